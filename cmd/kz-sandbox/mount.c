/*
 * The root view.  The run init assembles it under the stage directory in
 * its own new mount namespace (made private first, so nothing propagates
 * back to the host).  The stage is a small tmpfs holding
 *   root/        the view, on a tmpfs of its own: what view.c fills it
 *                with, a minimal /dev, the read-only projection, and
 *                size-bounded tmpfs instances for /workspace, /tmp and
 *                /dev/shm, the only writable places;
 *   projection/  a bind of SANDBOX_PROJECTION_DIR and empty/, the two
 *                layers of the read-only overlay at root/projection.
 * The init pivots into the stage and confines itself, and so every code
 * process, to root/ with chroot.  A mount outside a process's root is not
 * in its mountinfo: the bind, whose root field would name the projection's
 * host path (the run directory and the worker id), is not shown, and the
 * overlay's root is its own.  An overlay caches the lookups of the
 * directory below it; every lease has a run init, and an overlay, of its
 * own, so no name the last tenant looked up survives into the next.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "sbx_view.h"
#include "banned.h"

/* The character devices of /dev, by the numbers Linux gives them for
 * good (the kernel's admin-guide/devices.txt). */
static const struct {
	const char *name;
	unsigned major, minor;
} devs[] = {{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8},
    {"urandom", 1, 9}, {"tty", 5, 0}};

static int
fail(char *why, size_t wlen, const char *step, const char *what)
{
	int e = errno;

	kz_why(why, wlen, "mount: %s %s: %s", step, what, strerror(e));
	errno = e;
	return KZ_ESYS;
}

static int
setattr(const char *path, unsigned flags, uint64_t set, char *why, size_t wlen)
{
	struct mount_attr a = {.attr_set = set};

	if (syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof(a)) <
	    0)
		return fail(why, wlen, "read-only", path);
	return 0;
}

static int
mkdev(const char *root, char *why, size_t wlen)
{
	char p[SBX_PBUF];
	static const char *const links[][2] = {{"ptmx", "pts/ptmx"},
	    {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"},
	    {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}};

	snprintf(p, sizeof(p), "%s/dev", root);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NOEXEC,
	        "size=64k,mode=0755") < 0)
		return fail(why, wlen, "tmpfs", "/dev");
	/* Nodes of the view's own, not binds of the host's: an inotify
	 * watch on the host's inode hears every process of the host that
	 * reads or writes the device. */
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", root, devs[i].name);
		if (mknod(p, S_IFCHR | 0666,
		        makedev(devs[i].major, devs[i].minor)) < 0 ||
		    chmod(p, 0666) < 0)
			return fail(why, wlen, "mknod", devs[i].name);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", root, links[i][0]);
		if (symlink(links[i][1], p) < 0)
			return fail(why, wlen, "symlink", links[i][0]);
	}
	snprintf(p, sizeof(p), "%s/dev/pts", root);
	if (mkdir(p, 0755) < 0)
		return fail(why, wlen, "mkdir", "/dev/pts");
	snprintf(p, sizeof(p), "%s/dev/shm", root);
	if (mkdir(p, 01777) < 0)
		return fail(why, wlen, "mkdir", "/dev/shm");
	snprintf(p, sizeof(p), "%s/dev", root);
	if (setattr(p, AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, why,
	        wlen) != 0)
		return KZ_ESYS;
	return 0;
}

/* The three writable places, each a fresh size-bounded tmpfs. */
static int
writable(const struct sbx_conf *c, const char *root, const char *rel, char *why,
    size_t wlen)
{
	char p[SBX_PBUF], opt[128];
	uint64_t size = c->tmp_size;

	if (strcmp(rel, "workspace") == 0) {
		/* Host ids: with a user namespace, the ones the code's ids
		 * map to. */
		snprintf(opt, sizeof(opt),
		    "size=%llu,mode=0755,uid=%lld,gid=%lld",
		    (unsigned long long)c->ws_size,
		    (long long)(c->userns ? c->userns_uid : c->uid),
		    (long long)(c->userns ? c->userns_gid : c->gid));
	} else {
		if (strcmp(rel, "dev/shm") == 0)
			size = c->shm_size;
		snprintf(opt, sizeof(opt), "size=%llu,mode=1777",
		    (unsigned long long)size);
	}
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0)
		return fail(why, wlen, "tmpfs", rel);
	return 0;
}

