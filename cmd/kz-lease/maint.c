/*
 * Pool upkeep: expired leases retire their workers, which are deleted
 * (chores.c) and replaced; workers are created up to the capacity the
 * store counts, the store is reconciled against the controller's
 * inventory, and expired workspace snapshots are swept.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "daemon.h"
#include "banned.h"

#define CREATES_MAX 2
#define SWEEP_MAX "64"

static struct job *
job_new(struct lease_daemon *d, const char *w, const char *t)
{
	struct job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	snprintf(j->worker, sizeof(j->worker), "%s", w);
	snprintf(j->token, sizeof(j->token), "%s", t);
	LIST_INSERT_HEAD(&d->jobs, j, link);
	return j;
}

static void
job_free(struct lease_daemon *d, struct job *j)
{
	(void)d;
	LIST_REMOVE(j, link);
	free(j);
}

void
jobs_stop(struct lease_daemon *d)
{
	struct job *j;

	while ((j = LIST_FIRST(&d->jobs)) != NULL)
		job_free(d, j);
}

/* ---- creation ---- */

static void
commit_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	(void)arg;
	d->creates--;
	if (err != 0 || kz_pool_errcode(res) != NULL)
		kz_log(KZ_LOG_WARN, "create.commit", err, why, NULL);
}

/* The last worker that could not start, for status and kz-supervise. */
static void
worker_failed(struct lease_daemon *d, const char *w, const char *why)
{
	snprintf(d->last_fail, sizeof(d->last_fail), "worker %s: %s", w, why);
}

/* The store retired the worker (or would not): it is deleted through the
 * controller, under the retire token when there is one, so that its
 * record goes once the delete confirms it absent. */
static void
retired(struct lease_daemon *d, int err, cJSON *res, const char *why, void *arg)
{
	char *w = arg;
	const char *t = NULL;

	(void)why;
	if (err != 0 || kz_pool_errcode(res) != NULL ||
	    kz_json_str(res, "token", KZ_POOL_TOKEN_MAX, &t, NULL, 0) != 0)
		t = NULL;
	chore_delete(d, w, t, NULL, NULL);
	free(w);
}

/* Retires worker w under its token tok (the store records why), then
 * deletes it; -1 when the store could not be asked. */
static int
retire_delete(struct lease_daemon *d, const char *w, const char *tok,
    const char *why)
{
	char op[KZ_OPID_HEX + 1], *c;
	const char *av[4] = {op, w, tok, why};
	size_t n = strlen(w) + 1;

	if ((c = malloc(n)) == NULL)
		return -1;
	memcpy(c, w, n);
	kz_store_opid(op);
	if (pool_async(d, KZ_POOL_RETIRE, 4, av, retired, c) != 0) {
		free(c);
		return -1;
	}
	return 0;
}

static void
create_poll(struct lease_daemon *d, struct job *j)
{
	char gen[32], why[LEASE_FAIL_MAX], op[KZ_OPID_HEX + 1];
	const char *av[5] = {op, j->worker, j->token, j->endpoint, gen};

	if (ctl_ready(j->endpoint, j->worker, 200, gen, sizeof(gen), why,
	        sizeof(why)) == 0) {
		kz_store_opid(op);
		if (pool_async(d, KZ_POOL_CREATE_COMMIT, 5, av, commit_done,
		        NULL) != 0)
			d->creates--;
		kz_log(KZ_LOG_INFO, "create.ready", 0, "worker ready", "worker",
		    j->worker, NULL);
		job_free(d, j);
	} else if (d->inv_ok && ctl_gone(d->c, j->worker, why, sizeof(why))) {
		/* It said why it could not start, and exited: that line is
		 * what the operator needs, now and after it is deleted. */
		kz_log(KZ_LOG_WARN, "create.fail", 0, why, "worker", j->worker,
		    NULL);
		worker_failed(d, j->worker, why);
		d->creates--;
		/* What is left of it is deleted now, not after
		 * LEASE_CREATE_TIMEOUT_MS, so that its place in the capacity
		 * comes back at once: retired under its create token (no one
		 * can have leased it).  Should the store not answer, the
		 * create stays counted until reconcile. */
		(void)retire_delete(d, j->worker, j->token, "create_failed");
		job_free(d, j);
	} else if (kz_now_ms() > j->deadline) {
		/* Outcome unknown: it stays counted as creating until
		 * reconcile proves it absent or deletes it. */
		kz_log(KZ_LOG_WARN, "create.timeout", 0, "worker not ready",
		    "worker", j->worker, NULL);
		worker_failed(d, j->worker,
		    "the worker did not answer health in time");
		d->creates--;
		job_free(d, j);
	}
}

