/*
 * kz-pi-validate child.c, sbx.c and runtime.c: the observation rules
 * (nonce, bound, late, strict JSON), the kz-sandbox command line, and the
 * Node version floor.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_io.h"
#include "pv.h"
#include "kz_check.h"
#include "banned.h"

#define N64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void
outcome(struct pv_outcome *o, const char *result)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->nonce, sizeof(o->nonce), "%s", N64);
	o->result = strdup(result);
	o->rlen = strlen(result);
}

static const struct {
	const char *result;
	int want; /* KZ_EJSON: any parse refusal */
} obs[] = {
    {"{\"nonce\":\"" N64 "\",\"observation\":{\"skills\":[]}}", 0},
    /* without, or with another, or a prefix of the nonce */
    {"{\"observation\":{}}", KZ_ECRYPTO},
    {"{\"nonce\":\"" N64 "0\",\"observation\":{}}", KZ_ECRYPTO},
    {"{\"nonce\":\"0123456789abcdef\",\"observation\":{}}", KZ_ECRYPTO},
    {"{\"nonce\":\"f123456789abcdef0123456789abcdef0123456789abcdef"
     "0123456789abcdef\",\"observation\":{}}",
        KZ_ECRYPTO},
    {"{\"nonce\":1,\"observation\":{}}", KZ_ECRYPTO},
    /* the nonce, but no observation object */
    {"{\"nonce\":\"" N64 "\"}", KZ_EPROTO},
    {"{\"nonce\":\"" N64 "\",\"observation\":[]}", KZ_EPROTO},
    /* not one strict JSON object */
    {"", KZ_EPROTO},
    {"{\"nonce\":\"" N64 "\",\"observation\":{}} {}", KZ_EJSON},
    {"{\"nonce\":\"" N64 "\",\"nonce\":\"" N64 "\",\"observation\":{}}",
        KZ_EJSON},
    {"[\"" N64 "\"]", KZ_EJSON},
    {"{\"nonce\":\"" N64 "\",\"observation\":{\"a\":\"\\u0000\"}}", KZ_EJSON},
};

START_TEST(test_observation)
{
	struct pv_outcome o;
	cJSON *ob = NULL;
	char why[160];
	int r;

	outcome(&o, obs[_i].result);
	r = pv_observation(&o, &ob, why, sizeof(why));
	ck_assert_msg(r == obs[_i].want ||
	        (obs[_i].want != 0 && r != 0 && obs[_i].want == KZ_EJSON),
	    "case %d: got %d (%s)", _i, r, why);
	if (r == 0) {
		ck_assert(cJSON_IsObject(ob));
		cJSON_Delete(ob);
	}
	pv_outcome_release(&o);
}
END_TEST

/* Late or over the bound: rejected even with the right nonce. */
START_TEST(test_late_and_bound)
{
	const char *good = obs[0].result;
	struct pv_outcome o;
	cJSON *ob = NULL;
	char why[160];

	outcome(&o, good);
	o.timed_out = true;
	ck_assert_int_eq(pv_observation(&o, &ob, why, sizeof(why)),
	    KZ_ETIMEDOUT);
	pv_outcome_release(&o);
	outcome(&o, good);
	o.over_bound = true;
	ck_assert_int_eq(pv_observation(&o, &ob, why, sizeof(why)), KZ_ETOOBIG);
	pv_outcome_release(&o);
	ck_assert_ptr_null(ob);
}
END_TEST

START_TEST(test_err_line)
{
	struct pv_outcome o;
	char line[64];

	outcome(&o, "");
	snprintf(o.err_tail, sizeof(o.err_tail),
	    "first\nkz-sandbox: isolation setup failed at cgroup\x1b[0m\n\n");
	pv_err_line(&o, line, sizeof(line));
	ck_assert_str_eq(line,
	    "kz-sandbox: isolation setup failed at cgroup?[0m");
	o.err_tail[0] = '\0';
	pv_err_line(&o, line, sizeof(line));
	ck_assert_str_eq(line, "");
	pv_outcome_release(&o);
}
END_TEST

