/* kz-run classify.c: which command lines are inline scripts, the command
 * line itself and --file files whole.  A room's files are classified by
 * kz-project (tests/unit/kz-project/check_classify.c). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64], tree[96];
static struct run_conf conf;

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kz-run-unit.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(tree, sizeof(tree), "%s/files", dir);
	ck_assert(mkdir(tree, 0755) == 0);
	memset(&conf, 0, sizeof(conf));
}

static void
teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", dir, dir);
	ck_assert(system(cmd) == 0);
}

/* The command line is classified as the words kz-run execs, and --file
 * files whole. */
static const struct {
	const char *argv[6];
	int argc, want;
} cmd_cases[] = {
    {{"sudo", "id"}, 2, 1},
    {{"/usr/bin/sudo", "-n", "true"}, 3, 1},
    {{"env", "sudo", "id"}, 3, 1},
    {{"cat", "/etc/sudoers"}, 2, 1},
    {{"su", "-c", "id"}, 3, 1},
    {{"env", "A=1", "sh", "-c", "sudo id"}, 5, 1},
    {{"echo", "a;sudo"}, 2, 0},
    {{"echo", "a\nsudo x"}, 2, 0},
    {{"python3", "prog.py"}, 2, 0},
    {{"grep", "-r", "sudo", "."}, 4, 0},
};

START_TEST(test_command_line)
{
	struct run_opts o;
	char why[200] = "";

	memset(&o, 0, sizeof(o));
	o.argc = cmd_cases[_i].argc;
	o.argv = (char **)cmd_cases[_i].argv;
	ck_assert_msg(run_classify(&conf, &o, why, sizeof(why)) ==
	        cmd_cases[_i].want,
	    "case %d: %s", _i, why);
}
END_TEST

START_TEST(test_files_whole)
{
	struct run_opts o;
	char why[200] = "", p[128];
	const char *av[] = {"sh", "/projection/x.sh", NULL};
	FILE *f;

	memset(&o, 0, sizeof(o));
	o.argc = 2;
	o.argv = (char **)av;
	snprintf(p, sizeof(p), "%s/x.sh", tree);
	ck_assert((f = fopen(p, "w")) != NULL);
	/* bash runs the line after the NUL. */
	ck_assert_uint_eq(fwrite("echo one\necho two\0\nsudo id\n", 1, 27, f),
	    27);
	fclose(f);
	o.files[o.nfiles++] = p;
	ck_assert_int_eq(run_classify(&conf, &o, why, sizeof(why)), 1);
	ck_assert_str_eq(why, "a projected file is host administration");
	snprintf(p, sizeof(p), "%s/pipe", tree);
	ck_assert(mkfifo(p, 0600) == 0);
	o.files[0] = p;
	ck_assert_int_eq(run_classify(&conf, &o, why, sizeof(why)),
	    KZ_EUNAVAIL);
}
END_TEST

static const struct {
	const char *argv[6];
	int argc, text; /* text: index of the script, -1 none */
} inl_cases[] = {
    {{"bash", "-ec", "sudo id"}, 3, 2},
    {{"sh", "-xc", "x"}, 3, 2},
    {{"bash", "-e", "-c", "sudo id"}, 4, 3},
    {{"bash", "-o", "pipefail", "-c", "sudo id"}, 5, 4},
    {{"bash", "--norc", "-c", "x"}, 4, 3},
    {{"perl", "-E", "say 1"}, 3, 2},
    {{"node", "--eval", "1"}, 3, 2},
    {{"node", "-p", "1"}, 3, 2},
    {{"ruby", "-we", "1"}, 3, 2},
    {{"python3", "-I", "-c", "import os"}, 4, 3},
    {{"bash", "script.sh", "-e"}, 3, -1},
    {{"bash", "-e", "script.sh"}, 3, -1},
    {{"python3", "-e", "x"}, 3, -1},
    {{"sh", "-c"}, 2, -1},
    {{"sh", "--", "-c"}, 3, -1},
    {{"env", "sh", "-c", "x"}, 4, 3},
    {{"env", "-i", "A=1", "bash", "-c", "x"}, 6, 5},
    {{"nice", "-n", "5", "sh", "-c", "x"}, 6, 5},
    {{"/usr/bin/env", "nohup", "sh", "-c", "x"}, 5, 4},
    {{"env", "A=1"}, 2, -1},
};

START_TEST(test_inline_forms)
{
	const char *text = NULL;
	bool got = run_inline_script(inl_cases[_i].argc,
	    (char **)inl_cases[_i].argv, &text);

	ck_assert_int_eq(got, inl_cases[_i].text >= 0);
	if (got)
		ck_assert_str_eq(text, inl_cases[_i].argv[inl_cases[_i].text]);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("run-classify");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_command_line, 0,
	    sizeof(cmd_cases) / sizeof(cmd_cases[0]));
	tcase_add_test(tc, test_files_whole);
	tcase_add_loop_test(tc, test_inline_forms, 0,
	    sizeof(inl_cases) / sizeof(inl_cases[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
