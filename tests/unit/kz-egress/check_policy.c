/* The administrator's policy: how settings resolve (every unusable value
 * resolves to isolated, with a reason), and a table of destinations in
 * every mode, every protected class denied in all of them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress.h"
#include "kz_check.h"
#include "banned.h"

static char pkfile[64];

static void
setup(void)
{
	FILE *f;

	snprintf(pkfile, sizeof(pkfile), "/tmp/kz-egress-pk.%d", getpid());
	f = fopen(pkfile, "w");
	ck_assert_ptr_nonnull(f);
	fputs("be6ba96ccd5e7d69d57f27b578f292d37e460d4402786403eea4ef1774b7695a"
	      "\n",
	    f);
	fclose(f);
}

static void
teardown(void)
{
	unlink(pkfile);
}

static void
clear_env(void)
{
	for (int i = 0; eg_conf_keys[i] != NULL; i++)
		unsetenv(eg_conf_keys[i]);
}

/* A policy from "KEY=value" settings on top of a usable base. */
static struct eg_policy *
mk(const char *conf_why, const char *const *kv)
{
	struct eg_policy *p = NULL;

	clear_env();
	setenv("SANDBOX_EGRESS_PUBLIC_KEY_FILE", pkfile, 1);
	setenv("SANDBOX_EGRESS_RESOLVER", "127.0.0.1:53", 1);
	setenv("SANDBOX_EGRESS_LISTEN", "127.0.0.1:3128", 1);
	for (int i = 0; kv != NULL && kv[i] != NULL; i++) {
		char k[128];
		const char *eq = strchr(kv[i], '=');

		snprintf(k, sizeof(k), "%.*s", (int)(eq - kv[i]), kv[i]);
		if (eq[1] == '\0')
			unsetenv(k);
		else
			setenv(k, eq + 1, 1);
	}
	ck_assert_int_eq(eg_policy_load(NULL, conf_why, NULL, &p), 0);
	return p;
}

