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

#include <stdint.h>

#include "kz_err.h"

/* DIR/ACTOR is made with this mode (kz-run, in DIR's group, renames in
 * it and evicts from it; the worker, root, writes the archive). */
#define KZ_SNAP_DIR_MODE 0770
/* A partial file (*.new) older than this was left by a save that died. */
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
 * Commits tmp as path (see above).  0, with *evicted the snapshots
 * removed to make room; else a kz_err with why set (one line, sizes but
 * no path), and both tmp and the older path are gone.
 */
KZ_WUR int kz_snap_commit(const char *path, const char *tmp,
    const struct kz_snap_bounds *b, int *evicted, char *why, size_t wlen);

/* A save that failed: removes path and tmp (NULL: none). */
void kz_snap_drop(const char *path, const char *tmp);

/* Removes every snapshot of DIR unused for ttl_ms (and any left in DIR
 * itself by the older flat layout), and partial files left over. */
KZ_WUR int kz_snap_sweep(const char *dir, int64_t ttl_ms, int *removed);

#endif
