/*
 * Workspace snapshots on the host (see kz_snap.h).  Only names this
 * module makes are looked at: DIR/NAME/ directories, and in them regular
 * files ending in ".tar" (snapshots) or ".new" (partial saves); symlinks
 * are never followed and anything else is left alone.  The scan of DIR,
 * its ledger, eviction and expiry are in snap_space.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "kz_snap.h"
#include "snap_int.h"
#include "banned.h"

int64_t
kz_snap_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
kz_snap_mtime_ms(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 +
	    st->st_mtim.tv_nsec / 1000000;
}

int
kz_snap_ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n > m && strcmp(s + n - m, suf) == 0;
}

/* A size for a person: "512 bytes", "1.5M", "20G". */
static void
fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char u[] = "KMGTP";
	double d = (double)v;
	int i = -1;

	if (v < 1024) {
		snprintf(buf, len, "%llu bytes", (unsigned long long)v);
		return;
	}
	while (d >= 1024 && i < 4) {
		d /= 1024;
		i++;
	}
	if (d - (double)(uint64_t)d < 0.05)
		snprintf(buf, len, "%.0f%c", d, u[i]);
	else
		snprintf(buf, len, "%.1f%c", d, u[i]);
}

int
kz_snap_path(const char *dir, const char *actor, const char *wskey, char *buf,
    size_t len)
{
	int n;

	if (*actor == '\0' || *wskey == '\0' || strchr(actor, '/') != NULL ||
	    strchr(wskey, '/') != NULL || actor[0] == '.')
		return KZ_EINVAL;
	n = snprintf(buf, len, "%s/%s/%s.tar", dir, actor, wskey);
	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : 0;
}

/* DIR and DIR/ACTOR of a snapshot path; KZ_EINVAL when it is not one. */
static int
split(const char *path, char *base, char *actor, size_t len)
{
	const char *a, *b = strrchr(path, '/');

	if (path[0] != '/' || b == NULL || !kz_snap_ends_with(b + 1, ".tar"))
		return KZ_EINVAL;
	for (a = b - 1; a > path && *a != '/'; a--)
		;
	if (a <= path || (size_t)(a - path) >= len ||
	    (size_t)(b - a - 1) >= NAME_MAX_ || b - a - 1 == 0 ||
	    (size_t)(b - path) >= len)
		return KZ_EINVAL;
	snprintf(base, len, "%.*s", (int)(a - path), path);
	snprintf(actor, NAME_MAX_, "%.*s", (int)(b - a - 1), a + 1);
	return 0;
}

int
kz_snap_offer(const char *dir, const char *actor, const char *wskey,
    int64_t ttl_ms, char *path, size_t len)
{
	char adir[4096];
	struct stat st;
	int e;

	if ((e = kz_snap_path(dir, actor, wskey, path, len)) != 0)
		return e;
	if ((size_t)snprintf(adir, sizeof(adir), "%s/%s", dir, actor) >=
	    sizeof(adir))
		return KZ_ETOOBIG;
	/* The mode is set whatever the umask (kz-lease's unit has 0077). */
	if (mkdir(adir, 0700) == 0 && chmod(adir, KZ_SNAP_DIR_MODE) != 0)
		return KZ_ESYS;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : KZ_ESYS;
	if (!S_ISREG(st.st_mode) ||
	    kz_snap_wall_ms() - kz_snap_mtime_ms(&st) > ttl_ms)
		return unlink(path) == 0 || errno == ENOENT ? 0 : KZ_ESYS;
	return utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW) == 0 ?
	    0 :
	    KZ_ESYS;
}

int
kz_snap_fresh(const char *path, int64_t ttl_ms)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? KZ_ENOENT : KZ_ESYS;
	if (S_ISREG(st.st_mode) &&
	    kz_snap_wall_ms() - kz_snap_mtime_ms(&st) <= ttl_ms)
		return 0;
	(void)unlink(path);
	return KZ_ESTATE;
}

int
kz_snap_ident(const char *path, struct kz_snap_id *id)
{
	struct statx sx;

	*id = (struct kz_snap_id){0};
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
	        STATX_TYPE | STATX_INO | STATX_SIZE | STATX_BTIME, &sx) != 0)
		return errno == ENOENT ? 0 : KZ_ESYS;
	id->exists = true;
	id->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	id->ino = sx.stx_ino;
	id->size = sx.stx_size;
	if (sx.stx_mask & STATX_BTIME)
		id->btime_ns = (int64_t)sx.stx_btime.tv_sec * 1000000000 +
		    sx.stx_btime.tv_nsec;
	return 0;
}

