/*
 * Rooted relative paths (kz_path.h): grammar, resolution beneath a root
 * descriptor, revalidation of what was opened.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "kz_json.h"
#include "kz_path.h"
#include "banned.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x1000U
#endif

/* openat2 can fail with EAGAIN when a rename or mount raced the lookup. */
#define OPENAT2_TRIES 8

/* What resolution found about the root, taken once per call. */
struct root {
	int fd;
	uint64_t mnt;
	char path[PATH_MAX];
	size_t plen;
};

static int
check_byte(unsigned char c, unsigned char next, size_t i, char *why,
    size_t wlen)
{
	if (c < 0x20 || c == 0x7f ||
	    (c == 0xc2 && next >= 0x80 && next <= 0x9f)) {
		kz_why(why, wlen, "control character at byte %zu", i);
		return KZ_EPATH_CTRL;
	}
	if (c == '\\') {
		kz_why(why, wlen, "backslash at byte %zu", i);
		return KZ_EPATH_BACKSLASH;
	}
	return 0;
}

static int
check_segment(const char *s, size_t n, size_t off, char *why, size_t wlen)
{
	if (n == 0) {
		kz_why(why, wlen, "empty segment at byte %zu", off);
		return KZ_EPATH_EMPTYSEG;
	}
	if (n == 1 && s[0] == '.') {
		kz_why(why, wlen, "'.' segment at byte %zu", off);
		return KZ_EPATH_DOT;
	}
	if (n == 2 && s[0] == '.' && s[1] == '.') {
		kz_why(why, wlen, "'..' segment at byte %zu", off);
		return KZ_EPATH_DOTDOT;
	}
	if (n > KZ_PATH_SEG_MAX) {
		kz_why(why, wlen, "segment at byte %zu is %zu bytes", off, n);
		return KZ_EPATH_SEGLEN;
	}
	return 0;
}

int
kz_path_check(const char *rel, size_t len, char *why, size_t wlen)
{
	size_t start = 0, nseg = 0;
	int r;

	if (rel == NULL || len == 0) {
		kz_why(why, wlen, "empty path");
		return KZ_EPATH_EMPTY;
	}
	if (len > KZ_PATH_MAX) {
		kz_why(why, wlen, "path is %zu bytes", len);
		return KZ_EPATH_LEN;
	}
	if (memchr(rel, '\0', len) != NULL) {
		kz_why(why, wlen, "NUL at byte %zu",
		    (size_t)((const char *)memchr(rel, '\0', len) - rel));
		return KZ_EPATH_NUL;
	}
	if (!kz_utf8_valid(rel, len)) {
		kz_why(why, wlen, "not valid UTF-8");
		return KZ_EPATH_UTF8;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char next = i + 1 < len ? (unsigned char)rel[i + 1] :
		                                   0;

		if ((r = check_byte((unsigned char)rel[i], next, i, why,
		         wlen)) != 0)
			return r;
	}
	if (rel[0] == '/') {
		kz_why(why, wlen, "absolute path");
		return KZ_EPATH_ABSOLUTE;
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && rel[i] != '/')
			continue;
		if ((r = check_segment(rel + start, i - start, start, why,
		         wlen)) != 0)
			return r;
		if (++nseg > KZ_PATH_DEPTH_MAX) {
			kz_why(why, wlen, "more than %d segments",
			    KZ_PATH_DEPTH_MAX);
			return KZ_EPATH_LEN;
		}
		start = i + 1;
	}
	return 0;
}

static int
mnt_id(int fd, uint64_t *out, char *why, size_t wlen)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID,
	        &stx) != 0) {
		kz_why(why, wlen, "statx: %s", strerror(errno));
		return KZ_ESYS;
	}
	if (!(stx.stx_mask & STATX_MNT_ID)) {
		kz_why(why, wlen, "kernel reports no mount ids");
		return KZ_EUNAVAIL;
	}
	*out = stx.stx_mnt_id;
	return 0;
}