static int
find(char **a, const char *s)
{
	for (int i = 0; a[i] != NULL; i++)
		if (strcmp(a[i], s) == 0)
			return i;
	return -1;
}

START_TEST(test_sandbox_argv)
{
	char *cmd[] = {"/usr/bin/node", "child.mjs", "{}", NULL};
	struct pv_run r = {.iso = PV_ISO_SANDBOX,
	    .sandbox_bin = "/sbx",
	    .uid = 4242,
	    .cwd = "/run/pv/load",
	    .argv = cmd,
	    .channel = true,
	    .deps = PV_DEPS_STRICT,
	    .npm = "/usr/bin/npm",
	    .npm_cache = "/srv/cache",
	    .loader = "/usr/lib/kz/child.mjs"};
	char *a[PV_SBX_ARGV_MAX];
	int i;

	r.deadline_ms = kz_now_ms() + 9500;
	ck_assert_int_eq(pv_sandbox_argv(&r, a, PV_SBX_ARGV_MAX), 0);
	ck_assert_str_eq(a[0], "/sbx");
	ck_assert_str_eq(a[1], "run");
	ck_assert_int_lt(find(a, "--config"), 0);
	ck_assert_str_eq(a[find(a, "--projection") + 1], "/run/pv/load");
	ck_assert_str_eq(a[find(a, "--uid") + 1], "4242");
	ck_assert_int_lt(find(a, "--gvisor-uid"), 0);
	ck_assert_str_eq(a[find(a, "--timeout") + 1], "10");
	ck_assert_int_ge(find(a, "KZ_PI_RESULT_FD=4"), 0);
	ck_assert_str_eq(a[find(a, "--pass-fd") + 1], "3");
	i = find(a, "--");
	ck_assert_str_eq(a[i + 1], "/bin/sh");
	ck_assert_str_eq(a[i + 5], "strict");
	ck_assert_str_eq(a[i + 7], "/srv/cache");
	ck_assert_str_eq(a[i + 8], "/usr/lib/kz/child.mjs");
	ck_assert_str_eq(a[i + 9], "/usr/bin/node");
	ck_assert_str_eq(a[i + 11], "{}");
	ck_assert_ptr_null(a[i + 12]);
	/* no channel: nothing advertised, nothing passed */
	r.channel = false;
	r.npm_cache = NULL;
	r.deps = PV_DEPS_NONE;
	r.loader = NULL;
	ck_assert_int_eq(pv_sandbox_argv(&r, a, PV_SBX_ARGV_MAX), 0);
	ck_assert_int_lt(find(a, "--pass-fd"), 0);
	ck_assert_int_lt(find(a, "KZ_PI_NONCE_FD=3"), 0);
	ck_assert_str_eq(a[find(a, "--") + 5], "none");
	ck_assert_str_eq(a[find(a, "--") + 8], "-");
	r.sandbox_conf = "/etc/kaizen/pi-sandbox.conf";
	ck_assert_int_eq(pv_sandbox_argv(&r, a, PV_SBX_ARGV_MAX), 0);
	ck_assert_str_eq(a[2], "--config");
	ck_assert_str_eq(a[3], "/etc/kaizen/pi-sandbox.conf");
	/* a second uid for gvisor's runsc: both its ids */
	r.gv_uid = 4343;
	ck_assert_int_eq(pv_sandbox_argv(&r, a, PV_SBX_ARGV_MAX), 0);
	ck_assert_str_eq(a[find(a, "--gvisor-uid") + 1], "4343");
	ck_assert_str_eq(a[find(a, "--gvisor-gid") + 1], "4343");
	ck_assert_int_lt(find(a, "--gvisor-uid"), find(a, "--"));
	/* a command that does not fit is refused, not cut */
	ck_assert_int_eq(pv_sandbox_argv(&r, a, 20), KZ_ETOOBIG);
}
END_TEST

