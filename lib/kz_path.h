/*
 * Rooted relative paths: the one place that opens package resources and
 * workspace files beneath a root directory descriptor.
 *
 * A rooted path is a relative path of 1..KZ_PATH_MAX bytes made of
 * segments of 1..KZ_PATH_SEG_MAX bytes separated by single '/'.  It is
 * valid UTF-8 and holds no NUL, no control character (C0, DEL or C1), no
 * backslash, no "." or ".." segment, no empty segment (so no leading,
 * trailing or doubled '/').  Nothing is normalized: a fullwidth full stop
 * (U+FF0E) is an ordinary character, so "\uFF0E\uFF0E" names a file called
 * that and never the parent.
 *
 * kz_path_open() checks that grammar before touching the filesystem, then
 * resolves the path beneath the root with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), or, where
 * the kernel lacks openat2, by a walk that opens one segment at a time with
 * O_PATH | O_NOFOLLOW and checks each step.  The result is opened as O_PATH
 * first (a fifo or device is never opened for I/O), then revalidated:
 *   - the type is what was asked (regular file or directory; fifo, device,
 *     socket and symlink each have their own error),
 *   - a regular file has exactly one hard link,
 *   - the descriptor's mount id (statx STATX_MNT_ID) equals the root's, so
 *     a bind mount of the same filesystem is caught where st_dev is not,
 *   - the descriptor's path (/proc/self/fd) starts with the root's path
 *     followed by '/', so a sibling "root-evil" never passes for "root",
 * and only then reopened for reading through that verified descriptor.
 * Every failure is closed and named by a KZ_EPATH_* error.
 *
 * Requires /proc mounted (KZ_EUNAVAIL otherwise).  Thread-safe: no state.
 */
#ifndef KZ_PATH_H
#define KZ_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "kz_err.h"

#define KZ_PATH_MAX 4096 /* bytes in a rooted path, without a NUL */
#define KZ_PATH_SEG_MAX 255 /* bytes in one segment (NAME_MAX) */
#define KZ_PATH_DEPTH_MAX 64 /* segments in one path */

/* What kz_path_open() must find; exactly one of FILE or DIR. */
#define KZ_PATH_FILE 0x1 /* a regular file, returned O_RDONLY */
#define KZ_PATH_DIR 0x2 /* a directory, returned O_RDONLY|O_DIRECTORY */
/*
 * Forces the component walk even where openat2 exists.  For tests and for
 * comparing the two resolvers; both must give the same answers.
 */
#define KZ_PATH_WALK 0x100

/*
 * Grammar only: 0 or the KZ_EPATH_* error of the first violation.  len is
 * explicit so an embedded NUL is seen instead of silently shortening the
 * path.  why (optional) gets the byte offset of the problem.
 */
KZ_WUR int kz_path_check(const char *rel, size_t len, char *why, size_t wlen);

/*
 * Opens rel beneath rootfd (a directory descriptor; O_PATH is fine) and
 * sets *outfd (O_CLOEXEC) only on success.  flags: KZ_PATH_FILE or
 * KZ_PATH_DIR, optionally | KZ_PATH_WALK.  Returns 0 or a negative kz_err:
 * the grammar errors of kz_path_check(), KZ_EPATH_SYMLINK, _ESCAPE, _XDEV,
 * _NOTREG, _NOTDIR, _FIFO, _DEVICE, _NLINK, _NOENT, KZ_EUNAVAIL (no /proc
 * or no mount ids), KZ_EINVAL (bad flags or root), KZ_ESYS (errno kept).
 * why never contains file contents; it may name a segment index.
 */
KZ_WUR int kz_path_open(int rootfd, const char *rel, size_t len, int flags,
    int *outfd, char *why, size_t wlen);

/*
 * Creates the missing parent directories of rooted path rel beneath rootfd,
 * one segment at a time: mkdirat(mode), then openat(O_NOFOLLOW |
 * O_DIRECTORY), so a symlink or file planted at a segment is refused
 * (KZ_EPATH_SYMLINK or KZ_EPATH_NOTDIR) and never followed.  A directory
 * it creates is given to uid:gid unless uid is (uid_t)-1.  On success sets
 * *parentfd to a new descriptor (O_CLOEXEC) of the directory that holds
 * rel's last segment (a duplicate of rootfd when rel has one segment),
 * *base to that segment within rel, and *created (optional) to whether any
 * directory was made.  Errors: kz_path_check()'s, those above, KZ_ESYS.
 */
KZ_WUR int kz_path_mkparent(int rootfd, const char *rel, mode_t mode, uid_t uid,
    gid_t gid, int *parentfd, const char **base, bool *created);

/*
 * True when absolute path p lies strictly beneath absolute directory root:
 * p starts with root followed by '/' (root "/" is the one case where the
 * separator is root's own), and is longer than that prefix.  "/srv/r-x" is
 * not under "/srv/r".  Lexical only: callers compare kernel-resolved paths.
 */
bool kz_path_is_under(const char *root, size_t rlen, const char *p,
    size_t plen);

#endif