/* The kernel's idea of where fd is; fails closed when /proc is missing. */
static int
fd_path(int fd, char *buf, size_t blen, size_t *outlen, char *why, size_t wlen)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, buf, blen);
	if (n < 0) {
		kz_why(why, wlen, "cannot read the descriptor's path");
		return errno == ENOENT ? KZ_EUNAVAIL : KZ_ESYS;
	}
	if ((size_t)n >= blen || n == 0 || buf[0] != '/') {
		kz_why(why, wlen, "descriptor path is not usable");
		return KZ_EPATH_ESCAPE;
	}
	buf[n] = '\0';
	*outlen = (size_t)n;
	return 0;
}

/* An unlinked file's /proc path ends in " (deleted)". */
static bool
deleted(const char *p, size_t n)
{
	static const char suf[] = " (deleted)";

	return n >= sizeof(suf) - 1 &&
	    memcmp(p + n - (sizeof(suf) - 1), suf, sizeof(suf) - 1) == 0;
}

static int
root_init(struct root *rt, int fd, char *why, size_t wlen)
{
	struct stat st;
	int r;

	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
		kz_why(why, wlen, "root is not a directory descriptor");
		return KZ_EINVAL;
	}
	rt->fd = fd;
	if ((r = mnt_id(fd, &rt->mnt, why, wlen)) != 0)
		return r;
	if ((r = fd_path(fd, rt->path, sizeof(rt->path), &rt->plen, why,
	         wlen)) != 0)
		return r;
	/* An unlinked root has " (deleted)" appended: nothing is beneath it. */
	if (deleted(rt->path, rt->plen)) {
		kz_why(why, wlen, "root directory was removed");
		return KZ_EPATH_ESCAPE;
	}
	return 0;
}

/* Opens (making it when missing) directory seg beneath dfd. */
static int
mkparent_step(int dfd, const char *seg, mode_t mode, uid_t uid, gid_t gid,
    int *out, bool *made)
{
	struct stat st;
	int fd;

	*made = mkdirat(dfd, seg, mode) == 0;
	if (!*made && errno != EEXIST)
		return KZ_ESYS;
	fd = openat(dfd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ELOOP && errno != ENOTDIR)
			return KZ_ESYS;
		return fstatat(dfd, seg, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		        S_ISLNK(st.st_mode) ?
		    KZ_EPATH_SYMLINK :
		    KZ_EPATH_NOTDIR;
	}
	if (*made && uid != (uid_t)-1 && fchown(fd, uid, gid) != 0) {
		close(fd);
		return KZ_ESYS;
	}
	*out = fd;
	return 0;
}

int
kz_path_mkparent(int rootfd, const char *rel, mode_t mode, uid_t uid, gid_t gid,
    int *parentfd, const char **base, bool *created)
{
	char seg[KZ_PATH_SEG_MAX + 1];
	const char *s = rel, *slash;
	bool made, any = false;
	int fd, nfd, r;

	if ((r = kz_path_check(rel, strlen(rel), NULL, 0)) != 0)
		return r;
	if ((fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0)) < 0)
		return KZ_ESYS;
	while ((slash = strchr(s, '/')) != NULL) {
		size_t n = (size_t)(slash - s);

		memcpy(seg, s, n); /* the grammar bounds n */
		seg[n] = '\0';
		r = mkparent_step(fd, seg, mode, uid, gid, &nfd, &made);
		close(fd);
		if (r != 0)
			return r;
		any |= made;
		fd = nfd;
		s = slash + 1;
	}
	*parentfd = fd;
	*base = s;
	if (created != NULL)
		*created = any;
	return 0;
}

bool
kz_path_is_under(const char *root, size_t rlen, const char *p, size_t plen)
{
	/* The prefix is "root/": "/" is the one root that ends in '/'. */
	if (rlen == 1 && root[0] == '/')
		rlen = 0;
	return plen > rlen + 1 && memcmp(p, root, rlen) == 0 && p[rlen] == '/';
}

