/*
 * Workspace snapshots on the host, which kz-lease (layout, use, expiry)
 * and kz-run (restore, commit under the bounds) must agree on.
 *
 * Layout: DIR/ACTOR/WSKEY.tar, ACTOR the keyed hash of the actor and
 * WSKEY that of (actor, conversation); a save is written beside it as
 * WSKEY.tar.RID.new by the worker and committed by kz_snap_commit.  A
 * snapshot's mtime is its last use: the save that wrote it, or a lease
 * that offered it for restore.
 *
 * Bounds: the archive bytes of one actor's snapshots, and of all of them,
 * are each kept under a maximum.  A commit that would exceed one first
 * evicts that actor's (then anyone's) least recently used snapshots; an
 * archive larger than a bound alone is not saved.  A commit that fails
 * for any reason removes the older snapshot too, so the next run never
 * silently gets an older workspace.  Commits and sweeps hold an exclusive
 * flock on DIR, so concurrent savers do not overshoot.  A commit reads its
 * actor's directory and the ledger DIR/.usage (every snapshot's bytes,
 * erring high), and scans every directory only when the ledger says the
 * deployment's bound would be passed or is missing; a sweep rewrites it.
 */
#ifndef KZ_SNAP_H
#define KZ_SNAP_H

#include <stdbool.h>
#include <stdint.h>

#include "kz_err.h"

/* DIR/ACTOR is made with this mode (kz-run, in DIR's group, renames in
 * it and evicts from it; the worker, root, writes the archive). */
#define KZ_SNAP_DIR_MODE 0770
/* A partial file (*.new), or a run's output directory (*.out.d), older
 * than this was left by a save or a kz-run that died. */
#define KZ_SNAP_PARTIAL_MS (3600 * 1000)
/* The most snapshots a commit or a sweep looks at. */
#define KZ_SNAP_SCAN_MAX (1 << 20)

struct kz_snap_bounds {
	uint64_t actor_max; /* bytes, one actor's snapshots */
	uint64_t total_max; /* bytes, every snapshot in DIR */
	int64_t ttl_ms; /* unused this long: expired */
};

/* DIR/ACTOR/WSKEY.tar into buf. */
KZ_WUR int kz_snap_path(const char *dir, const char *actor, const char *wskey,
    char *buf, size_t len);

/*
 * At lease time: makes DIR/ACTOR if it is missing, removes the snapshot
 * of WSKEY when it expired (it is never restored), else marks it used
 * now.  path gets the snapshot's path either way.
 */
KZ_WUR int kz_snap_offer(const char *dir, const char *actor, const char *wskey,
    int64_t ttl_ms, char *path, size_t len);

/* Before a restore: 0 when path is a snapshot used within ttl_ms,
 * KZ_ENOENT when there is none, KZ_ESTATE when it expired (removed). */
KZ_WUR int kz_snap_fresh(const char *path, int64_t ttl_ms);

/*
 * Which file a snapshot is, not only its name: a save that replaced it
 * since is another file.  The birth time tells a new file that reuses a
 * freed inode number from the old one (where the file system keeps one).
 */
struct kz_snap_id {
	bool exists;
	uint64_t dev, ino, size;
	int64_t btime_ns; /* 0 where the file system keeps none */
};

/* What is at path now; 0 (id->exists false when nothing is), or
 * KZ_ESYS. */
KZ_WUR int kz_snap_ident(const char *path, struct kz_snap_id *id);

/*
 * Commits tmp as path (see above).  With base (the snapshot the save
 * started from, as kz_snap_ident saw it before the restore), a snapshot
 * in place that is not that one was saved by another run of the same
 * workspace meanwhile: it is kept, tmp is removed and KZ_EEXIST returned
 * (two runs that started from one snapshot cannot both be kept; the first
 * to commit wins and the other is told).  0, with *evicted the snapshots
 * removed to make room; else a kz_err with why set (one line, sizes but
 * no path), tmp is gone and so is the older path (when it is base).
 */
KZ_WUR int kz_snap_commit(const char *path, const char *tmp,
    const struct kz_snap_bounds *b, const struct kz_snap_id *base, int *evicted,
    char *why, size_t wlen);

/* A save that failed: removes tmp (NULL: none) and path, path only while
 * it is still base (NULL: whatever it is), under the directory's lock. */
void kz_snap_drop(const char *path, const char *tmp,
    const struct kz_snap_id *base);

/* Removes every snapshot of DIR unused for ttl_ms (and any left in DIR
 * itself by the older flat layout), and partial files and run output
 * directories left over; *removed counts them all. */
KZ_WUR int kz_snap_sweep(const char *dir, int64_t ttl_ms, int *removed);

#endif
