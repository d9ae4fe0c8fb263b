/*
 * What the snapshots of DIR take together (see kz_snap.h): the scan of
 * the actors' directories, the ledger DIR/.usage, the eviction that makes
 * room for a commit (kz_snap_commit, in snap.c), and the sweep that
 * expires old snapshots, partial files and run output directories.  All
 * of it runs with DIR open and flocked (kz_snap_lock_dir).  The rule of
 * snap.c holds here too: only names this module makes are looked at,
 * symlinks are never followed and anything else is left alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_snap.h"
#include "kz_tree.h"
#include "snap_int.h"
#include "banned.h"

struct ent {
	int64_t used; /* mtime, ms since the epoch */
	uint64_t size;
	char actor[NAME_MAX_];
	char name[NAME_MAX_];
	int gone;
};

struct scan {
	struct ent *e;
	size_t n, cap;
};

static int
scan_add(struct scan *s, const char *actor, const char *name,
    const struct stat *st)
{
	struct ent *n;

	if (strlen(actor) >= NAME_MAX_ || strlen(name) >= NAME_MAX_)
		return 0;
	if (s->n == s->cap) {
		if (s->cap >= KZ_SNAP_SCAN_MAX)
			return KZ_ETOOBIG;
		s->cap = s->cap ? s->cap * 2 : 64;
		if ((n = realloc(s->e, s->cap * sizeof(*n))) == NULL)
			return KZ_ENOMEM;
		s->e = n;
	}
	n = &s->e[s->n++];
	memset(n, 0, sizeof(*n));
	snprintf(n->actor, sizeof(n->actor), "%s", actor);
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->size = (uint64_t)st->st_size;
	n->used = kz_snap_mtime_ms(st);
	return 0;
}

/* The snapshots (with parts: partial files too) of one actor's dir. */
static int
scan_actor(int bfd, const char *actor, struct scan *s, int parts)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, e = 0;

	if ((fd = openat(bfd, actor,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return 0;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return KZ_ESYS;
	}
	while (e == 0 && (de = readdir(d)) != NULL) {
		if (!kz_snap_ends_with(de->d_name, ".tar") &&
		    !(parts && kz_snap_ends_with(de->d_name, ".new")))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
		        0 &&
		    S_ISREG(st.st_mode))
			e = scan_add(s, actor, de->d_name, &st);
	}
	closedir(d);
	return e;
}

/* Every snapshot under the locked base; "" is the actor of files left
 * in DIR itself by the flat layout (parts: partial files too). */
static int
scan_all(int bfd, struct scan *s, int parts)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, e = 0;

	/* A description of its own: readdir moves its offset. */
	if ((fd = openat(bfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return KZ_ESYS;
	}
	while (e == 0 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    fstatat(bfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			e = scan_actor(bfd, de->d_name, s, parts);
		else if (parts && S_ISREG(st.st_mode) &&
		    (kz_snap_ends_with(de->d_name, ".tar") ||
		        kz_snap_ends_with(de->d_name, ".new")))
			e = scan_add(s, "", de->d_name, &st);
	}
	closedir(d);
	return e;
}

static int
unlink_ent(int bfd, struct ent *n)
{
	char p[2 * NAME_MAX_ + 2];

	if (n->actor[0] != '\0')
		snprintf(p, sizeof(p), "%s/%s", n->actor, n->name);
	else
		snprintf(p, sizeof(p), "%s", n->name);
	if (unlinkat(bfd, p, 0) != 0 && errno != ENOENT)
		return -1;
	n->gone = 1;
	return 0;
}

static int
by_use(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;

	return x->used < y->used ? -1 : x->used > y->used;
}

/* ---- commit ---- */

struct usage {
	uint64_t actor, total;
};

/*
 * Evicts the least recently used snapshots, only the actor's when mine,
 * until need more bytes fit under max.  s is sorted by use.
 */
static int
evict(int bfd, struct scan *s, const char *actor, int mine, uint64_t need,
    uint64_t max, struct usage *u, int *evicted)
{
	uint64_t *used = mine ? &u->actor : &u->total;
	size_t i;

	for (i = 0; i<s->n && * used + need> max; i++) {
		struct ent *n = &s->e[i];
		int of_actor = strcmp(n->actor, actor) == 0;

		if (n->gone || (mine && !of_actor) || unlink_ent(bfd, n) != 0)
			continue;
		u->total -= n->size;
		if (of_actor)
			u->actor -= n->size;
		(*evicted)++;
	}
	return *used + need > max ? KZ_ESYS : 0;
}

/*
 * The ledger, DIR/.usage: the bytes of every snapshot in DIR, so that a
 * commit reads one actor's directory and this file rather than the whole
 * tree (a deployment has an actor directory per member).  It is read and
 * written only under the lock.  A snapshot removed outside a commit (an
 * expired one at lease time, a failed save) is not subtracted, so the
 * ledger errs high, never low: a commit that finds the total over its
 * bound scans the whole tree, which corrects it, before evicting anyone,
 * and every sweep rewrites it from a full scan.  A missing or unreadable
 * ledger is rebuilt the same way.
 */
#define LEDGER ".usage"

static int
ledger_read(int bfd, uint64_t *total)
{
	char buf[32], *end;
	ssize_t n;
	int fd;

	if ((fd = openat(bfd, LEDGER, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	errno = 0;
	*total = strtoull(buf, &end, 10);
	return errno != 0 || end == buf || *end != '\n' ? -1 : 0;
}

/* Replaced whole by a rename, so a reader never sees half of it. */
void
kz_snap_ledger_write(int bfd, uint64_t total)
{
	char buf[32];
	int fd,
	    n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)total);

	fd = openat(bfd, LEDGER ".new",
	    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, buf, (size_t)n) != n ||
	    renameat(bfd, LEDGER ".new", bfd, LEDGER) != 0)
		(void)unlinkat(bfd, LEDGER ".new", 0);
	close(fd);
}

/* The usage of actor (less the snapshot self, which is being replaced)
 * and of everyone, from a scan; the entries of self are marked gone. */
static void
tally(struct scan *s, const char *actor, const char *self, struct usage *u)
{
	u->actor = u->total = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->e[i].actor, actor) == 0 &&
		    strcmp(s->e[i].name, self) == 0) {
			s->e[i].gone = 1;
			continue;
		}
		u->total += s->e[i].size;
		if (strcmp(s->e[i].actor, actor) == 0)
			u->actor += s->e[i].size;
	}
	if (s->n > 0)
		qsort(s->e, s->n, sizeof(*s->e), by_use);
}

