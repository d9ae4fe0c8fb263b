/*
 * kz-ctl-local internals: the local controller (kz-controller(7)), which
 * starts kz-sandbox workers on this host, one directory each under
 * LEASE_WORKERS_DIR (lib/pool.c's layout).
 */
#ifndef CTL_H
#define CTL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kz_err.h"
#include "kz_sock.h"

#define CTL_INV_MAX 1024
/* A worker's projection directory: group-writable, sticky, world-readable
 * (local.c says why). */
#define CTL_PROJECTION_MODE 01775
/* A failed start's log, kept in the workers directory (ctl_gone). */
#define CTL_FAILED_LOG "last-failed.log"

/* The settings kz-lease hands every controller in the environment. */
struct ctl_conf {
	char workers_dir[PATH_MAX];
	char worker_bin[PATH_MAX];
	char worker_args[1024];
	char egress_sock[108];
	char broker_sock[108];
	struct kz_peer_policy peers;
	int64_t ids_first, ids_last; /* LEASE_WORKER_IDS */
	uint64_t frame_max;
};

/* conf.c: the environment over the defaults (no file). */
KZ_WUR int ctl_conf_load(struct ctl_conf *c, const char *self, char *why,
    size_t wlen);

struct ctl_inv {
	char id[CTL_INV_MAX][65];
	size_t n;
};

/* Whether runtime is one kz-sandbox knows (SANDBOX_RUNTIME). */
bool ctl_runtime_ok(const char *runtime);
/*
 * Starts a worker (detached) under runtime; returns its endpoint.
 * KZ_EDENIED: refused, nothing was left behind; any other failure leaves
 * the outcome unknown (the worker may exist).
 */
KZ_WUR int ctl_create(const struct ctl_conf *c, const char *id,
    const char *runtime, char *endpoint, size_t elen, char *why, size_t wlen);
/*
 * 1 when the worker's agent has exited (a start that failed): why gets
 * the last line of its log, and the log is kept as WORKERS/CTL_FAILED_LOG.
 */
int ctl_gone(const struct ctl_conf *c, const char *id, char *why, size_t wlen);
/* Stops the worker and confirms it is gone (0 = absent now). */
KZ_WUR int ctl_delete(const struct ctl_conf *c, const char *id, char *why,
    size_t wlen);
/* Inventory: every worker that exists on this host, alive or not. */
KZ_WUR int ctl_list(const struct ctl_conf *c, struct ctl_inv *inv, char *why,
    size_t wlen);

#endif