START_TEST(test_settings)
{
	static const struct {
		const char *kv[4];
		const char *mode, *why;
	} t[] = {
	    {{NULL}, "public_internet", NULL},
	    {{"SANDBOX_EGRESS_MODE=private_networks"}, "private_networks",
	        NULL},
	    {{"SANDBOX_EGRESS_MODE=host_allowlist"}, "host_allowlist", NULL},
	    {{"SANDBOX_EGRESS_MODE=isolated"}, "isolated", "configured"},
	    {{"SANDBOX_EGRESS_MODE=open"}, "isolated", "MODE"},
	    {{"SANDBOX_EGRESS_MODE=PUBLIC_INTERNET"}, "isolated", "MODE"},
	    {{"SANDBOX_EGRESS_ENABLED=off"}, "isolated", "disabled"},
	    {{"SANDBOX_EGRESS_ENABLED=maybe"}, "isolated", "ENABLED"},
	    {{"SANDBOX_EGRESS_ALLOWED_PORTS=80,http"}, "isolated", "port"},
	    {{"SANDBOX_EGRESS_ALLOWED_PORTS=0"}, "isolated", "port"},
	    {{"SANDBOX_EGRESS_ALLOWED_PORTS=70000"}, "isolated", "port"},
	    {{"SANDBOX_EGRESS_ALLOWED_PORTS= , "}, "isolated", "port"},
	    {{"SANDBOX_EGRESS_PUBLIC_KEY_FILE="}, "isolated", "public key"},
	    {{"SANDBOX_EGRESS_PUBLIC_KEY_FILE=/nonexistent"}, "isolated",
	        "public key"},
	    {{"SANDBOX_EGRESS_LISTEN="}, "isolated", "listen"},
	    {{"SANDBOX_EGRESS_LISTEN=unix:relative"}, "isolated", "LISTEN"},
	    {{"SANDBOX_EGRESS_RESOLVER=dns.example:53"}, "isolated",
	        "resolver"},
	    {{"SANDBOX_EGRESS_PRIVATE_CIDRS=10.0.0.0/40"}, "isolated",
	        "PRIVATE"},
	    {{"SANDBOX_EGRESS_CONTROL_PLANE_CIDRS=nonsense"}, "isolated",
	        "CONTROL"},
	    {{"SANDBOX_EGRESS_HOST_ALLOWLIST=ok.example,bad host!"}, "isolated",
	        "ALLOWLIST"},
	    {{"SANDBOX_EGRESS_TOKEN_TTL_SECONDS=ten"}, "isolated", "TTL"},
	    {{"SANDBOX_EGRESS_TURN=turn.example"}, "isolated", "TURN"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct eg_policy *p = mk(NULL, t[i].kv);

		ck_assert_msg(strcmp(eg_mode_name(p->mode), t[i].mode) == 0,
		    "case %zu: mode %s", i, eg_mode_name(p->mode));
		if (t[i].why != NULL)
			ck_assert_msg(strcasestr(p->isolated_why, t[i].why) !=
			        NULL,
			    "case %zu: why '%s'", i, p->isolated_why);
		eg_policy_free(p);
	}
}
END_TEST

START_TEST(test_unreadable_config)
{
	struct eg_policy *p = mk("cannot open config", NULL);

	ck_assert_int_eq(p->mode, EG_MODE_ISOLATED);
	ck_assert_ptr_nonnull(strstr(p->isolated_why, "config"));
	eg_policy_free(p);
}
END_TEST

START_TEST(test_ttl)
{
	static const char *const big[] =
	    {"SANDBOX_EGRESS_TOKEN_TTL_SECONDS=20000", NULL};
	static const char *const four_h[] =
	    {"SANDBOX_EGRESS_TOKEN_TTL_SECONDS=14400", NULL};
	struct eg_policy *p = mk(NULL, NULL);

	ck_assert_int_eq(p->ttl, 600);
	eg_policy_free(p);
	p = mk(NULL, four_h);
	ck_assert_int_eq(p->ttl, 14400);
	ck_assert(!p->ttl_clamped);
	eg_policy_free(p);
	p = mk(NULL, big);
	ck_assert_int_eq(p->ttl, 14400);
	ck_assert(p->ttl_clamped);
	ck_assert_int_eq(p->mode, EG_MODE_PUBLIC);
	eg_policy_free(p);
}
END_TEST

/* host, port, expected reason per mode (NULL = allowed):
 * isolated, public_internet, private_networks, host_allowlist */
static const struct {
	const char *host;
	int port;
	const char *want[4];
} dests[] = {
    {"8.8.8.8", 443, {"isolated", NULL, NULL, "host_not_allowlisted"}},
    {"allowed.example", 443, {"isolated", NULL, NULL, NULL}},
    {"ALLOWED.example.", 80, {"isolated", NULL, NULL, NULL}},
    {"other.example", 80, {"isolated", NULL, NULL, "host_not_allowlisted"}},
    {"8.8.8.8", 22,
        {"isolated", "port_not_allowed", "port_not_allowed",
            "port_not_allowed"}},
    {"10.213.0.2", 80,
        {"isolated", "private_use", NULL, "host_not_allowlisted"}},
    {"10.213.0.9", 80,
        {"isolated", "private_use", "private_use", "host_not_allowlisted"}},
    {"10.9.9.9", 80,
        {"isolated", "private_use", "private_use",
            "private_use"}}, /* allowlisted literal, still checked */
    {"fd00::1", 80,
        {"isolated", "unique_local", "unique_local", "host_not_allowlisted"}},
    {"127.0.0.1", 80, {"isolated", "loopback", "loopback", "loopback"}},
    {"127.1", 80, {"isolated", "loopback", "loopback", "loopback"}},
    {"[::1]", 80, {"isolated", "loopback", "loopback", "host_not_allowlisted"}},
    {"169.254.169.254", 80, {"isolated", "metadata", "metadata", "metadata"}},
    {"0.0.0.0", 80,
        {"isolated", "unspecified", "unspecified", "host_not_allowlisted"}},
    {"224.0.0.1", 80,
        {"isolated", "multicast", "multicast", "host_not_allowlisted"}},
    {"255.255.255.255", 80,
        {"isolated", "broadcast", "broadcast", "host_not_allowlisted"}},
    {"::ffff:10.213.0.2", 80,
        {"isolated", "private_use", NULL, "host_not_allowlisted"}},
    {"9.9.9.9", 80,
        {"isolated", "control_plane", "control_plane", "host_not_allowlisted"}},
    {"::ffff:9.9.9.9", 80,
        {"isolated", "control_plane", "control_plane", "host_not_allowlisted"}},
    {"127.0.0.1", 3128,
        {"isolated", "port_not_allowed", "port_not_allowed",
            "port_not_allowed"}},
    {"1.2.3.256", 80, {"bad_host", "bad_host", "bad_host", "bad_host"}},
    {"bad_host!", 80, {"bad_host", "bad_host", "bad_host", "bad_host"}},
};

static const char *
judge(struct eg_policy *p, const char *host, int port, unsigned caps,
    bool connect)
{
	struct eg_dest d;
	enum eg_reason r = eg_dest_init(&d, host, (uint16_t)port, connect,
	    caps);

	if (r == EG_R_NONE)
		r = eg_policy_check_dest(p, &d);
	if (r == EG_R_NONE && d.literal)
		r = eg_policy_check_addr(p, &d, &d.lit);
	return eg_reason_str(r);
}

START_TEST(test_destinations)
{
	static const char *const modes[] = {"isolated", "public_internet",
	    "private_networks", "host_allowlist"};

	for (int m = 0; m < 4; m++) {
		char mode[64];
		const char *kv[] = {mode,
		    "SANDBOX_EGRESS_PRIVATE_CIDRS=10.213.0.0/30,127.0.0.0/8,"
		    "169.254.0.0/16",
		    "SANDBOX_EGRESS_HOST_ALLOWLIST=allowed.example,10.9.9.9,"
		    "127.0.0.1,169.254.169.254",
		    "SANDBOX_EGRESS_CONTROL_PLANE_CIDRS=9.9.9.0/24", NULL};
		struct eg_policy *p;

		snprintf(mode, sizeof(mode), "SANDBOX_EGRESS_MODE=%s",
		    modes[m]);
		p = mk(NULL, kv);
		for (size_t i = 0; i < sizeof(dests) / sizeof(dests[0]); i++) {
			const char *r = judge(p, dests[i].host, dests[i].port,
			               0, false),
			           *w = dests[i].want[m];

			ck_assert_msg((r == NULL && w == NULL) ||
			        (r != NULL && w != NULL && strcmp(r, w) == 0),
			    "%s %s:%d: got %s, want %s", modes[m],
			    dests[i].host, dests[i].port, r ? r : "allow",
			    w ? w : "allow");
		}
		eg_policy_free(p);
	}
}
END_TEST

START_TEST(test_own_listen_address)
{
	static const char *const kv[] = {"SANDBOX_EGRESS_LISTEN=10.213.9.1:80",
	    NULL};
	struct eg_policy *p = mk(NULL, kv);

	ck_assert_str_eq(judge(p, "10.213.9.1", 80, 0, false), "own_address");
	eg_policy_free(p);
}
END_TEST

START_TEST(test_turn)
{
	static const char *const kv[] =
	    {"SANDBOX_EGRESS_TURN=turn.example:3478",
	        "SANDBOX_EGRESS_MODE=host_allowlist",
	        "SANDBOX_EGRESS_HOST_ALLOWLIST=allowed.example", NULL};
	struct eg_policy *p = mk(NULL, kv);

	/* The capability opens exactly the configured host:port, by CONNECT. */
	ck_assert_ptr_null(judge(p, "turn.example", 3478, EG_CAP_TURN, true));
	ck_assert_ptr_null(judge(p, "TURN.example.", 3478, EG_CAP_TURN, true));
	ck_assert_str_eq(judge(p, "turn.example", 3478, 0, true),
	    "port_not_allowed");
	ck_assert_str_eq(judge(p, "turn.example", 3478, EG_CAP_TURN, false),
	    "port_not_allowed");
	ck_assert_str_eq(judge(p, "turn.example", 3479, EG_CAP_TURN, true),
	    "port_not_allowed");
	ck_assert_str_eq(judge(p, "other.example", 3478, EG_CAP_TURN, true),
	    "port_not_allowed");
	ck_assert_str_eq(judge(p, "other.example", 443, EG_CAP_TURN, true),
	    "host_not_allowlisted");
	eg_policy_free(p);
}
END_TEST

/* What status reports and its exit status: 1 exactly when isolated. */
START_TEST(test_status)
{
	static const char *const turn[] =
	    {"SANDBOX_EGRESS_TURN=[2001:db8::1]:3478", NULL};
	static const char *const iso[] = {"SANDBOX_EGRESS_MODE=isolated", NULL};
	struct eg_policy *p = mk(NULL, turn);
	cJSON *o = eg_policy_status_json(p);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "turn_authority");
	FILE *null = freopen("/dev/null", "w", stdout);

	ck_assert_ptr_nonnull(null);
	ck_assert(cJSON_IsString(v));
	ck_assert_str_eq(v->valuestring, "[2001:db8::1]:3478");
	ck_assert_int_eq(eg_policy_status(o, "test", false), 0);
	ck_assert_int_eq(eg_policy_status(o, "test", true), 0);
	cJSON_Delete(o);
	eg_policy_free(p);
	p = mk(NULL, iso);
	o = eg_policy_status_json(p);
	ck_assert_ptr_null(
	    cJSON_GetObjectItemCaseSensitive(o, "turn_authority"));
	ck_assert_int_eq(eg_policy_status(o, "test", false), 1);
	ck_assert_int_eq(eg_policy_status(o, "test", true), 1);
	cJSON_Delete(o);
	/* A reply without a mode is no proof of a scope: isolation. */
	o = cJSON_CreateObject();
	ck_assert_int_eq(eg_policy_status(o, "test", false), 1);
	cJSON_Delete(o);
	eg_policy_free(p);
}
END_TEST

