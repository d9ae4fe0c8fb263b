/* The daemon's shared state, between serve.c, ops.c and maint.c. */
#ifndef LEASE_SERVE_H
#define LEASE_SERVE_H

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
enum lease_retire { LR_EVIDENCE, LR_RESET_START, LR_STALE_TOKEN, LR_EXPIRED,
	LR_RECONCILE, LR_N };

/* Process-lifetime counters of this replica, for status (the store holds
 * the pool; these say what this process did). */
struct lease_stats {
	unsigned long granted, refused, released;
	unsigned long reset_warm, reset_retired, reset_stale, reset_failed;
	unsigned long retired[LR_N];
};

struct d {
	struct lease_conf *c;
	struct event_base *base;
	struct kz_astore *st;
	struct kz_srv *srv;
	struct event *sig[3], *tick;
	struct kz_key idkey;
	bool store_ok, inv_ok, draining, open;
	char epoch[KZ_POOL_EPOCH_HEX + 1];
	char closed_why[64];
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

typedef void (*pool_fn)(struct d *d, int err, cJSON *res, const char *why,
    void *arg);
/* Runs a pool script (KEYS[1] added); fn gets the parsed reply. */
int pool_async(struct d *d, enum kz_pool_script which, int argc,
    const char **argv, pool_fn fn, void *arg);

/* ops.c */
extern const struct kz_op lease_ops[];
/* Counts n retirements for why. */
void lease_count_retire(struct d *d, enum lease_retire why, unsigned long n);

/* maint.c: creation, expiry sweep, reconcile. */
void maint_tick(struct d *d);
void maint_reconcile_now(struct d *d, struct kz_req *req);
void jobs_stop(struct d *d);
/* A pool_fn for calls whose result only matters when it failed (arg: a
 * const string naming the call, logged). */
void maint_nothing(struct d *d, int err, cJSON *res, const char *why,
    void *arg);

/* ready.c: readiness and progress for the service manager (kz_notify).
 * ready_start comes first, before any worker is started; ready_tick on
 * every tick. */
void ready_start(struct d *d);
void ready_tick(struct d *d);

/* reset.c: in-process fenced resets on a pool of nthreads threads. */
KZ_WUR int resets_new(struct d *d, int nthreads);
void resets_free(struct d *d);
int resets_running(const struct d *d);
/* Resets a worker that just left its owner (reset token, the endpoint
 * the store recorded, the releasing run's id or NULL); retires it when
 * the reset cannot even start. */
void reset_start(struct d *d, const char *worker, const char *token,
    const char *endpoint, const char *rid);

/* chores.c: blocking upkeep on threads of their own. */
KZ_WUR int chores_new(struct d *d);
void chores_free(struct d *d);
/* Deletions queued or running. */
int chores_running(const struct d *d);
/* Deletes a worker through the controller, then confirms it with the
 * DELETED script when token (its retiring or deleting token) is given.
 * why, when given, is audited with the run id in a retire record. */
void chore_delete(struct d *d, const char *worker, const char *token,
    const char *why, const char *rid);
/* Removes expired snapshots and leftover partial saves (one sweep at a
 * time). */
void chore_snap_sweep(struct d *d);

#endif
