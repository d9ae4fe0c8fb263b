/*
 * Blocking upkeep, off the event loop: deleting workers through the
 * controller, and the sweep of expired workspace snapshots (it reads the
 * whole snapshot directory under its lock).  ctl_delete waits for the
 * controller to confirm the worker gone (kz-ctl-local: up to about 4 s
 * for one that is running code: SIGTERM, 2 s, SIGKILL, 2 s; any
 * controller: LEASE_CONTROLLER_DELETE_TIMEOUT_MS at most), so it runs
 * here, on threads of their own, and the loop only runs the store script
 * that confirms the deletion.
 *
 *	queued (loop) -> ctl_delete [+ audit] (thread) -> DELETED (loop)
 *
 * A worker is queued at most once at a time, however many callers (an
 * expiry, a release under a stale token, every reconcile) ask.  A
 * deletion that fails leaves the worker retiring in the store; the next
 * reconcile finds it in the inventory and queues it again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "kz_audit.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_snap.h"
#include "daemon.h"
#include "workq.h"
#include "banned.h"

#define CHORE_THREADS 2
#define CHORE_STOP_WAIT_MS 5000
#define CHORE_WHY_MAX 32

enum ckind { C_DELETE, C_SNAP_SWEEP };

struct chore {
	struct workq_item q; /* first: the workq's */
	LIST_ENTRY(chore) all; /* loop thread only */
	enum ckind kind;
	int removed; /* C_SNAP_SWEEP */
	char worker[KZ_POOL_ID_MAX + 1];
	char token[KZ_POOL_TOKEN_MAX + 1]; /* "": not in the store */
	char why[CHORE_WHY_MAX]; /* "": no audit record */
	char rid[KZ_RUN_ID_MAX + 1];
	int err;
	char msg[128];
};

struct chores {
	struct lease_daemon *d;
	struct workq *q;
	/* Loop thread only: the chores not finished yet (a worker is
	 * queued once at a time), and how many. */
	LIST_HEAD(, chore) all;
	int inflight;
	bool sweeping;
	/* Copies for the threads (the configuration never changes). */
	const struct lease_conf *c;
	char audit_sock[108];
};

static bool
queued(struct chores *k, const char *w)
{
	struct chore *j;

	LIST_FOREACH(j, &k->all, all)
	if (j->kind == C_DELETE && strcmp(j->worker, w) == 0)
		return true;
	return false;
}

/* ---- the threads ---- */

static void
audit_retire(const struct chores *k, const struct chore *j, int64_t ms)
{
	char why[128] = "";
	cJSON *a = cJSON_CreateObject();
	int e;

	if (a == NULL)
		return;
	cJSON_AddStringToObject(a, "worker_id", j->worker);
	cJSON_AddNumberToObject(a, "token", (double)kz_pool_token_n(j->token));
	if (j->rid[0] != '\0')
		cJSON_AddStringToObject(a, "rid", j->rid);
	cJSON_AddStringToObject(a, "outcome", j->why);
	cJSON_AddStringToObject(a, "result",
	    j->err == 0 ? "deleted" : "delete_failed");
	cJSON_AddNumberToObject(a, "duration_ms", (double)ms);
	if ((e = kz_audit_send(k->audit_sock, "retire", a, KZ_AUDIT_TIMEOUT_MS,
	         why, sizeof(why))) != 0)
		kz_log(KZ_LOG_WARN, "audit.fail", e, why, "kind", "retire",
		    "worker", j->worker, NULL);
	cJSON_Delete(a);
}

static void
run_chore(void *ctx, struct workq_item *it)
{
	const struct chores *k = ctx;
	struct chore *j = (struct chore *)it;
	int64_t t0 = kz_now_ms();

	if (j->kind == C_SNAP_SWEEP) {
		j->err = kz_snap_sweep(k->c->snap_dir, k->c->snap_ttl_ms,
		    &j->removed);
		return;
	}
	j->err = ctl_delete(k->c, j->worker, j->msg, sizeof(j->msg));
	if (j->why[0] != '\0' && k->audit_sock[0] != '\0')
		audit_retire(k, j, kz_now_ms() - t0);
}

/* ---- the loop ---- */