/* The status socket: the key, else the one rule under KZ_RUN_DIR. */
START_TEST(test_status_socket)
{
	static const char *const none[] = {NULL};
	static const char *const run[] = {"KZ_RUN_DIR=/nonexistent/run", NULL};
	static const char *const both[] = {"KZ_RUN_DIR=/nonexistent/run",
	    "SANDBOX_EGRESS_STATUS_SOCKET=/x/s.sock", NULL};
	struct eg_policy *p = mk(NULL, none);

	ck_assert_str_eq(p->status_sock, "");
	eg_policy_free(p);
	p = mk(NULL, run);
	ck_assert_str_eq(p->status_sock,
	    "/nonexistent/run/kz-egress-status.sock");
	eg_policy_free(p);
	p = mk(NULL, both);
	ck_assert_str_eq(p->status_sock, "/x/s.sock");
	eg_policy_free(p);
}
END_TEST

/* A policy lives while anyone holds it: the last free frees it. */
START_TEST(test_refs)
{
	struct eg_policy *p = mk(NULL, NULL);

	ck_assert_ptr_eq(eg_policy_ref(p), p);
	eg_policy_free(p);
	ck_assert_uint_eq(atomic_load(&p->refs), 1);
	ck_assert_str_eq(eg_mode_name(p->mode), "public_internet");
	eg_policy_free(p);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("egress_policy");
	TCase *tc = tcase_create("policy");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_settings);
	tcase_add_test(tc, test_unreadable_config);
	tcase_add_test(tc, test_ttl);
	tcase_add_test(tc, test_destinations);
	tcase_add_test(tc, test_own_listen_address);
	tcase_add_test(tc, test_turn);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_status_socket);
	tcase_add_test(tc, test_refs);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
