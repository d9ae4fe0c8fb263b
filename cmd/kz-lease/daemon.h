/*
 * The kz-lease daemon's state and its modules, in the order they may call
 * each other (a module calls only those listed above it, so the calls
 * form no circle):
 *
 *	admission.c	whether leases may be granted (the op table's
 *			KZ_OP_ADMIT hook)
 *	pool_async.c	store scripts on the event loop
 *	workq.c		threads for blocking work, completed on the loop
 *	ready.c		readiness for the service manager
 *	chores.c	deletions and the snapshot sweep (on a workq)
 *	reset.c		in-process fenced resets (on a workq)
 *	maint.c		creation, expiry, reconcile
 *	ops.c		the ops
 *	serve.c		setup, the store's epoch, signals and the tick
 *
 * conf.c, ctl_exec.c and ctl_ready.c (lease.h) call none of them.
 */
#ifndef LEASE_DAEMON_H
#define LEASE_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <cJSON.h>
#include <event2/event.h>

#include "kz_key.h"
#include "kz_pool.h"
#include "kz_srv.h"
#include "kz_store.h"
#include "lease.h"

/* The longest run id a release may name (kz-run's are 32 hex). */
#define KZ_RUN_ID_MAX 64

/* A worker being created, tracked until it answers or times out. */
struct job {
	LIST_ENTRY(job) link;
	char worker[KZ_POOL_ID_MAX + 1];
	char token[KZ_POOL_TOKEN_MAX + 1];
	char endpoint[108];
	int64_t deadline;
};
struct resets;
struct chores;

/* Why a worker was retired, for status's counters (ops.c names them). */
enum lease_retire {
	LR_EVIDENCE,
	LR_RESET_START,
	LR_STALE_TOKEN,
	LR_EXPIRED,
	LR_RECONCILE,
	LR_N
};

/* Process-lifetime counters of this replica, for status (the store holds
 * the pool; these say what this process did). */
struct lease_stats {
	unsigned long granted, refused, released;
	unsigned long reset_warm, reset_retired, reset_stale, reset_failed;
	unsigned long retired[LR_N];
};

/* One kz-lease process: its configuration, its connections and what it
 * has in flight.  The pool itself is in the store. */
struct lease_daemon {
	struct lease_conf *c;
	struct event_base *base;
	struct kz_astore *st;
	struct kz_srv *srv;
	struct event *sig[3], *tick;
	struct kz_key idkey;
	bool store_ok, inv_ok, draining, open;
	char epoch[KZ_POOL_EPOCH_HEX + 1];
	char closed_why[64];
	/* The store client's last connect failure, as last logged. */
	char store_why[200];
	/* "worker ID: REASON" of the last start that failed; "" when none. */
	char last_fail[LEASE_FAIL_MAX + 96];
	int64_t next_reconcile, next_sweep, next_snap_sweep;
	bool reconciling, sweeping, statusing;
	int creates;
	LIST_HEAD(, job) jobs;
	struct resets *resets;
	struct chores *chores;
	struct lease_stats n;
};

/* Counts n retirements for why. */
static inline void
lease_count_retire(struct lease_daemon *d, enum lease_retire why,
    unsigned long n)
{
	if (why < LR_N)
		d->n.retired[why] += n;
}

/* admission.c: open only while the store has answered its epoch check,
 * the controller's inventory was readable at the last look and the pool
 * is not draining. */
void admission_update(struct lease_daemon *d);
/* The kz_srv_conf admit hook (arg: the daemon): counts a refusal and
 * says why admission is closed. */
bool admission_admit(void *arg, char *why, size_t wlen);

/* pool_async.c */
typedef void (*pool_fn)(struct lease_daemon *d, int err, cJSON *res,
    const char *why, void *arg);
/* Runs a pool script (KEYS[1] added); fn gets the parsed reply. */
int pool_async(struct lease_daemon *d, enum kz_pool_script which, int argc,
    const char **argv, pool_fn fn, void *arg);
/* A pool_fn for calls whose result only matters when it failed (arg: a
 * const string naming the call, logged). */
void pool_nothing(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg);

/* ready.c: readiness and progress for the service manager (kz_notify).
 * ready_start comes first, before any worker is started; ready_tick on
 * every tick. */
void ready_start(struct lease_daemon *d);
void ready_tick(struct lease_daemon *d);

/* chores.c: blocking upkeep on threads of their own. */
KZ_WUR int chores_new(struct lease_daemon *d);
void chores_free(struct lease_daemon *d);
/* Deletions queued or running. */
int chores_running(const struct lease_daemon *d);
/* Deletes a worker through the controller, then confirms it with the
 * DELETED script when token (its retiring or deleting token) is given.
 * why, when given, is audited with the run id in a retire record. */
void chore_delete(struct lease_daemon *d, const char *worker, const char *token,
    const char *why, const char *rid);
/* Removes expired snapshots and leftover partial saves (one sweep at a
 * time). */
void chore_snap_sweep(struct lease_daemon *d);

/* reset.c: in-process fenced resets on a pool of nthreads threads. */
KZ_WUR int resets_new(struct lease_daemon *d, int nthreads);
void resets_free(struct lease_daemon *d);
int resets_running(const struct lease_daemon *d);
/* Resets a worker that just left its owner (reset token, the endpoint
 * the store recorded, the releasing run's id or NULL); retires it when
 * the reset cannot even start. */
void reset_start(struct lease_daemon *d, const char *worker, const char *token,
    const char *endpoint, const char *rid);

/* maint.c: creation, expiry sweep, reconcile. */
void maint_tick(struct lease_daemon *d);
void maint_reconcile_now(struct lease_daemon *d, struct kz_req *req);
void jobs_stop(struct lease_daemon *d);

/* ops.c */
extern const struct kz_op lease_ops[];

#endif