static const char *const wplaces[] = {"workspace", "tmp", "dev/shm", NULL};

static char *
read_mountinfo(void)
{
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
	int fd;

	if (buf == NULL)
		return NULL;
	if ((fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)) < 0) {
		free(buf);
		return NULL;
	}
	while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return buf;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *
field(const char *line, int n, size_t *len)
{
	const char *p = line;

	for (int i = 0; i < n && p != NULL; i++)
		if ((p = strchr(p, ' ')) != NULL)
			p++;
	if (p == NULL)
		return NULL;
	*len = strcspn(p, " \n");
	return p;
}

/*
 * Keeps, for each mount at or under prefix, its root, mount point, mount
 * options and what follows the separator (type, source, super options),
 * sorted, without the ids that change when a tmpfs is replaced.
 */
char *
sbx_mnt_normalize(const char *mi, const char *prefix)
{
	char *lines[512], *out = NULL, *o;
	size_t nl = 0, pl = strlen(prefix), total = 1;

	for (const char *l = mi; l != NULL && *l != '\0' && nl < 512;) {
		const char *end = strchr(l, '\n'), *mp, *sep;
		size_t mlen, len = end ? (size_t)(end - l) : strlen(l);

		mp = field(l, 4, &mlen);
		sep = strstr(l, " - ");
		if (mp != NULL && sep != NULL && (size_t)(sep - l) < len &&
		    mlen >= pl && memcmp(mp, prefix, pl) == 0 &&
		    (mlen == pl || mp[pl] == '/')) {
			const char *root = field(l, 3, &mlen);
			size_t n = (size_t)(l + len - root);

			if ((lines[nl] = strndup(root, n)) == NULL)
				goto out;
			total += n + 1;
			nl++;
		}
		l = end ? end + 1 : NULL;
	}
	qsort(lines, nl, sizeof(lines[0]), cmpstr);
	if ((out = malloc(total)) == NULL)
		goto out;
	o = out;
	for (size_t i = 0; i < nl; i++) {
		size_t n = strlen(lines[i]);

		memcpy(o, lines[i], n);
		o[n] = '\n';
		o += n + 1;
	}
	*o = '\0';
out:
	for (size_t i = 0; i < nl; i++)
		free(lines[i]);
	return out;
}

static char *
snapshot_table(const struct sbx_mnt *m)
{
	char *mi = read_mountinfo(), *n;

	if (mi == NULL)
		return NULL;
	n = sbx_mnt_normalize(mi, m->stage);
	free(mi);
	return n;
}

/* The stage and the view's root tmpfs, with the places' mount points. */
static int
stage(const struct sbx_mnt *m, const struct sbx_conf *c, char *root,
    size_t rlen, char *why, size_t wlen)
{
	const char *const places[] = {"proc", "sys", "dev", "run", "tmp",
	    SBX_WS + 1, c->projection[0] ? SBX_PROJ + 1 : NULL, NULL};
	const char *const dirs[] = {"root", "empty", "projection"};
	char p[SBX_PBUF];

	if (mount("tmpfs", m->stage, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	        "size=16k,nr_inodes=8,mode=0755") < 0)
		return fail(why, wlen, "tmpfs", "stage");
	/* empty is the second layer of every overlay in the view (view.c). */
	for (int i = 0; i < (c->projection[0] ? 3 : 2); i++) {
		snprintf(p, sizeof(p), "%s/%s", m->stage, dirs[i]);
		if (mkdir(p, 0755) < 0)
			return fail(why, wlen, "mkdir", dirs[i]);
	}
	snprintf(root, rlen, "%s/root", m->stage);
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV,
	        "size=1m,mode=0755") < 0)
		return fail(why, wlen, "tmpfs", "root");
	for (int i = 0; places[i] != NULL; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, places[i]);
		if (mkdir(p, 0755) < 0)
			return fail(why, wlen, "mkdir", places[i]);
	}
	return 0;
}

