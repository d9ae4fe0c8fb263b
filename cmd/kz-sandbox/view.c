/*
 * What the root view holds.  By default it is an allowlist of the host: the
 * system directories (/usr and the /bin, /sbin, /lib* that usrmerge makes
 * links into it), a /etc synthesized for the sandbox, the directories of
 * SANDBOX_EXTRA_RO, and nothing else; a dedicated image (SANDBOX_ROOT other
 * than /) is exposed whole instead.  Everything is applied exactly or the
 * worker refuses to start naming the path: a system directory that is not
 * one, a link out of the view, an extra directory that is missing, crosses
 * a symlink or holds the run or state directory, a mask that names anything
 * but a directory of the view.  Nothing is ever created in a host
 * directory: the view's own directories live on its tmpfs.  A host
 * directory is shown through an overlay of the worker's own and a host
 * file of /etc as a copy, so that the code never holds the host's inode
 * (sbx_view_ro_layer).  The path grammar and the config's own checks are
 * view_path.c's, the /etc of the allowlist view_etc.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "kz_path.h"
#include "sbx.h"
#include "sbx_view.h"
#include "banned.h"

/* Where make install puts the configs (the Makefile passes SYSCONFDIR). */
#ifndef KZ_SYSCONFDIR
#define KZ_SYSCONFDIR "/usr/local/etc"
#endif

/* The most of one host or image file that the view takes a copy of. */
#define COPY_MAX (256 * 1024)

/* How a refusal names each forbidden directory. */
static const char *const fnames[SBX_VIEW_F_N] = {"the run directory",
    "the state directory", "/etc/kaizen"};

static int
refuse(struct sbx_view_fill *f, const char *what, const char *path,
    const char *reason)
{
	kz_why(f->why, f->wlen, "mount: %s %s: %s", what, path, reason);
	return KZ_EDENIED;
}

int
sbx_view_sys(struct sbx_view_fill *f, const char *what, const char *path)
{
	int e = errno;

	kz_why(f->why, f->wlen, "mount: %s %s: %s", what, path, strerror(e));
	errno = e;
	return KZ_ESYS;
}

/* Opens path below dirfd as O_PATH, never through a symlink (ELOOP). */
int
sbx_view_open_exact(int dirfd, const char *path, unsigned long long resolve)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | resolve};

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/*
 * Shows the host directory open at src (O_PATH) read-only at dst (a path,
 * or a descriptor's magic link) through an overlay of its own rather than
 * a bind.  A bind is the host's very inode, and an inotify watch on it
 * hears every open and read of it, by the host and by every other
 * worker's code (which binaries and libraries they start, and when); a
 * watch on an overlay's inode hears only what goes through that overlay,
 * which is this worker's.  The layers are named by descriptor, so the
 * code's mountinfo names no host path.  A mount below the host directory
 * is not shown: an overlay does not cross into it.
 */
int
sbx_view_ro_layer(const struct sbx_view_fill *f, int src, const char *dst)
{
	char opt[64];

	snprintf(opt, sizeof(opt), "lowerdir=/proc/self/fd/%d:/proc/self/fd/%d",
	    src, f->emptyfd);
	return mount("overlay", dst, "overlay",
	    MS_RDONLY | MS_NOSUID | MS_NODEV, opt);
}

/* Why an errno of sbx_view_open_exact keeps a path out of the view. */
static const char *
exact_reason(int e)
{
	if (e == ELOOP)
		return "crosses a symlink";
	if (e == ENOENT)
		return "does not exist";
	if (e == ENOTDIR)
		return "not a directory, or crosses a non-directory";
	return strerror(e);
}

/*
 * A canonical form of absolute path p: p itself when it has no dot or
 * empty segment and resolves without a symlink (the common case, one
 * system call), else what realpath makes of it, else p as configured (it
 * does not exist yet).
 */
static const char *
canon(struct sbx_view_fill *f, const char *p)
{
	char *r;
	int fd;

	if (sbx_view_path_ok(p) &&
	    (fd = sbx_view_open_exact(AT_FDCWD, p, 0)) >= 0) {
		close(fd);
		return p;
	}
	if (f->nowned < SBX_VIEW_F_N + 1 && (r = realpath(p, NULL)) != NULL)
		return f->owned[f->nowned++] = r;
	return p;
}

/* The directories the view must never hold or lie in. */
static void
forbidden(struct sbx_view_fill *f)
{
	const char *p[SBX_VIEW_F_N] = {f->c->run_dir, f->c->state_dir,
	    "/etc/kaizen"};

	for (int i = 0; i < SBX_VIEW_F_N; i++)
		f->forbid[i] = p[i][0] == '/' ? canon(f, p[i]) : "";
}