static void
deleted(struct lease_daemon *d, const struct chore *j)
{
	char op[KZ_OPID_HEX + 1];
	const char *av[3] = {op, j->worker, j->token};

	if (j->err != 0) {
		kz_log(KZ_LOG_WARN, "worker.delete", j->err, j->msg, "worker",
		    j->worker, NULL);
		return;
	}
	kz_log(KZ_LOG_INFO, "worker.deleted", 0, "deletion confirmed", "worker",
	    j->worker, NULL);
	if (j->token[0] == '\0')
		return;
	kz_store_opid(op);
	(void)pool_async(d, KZ_POOL_DELETED, 3, av, pool_nothing,
	    "delete_confirmed");
}

static void
swept(struct chores *k, const struct chore *j)
{
	char n[24];

	k->sweeping = false;
	snprintf(n, sizeof(n), "%d", j->removed);
	if (j->err != 0)
		kz_log(KZ_LOG_WARN, "snapshot.sweep", j->err,
		    "snapshot directory unreadable", NULL);
	else if (j->removed > 0)
		kz_log(KZ_LOG_INFO, "snapshot.expire", 0,
		    "unused snapshots removed", "removed", n, NULL);
}

static void
finish(void *ctx, struct workq_item *it)
{
	struct chores *k = ctx;
	struct chore *j = (struct chore *)it;

	if (j->kind == C_SNAP_SWEEP)
		swept(k, j);
	else
		deleted(k->d, j);
	LIST_REMOVE(j, all);
	k->inflight--;
	free(j);
}

static void
enqueue(struct chores *k, struct chore *j)
{
	LIST_INSERT_HEAD(&k->all, j, all);
	k->inflight++;
	workq_push(k->q, &j->q);
}

void
chore_delete(struct lease_daemon *d, const char *worker, const char *token,
    const char *why, const char *rid)
{
	struct chores *k = d->chores;
	struct chore *j;

	if (k == NULL || !kz_pool_id_ok(worker) || queued(k, worker))
		return;
	/* Out of memory: reconcile finds the worker again. */
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return;
	snprintf(j->worker, sizeof(j->worker), "%s", worker);
	snprintf(j->token, sizeof(j->token), "%s", token ? token : "");
	snprintf(j->why, sizeof(j->why), "%s", why ? why : "");
	snprintf(j->rid, sizeof(j->rid), "%s", rid ? rid : "");
	enqueue(k, j);
}

void
chore_snap_sweep(struct lease_daemon *d)
{
	struct chores *k = d->chores;
	struct chore *j;

	if (k == NULL || k->sweeping || (j = calloc(1, sizeof(*j))) == NULL)
		return;
	j->kind = C_SNAP_SWEEP;
	k->sweeping = true;
	enqueue(k, j);
}

int
chores_running(const struct lease_daemon *d)
{
	const struct chores *k = d->chores;

	/* Deletions only: the sweep is not one. */
	return k != NULL ? k->inflight - (k->sweeping ? 1 : 0) : 0;
}

static void
drop_chore(struct workq_item *it)
{
	free(it);
}

int
chores_new(struct lease_daemon *d)
{
	struct workq_conf wc = {.nthreads = CHORE_THREADS,
	    .run = run_chore,
	    .done = finish,
	    .drop = drop_chore};
	struct chores *k;
	int e;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return KZ_ENOMEM;
	k->d = d;
	k->c = d->c;
	LIST_INIT(&k->all);
	snprintf(k->audit_sock, sizeof(k->audit_sock), "%s", d->c->audit_sock);
	wc.ctx = k;
	if ((e = workq_new(d->base, &wc, &k->q)) != 0) {
		free(k);
		return e;
	}
	d->chores = k;
	return 0;
}

/*
 * Waits for the chores running now (a deletion is bounded, see above);
 * queued ones are dropped: their workers stay retiring and the next
 * daemon's reconcile deletes them.  A thread still blocked after the wait
 * keeps the state allocated (the process is about to exit).
 */
void
chores_free(struct lease_daemon *d)
{
	struct chores *k = d->chores;
	bool stopped;

	if (k == NULL)
		return;
	stopped = workq_free(k->q, CHORE_STOP_WAIT_MS);
	d->chores = NULL;
	if (!stopped) {
		kz_log(KZ_LOG_WARN, "chore.abandon", 0,
		    "deletions still running at exit", NULL);
		return;
	}
	free(k);
}