/* The projection overlay at dst; the layers are named from the stage,
 * which is the cwd. */
static int
overlay(const char *dst)
{
	return mount("overlay", dst, "overlay",
	    MS_RDONLY | MS_NOSUID | MS_NODEV, "lowerdir=projection:empty");
}

/* The host file src bound read-only (as the rest of the view is) at
 * the new file dst of the view, made with mode. */
static int
bind_file(const char *root, const char *src, const char *dst, mode_t mode,
    char *why, size_t wlen)
{
	char p[SBX_PBUF];
	int fd;

	snprintf(p, sizeof(p), "%s%s", root, dst);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)) < 0)
		return fail(why, wlen, "create", dst);
	close(fd);
	return mount(src, p, NULL, MS_BIND, NULL) < 0 ?
	    fail(why, wlen, "bind", dst) :
	    0;
}

/*
 * Under gvisor, the loader (gvloader/, a static binary beside the
 * archiver) at SBX_GV_LOADER in the view (read-only, like the rest of
 * it): the code's first process there, which loads the system call filter
 * inside gVisor's kernel (gvisor.c).  In the allowlisted view, whose /etc
 * is the sandbox's own, the object its ld.so.preload names too
 * (SBX_GV_COMPAT), from the same place; a worker without either does not
 * start.
 */
int
sbx_beside(const char *set, const char *rel, char *p, size_t len)
{
	char self[PATH_MAX], *slash;
	ssize_t m;
	int n;

	if (set[0] != '\0')
		n = snprintf(p, len, "%s", set);
	else {
		/* By its path: the magic link names a mount of the namespace
		 * the binary was started in, which a bind may not take. */
		if ((m = readlink("/proc/self/exe", self, sizeof(self) - 1)) <=
		    0)
			return -1;
		self[m] = '\0';
		slash = strrchr(self, '/');
		n = snprintf(p, len, "%.*s/%s", (int)(slash - self), self, rel);
	}
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static int
loader(const struct sbx_conf *c, const char *root, char *why, size_t wlen)
{
	char p[SBX_PBUF];
	int fd, r;

	if (sbx_beside(c->gv_loader, SBX_GV_LOADER_BESIDE, p, sizeof(p)) != 0 ||
	    access(p, X_OK) < 0) {
		kz_why(why, wlen, "gvisor: no kz-gvisor-loader %s: %s",
		    c->gv_loader[0] != '\0' ?
		        "at SANDBOX_GVISOR_LOADER" :
		        "beside the binary (" SBX_GV_LOADER_BESIDE ")",
		    strerror(errno));
		return KZ_EUNAVAIL;
	}
	if ((r = bind_file(root, p, SBX_GV_LOADER, 0555, why, wlen)) != 0)
		return r;
	if (strcmp(c->root, "/") == 0) {
		if (sbx_beside(c->gv_compat, SBX_GV_COMPAT_BESIDE, p,
		        sizeof(p)) != 0 ||
		    access(p, R_OK) < 0) {
			kz_why(why, wlen,
			    "gvisor: no kz-gvisor-compat.so %s: %s",
			    c->gv_compat[0] != '\0' ?
			        "at SANDBOX_GVISOR_COMPAT" :
			        "beside the binary (" SBX_GV_COMPAT_BESIDE ")",
			    strerror(errno));
			return KZ_EUNAVAIL;
		}
		if ((r = bind_file(root, p, SBX_GV_COMPAT, 0444, why, wlen)) !=
		    0)
			return r;
	}
	/* The mount point of each run's filter (runsc binds it there). */
	snprintf(p, sizeof(p), "%s%s", root, SBX_GV_FILTER);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) < 0)
		return fail(why, wlen, "create", SBX_GV_FILTER);
	close(fd);
	return 0;
}

