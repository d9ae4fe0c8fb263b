/* kz-run project.c, classify.c, audit.c: projection copies, the manifest
 * digest, inline-script detection and token parsing. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_pool.h"
#include "run.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64], src[80], proj[96];
static struct run_conf conf;

static void
put(const char *name, const char *text)
{
	char p[160];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", src, name);
	ck_assert((f = fopen(p, "w")) != NULL);
	fputs(text, f);
	fclose(f);
}

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kz-run-unit.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(proj, sizeof(proj), "%s/proj", dir);
	ck_assert(mkdir(src, 0700) == 0 && mkdir(proj, 0755) == 0);
	memset(&conf, 0, sizeof(conf));
	conf.file_max = 1024;
	conf.total_max = 1536;
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert(system(cmd) == 0);
}

static int
project(const char **names, size_t n, char *digest)
{
	const char *files[8];
	char paths[8][128], why[160];
	uint64_t bytes;
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/%s", src, names[i]);
		files[i] = paths[i];
	}
	return run_project(&conf, proj, files, n, digest, &bytes, why,
	    sizeof(why));
}

START_TEST(test_copy_readonly)
{
	const char *names[] = {"a.py", "b.txt"};
	char d1[RUN_DIGEST_MAX], p[160];
	struct stat sb;

	put("a.py", "print(1)\n");
	put("b.txt", "data\n");
	ck_assert_int_eq(project(names, 2, d1), 0);
	snprintf(p, sizeof(p), "%s/a.py", proj);
	ck_assert(stat(p, &sb) == 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0444);
	ck_assert_int_eq(sb.st_size, 9);
	ck_assert(strncmp(d1, "sha256:", 7) == 0 && strlen(d1) == 71);
}
END_TEST

START_TEST(test_digest_tracks_content)
{
	const char *names[] = {"a.py"};
	char d1[RUN_DIGEST_MAX], d2[RUN_DIGEST_MAX], d3[RUN_DIGEST_MAX];
	char cmd[160];

	put("a.py", "print(1)\n");
	ck_assert_int_eq(project(names, 1, d1), 0);
	snprintf(cmd, sizeof(cmd), "rm -f %s/*", proj);
	ck_assert(system(cmd) == 0);
	ck_assert_int_eq(project(names, 1, d2), 0);
	ck_assert_str_eq(d1, d2);
	ck_assert(system(cmd) == 0);
	put("a.py", "print(2)\n");
	ck_assert_int_eq(project(names, 1, d3), 0);
	ck_assert_str_ne(d1, d3);
	run_manifest_empty(d3);
	ck_assert_str_eq(d3,
	    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4"
	    "649b934ca495991b7852b855");
}
END_TEST

START_TEST(test_refusals)
{
	const char *dup[] = {"a.py", "a.py"}, *missing[] = {"nope"};
	const char *big[] = {"big"}, *total[] = {"m1", "m2"};
	const char *dirent[] = {"."};
	char d[RUN_DIGEST_MAX], cmd[160], huge[1100];

	put("a.py", "x\n");
	ck_assert_int_ne(project(dup, 2, d), 0);
	snprintf(cmd, sizeof(cmd), "rm -f %s/*", proj);
	ck_assert(system(cmd) == 0);
	ck_assert_int_ne(project(missing, 1, d), 0);
	memset(huge, 'x', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	put("big", huge);
	ck_assert_int_eq(project(big, 1, d), KZ_ETOOBIG);
	ck_assert(system(cmd) == 0);
	huge[1000] = '\0';
	put("m1", huge);
	put("m2", huge);
	ck_assert_int_eq(project(total, 2, d), KZ_ETOOBIG);
	ck_assert(system(cmd) == 0);
	ck_assert_int_ne(project(dirent, 1, d), 0);
}
END_TEST

START_TEST(test_projection_dir_symlink)
{
	const char *names[] = {"a.py"};
	char d[RUN_DIGEST_MAX], link[128];

	/* A projection directory swapped for a symlink is not followed. */
	put("a.py", "x\n");
	ck_assert(rmdir(proj) == 0);
	snprintf(link, sizeof(link), "%s", src);
	ck_assert(symlink(link, proj) == 0);
	ck_assert_int_eq(project(names, 1, d), KZ_EUNAVAIL);
}
END_TEST

static const struct {
	const char *argv[4];
	int argc;
	bool inl;
} inl_cases[] = {
    {{"sh", "-c", "sudo id"}, 3, true},
    {{"/bin/bash", "-c", "x"}, 3, true},
    {{"python3", "-c", "import os"}, 3, true},
    {{"perl", "-e", "print 1"}, 3, true},
    {{"python3", "/projection/p.py", "x"}, 3, false},
    {{"sh", "-c"}, 2, false},
    {{"/usr/bin/env", "-c", "x"}, 3, false},
    {{"shx", "-c", "x"}, 3, false},
};

START_TEST(test_inline)
{
	const char *text = NULL;
	bool got = run_inline_script(inl_cases[_i].argc,
	    (char **)inl_cases[_i].argv, &text);

	ck_assert_int_eq(got, inl_cases[_i].inl);
	if (got)
		ck_assert_str_eq(text, inl_cases[_i].argv[2]);
}
END_TEST

START_TEST(test_token)
{
	ck_assert_int_eq(kz_pool_token_n("0123456789abcdef:42"), 42);
	ck_assert_int_eq(kz_pool_token_n("nocolon"), 0);
	ck_assert_int_eq(kz_pool_token_n("e:-1"), 0);
	ck_assert_int_eq(kz_pool_token_n("e:99999999999999999999999"), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("run-project");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_copy_readonly);
	tcase_add_test(tc, test_digest_tracks_content);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_projection_dir_symlink);
	tcase_add_loop_test(tc, test_inline, 0,
	    sizeof(inl_cases) / sizeof(inl_cases[0]));
	tcase_add_test(tc, test_token);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
