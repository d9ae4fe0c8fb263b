/*
 * The canonical tree hash: the same tree hashes the same whatever order
 * its directories list in; a changed byte, name, executable bit or
 * manifest is a different hash; a symlink, fifo or extra hard link
 * anywhere refuses the tree; the copy is exact and read-only; a sealed
 * walk refuses an entry someone could write.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_tree.h"
#include "pkgrun.h"
#include "kz_check.h"

static char dir[64];
static int dfd = -1;
static const struct pr_tree_opts opts = {1000, 1 << 20, false, 0};

static void
setup(void)
{
	ck_assert_int_ge(sodium_init(), 0);
	snprintf(dir, sizeof(dir), "/tmp/pr-tree.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(mkdirat(dfd, "src", 0755), 0);
	ck_assert_int_eq(mkdirat(dfd, "src/bin", 0755), 0);
}

static void
teardown(void)
{
	ck_assert_int_eq(kz_tree_remove(dfd, "src"), 0);
	ck_assert_int_eq(kz_tree_remove(dfd, "copy"), 0);
	close(dfd);
	ck_assert_int_eq(rmdir(dir), 0);
}

static void
put(const char *rel, const char *text, mode_t mode)
{
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "src/%s", rel);
	fd = openat(dfd, p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static int
hash(const char *man, int dst, unsigned char h[PR_HASH_BYTES],
    const struct pr_tree_opts *o)
{
	char why[256];
	int sfd = openat(dfd, "src", O_RDONLY | O_DIRECTORY), r;

	ck_assert_int_ge(sfd, 0);
	r = pr_tree_hash(sfd, man, strlen(man), dst, o, h, why, sizeof(why));
	close(sfd);
	return r;
}

START_TEST(test_sensitive)
{
	unsigned char a[PR_HASH_BYTES], b[PR_HASH_BYTES];

	put("bin/run", "#!/bin/sh\necho hi\n", 0755);
	put("README", "hello\n", 0644);
	ck_assert_int_eq(hash("{}", -1, a, &opts), 0);
	ck_assert_int_eq(hash("{}", -1, b, &opts), 0);
	ck_assert_mem_eq(a, b, sizeof(a));
	/* The manifest is part of the package. */
	ck_assert_int_eq(hash("{} ", -1, b, &opts), 0);
	ck_assert_mem_ne(a, b, sizeof(a));
	/* One byte of one file. */
	put("README", "hellO\n", 0644);
	ck_assert_int_eq(hash("{}", -1, b, &opts), 0);
	ck_assert_mem_ne(a, b, sizeof(a));
	put("README", "hello\n", 0644);
	ck_assert_int_eq(hash("{}", -1, b, &opts), 0);
	ck_assert_mem_eq(a, b, sizeof(a));
	/* The executable bit. */
	put("README", "hello\n", 0755);
	ck_assert_int_eq(hash("{}", -1, b, &opts), 0);
	ck_assert_mem_ne(a, b, sizeof(a));
	put("README", "hello\n", 0644);
	/* A new empty file or directory. */
	put("empty", "", 0644);
	ck_assert_int_eq(hash("{}", -1, b, &opts), 0);
	ck_assert_mem_ne(a, b, sizeof(a));
	ck_assert_int_eq(unlinkat(dfd, "src/empty", 0), 0);
	ck_assert_int_eq(mkdirat(dfd, "src/empty", 0755), 0);
	ck_assert_int_eq(hash("{}", -1, b, &opts), 0);
	ck_assert_mem_ne(a, b, sizeof(a));
	ck_assert_int_eq(unlinkat(dfd, "src/empty", AT_REMOVEDIR), 0);
	/* A file moved to another name with the same bytes. */
	ck_assert_int_eq(renameat(dfd, "src/README", dfd, "src/README2"), 0);
	ck_assert_int_eq(hash("{}", -1, b, &opts), 0);
	ck_assert_mem_ne(a, b, sizeof(a));
}
END_TEST

START_TEST(test_hostile_entries)
{
	unsigned char h[PR_HASH_BYTES];

	put("ok", "x", 0644);
	ck_assert_int_eq(symlinkat("/etc/passwd", dfd, "src/bin/link"), 0);
	ck_assert_int_eq(hash("{}", -1, h, &opts), KZ_EPATH_SYMLINK);
	ck_assert_int_eq(unlinkat(dfd, "src/bin/link", 0), 0);
	ck_assert_int_eq(mkfifoat(dfd, "src/fifo", 0644), 0);
	ck_assert_int_eq(hash("{}", -1, h, &opts), KZ_EPATH_FIFO);
	ck_assert_int_eq(unlinkat(dfd, "src/fifo", 0), 0);
	ck_assert_int_eq(linkat(dfd, "src/ok", dfd, "src/ok2", 0), 0);
	ck_assert_int_eq(hash("{}", -1, h, &opts), KZ_EPATH_NLINK);
	ck_assert_int_eq(unlinkat(dfd, "src/ok2", 0), 0);
	put("bad\nname", "x", 0644);
	ck_assert_int_ne(hash("{}", -1, h, &opts), 0);
	ck_assert_int_eq(unlinkat(dfd, "src/bad\nname", 0), 0);
	ck_assert_int_eq(hash("{}", -1, h, &opts), 0);
}
END_TEST

