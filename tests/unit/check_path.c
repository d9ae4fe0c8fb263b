/*
 * Rooted paths against hostile names and hostile trees.  Every filesystem
 * case runs twice: through openat2 and through the forced component walk,
 * which must agree.  Needs root (device nodes, bind mounts); the bind mount
 * lives in a private mount namespace of the forked test process.
 */
#include <check.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "kz_path.h"
#include "kz_check.h"
#include "banned.h"

static char base[64], top[96], rootp[128];
static int rootfd = -1;
static const int modes[2] = {0, KZ_PATH_WALK};
static bool mounted_bind, mounted_tmp;

#define FW ".\xef\xbc\x8e" /* "." then U+FF0E FULLWIDTH FULL STOP */
#define FWDOTS "\xef\xbc\x8e\xef\xbc\x8e"

static void
put(const char *rel, const char *content)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(content, f);
	fclose(f);
}

static void
mk(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void
ln(const char *target, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	ck_assert_int_eq(symlink(target, p), 0);
}

/*
 * The base directory is made and removed by the runner itself, so a test
 * that fails (and skips its teardown in the forked child) leaves nothing.
 */
static void
base_setup(void)
{
	snprintf(base, sizeof(base), "/tmp/kz-check-path.XXXXXX");
	if (mkdtemp(base) == NULL)
		abort();
}

static void
base_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", base);
}

/*
 * top/root is the root; top/outside holds a secret; top/root-evil is the
 * sibling whose name extends the root's.
 */