static void
begin_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	char w[128], op[KZ_OPID_HEX + 1];
	const char *id, *tok, *av[3] = {op, NULL, NULL};
	struct job *j;
	int e;

	(void)arg;
	if (err != 0 || kz_pool_errcode(res) != NULL ||
	    kz_json_str(res, "id", KZ_POOL_ID_MAX, &id, NULL, 0) != 0 ||
	    kz_json_str(res, "token", KZ_POOL_TOKEN_MAX, &tok, NULL, 0) != 0 ||
	    (j = job_new(d, id, tok)) == NULL) {
		d->creates--;
		return;
	}
	j->deadline = kz_now_ms() + d->c->create_timeout_ms;
	if ((e = ctl_create(d->c, id, j->endpoint, sizeof(j->endpoint), w,
	         sizeof(w))) != 0) {
		kz_log(KZ_LOG_WARN, "create.fail", e, w, "worker", id, NULL);
		worker_failed(d, id, w);
		kz_store_opid(op);
		av[1] = id;
		av[2] = tok;
		/* Only a refusal says nothing was left behind; any other
		 * outcome stays counted as creating until reconcile proves
		 * it absent or deletes it (kz-controller(7)). */
		if (e == KZ_EDENIED)
			(void)pool_async(d, KZ_POOL_CREATE_ABORT, 3, av,
			    pool_nothing, "create_abort");
		d->creates--;
		job_free(d, j);
	}
	(void)why;
}

static void
create_one(struct lease_daemon *d)
{
	unsigned char b[6];
	char id[16], cap[24], op[KZ_OPID_HEX + 1];
	const char *av[3] = {op, id, cap};

	randombytes_buf(b, sizeof(b));
	id[0] = 'w';
	kz_hex(b, sizeof(b), id + 1);
	snprintf(cap, sizeof(cap), "%lld", (long long)d->c->capacity);
	kz_store_opid(op);
	if (pool_async(d, KZ_POOL_CREATE_BEGIN, 3, av, begin_done, NULL) == 0)
		d->creates++;
}

static void
status_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	int64_t total;

	(void)why;
	(void)arg;
	d->statusing = false;
	if (err != 0 ||
	    kz_json_int(res, "total", 0, 1 << 30, &total, NULL, 0) != 0)
		return;
	if (!d->draining && d->inv_ok && d->creates < CREATES_MAX &&
	    total < d->c->capacity)
		create_one(d);
}

/* ---- expiry ---- */

/* An expired lease's worker was retired by the sweep script: it is
 * deleted now, not at the next reconcile, so its endpoint stops
 * answering as soon as possible; a replacement is created once the
 * deletion is confirmed (the retiring worker counts against capacity). */
static void
sweep_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	const cJSON *x, *e = kz_json_get(res, "expired");
	const char *w, *t, *rid;

	(void)why;
	(void)arg;
	d->sweeping = false;
	if (err != 0 || !cJSON_IsArray(e))
		return;
	cJSON_ArrayForEach(x,
	    e) if (kz_json_str(x, "worker", KZ_POOL_ID_MAX, &w, NULL, 0) == 0 &&
	    kz_json_str(x, "token", KZ_POOL_TOKEN_MAX, &t, NULL, 0) == 0)
	{
		/* The run that held the lease, if it said. */
		if (kz_json_str(x, "run_id", KZ_RUN_ID_MAX, &rid, NULL, 0) !=
		        0 ||
		    *rid == '\0')
			rid = NULL;
		kz_log(KZ_LOG_INFO, "lease.expire", 0,
		    "lease expired: worker retired", "worker", w, NULL);
		lease_count_retire(d, LR_EXPIRED, 1);
		chore_delete(d, w, t, "expired", rid);
	}
}

/* ---- reconcile ---- */

/* The backstop: whatever reconcile finds to delete (retiring or deleting
 * workers still in the inventory, orphans) goes to the same threads. */
static void
delete_list(struct lease_daemon *d, const cJSON *a)
{
	const cJSON *x;
	const char *w, *t;

	cJSON_ArrayForEach(x, a)
	{
		if (cJSON_IsString(x))
			chore_delete(d, x->valuestring, NULL, NULL, NULL);
		else if (kz_json_str(x, "worker", KZ_POOL_ID_MAX, &w, NULL,
		             0) == 0 &&
		    kz_json_str(x, "token", KZ_POOL_TOKEN_MAX, &t, NULL, 0) ==
		        0)
			chore_delete(d, w, t, NULL, NULL);
	}
}

static void
reconcile_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	struct kz_req *req = arg;

	d->reconciling = false;
	if (err == 0 && kz_pool_errcode(res) == NULL) {
		lease_count_retire(d, LR_RECONCILE,
		    (unsigned long)cJSON_GetArraySize(
		        kz_json_get(res, "retire")));
		delete_list(d, kz_json_get(res, "retire"));
		delete_list(d, kz_json_get(res, "delete"));
		delete_list(d, kz_json_get(res, "orphans"));
	}
	if (req == NULL)
		return;
	if (err != 0)
		kz_req_err(req,
		    err == KZ_EUNAVAIL ? KZ_WE_STORE_UNAVAILABLE :
		                         KZ_WE_INTERNAL,
		    err == KZ_EUNAVAIL ? "store unavailable" :
		                         "reconcile failed");
	else
		kz_req_ok(req, cJSON_Duplicate(res, 1));
	(void)why;
}

