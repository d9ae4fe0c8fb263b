/* lib/tree.c: a tree is removed whole by descriptor: files, links (never
 * followed), sealed directories as an owner that is not root, and trees
 * deeper than one walk; emptying keeps the top. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_tree.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64];
static char outside[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kztree.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(outside, sizeof(outside), "/tmp/kztree-out.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(outside));
	ck_assert_int_eq(chmod(dir, 0755), 0);
}

static void
teardown(void)
{
	ck_assert_int_eq(kz_tree_remove(AT_FDCWD, dir), 0);
	ck_assert_int_eq(kz_tree_remove(AT_FDCWD, outside), 0);
}

static void
put(const char *base, const char *rel)
{
	char p[4096];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	close(fd);
}

static void
mk(const char *base, const char *rel)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	ck_assert_int_eq(mkdir(p, 0755), 0);
}

static bool
exists(const char *base, const char *rel)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	return lstat(p, &st) == 0;
}

/* kz_tree_remove(AT_FDCWD, path)'s result as uid 65534, in a child. */
static int
remove_as_nobody(const char *path)
{
	pid_t pid;
	int st;

	ck_assert_int_ge(pid = fork(), 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) != 0 ||
		    setresuid(65534, 65534, 65534) != 0)
			_exit(99);
		switch (kz_tree_remove(AT_FDCWD, path)) {
		case 0:
			_exit(0);
		case KZ_ESYS:
			_exit(1);
		default:
			_exit(2);
		}
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_int_lt(WEXITSTATUS(st), 2);
	return WEXITSTATUS(st) == 0 ? 0 : KZ_ESYS;
}

START_TEST(test_remove_tree)
{
	char p[128];

	mk(dir, "t");
	mk(dir, "t/a");
	mk(dir, "t/a/b");
	put(dir, "t/f");
	put(dir, "t/a/b/g");
	mkfifo((snprintf(p, sizeof(p), "%s/t/a/fifo", dir), p), 0600);
	ck_assert_int_eq(kz_tree_remove(AT_FDCWD,
	                     (snprintf(p, sizeof(p), "%s/t", dir), p)),
	    0);
	ck_assert(!exists(dir, "t"));
	/* Gone already: still 0. */
	ck_assert_int_eq(kz_tree_remove(AT_FDCWD, p), 0);
}
END_TEST

/* A symlink to a directory outside, at the top or inside: the link goes,
 * what it names stays. */
START_TEST(test_links_not_followed)
{
	char p[128], q[128];
	int dfd;

	put(outside, "keep");
	mk(dir, "t");
	snprintf(p, sizeof(p), "%s/t/link", dir);
	ck_assert_int_eq(symlink(outside, p), 0);
	snprintf(q, sizeof(q), "%s/top-link", dir);
	ck_assert_int_eq(symlink(outside, q), 0);
	ck_assert_int_ge(dfd = open(dir, O_RDONLY | O_DIRECTORY), 0);
	ck_assert_int_eq(kz_tree_remove(dfd, "top-link"), 0);
	ck_assert_int_eq(kz_tree_remove(dfd, "t"), 0);
	close(dfd);
	ck_assert(!exists(dir, "t"));
	ck_assert(!exists(dir, "top-link"));
	ck_assert(exists(outside, "keep"));
}
END_TEST

/* Directories sealed 0555 by their owner, who is not root: removed. */
START_TEST(test_sealed_not_root)
{
	char p[128];

	mk(dir, "t");
	mk(dir, "t/a");
	put(dir, "t/a/f");
	snprintf(p, sizeof(p), "%s/t/a", dir);
	ck_assert_int_eq(chmod(p, 0555), 0);
	snprintf(p, sizeof(p), "%s/t", dir);
	ck_assert_int_eq(chmod(p, 0555), 0);
	ck_assert_int_eq(chown(dir, 65534, 65534), 0);
	ck_assert_int_eq(chown(p, 65534, 65534), 0);
	snprintf(p, sizeof(p), "%s/t/a", dir);
	ck_assert_int_eq(chown(p, 65534, 65534), 0);
	snprintf(p, sizeof(p), "%s/t/a/f", dir);
	ck_assert_int_eq(chown(p, 65534, 65534), 0);
	snprintf(p, sizeof(p), "%s/t", dir);
	ck_assert_int_eq(remove_as_nobody(p), 0);
	ck_assert(!exists(dir, "t"));
}
END_TEST