/* Refuses a host path that holds, is, or lies in a forbidden directory. */
static int
overlap(struct sbx_view_fill *f, const char *what, const char *path)
{
	char r[256];

	for (int i = 0; i < SBX_VIEW_F_N; i++)
		if (f->forbid[i][0] != '\0' &&
		    (sbx_view_under(f->forbid[i], path) ||
		        sbx_view_under(path, f->forbid[i]))) {
			snprintf(r, sizeof(r), "%s %s",
			    sbx_view_under(path, f->forbid[i]) ? "is in" :
			                                         "holds",
			    fnames[i]);
			return refuse(f, what, path, r);
		}
	return 0;
}

/* Shows the host directory open at fd at name, made in the view. */
static int
bind_dir(struct sbx_view_fill *f, int fd, const char *name, const char *what)
{
	char dst[SBX_PBUF];

	snprintf(dst, sizeof(dst), "%s/%s", f->root, name);
	if (mkdir(dst, 0755) < 0)
		return sbx_view_sys(f, "mkdir", name);
	return sbx_view_ro_layer(f, fd, dst) < 0 ?
	    sbx_view_sys(f, "overlay", what) :
	    0;
}

/* One entry of the allowlist: a directory, a link inside it, or absent. */
static int
sysdir(struct sbx_view_fill *f, int host, const char *name)
{
	char path[64], tgt[PATH_MAX], dst[SBX_PBUF];
	struct stat st;
	ssize_t n;
	int fd, r;

	snprintf(path, sizeof(path), "/%s", name);
	if (fstatat(host, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT && strcmp(name, "usr") != 0 ?
		    0 :
		    sbx_view_sys(f, "root view", path);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlinkat(host, name, tgt, sizeof(tgt) - 1)) < 0)
			return sbx_view_sys(f, "readlink", path);
		tgt[n] = '\0';
		if (!sbx_view_link_ok(tgt))
			return refuse(f, "root view", path,
			    "a symlink out of the view");
		snprintf(dst, sizeof(dst), "%s/%s", f->root, name);
		return symlink(tgt, dst) < 0 ?
		    sbx_view_sys(f, "symlink", path) :
		    0;
	}
	if (!S_ISDIR(st.st_mode))
		return refuse(f, "root view", path, "not a directory");
	if ((r = overlap(f, "root view", path)) != 0)
		return r;
	if ((fd = sbx_view_open_exact(host, name, RESOLVE_BENEATH)) < 0)
		return sbx_view_sys(f, "open", path);
	r = bind_dir(f, fd, name, path);
	close(fd);
	return r;
}

/* Copies the file open at src (O_PATH, COPY_MAX at most) to a new file
 * rel below dir, with mode. */
