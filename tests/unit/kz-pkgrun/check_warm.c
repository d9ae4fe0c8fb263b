/*
 * The warm path's pure parts: a warm worker's kz-sandbox serve command
 * line has exactly the one-shot's settings (pr_serve_argv beside
 * pr_exec_argv), ids go round the range, and a run op's reply maps to a
 * one-shot's outcome, a reply kz-sandbox never gives being refused.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "conf_fixture.h"
#include "kz_check.h"

static struct pr_conf c;
static const char *env[] = {"KZ_PKG_TOOL=echo", NULL};
static const char *argv_[] = {"/projection/pkg/bin/x", NULL};

static void
setup(void)
{
	conf_fixture(&c, 1024);
}

START_TEST(test_serve_argv)
{
	static const char *const same[] = {"--id", "--uid", "--gid", "--memory",
	    "--pids", "--cpu", "--timeout", "--stdout-max", "--stderr-max",
	    "--projection", "--state-dir", "--cgroup-parent", NULL};
	struct pr_exec x = {"/run/kz-pkgrun/warm-1/proj", 2100200003,
	    2100200003, "pkgrun-warm-1", NULL, env, argv_, NULL, NULL};
	const char *r[160], *s[160];
	char one[64][64];

	ck_assert_int_eq(pr_exec_argv(&c, &x, r, 160), 0);
	for (int i = 0; same[i] != NULL; i++)
		snprintf(one[i], sizeof(one[i]), "%s", argv_val(r, same[i]));
	ck_assert_int_eq(pr_serve_argv(&c, &x, "/s/sock", "/s/pid", s, 160), 0);
	ck_assert_str_eq(s[1], "serve");
	for (int i = 0; same[i] != NULL; i++)
		ck_assert_str_eq(argv_val(s, same[i]), one[i]);
	ck_assert_str_eq(argv_val(s, "--socket"), "/s/sock");
	ck_assert_str_eq(argv_val(s, "--pid-file"), "/s/pid");
	/* The tool's argv, env and grant come with the run op. */
	ck_assert_ptr_null(argv_val(s, "--pass-fd"));
	ck_assert_ptr_null(argv_val(s, "--env"));
	ck_assert_ptr_null(argv_val(s, "--grant-file"));
	ck_assert_ptr_null(argv_val(s, "--egress-socket"));
	for (int i = 0; s[i] != NULL; i++)
		ck_assert_str_ne(s[i], "--");
	snprintf(c.egress_sock, sizeof(c.egress_sock), "/run/egress.sock");
	ck_assert_int_eq(pr_serve_argv(&c, &x, "/s/sock", "/s/pid", s, 160), 0);
	ck_assert_str_eq(argv_val(s, "--egress-socket"), "/run/egress.sock");
	ck_assert_int_eq(pr_serve_argv(&c, &x, "/s/sock", "/s/pid", s, 12),
	    KZ_ETOOBIG);
}
END_TEST

START_TEST(test_slots)
{
	bool used[4] = {false, false, false, false};

	ck_assert_int_eq(pr_slot_next(used, 4, 3), 0);
	ck_assert_int_eq(pr_slot_next(used, 4, 0), 1);
	ck_assert_int_eq(pr_slot_next(used, 4, 2), 3);
	used[3] = used[0] = true;
	/* Past the end, round to the start, over the used ones. */
	ck_assert_int_eq(pr_slot_next(used, 4, 2), 1);
	used[1] = used[2] = true;
	ck_assert_int_eq(pr_slot_next(used, 4, 2), -1);
	used[2] = false;
	ck_assert_int_eq(pr_slot_next(used, 4, 2), 2);
	ck_assert_int_eq(pr_slot_next(used, 1, 0), -1);
}
END_TEST

struct reply_case {
	const char *json;
	int r, exit_status, sig;
	bool setup_failed, truncated;
	const char *out;
};