static void
setup(void)
{
	char p[512], q[512];

	snprintf(top, sizeof(top), "%s/t.XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(rootp, sizeof(rootp), "%s/root", top);
	mk("root");
	mk("outside");
	mk("root-evil");
	put("outside/secret", "secret");
	put("root-evil/secret", "secret");
	mk("root/a");
	mk("root/a/b");
	put("root/a/b/file.txt", "inside");
	put("root/file.txt", "top");
	put("root/h1", "hard");
	snprintf(p, sizeof(p), "%s/root/h1", top);
	snprintf(q, sizeof(q), "%s/root/h2", top);
	ck_assert_int_eq(link(p, q), 0);
	ln("../outside", "root/link-out");
	ln("../root-evil", "root/link-sib");
	ln("a", "root/link-in");
	ln("../file.txt", "root/a/filelink");
	ln("/etc/passwd", "root/abs-link");
	snprintf(p, sizeof(p), "%s/root/fifo", top);
	ck_assert_int_eq(mkfifo(p, 0644), 0);
	snprintf(p, sizeof(p), "%s/root/null", top);
	ck_assert_int_eq(mknod(p, S_IFCHR | 0644, makedev(1, 3)), 0);
	mk("root/" FWDOTS);
	put("root/" FWDOTS "/f", "fullwidth");
	mk("root/mnt");
	mk("root/tmpfs");
	rootfd = open(rootp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(rootfd, 0);
}

/*
 * A private mount namespace for this (forked) test; the root is reopened
 * after mounting because a descriptor keeps the namespace it came from.
 */
static bool
private_mounts(void)
{
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 &&
	    errno == EINVAL) {
		/* In a chroot whose / is not a mount point the tree cannot
		 * be made private, and a mount here could propagate to the
		 * host: skip rather than risk it. */
		fprintf(stderr, "skip: / is not a mount point (chroot)\n");
		return false;
	}
	return true;
}

static void
reopen_root(void)
{
	close(rootfd);
	rootfd = open(rootp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(rootfd, 0);
}

static void
teardown(void)
{
	char cmd[160], p[512];

	if (mounted_bind) {
		snprintf(p, sizeof(p), "%s/mnt", rootp);
		umount2(p, MNT_DETACH);
	}
	if (mounted_tmp) {
		snprintf(p, sizeof(p), "%s/tmpfs", rootp);
		umount2(p, MNT_DETACH);
	}
	if (rootfd >= 0)
		close(rootfd);
	rootfd = -1;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", top);
}

/* Opens rel in mode and returns the error, or 0 with the first bytes. */
static int
try(const char *rel, size_t len, int flags, char *got, size_t glen)
{
	char why[256];
	int fd = -1, r;
	ssize_t n;

	r = kz_path_open(rootfd, rel, len, flags, &fd, why, sizeof(why));
	if (r != 0) {
		ck_assert_int_eq(fd, -1);
		return r;
	}
	if (got != NULL) {
		n = read(fd, got, glen - 1);
		got[n > 0 ? n : 0] = '\0';
	}
	close(fd);
	return 0;
}

/* Both resolvers give want for rel. */
static void
both(const char *rel, int flags, int want)
{
	for (int m = 0; m < 2; m++) {
		int r = try(rel, strlen(rel), flags | modes[m], NULL, 0);

		ck_assert_msg(r == want, "%s (%s): got %s, want %s", rel,
		    m ? "walk" : "openat2", kz_errname(r), kz_errname(want));
	}
}

/* ---- grammar ---- */

struct gcase {
	const char *in;
	size_t len; /* 0: strlen */
	int want;
};

static char longseg[KZ_PATH_SEG_MAX + 2], okseg[KZ_PATH_SEG_MAX + 1];
static char longpath[KZ_PATH_MAX + 2], deep[2 * (KZ_PATH_DEPTH_MAX + 1) + 1];

static const struct gcase gcases[] = {
    {"a", 0, 0},
    {"a/b/c.txt", 0, 0},
    {"...", 0, 0},
    {"..a", 0, 0},
    {".a", 0, 0},
    {"a b", 0, 0},
    {"caf\xc3\xa9", 0, 0},
    {FWDOTS, 0, 0},
    {FW, 0, 0},
    {"", 0, KZ_EPATH_EMPTY},
    {"/etc/passwd", 0, KZ_EPATH_ABSOLUTE},
    {"/", 0, KZ_EPATH_ABSOLUTE},
    {"//a", 0, KZ_EPATH_ABSOLUTE},
    {"..", 0, KZ_EPATH_DOTDOT},
    {"../x", 0, KZ_EPATH_DOTDOT},
    {"a/../b", 0, KZ_EPATH_DOTDOT},
    {"a/..", 0, KZ_EPATH_DOTDOT},
    {".", 0, KZ_EPATH_DOT},
    {"./a", 0, KZ_EPATH_DOT},
    {"a/./b", 0, KZ_EPATH_DOT},
    {"a/.", 0, KZ_EPATH_DOT},
    {"a//b", 0, KZ_EPATH_EMPTYSEG},
    {"a/", 0, KZ_EPATH_EMPTYSEG},
    {"a\\b", 0, KZ_EPATH_BACKSLASH},
    {"..\\x", 0, KZ_EPATH_BACKSLASH},
    {"a\nb", 0, KZ_EPATH_CTRL},
    {"a\tb", 0, KZ_EPATH_CTRL},
    {"a\rb", 0, KZ_EPATH_CTRL},
    {"\x1b[31m", 0, KZ_EPATH_CTRL},
    {"a\x7f", 0, KZ_EPATH_CTRL},
    {"a\xc2\x85"
     "b",
        0, KZ_EPATH_CTRL}, /* U+0085 NEL, a C1 control */
    {"a\0b", 3, KZ_EPATH_NUL},
    {"a\0", 2, KZ_EPATH_NUL},
    {"\xff", 0, KZ_EPATH_UTF8},
    {"\xc0\xae\xc0\xae", 0, KZ_EPATH_UTF8}, /* overlong ".." */
    {"\xc0\xaf", 0, KZ_EPATH_UTF8}, /* overlong "/" */
    {"\xed\xa0\x80", 0, KZ_EPATH_UTF8}, /* surrogate */
    {"a\xe2\x82", 0, KZ_EPATH_UTF8}, /* truncated */
    {"\xf4\x90\x80\x80", 0, KZ_EPATH_UTF8}, /* > U+10FFFF */
    {okseg, 0, 0},
    {longseg, 0, KZ_EPATH_SEGLEN},
    {longpath, 0, KZ_EPATH_LEN},
    {deep, 0, KZ_EPATH_LEN},
};

static void
fill_long(void)
{
	memset(okseg, 'x', KZ_PATH_SEG_MAX);
	memset(longseg, 'x', KZ_PATH_SEG_MAX + 1);
	memset(longpath, 'y', KZ_PATH_MAX + 1);
	for (int i = 0; i < KZ_PATH_DEPTH_MAX + 1; i++) {
		deep[2 * i] = 'd';
		deep[2 * i + 1] = '/';
	}
	deep[2 * KZ_PATH_DEPTH_MAX + 1] = '\0';
}

START_TEST(grammar_table)
{
	const struct gcase *c = &gcases[_i];
	char why[128] = "";
	size_t len;
	int r;

	fill_long();
	len = c->len ? c->len : strlen(c->in);
	r = kz_path_check(c->in, len, why, sizeof(why));
	ck_assert_msg(r == c->want, "case %d: got %s (%s), want %s", _i,
	    kz_errname(r), why, kz_errname(c->want));
}
END_TEST

/* The grammar is checked before the filesystem: no root is needed. */
START_TEST(grammar_before_fs)
{
	int fd = -1;

	ck_assert_int_eq(kz_path_open(-1, "../x", 4, KZ_PATH_FILE, &fd, NULL,
	                     0),
	    KZ_EPATH_DOTDOT);
	ck_assert_int_eq(fd, -1);
}
END_TEST

START_TEST(is_under_prefix)
{
	ck_assert(kz_path_is_under("/t/r", 4, "/t/r/x", 6));
	ck_assert(!kz_path_is_under("/t/r", 4, "/t/r-evil/x", 11));
	ck_assert(!kz_path_is_under("/t/r", 4, "/t/rx", 5));
	ck_assert(!kz_path_is_under("/t/r", 4, "/t/r", 4));
	ck_assert(!kz_path_is_under("/t/r", 4, "/t/r/", 5));
	ck_assert(!kz_path_is_under("/t/r", 4, "/t", 2));
	ck_assert(kz_path_is_under("/", 1, "/x", 2));
	ck_assert(!kz_path_is_under("/", 1, "/", 1));
}
END_TEST

/* ---- opening ---- */

START_TEST(opens_regular_file)
{
	char got[32];

	for (int m = 0; m < 2; m++) {
		ck_assert_int_eq(try("a/b/file.txt", 12,
		                     KZ_PATH_FILE | modes[m], got, sizeof(got)),
		    0);
		ck_assert_str_eq(got, "inside");
	}
}
END_TEST

START_TEST(returned_fd_flags)
{
	int fd = -1, fl;

	ck_assert_int_eq(kz_path_open(rootfd, "file.txt", 8, KZ_PATH_FILE, &fd,
	                     NULL, 0),
	    0);
	fl = fcntl(fd, F_GETFL);
	ck_assert_int_eq(fl & O_ACCMODE, O_RDONLY);
	ck_assert_int_eq(fl & O_NONBLOCK, 0);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	ck_assert_int_eq(write(fd, "x", 1), -1);
	close(fd);
}
END_TEST

START_TEST(dir_fd_is_a_new_root)
{
	char got[32];
	int dfd = -1, fd = -1;

	for (int m = 0; m < 2; m++) {
		ck_assert_int_eq(kz_path_open(rootfd, "a", 1,
		                     KZ_PATH_DIR | modes[m], &dfd, NULL, 0),
		    0);
		ck_assert_int_eq(kz_path_open(dfd, "b/file.txt", 10,
		                     KZ_PATH_FILE | modes[m], &fd, NULL, 0),
		    0);
		ck_assert_int_eq(read(fd, got, 6), 6);
		ck_assert_int_eq(memcmp(got, "inside", 6), 0);
		close(fd);
		/* Beneath "a", the top-level file is out of reach. */
		ck_assert_int_eq(kz_path_open(dfd, "file.txt", 8,
		                     KZ_PATH_FILE | modes[m], &fd, NULL, 0),
		    KZ_EPATH_NOENT);
		close(dfd);
	}
}
END_TEST

START_TEST(opath_root_accepted)
{
	int pfd = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC), fd = -1;

	ck_assert_int_ge(pfd, 0);
	ck_assert_int_eq(kz_path_open(pfd, "file.txt", 8, KZ_PATH_FILE, &fd,
	                     NULL, 0),
	    0);
	close(fd);
	close(pfd);
}
END_TEST

START_TEST(bad_root_and_flags)
{
	int ffd, fd = -1;
	char p[512];

	snprintf(p, sizeof(p), "%s/file.txt", rootp);
	ffd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(kz_path_open(ffd, "x", 1, KZ_PATH_FILE, &fd, NULL, 0),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_path_open(-1, "x", 1, KZ_PATH_FILE, &fd, NULL, 0),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_path_open(rootfd, "a", 1,
	                     KZ_PATH_FILE | KZ_PATH_DIR, &fd, NULL, 0),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_path_open(rootfd, "a", 1, 0, &fd, NULL, 0),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_path_open(rootfd, "a", 1, KZ_PATH_DIR | 0x40, &fd,
	                     NULL, 0),
	    KZ_EINVAL);
	ck_assert_int_eq(fd, -1);
	close(ffd);
}
END_TEST

START_TEST(symlink_escape)
{
	both("link-out/secret", KZ_PATH_FILE, KZ_EPATH_SYMLINK);
	both("link-out", KZ_PATH_DIR, KZ_EPATH_SYMLINK);
	both("abs-link", KZ_PATH_FILE, KZ_EPATH_SYMLINK);
}
END_TEST

START_TEST(symlink_inside_root)
{
	both("link-in/b/file.txt", KZ_PATH_FILE, KZ_EPATH_SYMLINK);
	both("a/filelink", KZ_PATH_FILE, KZ_EPATH_SYMLINK);
	both("link-in", KZ_PATH_DIR, KZ_EPATH_SYMLINK);
}
END_TEST

START_TEST(device_node)
{
	both("null", KZ_PATH_FILE, KZ_EPATH_DEVICE);
	both("null", KZ_PATH_DIR, KZ_EPATH_DEVICE);
}
END_TEST

START_TEST(hard_link_count)
{
	char p[512];

	both("h1", KZ_PATH_FILE, KZ_EPATH_NLINK);
	both("h2", KZ_PATH_FILE, KZ_EPATH_NLINK);
	snprintf(p, sizeof(p), "%s/h2", rootp);
	ck_assert_int_eq(unlink(p), 0);
	both("h1", KZ_PATH_FILE, 0);
}
END_TEST

START_TEST(socket_not_regular)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_uint_lt(strlen(rootp), 100);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s/sock", rootp);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	both("sock", KZ_PATH_FILE, KZ_EPATH_NOTREG);
	close(s);
}
END_TEST