int
sbx_mnt_base(struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen)
{
	char root[PATH_MAX + 8], p[SBX_PBUF];
	int r;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(why, wlen, "make", "private");
	if ((r = stage(m, c, root, sizeof(root), why, wlen)) != 0 ||
	    (r = sbx_view_fill(c, root, why, wlen)) != 0)
		return r;
	if (sbx_gvisor(c) && (r = loader(c, root, why, wlen)) != 0)
		return r;
	snprintf(p, sizeof(p), "%s/projection", m->stage);
	if (c->projection[0] != '\0' &&
	    mount(c->projection, p, NULL, MS_BIND, NULL) < 0)
		return fail(why, wlen, "bind", "projection");
	if ((r = setattr(m->stage, AT_RECURSIVE,
	         MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, why,
	         wlen)) != 0)
		return r;
	return mkdev(root, why, wlen);
}

/*
 * What no two leases share: the projection overlay (its lookups are
 * cached), a devpts instance and the three writable tmpfs instances.
 */
int
sbx_mnt_lease(const struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen)
{
	char root[PATH_MAX + 8], p[SBX_PBUF];
	int r;

	snprintf(root, sizeof(root), "%s/root", m->stage);
	if (c->projection[0] != '\0' &&
	    (chdir(m->stage) < 0 || overlay("root" SBX_PROJ) < 0))
		return fail(why, wlen, "overlay", SBX_PROJ);
	/* Every devpts instance but the host's draws on one kernel-wide
	 * count (kernel.pty.max less kernel.pty.reserve): without a
	 * maximum of its own, one tenant could take every pseudo-terminal
	 * from the others and from every container on the host. */
	snprintf(p, sizeof(p), "%s/dev/pts", root);
	if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC,
	        "newinstance,ptmxmode=0666,mode=0620,max=" SBX_PTY_MAX) < 0)
		return fail(why, wlen, "devpts", "/dev/pts");
	for (int i = 0; wplaces[i] != NULL; i++)
		if ((r = writable(c, root, wplaces[i], why, wlen)) != 0)
			return r;
	return 0;
}

int
sbx_mnt_build(struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen)
{
	int r;

	if ((r = sbx_mnt_base(m, c, why, wlen)) != 0)
		return r;
	return sbx_mnt_lease(m, c, why, wlen);
}

int
sbx_mnt_record(struct sbx_mnt *m)
{
	free(m->baseline);
	return (m->baseline = snapshot_table(m)) == NULL ? KZ_ESYS : 0;
}

/*
 * Pivots into the stage, then moves the view over it and makes that the
 * root, as switch_root does: to the kernel the init is not chrooted (it
 * still makes the code's user namespace), and the stage below, with the
 * projection's source, is outside every root that reads mountinfo.
 */
int
sbx_mnt_enter(const struct sbx_mnt *m, char *why, size_t wlen)
{
	if (chdir(m->stage) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return fail(why, wlen, "pivot_root", "");
	if (chdir("root") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 ||
	    chroot(".") < 0 || chdir("/") < 0)
		return fail(why, wlen, "move", "root");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	        "hidepid=invisible") < 0)
		return fail(why, wlen, "proc", "/proc");
	/* The kernel's command line is the host's (boot parameters, at
	 * times a secret): /dev/null takes its place, on a mount that must
	 * allow devices to be read at all. */
	if (mount("/dev/null", "/proc/cmdline", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/proc/cmdline", NULL,
	        MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
	        NULL) < 0)
		return fail(why, wlen, "mask", "/proc/cmdline");
	return 0;
}

bool
sbx_mnt_empty(const struct sbx_mnt *m, const char *rel)
{
	char p[SBX_PBUF];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(p, sizeof(p), "%s/%s", m->stage, rel);
	if ((dir = opendir(p)) == NULL)
		return false;
	while ((d = readdir(dir)) != NULL)
		if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0)
			n++;
	closedir(dir);
	return n == 0;
}

bool
sbx_mnt_baseline_ok(const struct sbx_mnt *m)
{
	char *now = snapshot_table(m);
	bool ok = now != NULL && m->baseline != NULL &&
	    strcmp(now, m->baseline) == 0;

	free(now);
	return ok;
}

void
sbx_mnt_release(struct sbx_mnt *m)
{
	free(m->baseline);
	m->baseline = NULL;
	/* The mounts vanish with the namespace; only the empty host
	 * directory is ours to remove. */
	if (m->made_dir)
		(void)rmdir(m->stage);
	m->made_dir = false;
}
