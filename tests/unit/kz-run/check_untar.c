/* kz-run untar.c: only declared regular files leave a workspace archive,
 * whatever the archive holds; a truncated or garbage archive is refused
 * whole. */
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

#define LONG                                                                   \
	"d/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.txt"

static char top[64], tarpath[128];

/* A workspace and its archive, made by tar as the worker makes it. */
static void
setup(void)
{
	char cmd[1024];

	snprintf(top, sizeof(top), "/tmp/kz-untar.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(tarpath, sizeof(tarpath), "%s/ws.tar", top);
	snprintf(cmd, sizeof(cmd),
	    "set -e; cd %s; mkdir ws out; cd ws; mkdir -p sub d; "
	    "echo one >a.txt; echo two >sub/b.txt; echo long >" LONG "; "
	    "ln -s /etc/passwd link.txt; echo h >h1.txt; ln h1.txt h2.txt; "
	    "mkfifo fifo; "
	    "head -c 5000 /dev/zero >big.txt; echo secret >undeclared.txt; "
	    "tar --numeric-owner -cf ../ws.tar .",
	    top);
	ck_assert_int_eq(system(cmd), 0);
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	(void)!system(cmd);
}

static const struct {
	const char *path;
	int want;
	const char *content;
} cases[] = {
    {"a.txt", 0, "one\n"},
    {"sub/b.txt", 0, "two\n"},
    {LONG, 0, "long\n"},
    {"missing.txt", KZ_ENOENT, NULL},
    {"link.txt", KZ_EPATH_NOTREG, NULL},
    {"sub", KZ_EPATH_NOTREG, NULL},
    {"fifo", KZ_EPATH_NOTREG, NULL},
    {"big.txt", KZ_ETOOBIG, NULL},
    {"./a.txt", KZ_ENOENT, NULL},
};

START_TEST(test_member)
{
	const char *paths[1] = {cases[_i].path};
	char p[256], got[64] = "";
	int fd, dfd, res[1];
	ssize_t n;

	snprintf(p, sizeof(p), "%s/out", top);
	fd = open(tarpath, O_RDONLY);
	dfd = open(p, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(run_untar(fd, paths, 1, dfd, 4096, res), 0);
	ck_assert_int_eq(res[0], cases[_i].want);
	snprintf(p, sizeof(p), "%s/out/%s", top, cases[_i].path);
	if (cases[_i].content != NULL) {
		int in = open(p, O_RDONLY);

		ck_assert_int_ge(in, 0);
		n = read(in, got, sizeof(got) - 1);
		ck_assert_int_ge(n, 0);
		ck_assert_str_eq(got, cases[_i].content);
		close(in);
	} else if (cases[_i].want != KZ_ETOOBIG)
		ck_assert_int_ne(access(p, F_OK), 0);
	/* Nothing undeclared was written. */
	snprintf(p, sizeof(p), "%s/out/undeclared.txt", top);
	ck_assert_int_ne(access(p, F_OK), 0);
	close(fd);
	close(dfd);
}
END_TEST

/* tar stores the second name of a hard link as a link member: that one
 * is refused, whichever of the two names it is. */
START_TEST(test_hardlink)
{
	const char *paths[2] = {"h1.txt", "h2.txt"};
	char p[256];
	int fd, dfd, res[2];

	snprintf(p, sizeof(p), "%s/out", top);
	fd = open(tarpath, O_RDONLY);
	dfd = open(p, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(run_untar(fd, paths, 2, dfd, 4096, res), 0);
	ck_assert_int_eq(res[0] + res[1], KZ_EPATH_NOTREG);
	ck_assert(res[0] == 0 || res[1] == 0);
	close(fd);
	close(dfd);
}
END_TEST

/* Cut short at each of these offsets, the archive is refused whole. */
static const off_t cuts[] = {0, 100, 512, 700, 1024 + 300};

START_TEST(test_truncated)
{
	const char *paths[1] = {"undeclared.txt"};
	char p[256];
	int fd, dfd, res[1];

	ck_assert_int_eq(truncate(tarpath, cuts[_i]), 0);
	snprintf(p, sizeof(p), "%s/out", top);
	fd = open(tarpath, O_RDONLY);
	dfd = open(p, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ne(run_untar(fd, paths, 1, dfd, 4096, res), 0);
	close(fd);
	close(dfd);
}
END_TEST

START_TEST(test_garbage)
{
	unsigned char b[1024];
	const char *paths[1] = {"a.txt"};
	char p[256];
	int fd, dfd, res[1];

	memset(b, 'z', sizeof(b));
	fd = open(tarpath, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, b, sizeof(b)), (ssize_t)sizeof(b));
	close(fd);
	snprintf(p, sizeof(p), "%s/out", top);
	fd = open(tarpath, O_RDONLY);
	dfd = open(p, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ne(run_untar(fd, paths, 1, dfd, 4096, res), 0);
	ck_assert_int_ne(res[0], 0);
	close(fd);
	close(dfd);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-run untar");
	TCase *tc = tcase_create("untar");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_member, 0,
	    sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_hardlink);
	tcase_add_loop_test(tc, test_truncated, 0,
	    sizeof(cuts) / sizeof(cuts[0]));
	tcase_add_test(tc, test_garbage);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