START_TEST(test_sandbox_failed)
{
	ck_assert(pv_sandbox_failed(2 << 8));
	ck_assert(pv_sandbox_failed(3 << 8));
	ck_assert(!pv_sandbox_failed(0));
	ck_assert(!pv_sandbox_failed(1 << 8));
	ck_assert(!pv_sandbox_failed(PV_PREP_EXIT << 8));
	ck_assert(!pv_sandbox_failed(PV_LOADER_EXIT << 8));
	ck_assert(!pv_sandbox_failed(127 << 8));
	ck_assert(!pv_sandbox_failed(9)); /* killed by SIGKILL */
}
END_TEST

/* The in-sandbox step run on the host: its reachability check of node
 * and the loader script comes before anything else it does. */
static const struct {
	const char *node, *loader;
	int want;
} reach[] = {
    {"/bin/true", "/nonexistent/child.mjs", PV_LOADER_EXIT},
    {"/nonexistent/node", NULL, PV_LOADER_EXIT},
    {"/nonexistent/node", "/bin/sh", PV_LOADER_EXIT},
    {"/etc/passwd", NULL, PV_LOADER_EXIT}, /* not executable */
    {"/bin/true", "/etc", PV_LOADER_EXIT}, /* not a file */
    /* Both there: the step goes on to copy /projection, which the host
     * lacks, and fails as preparation. */
    {"/bin/true", "/bin/sh", PV_PREP_EXIT},
    {"true", NULL, PV_PREP_EXIT}, /* a bare name, found on PATH */
};

START_TEST(test_step_reach)
{
	char *cmd[] = {(char *)reach[_i].node, NULL};
	struct pv_run r = {.iso = PV_ISO_SANDBOX,
	    .sandbox_bin = "/sbx",
	    .cwd = "/",
	    .argv = cmd,
	    .npm = "/usr/bin/npm",
	    .loader = reach[_i].loader};
	char *a[PV_SBX_ARGV_MAX];
	int i, st;
	pid_t pid;

	if (access("/projection", F_OK) == 0)
		return; /* the preparation cases would not fail here */
	r.deadline_ms = kz_now_ms() + 1000;
	ck_assert_int_eq(pv_sandbox_argv(&r, a, PV_SBX_ARGV_MAX), 0);
	i = find(a, "--");
	ck_assert((pid = fork()) >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null < 0 || dup2(null, 2) < 0)
			_exit(126);
		execv(a[i + 1], a + i + 1);
		_exit(127);
	}
	ck_assert(waitpid(pid, &st, 0) == pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == reach[_i].want,
	    "%s %s: %d", reach[_i].node, reach[_i].loader, st);
}
END_TEST

static const struct {
	const char *v;
	int rc;
	bool ok;
} versions[] = {
    {"v20.20.2", 0, true},
    {"v20.6.0", 0, true},
    {"v22.1.0", 0, true},
    {"v20.5.1", 0, false},
    {"v18.20.4", 0, false},
    {"v19.9.0", 0, false},
    {"v21.0.0-pre", 0, true},
    {"20.20.2", KZ_EINVAL, false},
    {"v20", KZ_EINVAL, false},
    {"v20.x.1", KZ_EINVAL, false},
    {"v20.6.0 ", KZ_EINVAL, false},
    {"", KZ_EINVAL, false},
    {"v-1.0.0", KZ_EINVAL, false},
};

START_TEST(test_node_version)
{
	bool ok = false;

	ck_assert_int_eq(pv_node_version_ok(versions[_i].v, &ok),
	    versions[_i].rc);
	if (versions[_i].rc == 0)
		ck_assert_msg(ok == versions[_i].ok, "%s", versions[_i].v);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pv_child");
	TCase *tc = tcase_create("child");

	tcase_add_loop_test(tc, test_observation, 0,
	    (int)(sizeof(obs) / sizeof(obs[0])));
	tcase_add_test(tc, test_late_and_bound);
	tcase_add_test(tc, test_err_line);
	tcase_add_test(tc, test_sandbox_argv);
	tcase_add_test(tc, test_sandbox_failed);
	tcase_add_loop_test(tc, test_step_reach, 0,
	    (int)(sizeof(reach) / sizeof(reach[0])));
	tcase_add_loop_test(tc, test_node_version, 0,
	    (int)(sizeof(versions) / sizeof(versions[0])));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