/* A sealed tree deeper than one walk, as its owner who is not root. */
START_TEST(test_sealed_deep_not_root)
{
	char p[128];
	int fd, next;

	ck_assert_int_eq(chown(dir, 65534, 65534), 0);
	mk(dir, "t");
	snprintf(p, sizeof(p), "%s/t", dir);
	ck_assert_int_ge(fd = open(p, O_RDONLY | O_DIRECTORY), 0);
	for (int i = 0; i < 2 * KZ_TREE_DEPTH + 5; i++) {
		ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
		ck_assert_int_ge(next = openat(fd, "d", O_RDONLY | O_DIRECTORY),
		    0);
		ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
		ck_assert_int_eq(fchmod(fd, 0555), 0);
		close(fd);
		fd = next;
	}
	ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
	ck_assert_int_eq(fchmod(fd, 0555), 0);
	close(fd);
	ck_assert_int_eq(remove_as_nobody(p), 0);
	ck_assert(!exists(dir, "t"));
}
END_TEST

/* Deeper than any one walk, and than the descriptors this process may
 * hold: removed whole, in passes. */
START_TEST(test_deep)
{
	struct rlimit rl = {KZ_TREE_DEPTH + 32, KZ_TREE_DEPTH + 32};
	int dfd, fd;

	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	mk(dir, "t");
	ck_assert_int_ge(dfd = open(dir, O_RDONLY | O_DIRECTORY), 0);
	ck_assert_int_ge(fd = openat(dfd, "t", O_RDONLY | O_DIRECTORY), 0);
	for (int i = 0; i < 5 * KZ_TREE_DEPTH + 7; i++) {
		int next;

		ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
		ck_assert_int_ge(next = openat(fd, "d", O_RDONLY | O_DIRECTORY),
		    0);
		close(fd);
		fd = next;
	}
	ck_assert_int_ge(openat(fd, "leaf", O_WRONLY | O_CREAT, 0600), 0);
	close(fd);
	ck_assert_int_eq(kz_tree_remove(dfd, "t"), 0);
	close(dfd);
	ck_assert(!exists(dir, "t"));
}
END_TEST

START_TEST(test_empty_keeps_top)
{
	int dfd;

	mk(dir, "a");
	put(dir, "a/f");
	put(dir, "g");
	ck_assert_int_ge(dfd = open(dir, O_RDONLY | O_DIRECTORY), 0);
	ck_assert_int_eq(kz_tree_empty(dfd), 0);
	/* Again, on the same descriptor: nothing left, still 0. */
	ck_assert_int_eq(kz_tree_empty(dfd), 0);
	close(dfd);
	ck_assert(exists(dir, ""));
	ck_assert(!exists(dir, "a"));
	ck_assert(!exists(dir, "g"));
}
END_TEST

/* What cannot be removed is said, not hidden: a file in a directory this
 * uid cannot write, owned by another. */
START_TEST(test_failure_said)
{
	char p[128];

	mk(dir, "t");
	put(dir, "t/f");
	snprintf(p, sizeof(p), "%s/t", dir);
	ck_assert_int_eq(chmod(p, 0555), 0);
	ck_assert_int_eq(remove_as_nobody(p), KZ_ESYS);
	ck_assert(exists(dir, "t/f"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("tree");
	TCase *tc = tcase_create("tree");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_remove_tree);
	tcase_add_test(tc, test_links_not_followed);
	tcase_add_test(tc, test_sealed_not_root);
	tcase_add_test(tc, test_deep);
	tcase_add_test(tc, test_sealed_deep_not_root);
	tcase_add_test(tc, test_empty_keeps_top);
	tcase_add_test(tc, test_failure_said);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
