/* kz-run opts.c and admit.c: the rules between options, the admit
 * request, the snapshot taken from a reply, exit codes for wire codes,
 * and the refusals that happen before kz-project is asked. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_json.h"
#include "run.h"
#include "kz_check.h"
#include "banned.h"

static char *cmd[] = {"true"};

static const struct {
	const char *actor, *conv, *room, *member, *turn, *file, *sel;
	bool contract;
	int argc;
	int want;
	const char *want_actor, *want_conv;
} opt_cases[] = {
    {"a", "c", NULL, NULL, NULL, NULL, NULL, false, 1, 0, "a", "c"},
    {"a", "c", NULL, NULL, NULL, "f", NULL, false, 1, 0, "a", "c"},
    {NULL, NULL, "r", "m", NULL, NULL, NULL, false, 1, 0, "m", "r"},
    {"m", "r", "r", "m", "t1", NULL, "d1", true, 1, 0, "m", "r"},
    /* Refused: the member's projection in another actor's workspace. */
    {"a", NULL, "r", "m", NULL, NULL, NULL, false, 1, -1, NULL, NULL},
    {NULL, "c", "r", "m", NULL, NULL, NULL, false, 1, -1, NULL, NULL},
    {NULL, NULL, "r", "m", NULL, "f", NULL, false, 1, -1, NULL, NULL},
    {NULL, NULL, "r", NULL, NULL, NULL, NULL, false, 1, -1, NULL, NULL},
    {NULL, NULL, NULL, "m", NULL, NULL, NULL, false, 1, -1, NULL, NULL},
    {NULL, NULL, "", "m", NULL, NULL, NULL, false, 1, -1, NULL, NULL},
    {NULL, NULL, "r", "m", "", NULL, NULL, false, 1, -1, NULL, NULL},
    {"a", "c", NULL, NULL, NULL, NULL, "d1", false, 1, -1, NULL, NULL},
    {"a", "c", NULL, NULL, NULL, NULL, NULL, true, 1, -1, NULL, NULL},
    {"a", "c", NULL, NULL, "t", NULL, NULL, false, 1, -1, NULL, NULL},
    {"a", NULL, NULL, NULL, NULL, NULL, NULL, false, 1, -1, NULL, NULL},
    {"a", "c", NULL, NULL, NULL, NULL, NULL, false, 0, -1, NULL, NULL},
};

START_TEST(test_opts)
{
	struct run_opts o = {0};
	char why[160] = "";
	int got;

	o.actor = opt_cases[_i].actor;
	o.conv = opt_cases[_i].conv;
	o.room = opt_cases[_i].room;
	o.member = opt_cases[_i].member;
	o.turn = opt_cases[_i].turn;
	o.contract = opt_cases[_i].contract;
	if (opt_cases[_i].file != NULL)
		o.files[o.nfiles++] = opt_cases[_i].file;
	if (opt_cases[_i].sel != NULL)
		o.select[o.nselect++] = opt_cases[_i].sel;
	o.argc = opt_cases[_i].argc;
	o.argv = cmd;
	got = run_opts_check(&o, why, sizeof(why));
	ck_assert_int_eq(got, opt_cases[_i].want);
	if (got != 0) {
		ck_assert(why[0] != '\0');
		return;
	}
	ck_assert_str_eq(o.actor, opt_cases[_i].want_actor);
	ck_assert_str_eq(o.conv, opt_cases[_i].want_conv);
	ck_assert_str_eq(o.cap, "code.run");
}
END_TEST

/* --output and --call belong to a room's turn. */
START_TEST(test_opts_outputs)
{
	struct run_opts o = {.actor = "a", .conv = "c", .argc = 1, .argv = cmd};
	char why[160] = "";

	o.outputs[o.noutputs++] = "out.txt";
	ck_assert_int_eq(run_opts_check(&o, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "--output needs --room"));
	o.noutputs = 0;
	o.call = "call_1";
	ck_assert_int_eq(run_opts_check(&o, why, sizeof(why)), -1);
	o = (struct run_opts){.room = "r",
	    .member = "m",
	    .argc = 1,
	    .argv = cmd,
	    .call = "call_1"};
	o.outputs[o.noutputs++] = "out.txt";
	ck_assert_int_eq(run_opts_check(&o, why, sizeof(why)), 0);
}
END_TEST

START_TEST(test_admit_req)
{
	struct run_opts o = {.room = "r1", .member = "alice"};
	cJSON *r;
	char *s;

	o.select[o.nselect++] = "d1";
	o.select[o.nselect++] = "d2";
	ck_assert((r = run_admit_req(&o, "rid0")) != NULL);
	s = cJSON_PrintUnformatted(r);
	ck_assert_str_eq(s,
	    "{\"v\":1,\"op\":\"admit\",\"id\":\"rid0\","
	    "\"room\":\"r1\",\"member\":\"alice\",\"turn\":\"rid0\","
	    "\"select\":[\"d1\",\"d2\"]}");
	free(s);
	cJSON_Delete(r);
	/* No capability: kz-project's capability is one of its own ids. */
	o.turn = "t7";
	o.contract = true;
	o.retrieved[o.nretrieved++] = "d3";
	ck_assert((r = run_admit_req(&o, "rid0")) != NULL);
	ck_assert_str_eq(cJSON_GetStringValue(kz_json_get(r, "turn")), "t7");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "contract")));
	ck_assert_int_eq(cJSON_GetArraySize(kz_json_get(r, "retrieved")), 1);
	ck_assert(kz_json_get(r, "capability") == NULL);
	cJSON_Delete(r);
}
END_TEST

#define MD "0f5d803b68549f36a5b721f497191a978645e582f444550b93f567a827e61329"

