/*
 * kz-lease internals: configuration, the controller, and the daemon.
 * Pool state lives only in the store (lib/pool.c); nothing here keeps a
 * pool, a lease table or an allocation of its own.
 */
#ifndef LEASE_H
#define LEASE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kz_err.h"
#include "kz_exit.h"
#include "kz_key.h"
#include "kz_sock.h"

#define LEASE_INV_MAX 1024
/* The workspace snapshots (lib/snap.c): kz-lease makes DIR and each
 * actor's directory below it, where the worker (root) writes a save and
 * kz-run (a member of kz-lease's group) commits it. */
#define LEASE_SNAPSHOT_DIR_MODE 0750
#define LEASE_SNAPSHOT_DIR_DEFAULT "/var/lib/kaizen/snapshots"

struct lease_conf {
	char sock[108];
	char run_dir[PATH_MAX];
	char store_sock[108];
	char audit_sock[108];
	char key_file[PATH_MAX];
	char dep[65];
	char controller[PATH_MAX]; /* LEASE_CONTROLLER: the executable */
	char worker_runtime[16]; /* LEASE_WORKER_RUNTIME */
	int64_t ctl_timeout_ms, ctl_delete_timeout_ms;
	char workers_dir[PATH_MAX];
	char worker_bin[PATH_MAX];
	char worker_args[1024];
	char snap_dir[PATH_MAX];
	uint64_t snap_actor_max, snap_total_max;
	int64_t snap_ttl_ms;
	char egress_sock[108];
	char broker_sock[108]; /* kz-pkgbroker's, for the workers */
	struct kz_peer_policy peers;
	/* Who may drain and reconcile (KZ_OP_OPERATOR): KZ_OPERATOR_UIDS and
	 * KZ_OPERATOR_GIDS; empty, root and kz-lease's own uid. */
	struct kz_peer_policy operators;
	uint64_t frame_max;
	int64_t capacity, member_limit, ttl_ms, store_timeout_ms, tick_ms;
	int64_t reconcile_ms, create_timeout_ms, reset_grace_ms;
	int64_t reset_io_timeout_ms, reset_threads;
	int64_t ids_first, ids_last; /* LEASE_WORKER_IDS */
	int64_t files_share; /* LEASE_FILES_SHARE, for kz-ctl-local */
	bool stop_workers;
};

/* conf.c: file (NULL: none) and environment over the defaults. */
KZ_WUR int lease_conf_load(struct lease_conf *c, const char *path,
    const char *self, char *why, size_t wlen);

/*
 * ctl_exec.c: the controller, an executable kz-lease runs for each call
 * (kz-controller(7)); kz-lease holds no controller's code.
 */
struct ctl_inv {
	char id[LEASE_INV_MAX][65];
	/* Listed by kz-lease, not by the controller: a worker it reported
	 * (or was asked to create) that it no longer lists, counted until
	 * a delete confirms its absence. */
	bool held[LEASE_INV_MAX];
	size_t n;
};
/*
 * Asks for a worker; returns its endpoint.  KZ_EDENIED: refused, nothing
 * was left behind.  Any other failure leaves the outcome unknown: the
 * worker stays counted (creating) until a list or a delete settles it.
 */
KZ_WUR int ctl_create(const struct lease_conf *c, const char *id,
    char *endpoint, size_t elen, char *why, size_t wlen);
/*
 * 1 when the controller says the worker's start failed (its agent
 * exited); why gets its last word.  0 when not, or when it cannot say.
 */
int ctl_gone(const struct lease_conf *c, const char *id, char *why,
    size_t wlen);
#define LEASE_FAIL_MAX 256
/* Stops the worker and confirms it is gone (0 = absent now). */
KZ_WUR int ctl_delete(const struct lease_conf *c, const char *id, char *why,
    size_t wlen);
/* Inventory: every worker that exists, alive or not, and those held. */
KZ_WUR int ctl_list(const struct lease_conf *c, struct ctl_inv *inv, char *why,
    size_t wlen);
/* Whether a call was killed or answered garbage since the last look. */
bool ctl_fault_take(void);
/* Stops and deletes every worker in the inventory. */
void ctl_stop_all(const struct lease_conf *c);

/* ctl_ready.c: 0 and the generation once the worker answers health with
 * its id (the worker's protocol, not the controller's). */
KZ_WUR int ctl_ready(const char *endpoint, const char *id, int timeout_ms,
    char *gen, size_t glen, char *why, size_t wlen);

/* serve.c: runs the daemon until SIGTERM or SIGINT. */
enum kz_exit lease_serve(struct lease_conf *c);

#endif