static const struct reply_case replies[] = {
    {"{\"ok\":true,\"exit_code\":0,\"signal\":null,\"limit\":null,"
     "\"stdout_b64\":\"aGk=\",\"stderr_b64\":\"\"}",
        0, 0, 0, false, false, "hi"},
    {"{\"ok\":true,\"exit_code\":3,\"signal\":null,\"limit\":null,"
     "\"stdout_b64\":\"\",\"stderr_b64\":\"\"}",
        0, 3, 0, false, false, ""},
    /* Killed: no status, the signal. */
    {"{\"ok\":true,\"exit_code\":null,\"signal\":9,\"limit\":null,"
     "\"stdout_b64\":\"\",\"stderr_b64\":\"\"}",
        0, -1, 9, false, false, ""},
    /* A limit is a stop, whatever status came with it. */
    {"{\"ok\":true,\"exit_code\":0,\"signal\":null,\"limit\":\"timeout\","
     "\"stdout_b64\":\"\",\"stderr_b64\":\"\"}",
        0, -1, 0, false, false, ""},
    {"{\"ok\":true,\"exit_code\":0,\"signal\":null,\"limit\":null,"
     "\"stdout_b64\":\"\",\"stderr_b64\":\"\",\"stdout_truncated\":true}",
        0, 0, 0, false, true, ""},
    /* kz-sandbox's own errors: nothing ran. */
    {"{\"ok\":false,\"error\":\"isolation_denied\",\"reason\":\"x\"}", 0, -1, 0,
        true, false, NULL},
    /* Replies it never gives. */
    {"{\"ok\":true,\"exit_code\":256,\"signal\":null,\"limit\":null,"
     "\"stdout_b64\":\"\",\"stderr_b64\":\"\"}",
        KZ_EPROTO, -1, 0, false, false, NULL},
    {"{\"ok\":true,\"exit_code\":1.5,\"signal\":null,\"limit\":null,"
     "\"stdout_b64\":\"\",\"stderr_b64\":\"\"}",
        KZ_EPROTO, -1, 0, false, false, NULL},
    {"{\"ok\":true,\"exit_code\":\"0\",\"signal\":null,\"limit\":null,"
     "\"stdout_b64\":\"\",\"stderr_b64\":\"\"}",
        KZ_EPROTO, -1, 0, false, false, NULL},
    {"{\"ok\":true,\"exit_code\":0,\"stderr_b64\":\"\"}", KZ_EPROTO, -1, 0,
        false, false, NULL},
    {"{\"ok\":true,\"exit_code\":0,\"stdout_b64\":\"!!!\","
     "\"stderr_b64\":\"\"}",
        KZ_EPROTO, -1, 0, false, false, NULL},
};

START_TEST(test_reply)
{
	const struct reply_case *k = &replies[_i];
	struct pr_exec_out o;
	char why[128] = "";
	cJSON *j;

	ck_assert_int_eq(kz_json_parse(k->json, strlen(k->json), &j, NULL, 0),
	    0);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(pr_worker_reply(&c, j, &o, why, sizeof(why)), k->r);
	ck_assert_int_eq(o.exit_status, k->exit_status);
	ck_assert_int_eq(o.sig, k->sig);
	ck_assert(o.setup_failed == k->setup_failed);
	ck_assert(o.truncated == k->truncated);
	if (k->out != NULL) {
		ck_assert_uint_eq(o.outlen, strlen(k->out));
		ck_assert(memcmp(o.out, k->out, o.outlen) == 0);
	} else
		ck_assert_ptr_null(o.out);
	if (k->r != 0)
		ck_assert_str_ne(why, "");
	free(o.out);
	free(o.err);
	cJSON_Delete(j);
}
END_TEST

START_TEST(test_reply_bound)
{
	static const char big[] = "{\"ok\":true,\"exit_code\":0,\"signal\":"
	                          "null,\"limit\":null,\"stdout_b64\":\"";
	struct pr_exec_out o;
	char *s;
	size_t n = 2000;
	cJSON *j;

	/* More than PKGRUN_RESULT_MAX back: cut there, and said so. */
	s = malloc(sizeof(big) + n * 4 / 3 + 64);
	memcpy(s, big, sizeof(big) - 1);
	memset(s + sizeof(big) - 1, 'Q', n / 3 * 4);
	snprintf(s + sizeof(big) - 1 + n / 3 * 4, 64,
	    "\",\"stderr_b64\":\"\"}");
	ck_assert_int_eq(kz_json_parse(s, strlen(s), &j, NULL, 0), 0);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(pr_worker_reply(&c, j, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.outlen, c.result_max);
	ck_assert(o.truncated);
	free(o.out);
	free(o.err);
	cJSON_Delete(j);
	free(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-pkgrun warm");
	TCase *tc = tcase_create("warm");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_serve_argv);
	tcase_add_test(tc, test_slots);
	tcase_add_loop_test(tc, test_reply, 0,
	    sizeof(replies) / sizeof(replies[0]));
	tcase_add_test(tc, test_reply_bound);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
