/* kz-browser turn.c: SANDBOX_EGRESS_TURN, BROWSER_TURN_SECRET_FILE and
 * BROWSER_TURN_TTL.  A TURN authority is host:port or [v6]:port and
 * nothing else; half a configuration and out-of-range lifetimes are bad
 * configurations, never TURN quietly off. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kzb.h"
#include "kz_check.h"
#include "banned.h"

/* Loads a file holding the given settings (NULL: absent) and runs
 * kzb_turn_conf on it; c and why get the outcome. */
static int
load(const char *turn, const char *secret, const char *ttl, struct kzb_conf *c,
    char *why, size_t wlen)
{
	char path[] = "/tmp/check_turn.XXXXXX";
	struct kz_conf *k = NULL;
	int fd = mkstemp(path), r;
	FILE *fp;

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(fp = fdopen(fd, "w"));
	if (turn != NULL)
		fprintf(fp, "SANDBOX_EGRESS_TURN = %s\n", turn);
	if (secret != NULL)
		fprintf(fp, "BROWSER_TURN_SECRET_FILE = %s\n", secret);
	if (ttl != NULL)
		fprintf(fp, "BROWSER_TURN_TTL = %s\n", ttl);
	ck_assert_int_eq(fclose(fp), 0);
	memset(c, 0, sizeof(*c));
	ck_assert_msg(kz_conf_load(path, kzb_conf_keys, &k, why, wlen) == 0,
	    "%s", why);
	unlink(path);
	r = kzb_turn_conf(c, k, why, wlen);
	kz_conf_free(k);
	return r;
}

static const struct {
	const char *v;
	const char *host; /* NULL: refused */
	int port;
} auth[] = {
    {"10.213.0.2:3478", "10.213.0.2", 3478},
    {"turn.example.test:443", "turn.example.test", 443},
    {"TURN-1.Example.test:1", "TURN-1.Example.test", 1},
    {"[fd00::2]:3478", "fd00::2", 3478},
    {"[::1]:65535", "::1", 65535},
    {"h:0", NULL, 0},
    {"h:65536", NULL, 0},
    {"h:", NULL, 0},
    {"h:-1", NULL, 0},
    {"h:34x", NULL, 0},
    {":3478", NULL, 0},
    {"h", NULL, 0},
    {"fd00::2:3478", NULL, 0},
    {"[fd00::2]", NULL, 0},
    {"[fd00::2]3478", NULL, 0},
    {"[]:3478", NULL, 0},
    {"[h.test]:3478", "h.test", 3478},
    {"user@h:3478", NULL, 0},
    {"h/x:3478", NULL, 0},
    {"h_x:3478", NULL, 0},
    {"turn:h:3478", NULL, 0},
    {"h:3478?transport=udp", NULL, 0},
    {"h%0a:3478", NULL, 0},
};

START_TEST(test_authority)
{
	struct kzb_conf c;
	char why[256] = "";
	int r = load(auth[_i].v, "/etc/kaizen/turn.secret", NULL, &c, why,
	    sizeof(why));

	if (auth[_i].host == NULL) {
		ck_assert_msg(r == KZ_ECONF, "%s was accepted", auth[_i].v);
		ck_assert_ptr_nonnull(strstr(why, "SANDBOX_EGRESS_TURN"));
		return;
	}
	ck_assert_msg(r == 0, "%s: %s", auth[_i].v, why);
	ck_assert_str_eq(c.turn_host, auth[_i].host);
	ck_assert_int_eq(c.turn_port, auth[_i].port);
	ck_assert_str_eq(c.turn_secret, "/etc/kaizen/turn.secret");
	ck_assert_int_eq(c.turn_ttl, 600);
}
END_TEST

/* A host longer than a name can be is refused, not cut. */
START_TEST(test_long_host)
{
	struct kzb_conf c;
	char v[400], why[256] = "";

	memset(v, 'a', 300);
	snprintf(v + 300, sizeof(v) - 300, ":3478");
	ck_assert_int_eq(load(v, "/s", NULL, &c, why, sizeof(why)), KZ_ECONF);
	memset(v, 'a', 256);
	snprintf(v + 256, sizeof(v) - 256, ":3478");
	ck_assert_int_eq(load(v, "/s", NULL, &c, why, sizeof(why)), KZ_ECONF);
	memset(v, 'a', 255);
	snprintf(v + 255, sizeof(v) - 255, ":3478");
	ck_assert_msg(load(v, "/s", NULL, &c, why, sizeof(why)) == 0, "%s",
	    why);
	ck_assert_uint_eq(strlen(c.turn_host), 255);
}
END_TEST

/* Both or neither. */
START_TEST(test_pairing)
{
	struct kzb_conf c;
	char why[256] = "";

	ck_assert_int_eq(load(NULL, NULL, NULL, &c, why, sizeof(why)), 0);
	ck_assert_str_eq(c.turn_host, "");
	ck_assert_int_eq(load("h:3478", NULL, NULL, &c, why, sizeof(why)),
	    KZ_ECONF);
	ck_assert_ptr_nonnull(strstr(why, "together or not at all"));
	ck_assert_int_eq(load(NULL, "/s", NULL, &c, why, sizeof(why)),
	    KZ_ECONF);
	ck_assert_ptr_nonnull(strstr(why, "together or not at all"));
	ck_assert_int_eq(load("", "", NULL, &c, why, sizeof(why)), 0);
	ck_assert_str_eq(c.turn_host, "");
}
END_TEST

static const struct {
	const char *ttl;
	int64_t want; /* -1: refused */
} ttls[] = {
    {"60", 60},
    {"3600", 3600},
    {"900", 900},
    {"59", -1},
    {"3601", -1},
    {"0", -1},
    {"-600", -1},
    {"10m", -1},
    {"", -1},
};

START_TEST(test_ttl)
{
	struct kzb_conf c;
	char why[256] = "";
	int r = load("h:3478", "/s", ttls[_i].ttl, &c, why, sizeof(why));

	if (ttls[_i].want < 0) {
		ck_assert_msg(r != 0, "TTL %s was accepted", ttls[_i].ttl);
		ck_assert_ptr_nonnull(strstr(why, "BROWSER_TURN_TTL"));
		return;
	}
	ck_assert_msg(r == 0, "%s", why);
	ck_assert_int_eq(c.turn_ttl, ttls[_i].want);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("browser-turn");
	TCase *tc = tcase_create("core");

	unsetenv("SANDBOX_EGRESS_TURN");
	unsetenv("BROWSER_TURN_SECRET_FILE");
	unsetenv("BROWSER_TURN_TTL");
	tcase_add_loop_test(tc, test_authority, 0,
	    sizeof(auth) / sizeof(auth[0]));
	tcase_add_test(tc, test_long_host);
	tcase_add_test(tc, test_pairing);
	tcase_add_loop_test(tc, test_ttl, 0, sizeof(ttls) / sizeof(ttls[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