/*
 * A worker the controller no longer lists is held (ctl_exec.c): counted,
 * but first retired, so that no one is handed a worker that may be gone,
 * then deleted; its record goes once the deletion is confirmed.
 */
static void
held_got(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	char *w = arg;
	const char *st, *t;

	(void)why;
	if (err != 0 || kz_pool_errcode(res) != NULL ||
	    kz_json_str(res, "state", 32, &st, NULL, 0) != 0 ||
	    kz_json_str(res, "token", KZ_POOL_TOKEN_MAX, &t, NULL, 0) != 0 ||
	    strcmp(st, "retiring") == 0 || strcmp(st, "deleting") == 0 ||
	    retire_delete(d, w, t, "inventory") != 0)
		/* Not in the store, or already on its way out: the delete
		 * alone. */
		chore_delete(d, w, NULL, NULL, NULL);
	free(w);
}

static void
hold(struct lease_daemon *d, const char *id)
{
	size_t n = strlen(id) + 1;
	char *w = malloc(n);
	const char *av[1] = {w};

	if (w != NULL) {
		memcpy(w, id, n);
		if (pool_async(d, KZ_POOL_GET, 1, av, held_got, w) == 0)
			return;
		free(w);
	}
	chore_delete(d, id, NULL, NULL, NULL);
}

static int
reconcile(struct lease_daemon *d, struct kz_req *req)
{
	static struct ctl_inv inv;
	char why[128], op[KZ_OPID_HEX + 1], cg[24], rg[24], *js = NULL;
	const char *av[4] = {op, NULL, cg, rg};
	cJSON *a = NULL;
	size_t i;
	int e;

	if ((e = ctl_list(d->c, &inv, why, sizeof(why))) != 0) {
		d->inv_ok = false;
		kz_log(KZ_LOG_WARN, "inventory.fail", e, why, NULL);
		return KZ_EUNAVAIL;
	}
	d->inv_ok = true;
	if ((a = cJSON_CreateArray()) == NULL)
		return KZ_ENOMEM;
	for (i = 0; i < inv.n; i++) {
		cJSON_AddItemToArray(a, cJSON_CreateString(inv.id[i]));
		if (inv.held[i])
			hold(d, inv.id[i]);
	}
	/* cjson.decode of "[]" is an empty table, as wanted. */
	js = kz_json_print(a);
	cJSON_Delete(a);
	if (js == NULL)
		return KZ_ENOMEM;
	kz_store_opid(op);
	av[1] = js;
	snprintf(cg, sizeof(cg), "%lld", (long long)d->c->create_timeout_ms);
	snprintf(rg, sizeof(rg), "%lld", (long long)d->c->reset_grace_ms);
	e = pool_async(d, KZ_POOL_RECONCILE, 4, av, reconcile_done, req);
	free(js);
	if (e == 0)
		d->reconciling = true;
	return e;
}

void
maint_reconcile_now(struct lease_daemon *d, struct kz_req *req)
{
	if (reconcile(d, req) != 0)
		kz_req_err(req, KZ_WE_ADMISSION_CLOSED,
		    d->inv_ok ? "store unavailable" :
		                "controller inventory unavailable");
}

void
maint_tick(struct lease_daemon *d)
{
	int64_t now = kz_now_ms(), q;
	char cap[24];
	const char *av[2] = {"", SWEEP_MAX};
	struct job *j, *n;

	/* A controller killed at its deadline, or one that answered
	 * garbage, is not confirmed until its inventory is read again:
	 * admission closes now, and that read comes at once. */
	if (ctl_fault_take()) {
		d->inv_ok = false;
		d->next_reconcile = now;
		admission_update(d);
	}
	for (j = LIST_FIRST(&d->jobs); j != NULL; j = n) {
		n = LIST_NEXT(j, link);
		create_poll(d, j);
	}
	if (!d->reconciling && now >= d->next_reconcile) {
		d->next_reconcile = now + d->c->reconcile_ms;
		(void)reconcile(d, NULL);
	}
	if (!d->sweeping && now >= d->next_sweep) {
		d->next_sweep = now + 500;
		if (pool_async(d, KZ_POOL_SWEEP, 2, av, sweep_done, NULL) == 0)
			d->sweeping = true;
	}
	/* Snapshots expire in days: a sweep every quarter of the expiry,
	 * 1 s to 60 s apart, keeps them within a minute of it. */
	if (now >= d->next_snap_sweep) {
		q = d->c->snap_ttl_ms / 4;
		d->next_snap_sweep = now +
		    (q < 1000         ? 1000 :
		            q > 60000 ? 60000 :
		                        q);
		chore_snap_sweep(d);
	}
	if (!d->statusing) {
		snprintf(cap, sizeof(cap), "%lld", (long long)d->c->capacity);
		av[0] = cap;
		if (pool_async(d, KZ_POOL_STATUS, 1, av, status_done, NULL) ==
		    0)
			d->statusing = true;
	}
}