static int
map_errno(int e, const char *what, char *why, size_t wlen)
{
	kz_why(why, wlen, "%s: %s", what, strerror(e));
	switch (e) {
	case ELOOP:
		return KZ_EPATH_SYMLINK;
	case EXDEV:
		return KZ_EPATH_XDEV;
	case ENOENT:
		return KZ_EPATH_NOENT;
	case ENOTDIR:
		return KZ_EPATH_NOTDIR;
	default:
		errno = e;
		return KZ_ESYS;
	}
}

static int
open_beneath(const struct root *rt, const char *rel, int *out, char *why,
    size_t wlen)
{
	struct open_how how;
	long fd = -1;

	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	for (int i = 0; i < OPENAT2_TRIES; i++) {
		fd = syscall(SYS_openat2, rt->fd, rel, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	if (fd < 0) {
		if (errno == ENOSYS || errno == EPERM)
			return 1; /* no openat2 (or filtered): walk instead */
		return map_errno(errno, "openat2", why, wlen);
	}
	*out = (int)fd;
	return 0;
}

/*
 * Checks one step of the walk: a symlink, a non-directory in the middle or
 * a different mount each end it.
 */
static int
walk_step_check(const struct root *rt, int fd, size_t seg, bool last, char *why,
    size_t wlen)
{
	struct stat st;
	uint64_t mnt;
	int r;

	if (fstat(fd, &st) != 0)
		return map_errno(errno, "fstat", why, wlen);
	if (S_ISLNK(st.st_mode)) {
		kz_why(why, wlen, "segment %zu is a symlink", seg);
		return KZ_EPATH_SYMLINK;
	}
	if (!last && !S_ISDIR(st.st_mode)) {
		kz_why(why, wlen, "segment %zu is not a directory", seg);
		return KZ_EPATH_NOTDIR;
	}
	if ((r = mnt_id(fd, &mnt, why, wlen)) != 0)
		return r;
	if (mnt != rt->mnt) {
		kz_why(why, wlen, "segment %zu is on another mount", seg);
		return KZ_EPATH_XDEV;
	}
	return 0;
}

static int
open_walk(const struct root *rt, const char *rel, size_t len, int *out,
    char *why, size_t wlen)
{
	char seg[KZ_PATH_SEG_MAX + 1];
	size_t start = 0, idx = 0;
	int cur = rt->fd, next = -1, r = 0;

	for (size_t i = 0; i <= len; i++) {
		bool last = i == len;

		if (!last && rel[i] != '/')
			continue;
		memcpy(seg, rel + start, i - start);
		seg[i - start] = '\0';
		/* O_PATH|O_NOFOLLOW hands back a symlink itself; fstat sees it.
		 */
		next = openat(cur, seg, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			r = map_errno(errno, "openat", why, wlen);
			goto out;
		}
		if ((r = walk_step_check(rt, next, idx, last, why, wlen)) != 0)
			goto out;
		if (cur != rt->fd)
			close(cur);
		cur = next;
		next = -1;
		start = i + 1;
		idx++;
	}
	*out = cur;
	cur = rt->fd;
out:
	if (next >= 0)
		close(next);
	if (cur != rt->fd)
		close(cur);
	return r;
}

static int
check_type(const struct stat *st, int want, char *why, size_t wlen)
{
	if (S_ISLNK(st->st_mode)) {
		kz_why(why, wlen, "final segment is a symlink");
		return KZ_EPATH_SYMLINK;
	}
	if (S_ISFIFO(st->st_mode)) {
		kz_why(why, wlen, "final segment is a fifo");
		return KZ_EPATH_FIFO;
	}
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		kz_why(why, wlen, "final segment is a device node");
		return KZ_EPATH_DEVICE;
	}
	if (want == KZ_PATH_DIR && !S_ISDIR(st->st_mode)) {
		kz_why(why, wlen, "final segment is not a directory");
		return KZ_EPATH_NOTDIR;
	}
	if (want == KZ_PATH_FILE && !S_ISREG(st->st_mode)) {
		kz_why(why, wlen, "final segment is not a regular file");
		return KZ_EPATH_NOTREG;
	}
	if (want == KZ_PATH_FILE && st->st_nlink != 1) {
		kz_why(why, wlen, "file has %ju hard links",
		    (uintmax_t)st->st_nlink);
		return KZ_EPATH_NLINK;
	}
	return 0;
}

/* What the descriptor is, where it lives and on which mount. */
static int
revalidate(const struct root *rt, int fd, int want, struct stat *st, char *why,
    size_t wlen)
{
	char p[PATH_MAX];
	size_t plen;
	uint64_t mnt;
	int r;

	if (fstat(fd, st) != 0)
		return map_errno(errno, "fstat", why, wlen);
	if ((r = check_type(st, want, why, wlen)) != 0)
		return r;
	if ((r = mnt_id(fd, &mnt, why, wlen)) != 0)
		return r;
	if (mnt != rt->mnt) {
		kz_why(why, wlen, "descriptor is on another mount");
		return KZ_EPATH_XDEV;
	}
	if ((r = fd_path(fd, p, sizeof(p), &plen, why, wlen)) != 0)
		return r;
	/* The trailing '/' keeps a sibling "root-x" from passing as "root". */
	if (!kz_path_is_under(rt->path, rt->plen, p, plen) ||
	    deleted(p, plen)) {
		kz_why(why, wlen, "descriptor resolves outside the root");
		return KZ_EPATH_ESCAPE;
	}
	return 0;
}

/* Reopens the verified O_PATH descriptor for reading, same inode only. */
static int
reopen(int pfd, int want, const struct stat *st, int *out, char *why,
    size_t wlen)
{
	char link[64];
	struct stat st2;
	int fd, fl = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

	if (want == KZ_PATH_DIR)
		fl |= O_DIRECTORY;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
	if ((fd = open(link, fl)) < 0) {
		kz_why(why, wlen, "reopen: %s", strerror(errno));
		return errno == ENOENT ? KZ_EUNAVAIL : KZ_ESYS;
	}
	if (fstat(fd, &st2) != 0 || st2.st_dev != st->st_dev ||
	    st2.st_ino != st->st_ino) {
		close(fd);
		kz_why(why, wlen, "reopened descriptor changed");
		return KZ_EPATH_ESCAPE;
	}
	/* Reads block as usual once we know this is a file or directory. */
	if (fcntl(fd, F_SETFL, 0) != 0) {
		close(fd);
		return map_errno(errno, "fcntl", why, wlen);
	}
	*out = fd;
	return 0;
}

int
kz_path_open(int rootfd, const char *rel, size_t len, int flags, int *outfd,
    char *why, size_t wlen)
{
	char buf[KZ_PATH_MAX + 1];
	struct root rt;
	struct stat st;
	int want = flags & (KZ_PATH_FILE | KZ_PATH_DIR), pfd = -1, r;

	if (outfd == NULL || (want != KZ_PATH_FILE && want != KZ_PATH_DIR) ||
	    (flags & ~(KZ_PATH_FILE | KZ_PATH_DIR | KZ_PATH_WALK)) != 0) {
		kz_why(why, wlen, "bad flags");
		return KZ_EINVAL;
	}
	if ((r = kz_path_check(rel, len, why, wlen)) != 0)
		return r;
	/* rel need not be NUL-terminated; the kernel wants a C string. */
	memcpy(buf, rel, len);
	buf[len] = '\0';
	if ((r = root_init(&rt, rootfd, why, wlen)) != 0)
		return r;
	r = 1;
	if (!(flags & KZ_PATH_WALK))
		r = open_beneath(&rt, buf, &pfd, why, wlen);
	if (r == 1)
		r = open_walk(&rt, buf, len, &pfd, why, wlen);
	if (r != 0)
		goto out;
	if ((r = revalidate(&rt, pfd, want, &st, why, wlen)) != 0)
		goto out;
	r = reopen(pfd, want, &st, outfd, why, wlen);
out:
	if (pfd >= 0)
		close(pfd);
	return r;
}
