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

/* The host's record of worker uids, whatever the deployment (host.c). */
#define CTL_HOST_DIR "/run/kz-host"

/* The settings kz-lease hands every controller in the environment. */
struct ctl_conf {
	char workers_dir[PATH_MAX];
	char host_dir[PATH_MAX]; /* LEASE_HOST_DIR */
	char worker_bin[PATH_MAX];
	char worker_args[1024];
	char egress_sock[108];
	char broker_sock[108];
	struct kz_peer_policy peers;
	int64_t ids_first, ids_last; /* LEASE_WORKER_IDS */
	int64_t files_share; /* LEASE_FILES_SHARE: percent; 0: no guard */
	uint64_t frame_max;
};

/* conf.c: the environment over the defaults (no file). */
KZ_WUR int ctl_conf_load(struct ctl_conf *c, const char *self, char *why,
    size_t wlen);

struct ctl_inv {
	char id[CTL_INV_MAX][65];
	size_t n;
};

/* A worker's command line (local.c), with the buffers it points into. */
#define ARGS_MAX 32
struct ctl_argv {
	char sock[PATH_MAX], state[PATH_MAX], proj[PATH_MAX];
	char extra[1024], ids[24], gvids[24];
	char *av[ARGS_MAX + 28];
};
int ctl_worker_argv(const struct ctl_conf *c, const char *sub, const char *id,
    int64_t hid, struct ctl_argv *a);
/* The worker's environment (allocated; freed with ctl_worker_env_free). */
char **ctl_worker_env(const struct ctl_conf *c, const char *runtime);
void ctl_worker_env_free(char **env);
/* The number in dir/leaf, one line, within [min, max]; -1 when none
 * (local.c). */
int64_t ctl_read_num(const char *dir, const char *leaf, int64_t min,
    int64_t max);

/* host.c: what a worker holds of the host. */
/* Runs kz-sandbox's sub with the worker's settings; its first line of
 * output in out; its exit status, or -1 when it could not be run. */
int ctl_sandbox(const struct ctl_conf *c, const char *sub, const char *id,
    int64_t hid, const char *runtime, char *out, size_t olen);
/*
 * The host's record of worker uids (LEASE_HOST_DIR), shared by every
 * deployment of the host.  ctl_host_lock takes its lock (an fd to close,
 * or a negative kz_err with why); ctl_host_claim and ctl_host_release are
 * called under it.
 */
KZ_WUR int ctl_host_lock(const struct ctl_conf *c, char *why, size_t wlen);
/*
 * Claims for worker id the lowest uid of LEASE_WORKER_IDS that is not in
 * held (the ids of this workers directory, nh at most 2 * CTL_INV_MAX:
 * a gvisor worker holds two), not claimed by a live worker
 * of any deployment and not run as by any process, once the workers of
 * the host and the new one, holding files (0: no guard), stay within
 * LEASE_FILES_SHARE of fs.file-max.  0 with *out; KZ_EDENIED with why.
 */
KZ_WUR int ctl_host_claim(const struct ctl_conf *c, const char *id,
    const int64_t *held, size_t nh, uint64_t files, int64_t *out, char *why,
    size_t wlen);
/* Drops worker id's claim on uid, if it is still its own. */
void ctl_host_release(const struct ctl_conf *c, const char *id, int64_t uid);
/* Kills every process of host uid hid, worker id's; 0 once none is left,
 * KZ_EDENIED when the host's record gives the uid to another live worker
 * (nothing is killed), KZ_ESTATE when some would not die, KZ_EUNAVAIL
 * when /proc cannot tell. */
KZ_WUR int ctl_uid_kill(const struct ctl_conf *c, const char *id, int64_t hid,
    char *why, size_t wlen);

/* A gvisor worker's second host uid (WORKERS/<id>/gvids); -1 when none. */
int64_t ctl_gvisor_id(const struct ctl_conf *c, const char *id);
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
