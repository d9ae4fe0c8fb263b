/* kz-run classify.c and project.c's tree removal: which command lines are
 * inline scripts, the classification of a materialized tree (every file,
 * in batches, fail closed on anything odd) and the removal of that tree. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "banned.h"

static char dir[64], tree[96], calls[96];
static struct run_conf conf;

/* A stand-in classifier with kz-sandbox's contract: exit 1 and a line
 * when a file says sudo, 0 otherwise; each call is logged. */
static const char standin[] =
    "#!/bin/sh\n"
    "[ \"$1\" = classify ] || exit 2\n"
    "shift\n"
    "echo \"$#\" >>\"${0%/*}/calls\"\n"
    "for f; do\n"
    "  [ -r \"$f\" ] || exit 2\n"
    "  while IFS= read -r l; do case $l in *sudo*)\n"
    "    echo \"$f: host_administration\"; exit 1;; esac; done <\"$f\"\n"
    "done\n";

static void
put(const char *rel, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", tree, rel);
	ck_assert((f = fopen(p, "w")) != NULL);
	fputs(text, f);
	fclose(f);
}

static int
ncalls(void)
{
	FILE *f = fopen(calls, "r");
	int n = 0, c;

	if (f == NULL)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void
setup(void)
{
	char p[128];
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/kz-run-unit.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(tree, sizeof(tree), "%s/files", dir);
	snprintf(calls, sizeof(calls), "%s/calls", dir);
	ck_assert(mkdir(tree, 0755) == 0);
	snprintf(p, sizeof(p), "%s/classify.sh", dir);
	ck_assert((f = fopen(p, "w")) != NULL);
	fputs(standin, f);
	fclose(f);
	ck_assert(chmod(p, 0755) == 0);
	memset(&conf, 0, sizeof(conf));
	snprintf(conf.sandbox_bin, sizeof(conf.sandbox_bin), "%s", p);
}

static void
teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", dir, dir);
	ck_assert(system(cmd) == 0);
}

START_TEST(test_tree_clean)
{
	char why[200] = "", p[128];

	snprintf(p, sizeof(p), "%s/a", tree);
	ck_assert(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/a/b", tree);
	ck_assert(mkdir(p, 0755) == 0);
	put("a/b/x.sh", "echo hi\n");
	put("top.csv", "a,b\n");
	ck_assert_int_eq(run_classify_dir(&conf, tree, why, sizeof(why)), 0);
	ck_assert_int_eq(ncalls(), 1);
}
END_TEST

START_TEST(test_tree_nested_admin)
{
	char why[200] = "", p[128];

	snprintf(p, sizeof(p), "%s/deep", tree);
	ck_assert(mkdir(p, 0755) == 0);
	put("ok.sh", "echo fine\n");
	put("deep/setup.sh", "sudo apt-get install x\n");
	ck_assert_int_eq(run_classify_dir(&conf, tree, why, sizeof(why)), 1);
	ck_assert_str_eq(why, "a projected file is host administration");
	/* The reason names no file (it is audited). */
	ck_assert_ptr_null(strstr(why, "setup"));
}
END_TEST

/* 150 files go in batches of at most 64, each one classified; one bad
 * file among them refuses the tree. */
START_TEST(test_tree_batches)
{
	char why[200] = "", name[32];
	int i;

	for (i = 0; i < 150; i++) {
		snprintf(name, sizeof(name), "f%03d.txt", i);
		put(name, "data\n");
	}
	ck_assert_int_eq(run_classify_dir(&conf, tree, why, sizeof(why)), 0);
	ck_assert_int_eq(ncalls(), 3);
	put("f077.txt", "sudo id\n");
	ck_assert_int_eq(run_classify_dir(&conf, tree, why, sizeof(why)), 1);
}
END_TEST

START_TEST(test_tree_empty)
{
	char why[200] = "";

	ck_assert_int_eq(run_classify_dir(&conf, tree, why, sizeof(why)), 0);
	ck_assert_int_eq(ncalls(), 0);
}
END_TEST

/* Anything that is not a directory or a regular file is not proven. */
START_TEST(test_tree_symlink_refused)
{
	char why[200] = "", p[128];

	put("ok.txt", "x\n");
	snprintf(p, sizeof(p), "%s/link", tree);
	ck_assert(symlink("/etc/passwd", p) == 0);
	ck_assert_int_eq(run_classify_dir(&conf, tree, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_int_eq(ncalls(), 0);
}
END_TEST

START_TEST(test_tree_missing_or_no_classifier)
{
	char why[200] = "", p[128];

	snprintf(p, sizeof(p), "%s/nope", dir);
	ck_assert_int_eq(run_classify_dir(&conf, p, why, sizeof(why)),
	    KZ_EUNAVAIL);
	put("a.sh", "echo\n");
	snprintf(conf.sandbox_bin, sizeof(conf.sandbox_bin), "%s/none", dir);
	ck_assert_int_eq(run_classify_dir(&conf, tree, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_str_eq(why, "the script classifier could not run");
}
END_TEST

/* A materialized tree: 0444 files, 0555 directories, and a symlink to a
 * file outside, which must be removed and not followed. */
START_TEST(test_tree_remove)
{
	char p[128], out[128], sub[128];
	struct stat sb;

	snprintf(sub, sizeof(sub), "%s/d", tree);
	ck_assert(mkdir(sub, 0755) == 0);
	put("d/x", "x");
	snprintf(out, sizeof(out), "%s/outside", dir);
	ck_assert(close(open(out, O_CREAT | O_WRONLY, 0600)) == 0);
	snprintf(p, sizeof(p), "%s/d/l", tree);
	ck_assert(symlink(out, p) == 0);
	snprintf(p, sizeof(p), "%s/d/x", tree);
	ck_assert(chmod(p, 0444) == 0 && chmod(sub, 0555) == 0 &&
	    chmod(tree, 0555) == 0);
	ck_assert_int_eq(run_tree_remove(tree), 0);
	ck_assert(lstat(tree, &sb) != 0);
	ck_assert(stat(out, &sb) == 0);
	ck_assert_int_eq(run_tree_remove(tree), 0);
}
END_TEST

static const struct {
	const char *argv[6];
	int argc, text;		/* text: index of the script, -1 none */
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
	{{"env", "sh", "-c", "x"}, 4, -1},
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
	SRunner *sr;
	int nf;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_tree_clean);
	tcase_add_test(tc, test_tree_nested_admin);
	tcase_add_test(tc, test_tree_batches);
	tcase_add_test(tc, test_tree_empty);
	tcase_add_test(tc, test_tree_symlink_refused);
	tcase_add_test(tc, test_tree_missing_or_no_classifier);
	tcase_add_test(tc, test_tree_remove);
	tcase_add_loop_test(tc, test_inline_forms, 0, sizeof(inl_cases) /
	    sizeof(inl_cases[0]));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
