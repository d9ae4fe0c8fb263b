/*
 * The root view.  The run init assembles it once under the stage directory
 * in its own new mount namespace (made private first, so nothing propagates
 * back to the host): a small tmpfs holding a read-only recursive
 * bind of each top-level entry of the configured root (less /proc, /sys,
 * /dev, /run, /tmp and the masked paths), a minimal /dev, the projection
 * read-only, and size-bounded tmpfs instances for /workspace, /tmp and
 * /dev/shm, the only writable places.  Each run pivots into it from a copy
 * of the namespace and mounts a /proc of its own pid namespace.
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
#include <unistd.h>
#include <linux/openat2.h>

#include "sbx.h"
#include "banned.h"

static const char *const skip_top[] = {"proc", "sys", "dev", "run", "tmp",
    SBX_WS + 1, SBX_PROJ + 1, NULL};
static const char *const devs[] = {"null", "zero", "full", "random",
    "urandom", "tty", NULL};

static int
fail(char *why, size_t wlen, const char *step, const char *what)
{
	int e = errno;

	kz_why(why, wlen, "mount: %s %s: %s", step, what, strerror(e));
	errno = e;
	return KZ_ESYS;
}

static bool
in_list(const char *s, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

/* Whether /name is one of the comma-separated masks. */
static bool
masked_top(const char *masks, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = masks; *p != '\0';) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == n + 1 && p[0] == '/' && memcmp(p + 1, name, n) == 0)
			return true;
		p += l + (e ? 1 : 0);
	}
	return false;
}

/* type: the entry's d_type; DT_UNKNOWN asks lstat. */
static int
add_top(const struct sbx_conf *c, const char *stage, const char *name,
    unsigned char type, char *why, size_t wlen)
{
	char src[SBX_PBUF], dst[SBX_PBUF], tgt[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(src, sizeof(src), "%s/%s", strcmp(c->root, "/") ? c->root :
	    "", name);
	snprintf(dst, sizeof(dst), "%s/%s", stage, name);
	if (type == DT_UNKNOWN) {
		if (lstat(src, &st) < 0)
			return 0;
		type = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ?
		    DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
	}
	if (type == DT_LNK) {
		if ((n = readlink(src, tgt, sizeof(tgt) - 1)) < 0)
			return fail(why, wlen, "readlink", name);
		tgt[n] = '\0';
		return symlink(tgt, dst) < 0 ? fail(why, wlen, "symlink", name)
		    : 0;
	}
	if (type == DT_DIR) {
		if (mkdir(dst, 0755) < 0)
			return fail(why, wlen, "mkdir", name);
		if (masked_top(c->masks, name))
			return 0;
		return mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0 ?
		    fail(why, wlen, "bind", name) : 0;
	}
	if (type != DT_REG || masked_top(c->masks, name))
		return 0;
	if ((fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
		return fail(why, wlen, "create", name);
	close(fd);
	return mount(src, dst, NULL, MS_BIND, NULL) < 0 ?
	    fail(why, wlen, "bind", name) : 0;
}

/*
 * Reads the root with getdents64 into a stack buffer, not opendir: in the
 * init, opendir's 32 KiB heap buffer costs copy-on-write faults, and the
 * entries' d_type saves an lstat each.
 */
static int
populate(const struct sbx_conf *c, const char *stage, char *why, size_t wlen)
{
	union {
		struct dirent64 d;
		char b[4096];
	} u;
	ssize_t n;
	int fd, r = 0;

	if ((fd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail(why, wlen, "open", "root");
	while (r == 0 && (n = getdents64(fd, u.b, sizeof(u.b))) > 0)
		for (ssize_t off = 0; r == 0 && off < n;) {
			struct dirent64 *d = (struct dirent64 *)(u.b + off);

			off += d->d_reclen;
			if (strcmp(d->d_name, ".") != 0 &&
			    strcmp(d->d_name, "..") != 0 &&
			    !in_list(d->d_name, skip_top))
				r = add_top(c, stage, d->d_name, d->d_type, why,
				    wlen);
		}
	if (r == 0 && n < 0)
		r = fail(why, wlen, "read", "root");
	close(fd);
	return r;
}

/*
 * Hides one path of the view under an empty read-only tmpfs.  The path is
 * resolved below the stage without following any symlink, so a link in the
 * root cannot point the mount at a host directory.
 */
static int
mask_one(int stagefd, const char *path, char *why, size_t wlen)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH |
	    RESOLVE_NO_MAGICLINKS};
	char fdp[64];
	int fd, r = 0;

	while (*path == '/')
		path++;
	if (*path == '\0' || strchr(path, '/') == NULL)
		return 0;	/* top level: never bound at all */
	fd = (int)syscall(SYS_openat2, stagefd, path, &how, sizeof(how));
	if (fd < 0)
		return (errno == ENOENT || errno == ENOTDIR || errno == ELOOP ||
		    errno == EXDEV) ? 0 : fail(why, wlen, "resolve", "mask");
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", fd);
	if (mount("tmpfs", fdp, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, "size=4k,mode=0755") < 0)
		r = fail(why, wlen, "mask", path);
	close(fd);
	return r;
}

static int
masks(const struct sbx_conf *c, const char *stage, char *why, size_t wlen)
{
	char buf[sizeof(c->masks)], *save = NULL, *p;
	const char *extra[] = {c->state_dir, c->run_dir, NULL};
	int sfd, r = 0;

	if ((sfd = open(stage, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail(why, wlen, "open", "stage");
	snprintf(buf, sizeof(buf), "%s", c->masks);
	for (p = strtok_r(buf, ",", &save); r == 0 && p != NULL;
	    p = strtok_r(NULL, ",", &save))
		r = mask_one(sfd, p, why, wlen);
	for (int i = 0; r == 0 && extra[i] != NULL; i++)
		if (extra[i][0] == '/')
			r = mask_one(sfd, extra[i], why, wlen);
	close(sfd);
	return r;
}

static int
setattr(const char *path, unsigned flags, uint64_t set, char *why,
    size_t wlen)
{
	struct mount_attr a = {.attr_set = set};

	if (syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a,
	    sizeof(a)) < 0)
		return fail(why, wlen, "read-only", path);
	return 0;
}

static int
mkdev(const char *stage, char *why, size_t wlen)
{
	char p[SBX_PBUF], src[64];
	static const char *const links[][2] = {{"ptmx", "pts/ptmx"},
	    {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"},
	    {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}};
	int fd;

	snprintf(p, sizeof(p), "%s/dev", stage);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NOEXEC,
	    "size=64k,mode=0755") < 0)
		return fail(why, wlen, "tmpfs", "/dev");
	for (int i = 0; devs[i] != NULL; i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", stage, devs[i]);
		snprintf(src, sizeof(src), "/dev/%s", devs[i]);
		if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		    0666)) < 0)
			return fail(why, wlen, "create", src);
		close(fd);
		if (mount(src, p, NULL, MS_BIND, NULL) < 0)
			return fail(why, wlen, "bind", src);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", stage, links[i][0]);
		if (symlink(links[i][1], p) < 0)
			return fail(why, wlen, "symlink", links[i][0]);
	}
	snprintf(p, sizeof(p), "%s/dev/pts", stage);
	if (mkdir(p, 0755) < 0)
		return fail(why, wlen, "mkdir", "/dev/pts");
	snprintf(p, sizeof(p), "%s/dev/shm", stage);
	if (mkdir(p, 01777) < 0)
		return fail(why, wlen, "mkdir", "/dev/shm");
	snprintf(p, sizeof(p), "%s/dev", stage);
	if (setattr(p, AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
	    why, wlen) != 0)
		return KZ_ESYS;
	snprintf(p, sizeof(p), "%s/dev/pts", stage);
	if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC,
	    "newinstance,ptmxmode=0666,mode=0620") < 0)
		return fail(why, wlen, "devpts", "/dev/pts");
	return 0;
}