static const struct {
	const char *reply;
	int want;
} take_cases[] = {
    {"{\"ok\":true,\"admission\":{\"audience_version\":3,\"files\":1,"
     "\"bytes\":5,\"manifest_digest\":\"" MD "\",\"items\":[]}}",
        0},
    {"{\"ok\":true}", KZ_EPROTO},
    {"{\"ok\":true,\"admission\":[]}", KZ_EPROTO},
    {"{\"ok\":true,\"admission\":{\"audience_version\":3,\"files\":1,"
     "\"bytes\":5,\"manifest_digest\":\"sha256:x\",\"items\":[]}}",
        KZ_EPROTO},
    {"{\"ok\":true,\"admission\":{\"audience_version\":-1,\"files\":1,"
     "\"bytes\":5,\"manifest_digest\":\"" MD "\",\"items\":[]}}",
        KZ_EPROTO},
    {"{\"ok\":true,\"admission\":{\"audience_version\":1.5,\"files\":1,"
     "\"bytes\":5,\"manifest_digest\":\"" MD "\",\"items\":[]}}",
        KZ_EPROTO},
    {"{\"ok\":true,\"admission\":{\"audience_version\":\"3\",\"files\":1,"
     "\"bytes\":5,\"manifest_digest\":\"" MD "\",\"items\":[]}}",
        KZ_EPROTO},
    {"{\"ok\":true,\"admission\":{\"audience_version\":3,\"files\":1,"
     "\"bytes\":5,\"manifest_digest\":\"" MD "\"}}",
        KZ_EPROTO},
};

START_TEST(test_take)
{
	const char *js = take_cases[_i].reply;
	struct run_adm a;
	cJSON *rep;

	ck_assert((rep = cJSON_Parse(js)) != NULL);
	ck_assert_int_eq(run_adm_take(rep, &a), take_cases[_i].want);
	if (take_cases[_i].want == 0) {
		ck_assert_int_eq(a.audience, 3);
		ck_assert_int_eq(a.files, 1);
		ck_assert_int_eq(a.bytes, 5);
		ck_assert_str_eq(a.manifest, MD);
		ck_assert(
		    a.snap != NULL && kz_json_get(rep, "admission") == NULL);
	} else {
		ck_assert_int_eq(a.audience, -1);
		ck_assert(a.snap == NULL);
	}
	run_adm_release(&a);
	cJSON_Delete(rep);
}
END_TEST

START_TEST(test_exit_for)
{
	ck_assert_int_eq(kz_exit_for_wire("refused"), KZ_EXIT_REFUSED);
	ck_assert_int_eq(kz_exit_for_wire("manifest_changed"), KZ_EXIT_REFUSED);
	ck_assert_int_eq(kz_exit_for_wire("resource_audience_changed"),
	    KZ_EXIT_REFUSED);
	ck_assert_int_eq(kz_exit_for_wire("store_unavailable"),
	    KZ_EXIT_UNAVAIL);
	ck_assert_int_eq(kz_exit_for_wire("unavailable"), KZ_EXIT_UNAVAIL);
	ck_assert_int_eq(kz_exit_for_wire("bad_request"), KZ_EXIT_USAGE);
	ck_assert_int_eq(kz_exit_for_wire("internal"), KZ_EXIT_INTERNAL);
	ck_assert_int_eq(kz_exit_for_wire(NULL), KZ_EXIT_INTERNAL);
}
END_TEST

/* Refusals before any byte: kz-project unreachable, and a projection
 * directory that is missing, relative or not empty (a reset that did
 * not hold) is never handed to kz-project. */
START_TEST(test_refusals)
{
	struct run_opts o = {.room = "r1",
	    .member = "m",
	    .actor = "m",
	    .conv = "r1",
	    .cap = "code.run"};
	struct run_conf c = {.io_timeout_ms = 1000};
	struct run_ctx x = {.c = &c, .o = &o, .rid = "rid0", .audience = -1};
	struct run_adm a = {.audience = -1};
	struct run_refusal f;
	char dir[64], p[96];

	snprintf(dir, sizeof(dir), "/tmp/kz-run-admit.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(c.project_sock, sizeof(c.project_sock), "%s/none.sock", dir);
	ck_assert_int_eq(run_admit(&x, &a, &f), KZ_EXIT_UNAVAIL);
	ck_assert_str_eq(f.code, "unavailable");
	ck_assert(a.snap == NULL);
	ck_assert_int_eq(run_materialize(&x, &a, NULL, &f), KZ_EXIT_UNAVAIL);
	ck_assert_int_eq(run_materialize(&x, &a, "rel/dir", &f),
	    KZ_EXIT_UNAVAIL);
	snprintf(p, sizeof(p), "%s/left", dir);
	ck_assert(mkdir(p, 0700) == 0);
	ck_assert_int_eq(run_materialize(&x, &a, dir, &f), KZ_EXIT_UNAVAIL);
	ck_assert_str_eq(f.stage, "materialize");
	/* An empty directory goes on to verify: the service is not there. */
	ck_assert_int_eq(run_materialize(&x, &a, p, &f), KZ_EXIT_UNAVAIL);
	ck_assert_str_eq(f.stage, "verify");
	ck_assert(rmdir(p) == 0 && rmdir(dir) == 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("run-admit");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_opts, 0,
	    sizeof(opt_cases) / sizeof(opt_cases[0]));
	tcase_add_test(tc, test_opts_outputs);
	tcase_add_test(tc, test_admit_req);
	tcase_add_loop_test(tc, test_take, 0,
	    sizeof(take_cases) / sizeof(take_cases[0]));
	tcase_add_test(tc, test_exit_for);
	tcase_add_test(tc, test_refusals);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
