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

/* A child (kz-reset) or a worker being created, tracked until done. */
enum job_kind { JOB_RESET, JOB_CREATE };
struct job {
	LIST_ENTRY(job) link;
	enum job_kind kind;
	pid_t pid;
	char worker[KZ_POOL_ID_MAX + 1];
	char token[KZ_POOL_TOKEN_MAX + 1];
	char endpoint[108];
	int64_t deadline;
	bool busy;
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
	int64_t next_reconcile, next_sweep;
	bool reconciling, sweeping, statusing;
	int creates;
	LIST_HEAD(, job) jobs;
};

typedef void (*pool_fn)(struct d *d, int err, cJSON *res, const char *why,
    void *arg);
/* Runs a pool script (KEYS[1] added); fn gets the parsed reply. */
int pool_async(struct d *d, enum kz_pool_script which, int argc,
    const char **argv, pool_fn fn, void *arg);

/* ops.c */
extern const struct kz_op lease_ops[];

/* maint.c: creation, expiry sweep, reconcile, resets. */
void maint_tick(struct d *d);
void maint_reconcile_now(struct d *d, struct kz_req *req);
void jobs_reap(struct d *d);
void jobs_stop(struct d *d);
/* Starts kz-reset for a worker that just left its owner. */
void reset_start(struct d *d, const char *worker, const char *token);

#endif