START_TEST(wrong_types)
{
	both("a", KZ_PATH_FILE, KZ_EPATH_NOTREG);
	both("file.txt", KZ_PATH_DIR, KZ_EPATH_NOTDIR);
	both("file.txt/x", KZ_PATH_FILE, KZ_EPATH_NOTDIR);
	both("nope", KZ_PATH_FILE, KZ_EPATH_NOENT);
	both("a/nope/x", KZ_PATH_FILE, KZ_EPATH_NOENT);
}
END_TEST

START_TEST(tmpfs_mount_crossing)
{
	char p[512];

	if (!private_mounts())
		return;
	snprintf(p, sizeof(p), "%s/tmpfs", rootp);
	ck_assert_int_eq(mount("tmpfs", p, "tmpfs", 0, "size=64k"), 0);
	mounted_tmp = true;
	reopen_root();
	put("root/tmpfs/f", "other fs");
	both("tmpfs/f", KZ_PATH_FILE, KZ_EPATH_XDEV);
	both("tmpfs", KZ_PATH_DIR, KZ_EPATH_XDEV);
}
END_TEST

/* ---- the known traps, one test each ---- */

/*
 * O_NOFOLLOW only covers the last component: "link/" and "link/." make
 * the symlink an intermediate one, and it is followed.
 */