/* The three writable places, each a fresh size-bounded tmpfs. */
static int
writable(const struct sbx_conf *c, const char *stage, const char *rel,
    char *why, size_t wlen)
{
	char p[SBX_PBUF], opt[128];
	uint64_t size = c->tmp_size;

	if (strcmp(rel, "workspace") == 0) {
		/* Host ids: with a user namespace, the ones the code's ids
		 * map to. */
		snprintf(opt, sizeof(opt), "size=%llu,mode=0755,uid=%lld,"
		    "gid=%lld", (unsigned long long)c->ws_size,
		    (long long)(c->userns ? c->userns_uid : c->uid),
		    (long long)(c->userns ? c->userns_gid : c->gid));
	} else {
		if (strcmp(rel, "dev/shm") == 0)
			size = c->shm_size;
		snprintf(opt, sizeof(opt), "size=%llu,mode=1777",
		    (unsigned long long)size);
	}
	snprintf(p, sizeof(p), "%s/%s", stage, rel);
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

int
sbx_mnt_build(struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen)
{
	char p[SBX_PBUF];
	const char *dirs[] = {"proc", "sys", "dev", "run", "tmp", "workspace",
	    c->projection[0] ? "projection" : NULL, NULL};
	int r;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(why, wlen, "make", "private");
	if (mount("tmpfs", m->stage, "tmpfs", MS_NOSUID | MS_NODEV,
	    "size=1m,mode=0755") < 0)
		return fail(why, wlen, "tmpfs", "root");
	if ((r = populate(c, m->stage, why, wlen)) != 0)
		return r;
	for (int i = 0; dirs[i] != NULL; i++) {
		snprintf(p, sizeof(p), "%s/%s", m->stage, dirs[i]);
		if (mkdir(p, 0755) < 0)
			return fail(why, wlen, "mkdir", dirs[i]);
	}
	if ((r = masks(c, m->stage, why, wlen)) != 0)
		return r;
	if (c->projection[0] != '\0') {
		snprintf(p, sizeof(p), "%s/projection", m->stage);
		if (mount(c->projection, p, NULL, MS_BIND | MS_REC, NULL) < 0)
			return fail(why, wlen, "bind", "projection");
	}
	if ((r = setattr(m->stage, AT_RECURSIVE, MOUNT_ATTR_RDONLY |
	    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, why, wlen)) != 0)
		return r;
	if ((r = mkdev(m->stage, why, wlen)) != 0)
		return r;
	for (int i = 0; wplaces[i] != NULL; i++)
		if ((r = writable(c, m->stage, wplaces[i], why, wlen)) != 0)
			return r;
	return 0;
}

int
sbx_mnt_record(struct sbx_mnt *m)
{
	free(m->baseline);
	return (m->baseline = snapshot_table(m)) == NULL ? KZ_ESYS : 0;
}

int
sbx_mnt_enter(const struct sbx_mnt *m, char *why, size_t wlen)
{
	if (chdir(m->stage) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return fail(why, wlen, "pivot_root", "");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "hidepid=invisible") < 0)
		return fail(why, wlen, "proc", "/proc");
	return 0;
}

int
sbx_mnt_wipe(const struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen)
{
	char p[SBX_PBUF];
	int r;

	for (int i = 0; wplaces[i] != NULL; i++) {
		snprintf(p, sizeof(p), "%s/%s", m->stage, wplaces[i]);
		if (umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			return fail(why, wlen, "umount", wplaces[i]);
		if ((r = writable(c, m->stage, wplaces[i], why, wlen)) != 0)
			return r;
	}
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
