/*
 * kz-pi-validate tree.c: a fresh exact copy of the authored tree, its
 * parents made one segment at a time beneath the new directory.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCRATCH_TAG "tree"
#include "scratch.h"
#include "kz_path.h"
#include "kz_check.h"
#include "banned.h"

static void
check_copy(const char *rel, const char *text, uid_t owner)
{
	char p[256], buf[64] = "";
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "%s/copy/%s", dir, rel);
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_uid, owner);
	ck_assert_int_ge(fd = open(p, O_RDONLY), 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf) - 1), (ssize_t)strlen(text));
	close(fd);
	ck_assert_str_eq(buf, text);
}

static void
check_dir(const char *rel, uid_t owner)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/copy/%s", dir, rel);
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	ck_assert_uint_eq(st.st_uid, owner);
}

/* Every file lands at its path, every parent is a 0755 directory owned
 * by the copy's owner, and the contents are the source's. */
START_TEST(test_materialize_nested)
{
	struct pv_tree t = {0};
	char why[256] = "", src[96];
	uid_t me = geteuid();
	int sfd, dfd;

	put("src/top.md", "top");
	put("src/a/one.md", "one");
	put("src/a/b/c/deep.md", "deep");
	put("src/a/b/two.md", "two");
	snprintf(src, sizeof(src), "%s/src", dir);
	ck_assert_int_ge(sfd = open(src, O_RDONLY | O_DIRECTORY), 0);
	ck_assert_int_ge(dfd = open(dir, O_RDONLY | O_DIRECTORY), 0);
	ck_assert_int_eq(pv_tree_scan(sfd, false, &t, why, sizeof(why)), 0);
	ck_assert_uint_eq(t.n, 4);
	ck_assert_msg(pv_materialize(sfd, &t, dfd, "copy", me, why,
	                  sizeof(why)) == 0,
	    "%s", why);
	check_copy("top.md", "top", me);
	check_copy("a/one.md", "one", me);
	check_copy("a/b/two.md", "two", me);
	check_copy("a/b/c/deep.md", "deep", me);
	check_dir("a", me);
	check_dir("a/b", me);
	check_dir("a/b/c", me);
	/* A tree is always fresh: a second copy under the same name is
	 * refused, not merged. */
	ck_assert_int_eq(pv_materialize(sfd, &t, dfd, "copy", me, why,
	                     sizeof(why)),
	    KZ_ESYS);
	pv_tree_release(&t);
	close(sfd);
	close(dfd);
}
END_TEST

/*
 * A test tree the child wrote is removed whole whatever it made: a chain
 * of directories deeper than any walk goes, a directory it closed (mode
 * 0), and symlinks to a directory outside, at its top and at the
 * bottom of the chain, which are removed, never followed.
 */
START_TEST(test_remove_hostile)
{
	char p[256], canary[256];
	int fd, nfd;

	put("t/top.md", "top");
	put("outside/keep", "keep");
	/* The validator is root: a directory closed to it is not. */
	if (geteuid() == 0) {
		snprintf(p, sizeof(p), "%s/t/closed", dir);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		put("t/closed/f", "f");
		ck_assert_int_eq(chmod(p, 0), 0);
	}
	snprintf(p, sizeof(p), "%s/outside", dir);
	snprintf(canary, sizeof(canary), "%s/t/link", dir);
	ck_assert_int_eq(symlink(p, canary), 0);
	snprintf(p, sizeof(p), "%s/t", dir);
	ck_assert_int_ge(fd = open(p, O_RDONLY | O_DIRECTORY), 0);
	for (int i = 0; i < 3 * 2 * KZ_PATH_DEPTH_MAX + 5; i++) {
		ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
		ck_assert_int_ge(nfd = openat(fd, "d", O_RDONLY | O_DIRECTORY),
		    0);
		close(fd);
		fd = nfd;
	}
	ck_assert_int_ge(nfd = openat(fd, "bottom", O_WRONLY | O_CREAT, 0644),
	    0);
	close(nfd);
	snprintf(canary, sizeof(canary), "%s/outside", dir);
	ck_assert_int_eq(symlinkat(canary, fd, "deeplink"), 0);
	close(fd);
	ck_assert_int_eq(kz_tree_remove(AT_FDCWD, p), 0);
	ck_assert_int_ne(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/outside/keep", dir);
	ck_assert_int_eq(access(p, F_OK), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pv_tree");
	TCase *tc = tcase_create("tree");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_materialize_nested);
	tcase_add_test(tc, test_remove_hostile);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