static bool
same_file(const struct kz_snap_id *a, const struct kz_snap_id *b)
{
	return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino &&
	    a->size == b->size && a->btime_ns == b->btime_ns;
}

/* ---- the locked directory ---- */

int
kz_snap_lock_dir(const char *base)
{
	int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX) != 0)
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	return fd;
}

/* Removes path only while it is base (NULL: whatever it is); the caller
 * holds the directory's lock, or there is none to take. */
static void
drop_locked(const char *path, const struct kz_snap_id *base)
{
	struct kz_snap_id cur;

	if (path == NULL)
		return;
	if (base == NULL ||
	    (kz_snap_ident(path, &cur) == 0 && same_file(&cur, base)))
		(void)unlink(path);
}

void
kz_snap_drop(const char *path, const char *tmp, const struct kz_snap_id *base)
{
	char dir[4096], actor[NAME_MAX_];
	int fd = -1;

	if (tmp != NULL)
		(void)unlink(tmp);
	if (path != NULL && base != NULL &&
	    split(path, dir, actor, sizeof(dir)) == 0)
		fd = kz_snap_lock_dir(dir);
	drop_locked(path, base);
	if (fd >= 0)
		close(fd);
}

/* ---- commit ---- */

/* An archive larger than a bound on its own is never saved. */
static int
over_bound(uint64_t need, const struct kz_snap_bounds *b, char *why,
    size_t wlen)
{
	char have[32], max[32];
	int mine = need > b->actor_max;

	if (!mine && need <= b->total_max)
		return 0;
	fmt_size(need, have, sizeof(have));
	fmt_size(mine ? b->actor_max : b->total_max, max, sizeof(max));
	kz_why(why, wlen,
	    "the workspace archive (%s) is larger than the %s "
	    "snapshot bound (%s)",
	    have, mine ? "per-actor" : "deployment's", max);
	return KZ_ETOOBIG;
}

int
kz_snap_commit(const char *path, const char *tmp,
    const struct kz_snap_bounds *b, const struct kz_snap_id *base, int *evicted,
    char *why, size_t wlen)
{
	char dir[4096], actor[NAME_MAX_];
	struct kz_snap_id cur;
	struct stat st;
	uint64_t total = 0;
	int fd = -1, e;

	*evicted = 0;
	if (split(path, dir, actor, sizeof(dir)) != 0) {
		/* Not a path of this layout: only the partial file is ours
		 * to remove. */
		kz_snap_drop(NULL, tmp, NULL);
		kz_why(why, wlen, "kz-lease named no snapshot of this layout");
		return KZ_EINVAL;
	}
	/* Every check and every removal under the lock: a concurrent
	 * commit of the same workspace is either before or after. */
	if ((fd = kz_snap_lock_dir(dir)) < 0) {
		kz_why(why, wlen, "the snapshot directory cannot be locked");
		e = KZ_ESYS;
		goto fail;
	}
	if (base != NULL && kz_snap_ident(path, &cur) == 0 && cur.exists &&
	    !same_file(&cur, base)) {
		(void)unlink(tmp);
		close(fd);
		kz_why(why, wlen,
		    "another run of this conversation saved its workspace "
		    "meanwhile; that one is kept");
		return KZ_EEXIST;
	}
	if (lstat(tmp, &st) != 0 || !S_ISREG(st.st_mode)) {
		kz_why(why, wlen, "the worker wrote no archive");
		e = KZ_ESYS;
		goto fail;
	}
	if ((e = over_bound((uint64_t)st.st_size, b, why, wlen)) != 0 ||
	    (e = kz_snap_make_room(fd, actor, strrchr(path, '/') + 1,
	         (uint64_t)st.st_size, b, &total, evicted, why, wlen)) != 0)
		goto fail;
	/* Before the rename: a commit that dies after it leaves the ledger
	 * high, never low. */
	kz_snap_ledger_write(fd, total);
	if (rename(tmp, path) != 0) {
		kz_why(why, wlen, "the archive could not be put in place");
		e = KZ_ESYS;
		goto fail;
	}
	close(fd);
	return 0;
fail:
	(void)unlink(tmp);
	drop_locked(path, base);
	if (fd >= 0)
		close(fd);
	return e;
}