int
sbx_view_copy_at(int src, int dir, const char *rel, mode_t mode)
{
	char self[32], buf[16384];
	ssize_t n = 0;
	off_t done = 0;
	int in, out;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", src);
	if ((in = open(self, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if ((out = openat(dir, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	         mode)) < 0) {
		close(in);
		return -1;
	}
	while (done <= COPY_MAX && (n = read(in, buf, sizeof(buf))) > 0 &&
	    write(out, buf, (size_t)n) == n)
		done += n;
	close(in);
	/* The mode asked for, whatever the umask took of it. */
	if (fchmod(out, mode) < 0)
		n = -1;
	return close(out) < 0 || n != 0 || done > COPY_MAX ? -1 : 0;
}

/* The default view: the allowlisted system directories and /etc. */
static int
allowlist(struct sbx_view_fill *f)
{
	int host, r = 0;

	if ((host = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_view_sys(f, "open", "/");
	for (int i = 0; r == 0 && sbx_view_sysdirs[i] != NULL; i++)
		r = sysdir(f, host, sbx_view_sysdirs[i]);
	close(host);
	return r != 0 ? r : sbx_view_etc(f);
}

/*
 * One top-level entry of an image: a directory through an overlay of its
 * own, a file copied (both for the reason sbx_view_ro_layer gives: the
 * image is shared by every worker, and a watch on its inode would hear
 * them all), links recreated.
 */
static int
image_entry(struct sbx_view_fill *f, int img, const char *name)
{
	char tgt[PATH_MAX], dst[SBX_PBUF];
	struct stat st;
	ssize_t n;
	int fd, r;

	snprintf(dst, sizeof(dst), "%s/%s", f->root, name);
	if (fstatat(img, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_view_sys(f, "root", name);
	if (S_ISLNK(st.st_mode)) {
		/* Inside the view a link resolves within the image. */
		if ((n = readlinkat(img, name, tgt, sizeof(tgt) - 1)) < 0)
			return sbx_view_sys(f, "readlink", name);
		tgt[n] = '\0';
		return symlink(tgt, dst) < 0 ?
		    sbx_view_sys(f, "symlink", name) :
		    0;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return refuse(f, "root", name,
		    "neither a directory, a file nor a symlink");
	if (S_ISREG(st.st_mode) && st.st_size > COPY_MAX)
		return refuse(f, "root", name,
		    "a top-level file over 256 KiB (the view copies "
		    "those; keep it in a directory)");
	if ((fd = sbx_view_open_exact(img, name, RESOLVE_BENEATH)) < 0)
		return sbx_view_sys(f, "open", name);
	if (S_ISDIR(st.st_mode))
		r = bind_dir(f, fd, name, name);
	else
		r = sbx_view_copy_at(fd, f->viewfd, name, st.st_mode & 0777) <
		        0 ?
		    sbx_view_sys(f, "copy", name) :
		    0;
	close(fd);
	return r;
}

/*
 * A dedicated image: every top-level entry but the view's own places.  It
 * is read with getdents64 into a stack buffer, not opendir, whose 32 KiB
 * heap buffer costs copy-on-write faults in the init.
 */
static int
image(struct sbx_view_fill *f)
{
	union {
		struct dirent64 d;
		char b[4096];
	} u;
	const char *root = canon(f, f->c->root);
	ssize_t n;
	int fd, r;

	if ((r = overlap(f, "root", root)) != 0)
		return r;
	if ((fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_view_sys(f, "open", "root");
	while (r == 0 && (n = getdents64(fd, u.b, sizeof(u.b))) > 0)
		for (ssize_t off = 0; r == 0 && off < n;) {
			struct dirent64 *d = (struct dirent64 *)(u.b + off);

			off += d->d_reclen;
			if (strcmp(d->d_name, ".") != 0 &&
			    strcmp(d->d_name, "..") != 0 &&
			    !sbx_view_in_list(d->d_name, strlen(d->d_name),
			        sbx_view_places))
				r = image_entry(f, fd, d->d_name);
		}
	if (r == 0 && n < 0)
		r = sbx_view_sys(f, "read", "root");
	close(fd);
	return r;
}

/*
 * The directory a bind goes on: made, with its parents, where it lies on
 * the view's own tmpfs; below a bound directory it must exist already.
 */
static int
mountpoint(struct sbx_view_fill *f, const char *path, int *out)
{
	char seg[KZ_PATH_SEG_MAX + 1];
	const char *s = path + 1;
	int cur = f->viewfd, fd = -1, e = 0;
	bool own = true;
	struct stat st;

	while (*s != '\0' && e == 0) {
		size_t n = strcspn(s, "/");

		snprintf(seg, sizeof(seg), "%.*s", (int)n, s);
		s += n + (s[n] == '/');
		fd = sbx_view_open_exact(cur, seg, own ? RESOLVE_NO_XDEV : 0);
		if (fd < 0 && errno == EXDEV) {
			own = false;
			fd = sbx_view_open_exact(cur, seg, 0);
		} else if (fd < 0 && errno == ENOENT && own &&
		    mkdirat(cur, seg, 0755) == 0)
			fd = sbx_view_open_exact(cur, seg, RESOLVE_NO_XDEV);
		e = fd < 0 ? errno : 0;
		if (cur != f->viewfd)
			close(cur);
		cur = fd;
	}
	if (e == 0 && (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)))
		e = ENOTDIR;
	if (e != 0) {
		if (fd >= 0)
			close(fd);
		return refuse(f, "extra bind", path,
		    e == ENOENT ?
		        "not in the "
		        "bound directory it lies in (nothing is made there)" :
		        exact_reason(e));
	}
	*out = fd;
	return 0;
}

/* One directory of SANDBOX_EXTRA_RO, bound at the same path. */
static int
extra_one(struct sbx_view_fill *f, const char *path)
{
	struct stat st;
	int src, dst = -1, r;

	if ((src = sbx_view_open_exact(AT_FDCWD, path, 0)) < 0)
		return refuse(f, "extra bind", path, exact_reason(errno));
	if (fstat(src, &st) < 0 || !S_ISDIR(st.st_mode))
		r = refuse(f, "extra bind", path, "not a directory");
	else if ((r = overlap(f, "extra bind", path)) == 0 &&
	    (r = mountpoint(f, path, &dst)) == 0) {
		char at[32];

		snprintf(at, sizeof(at), "/proc/self/fd/%d", dst);
		if (sbx_view_ro_layer(f, src, at) < 0)
			r = sbx_view_sys(f, "extra bind", path);
	}
	if (dst >= 0)
		close(dst);
	close(src);
	return r;
}

/*
 * Hides one directory of the view under an empty read-only tmpfs.  It is
 * resolved below the view without following any symlink; a mask of a file,
 * a link or a path the view does not have refuses to start, since a mask
 * that hides nothing now could fail to hide what appears there later.
 */
static int
mask_one(struct sbx_view_fill *f, const char *path)
{
	char fdp[32];
	struct stat st;
	int fd, r = 0;

	if ((fd = sbx_view_open_exact(f->viewfd, path + 1, RESOLVE_BENEATH)) <
	    0)
		return refuse(f, "mask", path,
		    errno == ENOENT ? "not in the root view" :
		                      exact_reason(errno));
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", fd);
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		r = refuse(f, "mask", path,
		    "not a directory (only a directory can be masked)");
	else if (mount("tmpfs", fdp, "tmpfs",
	             MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	             "size=4k,nr_inodes=1,mode=0755") < 0)
		r = sbx_view_sys(f, "mask", path);
	close(fd);
	return r;
}

/*
 * The configuration directory kz was installed with (make install's
 * SYSCONFDIR, PREFIX/etc), where its configs live: under the default
 * PREFIX that is /usr/local/etc, inside the /usr the view binds whole.
 * When the view holds it as a directory it is hidden as a mask is, with
 * whatever else the host keeps there (a global npmrc, say); /etc is the
 * view's own.  A path that crosses a symlink resolves inside the view,
 * where no host configuration is.
 */
static int
hide_sysconf(struct sbx_view_fill *f)
{
	const char *p = KZ_SYSCONFDIR;
	int fd;

	if (p[0] != '/' || strcmp(p, "/etc") == 0)
		return 0;
	if ((fd = sbx_view_open_exact(f->viewfd, p + 1, RESOLVE_BENEATH)) < 0)
		return errno == ENOENT || errno == ELOOP || errno == ENOTDIR ?
		    0 :
		    sbx_view_sys(f, "mask", p);
	close(fd);
	return mask_one(f, p);
}

/*
 * The projection is read-only but live, so it must not hold what the view
 * never shows (kz-lease's lies inside the run directory, which is fine).
 */
static int
projection(struct sbx_view_fill *f)
{
	const char *p;

	if (access(f->c->projection, F_OK) < 0)
		return sbx_view_sys(f, "bind", "projection");
	p = canon(f, f->c->projection);
	for (int i = 0; i < SBX_VIEW_F_N; i++)
		if (f->forbid[i][0] != '\0' &&
		    sbx_view_under(f->forbid[i], p)) {
			char r[64];

			snprintf(r, sizeof(r), "holds %s", fnames[i]);
			return refuse(f, "projection", f->c->projection, r);
		}
	return 0;
}

int
sbx_view_fill(const struct sbx_conf *c, const char *root, char *why,
    size_t wlen)
{
	struct sbx_view_fill f = {.c = c,
	    .root = root,
	    .viewfd = -1,
	    .emptyfd = -1,
	    .why = why,
	    .wlen = wlen};
	char item[PATH_MAX];
	const char *p;
	int r = 0;

	forbidden(&f);
	if (c->projection[0] != '\0' && (r = projection(&f)) != 0)
		goto out;
	if ((f.viewfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (f.emptyfd = openat(f.viewfd, "../empty",
	         O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = sbx_view_sys(&f, "open", "view");
		goto out;
	}
	r = strcmp(c->root, "/") == 0 ? allowlist(&f) : image(&f);
	if (r == 0 && strcmp(c->root, "/") == 0)
		r = hide_sysconf(&f);
	for (p = c->extra_ro; r == 0 && sbx_view_next(&p, item, sizeof(item));)
		r = extra_one(&f, item);
	for (p = c->masks; r == 0 && sbx_view_next(&p, item, sizeof(item));)
		r = mask_one(&f, item);
out:
	if (f.emptyfd >= 0)
		close(f.emptyfd);
	if (f.viewfd >= 0)
		close(f.viewfd);
	for (int i = 0; i < f.nowned; i++)
		free(f.owned[i]);
	return r;
}