START_TEST(test_limits)
{
	struct pr_tree_opts few = {1, 1 << 20, false, 0},
	                    small = {100, 3, false, 0};
	unsigned char h[PR_HASH_BYTES];

	put("a", "1234", 0644);
	ck_assert_int_eq(hash("{}", -1, h, &few), KZ_ETOOBIG);
	ck_assert_int_eq(hash("{}", -1, h, &small), KZ_ETOOBIG);
}
END_TEST

START_TEST(test_copy_sealed)
{
	struct pr_tree_opts sealed = {1000, 1 << 20, true, 0};
	unsigned char a[PR_HASH_BYTES], b[PR_HASH_BYTES];
	struct stat st;
	int cfd;

	put("bin/run", "#!/bin/sh\n", 0755);
	put("data", "bytes", 0644);
	ck_assert_int_eq(mkdirat(dfd, "copy", 0755), 0);
	cfd = openat(dfd, "copy", O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(hash("{}", cfd, a, &opts), 0);
	ck_assert_int_eq(fstatat(cfd, "bin/run", &st, 0), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0555);
	ck_assert_int_eq(fstatat(cfd, "data", &st, 0), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0444);
	ck_assert_int_eq(fstatat(cfd, "bin", &st, 0), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0555);
	/* The copy hashes the same, sealed (its root is sealed too). */
	ck_assert_int_eq(fchmod(cfd, 0555), 0);
	ck_assert_int_eq(pr_tree_hash(cfd, "{}", 2, -1, &sealed, b, NULL, 0),
	    0);
	ck_assert_mem_eq(a, b, sizeof(a));
	/* The source is writable: a sealed walk refuses it. */
	ck_assert_int_eq(hash("{}", -1, b, &sealed), KZ_EDENIED);
	/* One writable file in the copy is enough to refuse it. */
	ck_assert_int_eq(fchmodat(cfd, "data", 0644, 0), 0);
	ck_assert_int_eq(pr_tree_hash(cfd, "{}", 2, -1, &sealed, b, NULL, 0),
	    KZ_EDENIED);
	close(cfd);
}
END_TEST

/* Room is taken before a copy is written, and counted while it is held:
 * two copies at once cannot each see the same free space. */
START_TEST(test_space)
{
	struct pr_tree_opts room = {1000, 1 << 20, false, 0};
	struct pr_space a, b;
	unsigned char h[PR_HASH_BYTES];
	struct statvfs v;
	uint64_t avail, min = 1 << 20;
	char why[256] = "";
	int cfd;

	ck_assert_int_eq(fstatvfs(dfd, &v), 0);
	avail = (uint64_t)v.f_bavail * v.f_frsize;
	ck_assert_uint_gt(avail, 64u << 20);
	/* All but 8 MiB of the room beyond min, held: 16 MiB more does not
	 * fit, 1 MiB does; once given back 16 MiB fits again. */
	ck_assert_int_eq(pr_space_take(dfd, min, avail - min - (8u << 20), 1,
	                     &a, why, sizeof(why)),
	    0);
	ck_assert_int_eq(pr_space_take(dfd, min, 16u << 20, 1, &b, why,
	                     sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_ptr_nonnull(strstr(why, "PKGRUN_STAGING_FREE_MIN"));
	ck_assert_int_eq(pr_space_take(dfd, min, 1u << 20, 1, &b, why,
	                     sizeof(why)),
	    0);
	pr_space_give(&b);
	pr_space_give(&a);
	ck_assert_int_eq(pr_space_take(dfd, min, 16u << 20, 1, &b, why,
	                     sizeof(why)),
	    0);
	pr_space_give(&b);
	/* A whole page a file; 0 checks nothing. */
	ck_assert_uint_eq(pr_space_file(1), PR_SPACE_PAGE);
	ck_assert_uint_eq(pr_space_file(PR_SPACE_PAGE + 1), 2 * PR_SPACE_PAGE);
	ck_assert_int_eq(pr_space_take(dfd, 0, UINT64_MAX, 1, &b, why,
	                     sizeof(why)),
	    0);
	pr_space_give(&b);
	/* A copy of the tree takes its room: with all of it kept, none. */
	put("data", "bytes", 0644);
	ck_assert_int_eq(mkdirat(dfd, "copy", 0755), 0);
	cfd = openat(dfd, "copy", O_RDONLY | O_DIRECTORY);
	room.free_min = avail + (1u << 30);
	ck_assert_int_eq(hash("{}", cfd, h, &room), KZ_EUNAVAIL);
	ck_assert_int_eq(faccessat(cfd, "data", F_OK, 0), -1);
	room.free_min = min;
	ck_assert_int_eq(hash("{}", cfd, h, &room), 0);
	ck_assert_int_eq(faccessat(cfd, "data", F_OK, 0), 0);
	close(cfd);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-pkgrun tree");
	TCase *tc = tcase_create("tree");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_sensitive);
	tcase_add_test(tc, test_hostile_entries);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_copy_sealed);
	tcase_add_test(tc, test_space);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