START_TEST(trap_nofollow_trailing_slash)
{
	int fd;

	fd = openat(rootfd, "link-out/", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "the trap no longer exists on this kernel");
	close(fd);
	fd = openat(rootfd, "link-out/.", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	both("link-out/", KZ_PATH_DIR, KZ_EPATH_EMPTYSEG);
	both("link-out/.", KZ_PATH_DIR, KZ_EPATH_DOT);
	both("link-in/", KZ_PATH_DIR, KZ_EPATH_EMPTYSEG);
}
END_TEST

/* O_PATH | O_NOFOLLOW on a symlink returns the link, not an error. */
START_TEST(trap_opath_nofollow_returns_link)
{
	struct stat st;
	int fd = openat(rootfd, "link-out", O_PATH | O_NOFOLLOW | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	close(fd);
	both("link-out", KZ_PATH_FILE, KZ_EPATH_SYMLINK);
	both("a/filelink", KZ_PATH_FILE, KZ_EPATH_SYMLINK);
}
END_TEST

/*
 * A bind mount of the same filesystem: st_dev is the same and the /proc
 * path lies under the root, so only the mount id tells.
 */
START_TEST(trap_bind_mount_same_fs)
{
	char src[512], dst[512], lp[64], got[512];
	struct stat a, b;
	int fd;
	ssize_t n;

	if (!private_mounts())
		return;
	snprintf(src, sizeof(src), "%s/outside", top);
	snprintf(dst, sizeof(dst), "%s/mnt", rootp);
	ck_assert_int_eq(mount(src, dst, NULL, MS_BIND, NULL), 0);
	mounted_bind = true;
	reopen_root();
	fd = openat(rootfd, "mnt/secret", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(fstat(rootfd, &b), 0);
	ck_assert(a.st_dev == b.st_dev); /* st_dev cannot tell */
	snprintf(lp, sizeof(lp), "/proc/self/fd/%d", fd);
	n = readlink(lp, got, sizeof(got) - 1);
	ck_assert_int_gt(n, 0);
	ck_assert(kz_path_is_under(rootp, strlen(rootp), got, (size_t)n));
	close(fd);
	both("mnt/secret", KZ_PATH_FILE, KZ_EPATH_XDEV);
	both("mnt", KZ_PATH_DIR, KZ_EPATH_XDEV);
}
END_TEST

/*
 * The sibling "root-evil" starts with the root's path.  Reaching it needs
 * a symlink (refused) and the prefix check itself requires the '/'.
 */
START_TEST(trap_sibling_prefix)
{
	char sib[512];

	snprintf(sib, sizeof(sib), "%s-evil/secret", rootp);
	ck_assert_int_eq(strncmp(sib, rootp, strlen(rootp)), 0);
	ck_assert(!kz_path_is_under(rootp, strlen(rootp), sib, strlen(sib)));
	both("link-sib/secret", KZ_PATH_FILE, KZ_EPATH_SYMLINK);
}
END_TEST

/* Opening a fifo for reading blocks; the resolver never opens it. */
START_TEST(trap_fifo_does_not_block)
{
	alarm(5); /* a blocked open fails the test by SIGALRM */
	both("fifo", KZ_PATH_FILE, KZ_EPATH_FIFO);
	both("fifo", KZ_PATH_DIR, KZ_EPATH_FIFO);
	alarm(0);
}
END_TEST

/* strlen() would make "file.txt\0/../x" look like "file.txt". */
START_TEST(trap_embedded_nul)
{
	static const char p[] = "file.txt\0/../../outside/secret";

	ck_assert_uint_eq(strlen(p), 8);
	for (int m = 0; m < 2; m++)
		ck_assert_int_eq(try(p, sizeof(p) - 1, KZ_PATH_FILE | modes[m],
		                     NULL, 0),
		    KZ_EPATH_NUL);
}
END_TEST

/* Fullwidth dots are a name, never normalized into "..". */
START_TEST(trap_fullwidth_dots)
{
	char got[32];

	for (int m = 0; m < 2; m++) {
		ck_assert_int_eq(try(FWDOTS "/f", strlen(FWDOTS "/f"),
		                     KZ_PATH_FILE | modes[m], got, sizeof(got)),
		    0);
		ck_assert_str_eq(got, "fullwidth");
	}
	both(FWDOTS "/outside/secret", KZ_PATH_FILE, KZ_EPATH_NOENT);
	both(FWDOTS "/" FWDOTS "/outside/secret", KZ_PATH_FILE, KZ_EPATH_NOENT);
}
END_TEST

/* ---- the race ---- */

struct race {
	atomic_bool stop;
	char d[512], alt[512];
};

/* Swaps the real directory "d" and the symlink "alt" as fast as it can. */
static void *
swapper(void *arg)
{
	struct race *rc = arg;

	while (!atomic_load(&rc->stop))
		renameat2(AT_FDCWD, rc->d, AT_FDCWD, rc->alt, RENAME_EXCHANGE);
	return NULL;
}

static void
race_mode(int mode, const char *rel)
{
	struct race rc;
	pthread_t th;
	char got[32];
	int ok = 0, refused = 0;

	memset(&rc, 0, sizeof(rc));
	snprintf(rc.d, sizeof(rc.d), "%s/d", rootp);
	snprintf(rc.alt, sizeof(rc.alt), "%s/alt", rootp);
	ck_assert_int_eq(pthread_create(&th, NULL, swapper, &rc), 0);
	for (int i = 0; i < 3000; i++) {
		int r = try(rel, strlen(rel), KZ_PATH_FILE | mode, got,
		    sizeof(got));

		if (r == 0) {
			ck_assert_msg(strcmp(got, "inside") == 0,
			    "read '%s' through a swapped path", got);
			ok++;
		} else {
			ck_assert_msg(r == KZ_EPATH_SYMLINK ||
			        r == KZ_EPATH_NOENT || r == KZ_EPATH_NOTDIR ||
			        r == KZ_EPATH_ESCAPE || r == KZ_ESYS,
			    "unexpected %s", kz_errname(r));
			refused++;
		}
	}
	atomic_store(&rc.stop, true);
	pthread_join(th, NULL);
	fprintf(stderr, "race %s %s: %d opened, %d refused\n",
	    mode ? "walk" : "openat2", rel, ok, refused);
}

/* The creation walk: parents made beneath the root, never through a link. */
START_TEST(mkparent_makes_and_refuses)
{
	const char *b = NULL;
	struct stat st;
	bool made = false;
	int pfd = -1;

	ck_assert_int_eq(kz_path_mkparent(rootfd, "n1/n2/new.txt", 0700,
	                     (uid_t)-1, (gid_t)-1, &pfd, &b, &made),
	    0);
	ck_assert(made);
	ck_assert_str_eq(b, "new.txt");
	ck_assert_int_eq(fstat(pfd, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	close(pfd);
	/* Existing parents: nothing made; a top-level name: the root. */
	ck_assert_int_eq(kz_path_mkparent(rootfd, "a/b/file.txt", 0700,
	                     (uid_t)-1, (gid_t)-1, &pfd, &b, &made),
	    0);
	ck_assert(!made);
	ck_assert_int_eq(faccessat(pfd, "file.txt", F_OK, 0), 0);
	close(pfd);
	ck_assert_int_eq(kz_path_mkparent(rootfd, "top.txt", 0700, (uid_t)-1,
	                     (gid_t)-1, &pfd, &b, NULL),
	    0);
	ck_assert_int_ne(pfd, rootfd);
	ck_assert_str_eq(b, "top.txt");
	ck_assert_int_eq(faccessat(pfd, "file.txt", F_OK, 0), 0);
	close(pfd);
	/* A planted link or file at a segment is refused, never followed. */
	pfd = -1;
	ck_assert_int_eq(kz_path_mkparent(rootfd, "link-out/x", 0700, (uid_t)-1,
	                     (gid_t)-1, &pfd, &b, NULL),
	    KZ_EPATH_SYMLINK);
	ck_assert_int_eq(kz_path_mkparent(rootfd, "link-in/b/x", 0700,
	                     (uid_t)-1, (gid_t)-1, &pfd, &b, NULL),
	    KZ_EPATH_SYMLINK);
	ck_assert_int_eq(kz_path_mkparent(rootfd, "file.txt/x", 0700, (uid_t)-1,
	                     (gid_t)-1, &pfd, &b, NULL),
	    KZ_EPATH_NOTDIR);
	ck_assert_int_eq(kz_path_mkparent(rootfd, "../outside/x", 0700,
	                     (uid_t)-1, (gid_t)-1, &pfd, &b, NULL),
	    KZ_EPATH_DOTDOT);
	ck_assert_int_eq(kz_path_mkparent(rootfd, "/etc/x", 0700, (uid_t)-1,
	                     (gid_t)-1, &pfd, &b, NULL),
	    KZ_EPATH_ABSOLUTE);
	ck_assert_int_eq(pfd, -1);
	ck_assert_int_ne(faccessat(rootfd, "../outside/x", F_OK, 0), 0);
}
END_TEST

START_TEST(mkparent_owns_what_it_makes)
{
	const char *b;
	struct stat st;
	int pfd;

	ck_assert_int_eq(kz_path_mkparent(rootfd, "o1/o2/f", 0755, 65534, 65534,
	                     &pfd, &b, NULL),
	    0);
	ck_assert_int_eq(fstat(pfd, &st), 0);
	ck_assert_int_eq(st.st_uid, 65534);
	ck_assert_int_eq(st.st_gid, 65534);
	close(pfd);
	ck_assert_int_eq(fstatat(rootfd, "o1", &st, 0), 0);
	ck_assert_int_eq(st.st_uid, 65534);
	/* A directory that was there keeps its owner. */
	ck_assert_int_eq(kz_path_mkparent(rootfd, "a/o3/f", 0755, 65534, 65534,
	                     &pfd, &b, NULL),
	    0);
	close(pfd);
	ck_assert_int_eq(fstatat(rootfd, "a", &st, 0), 0);
	ck_assert_int_eq(st.st_uid, getuid());
}
END_TEST

START_TEST(race_dir_swapped_for_symlink)
{
	mk("root/d");
	mk("root/d/e");
	put("root/d/f", "inside");
	put("root/d/e/f", "inside");
	mk("outside/e");
	put("outside/f", "secret");
	put("outside/e/f", "secret");
	ln("../outside", "root/alt");
	race_mode(0, "d/f");
	race_mode(KZ_PATH_WALK, "d/f");
	race_mode(0, "d/e/f");
	race_mode(KZ_PATH_WALK, "d/e/f");
}
END_TEST

static Suite *
path_suite(void)
{
	Suite *s = suite_create("path");
	TCase *g = tcase_create("grammar"), *f = tcase_create("fs");

	tcase_add_loop_test(g, grammar_table, 0,
	    (int)(sizeof(gcases) / sizeof(gcases[0])));
	tcase_add_test(g, grammar_before_fs);
	tcase_add_test(g, is_under_prefix);
	suite_add_tcase(s, g);
	tcase_add_unchecked_fixture(f, base_setup, base_teardown);
	tcase_add_checked_fixture(f, setup, teardown);
	tcase_set_timeout(f, 30);
	tcase_add_test(f, opens_regular_file);
	tcase_add_test(f, returned_fd_flags);
	tcase_add_test(f, dir_fd_is_a_new_root);
	tcase_add_test(f, opath_root_accepted);
	tcase_add_test(f, bad_root_and_flags);
	tcase_add_test(f, symlink_escape);
	tcase_add_test(f, symlink_inside_root);
	tcase_add_test(f, device_node);
	tcase_add_test(f, hard_link_count);
	tcase_add_test(f, socket_not_regular);
	tcase_add_test(f, wrong_types);
	tcase_add_test(f, tmpfs_mount_crossing);
	tcase_add_test(f, trap_nofollow_trailing_slash);
	tcase_add_test(f, trap_opath_nofollow_returns_link);
	tcase_add_test(f, trap_bind_mount_same_fs);
	tcase_add_test(f, trap_sibling_prefix);
	tcase_add_test(f, trap_fifo_does_not_block);
	tcase_add_test(f, trap_embedded_nul);
	tcase_add_test(f, trap_fullwidth_dots);
	tcase_add_test(f, race_dir_swapped_for_symlink);
	tcase_add_test(f, mkparent_makes_and_refuses);
	tcase_add_test(f, mkparent_owns_what_it_makes);
	suite_add_tcase(s, f);
	return s;
}

int
main(void)
{
	return kz_check_run(path_suite());
}