static int
scan_why(int e, char *why, size_t wlen)
{
	kz_why(why, wlen,
	    e == KZ_ETOOBIG ? "too many snapshots to account for" :
	                      "the snapshot directory is unreadable");
	return e;
}

/*
 * Makes room for need more bytes of actor's, replacing self: the actor's
 * own least recently used first, from its directory alone; then, only
 * when the ledger says the deployment's bound would be passed, anyone's,
 * from a scan of every directory.  *total gets the usage after the
 * commit, for the ledger.
 */
int
kz_snap_make_room(int bfd, const char *actor, const char *self, uint64_t need,
    const struct kz_snap_bounds *b, uint64_t *total, int *evicted, char *why,
    size_t wlen)
{
	struct scan s = {0};
	struct usage u, mine;
	uint64_t ledger;
	int e;

	if ((e = scan_actor(bfd, actor, &s, 0)) != 0) {
		scan_why(e, why, wlen);
		goto out;
	}
	tally(&s, actor, self, &mine);
	/* The replaced snapshot is in the ledger: its bytes leave it. */
	if (ledger_read(bfd, &ledger) == 0) {
		u.actor = mine.actor;
		u.total = ledger;
		for (size_t i = 0; i < s.n; i++)
			if (s.e[i].gone && u.total >= s.e[i].size)
				u.total -= s.e[i].size;
		/* Never below what one directory alone shows. */
		if (u.total < u.actor)
			u.total = u.actor;
	} else
		u.total = UINT64_MAX; /* unknown: the full scan below */
	if (u.total != UINT64_MAX &&
	    (e = evict(bfd, &s, actor, 1, need, b->actor_max, &u, evicted)) !=
	        0)
		goto evict_failed;
	if (u.total == UINT64_MAX || u.total + need > b->total_max) {
		free(s.e);
		s = (struct scan){0};
		if ((e = scan_all(bfd, &s, 0)) != 0) {
			scan_why(e, why, wlen);
			goto out;
		}
		tally(&s, actor, self, &u);
		if ((e = evict(bfd, &s, actor, 1, need, b->actor_max, &u,
		         evicted)) != 0 ||
		    (e = evict(bfd, &s, actor, 0, need, b->total_max, &u,
		         evicted)) != 0)
			goto evict_failed;
	}
	*total = u.total + need;
	goto out;
evict_failed:
	kz_why(why, wlen, "older snapshots could not be removed to make room");
out:
	free(s.e);
	return e;
}

/* ---- expiry ---- */

/* The output directories (*.out.d) of one actor's directory that a
 * kz-run which died before removing them left, once as old as a partial
 * file: the declared outputs it took out of a workspace are in them. */
static void
sweep_outdirs_of(int bfd, const char *actor, int64_t now, int *removed)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	if ((fd = openat(bfd, actor,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (kz_snap_ends_with(de->d_name, ".out.d") &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
		        0 &&
		    S_ISDIR(st.st_mode) &&
		    now - kz_snap_mtime_ms(&st) > KZ_SNAP_PARTIAL_MS &&
		    kz_tree_remove(dirfd(d), de->d_name) == 0)
			(*removed)++;
	closedir(d);
}

static void
sweep_outdirs(int bfd, int64_t now, int *removed)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	if ((fd = openat(bfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' &&
		    fstatat(bfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode))
			sweep_outdirs_of(bfd, de->d_name, now, removed);
	closedir(d);
}

int
kz_snap_sweep(const char *dir, int64_t ttl_ms, int *removed)
{
	struct scan s = {0};
	int64_t now = kz_snap_wall_ms(), age;
	uint64_t total = 0;
	size_t i;
	int fd, e;

	*removed = 0;
	if ((fd = kz_snap_lock_dir(dir)) < 0)
		return errno == ENOENT ? 0 : KZ_ESYS;
	e = scan_all(fd, &s, 1);
	for (i = 0; i < s.n; i++) {
		int part = kz_snap_ends_with(s.e[i].name, ".new");

		age = now - s.e[i].used;
		if ((part ? age > KZ_SNAP_PARTIAL_MS : age > ttl_ms) &&
		    unlink_ent(fd, &s.e[i]) == 0)
			(*removed)++;
		else if (!part && s.e[i].actor[0] != '\0')
			total += s.e[i].size;
	}
	/* The truth, whatever was removed outside a commit since. */
	if (e == 0)
		kz_snap_ledger_write(fd, total);
	sweep_outdirs(fd, now, removed);
	free(s.e);
	close(fd);
	return e;
}
