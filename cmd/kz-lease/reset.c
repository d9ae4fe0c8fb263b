/*
 * Fenced resets, in-process.  Every worker that left its owner (released,
 * or its lease expired) is reset here, as kz-reset(8) would, without a
 * fork and exec: a small pool of threads (workq.c) does the blocking
 * parts (the agent's wipe and health calls, the host-side checks, the
 * audit append), and the event loop runs the store scripts.  A job moves
 *
 *	EVIDENCE (thread) -> DECIDE (loop: publish or retire script)
 *	    -> AUDIT (thread) -> freed (loop)
 *
 * and publishes the worker warm only with every item of evidence in hand
 * and only if its reset token is still current (the script checks both
 * state and token).  Anything missing retires it.  The threads touch only
 * their job and the configuration; pool state stays in the store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_audit.h"
#include "kz_evidence.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "daemon.h"
#include "workq.h"
#include "banned.h"

#define RESET_STOP_WAIT_MS 2000

enum rphase { RP_EVIDENCE, RP_DECIDE, RP_AUDIT, RP_DONE };

struct rjob {
	struct workq_item q; /* first: the workq's */
	enum rphase phase;
	char worker[KZ_POOL_ID_MAX + 1];
	char token[KZ_POOL_TOKEN_MAX + 1];
	char endpoint[108];
	char rid[KZ_RUN_ID_MAX + 1];
	int64_t t0;
	struct kz_reset rs; /* the evidence and the decision */
};

struct resets {
	struct lease_daemon *d;
	struct workq *q;
	/* Loop thread only. */
	int inflight;
	/* Copies for the threads (the configuration never changes). */
	char workers_dir[PATH_MAX];
	char audit_sock[108];
	int io_timeout_ms;
};

static void
rjob_free(struct rjob *j)
{
	if (j == NULL)
		return;
	kz_reset_release(&j->rs);
	free(j);
}

/* ---- the threads ---- */

static void
do_evidence(const struct resets *r, struct rjob *j)
{
	kz_reset_prove(&j->rs, r->workers_dir, j->worker, j->endpoint,
	    r->io_timeout_ms);
}

static void
do_audit(const struct resets *r, struct rjob *j)
{
	char why[128] = "";
	cJSON *a;
	int e;

	a = kz_evidence_record(j->rs.out, j->worker, j->token, j->rid,
	    kz_now_ms() - j->t0);
	if (a == NULL ||
	    (e = kz_audit_send(r->audit_sock, j->rs.kind, a,
	         KZ_AUDIT_TIMEOUT_MS, why, sizeof(why))) != 0)
		kz_log(KZ_LOG_WARN, "audit.fail", a == NULL ? KZ_ENOMEM : e,
		    a == NULL ? "out of memory" : why, "kind", j->rs.kind,
		    "worker", j->worker, NULL);
	cJSON_Delete(a);
}

/* The blocking part of the job's phase, on a reset thread. */
static void
run_job(void *ctx, struct workq_item *it)
{
	const struct resets *r = ctx;
	struct rjob *j = (struct rjob *)it;

	if (j->phase == RP_EVIDENCE) {
		do_evidence(r, j);
		j->phase = RP_DECIDE;
	} else {
		do_audit(r, j);
		j->phase = RP_DONE;
	}
}

static void
drop_job(struct workq_item *it)
{
	rjob_free((struct rjob *)it);
}

/* ---- the loop ---- */

static void
finish(struct resets *r, struct rjob *j)
{
	r->inflight--;
	rjob_free(j);
}

/*
 * The retire script moved the worker to retiring under a new token (in
 * its reply): its deletion is confirmed with the controller now, and the
 * creation loop replaces it; reconcile is the backstop.  The reset's own
 * record already says why, so the deletion audits nothing more.
 */
static void
retired(struct lease_daemon *d, const cJSON *res, const char *worker)
{
	const char *t;

	if (kz_json_str(res, "token", KZ_POOL_TOKEN_MAX, &t, NULL, 0) == 0)
		chore_delete(d, worker, t, NULL, NULL);
	else
		d->next_reconcile = 0;
}

static void
decided(struct lease_daemon *d, int err, cJSON *res, const char *why, void *arg)
{
	struct rjob *j = arg;
	struct resets *r = d->resets;
	const char *result;

	if (r == NULL) {
		/* Shutting down: the store client answers what is pending
		 * after the reset threads are gone. */
		rjob_free(j);
		return;
	}
	if (err != 0) {
		/* Outcome unknown: the worker stays resetting until
		 * reconcile retires it (LEASE_RESET_GRACE_MS); it is never
		 * leased from that state. */
		kz_log(KZ_LOG_WARN, "reset.fail", err, why, "worker", j->worker,
		    NULL);
		d->n.reset_failed++;
		finish(r, j);
		return;
	}
	result = kz_reset_outcome(&j->rs, res);
	if (strcmp(result, "stale_token") == 0) {
		d->n.reset_stale++;
		kz_log(KZ_LOG_WARN, "reset.stale", 0, "reset token is stale",
		    "worker", j->worker, NULL);
	} else if (strcmp(result, "warm") == 0) {
		d->n.reset_warm++;
		kz_log(KZ_LOG_INFO, "reset.warm", 0, "published warm", "worker",
		    j->worker, NULL);
	} else {
		d->n.reset_retired++;
		lease_count_retire(d, LR_EVIDENCE, 1);
		kz_log(KZ_LOG_WARN, "worker.retire", 0, "missing evidence",
		    "worker", j->worker, "missing", j->rs.miss, NULL);
		retired(d, res, j->worker);
	}
	if (r->audit_sock[0] == '\0') {
		finish(r, j);
		return;
	}
	j->phase = RP_AUDIT;
	workq_push(r->q, &j->q);
}

static void
decide(struct resets *r, struct rjob *j)
{
	char op[KZ_OPID_HEX + 1];
	const char *av[4] = {op, j->worker, j->token, NULL};
	enum kz_pool_script which;
	int e;

	if (j->rs.out == NULL) {
		decided(r->d, KZ_ENOMEM, NULL, "out of memory", j);
		return;
	}
	kz_store_opid(op);
	which = kz_reset_script(&j->rs, &av[3]);
	if ((e = pool_async(r->d, which, 4, av, decided, j)) != 0)
		decided(r->d, e, NULL, "store unavailable", j);
}

/* Back on the loop from a thread: the store decides, or it is over. */
static void
job_done(void *ctx, struct workq_item *it)
{
	struct resets *r = ctx;
	struct rjob *j = (struct rjob *)it;

	if (j->phase == RP_DECIDE)
		decide(r, j);
	else
		finish(r, j);
}

int
resets_new(struct lease_daemon *d, int nthreads)
{
	struct workq_conf wc = {.nthreads = nthreads,
	    .run = run_job,
	    .done = job_done,
	    .drop = drop_job};
	struct resets *r;
	int e;

	if (nthreads < 1 || nthreads > WORKQ_THREADS_MAX ||
	    (r = calloc(1, sizeof(*r))) == NULL)
		return KZ_EINVAL;
	r->d = d;
	snprintf(r->workers_dir, sizeof(r->workers_dir), "%s",
	    d->c->workers_dir);
	snprintf(r->audit_sock, sizeof(r->audit_sock), "%s", d->c->audit_sock);
	r->io_timeout_ms = (int)d->c->reset_io_timeout_ms;
	wc.ctx = r;
	if ((e = workq_new(d->base, &wc, &r->q)) != 0) {
		free(r);
		return e;
	}
	d->resets = r;
	return 0;
}

/*
 * Resets still running are abandoned: their workers stay resetting and
 * reconcile retires them (a reset is never resumed by a later process).
 * Threads blocked in an agent call are waited for a short while; if one
 * is still blocked the state is left allocated for it (the process is
 * about to exit).
 */
void
resets_free(struct lease_daemon *d)
{
	struct resets *r = d->resets;
	bool stopped;

	if (r == NULL)
		return;
	stopped = workq_free(r->q, RESET_STOP_WAIT_MS);
	d->resets = NULL;
	if (!stopped) {
		kz_log(KZ_LOG_WARN, "reset.abandon", 0,
		    "resets still running at exit", NULL);
		return;
	}
	free(r);
}

int
resets_running(const struct lease_daemon *d)
{
	return d->resets != NULL ? d->resets->inflight : 0;
}

static void
retire_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	const char *w;

	(void)arg;
	if (err != 0 || kz_pool_errcode(res) != NULL) {
		kz_log(KZ_LOG_WARN, "store.call", err, why, "what", "retire",
		    NULL);
		d->next_reconcile = 0;
		return;
	}
	if (kz_json_str(res, "worker", KZ_POOL_ID_MAX, &w, NULL, 0) == 0)
		retired(d, res, w);
}

static void
retire_now(struct lease_daemon *d, const char *w, const char *t,
    const char *why)
{
	char op[KZ_OPID_HEX + 1];
	const char *av[4] = {op, w, t, why};

	kz_store_opid(op);
	kz_log(KZ_LOG_WARN, "worker.retire", 0, why, "worker", w, NULL);
	if (pool_async(d, KZ_POOL_RETIRE, 4, av, retire_done, NULL) != 0)
		d->next_reconcile = 0;
}

void
reset_start(struct lease_daemon *d, const char *worker, const char *token,
    const char *endpoint, const char *rid)
{
	struct rjob *j;

	if (d->resets == NULL || endpoint == NULL || *endpoint == '\0' ||
	    strlen(endpoint) >= sizeof(j->endpoint) ||
	    (j = calloc(1, sizeof(*j))) == NULL) {
		lease_count_retire(d, LR_RESET_START, 1);
		retire_now(d, worker, token, "reset could not start");
		return;
	}
	j->phase = RP_EVIDENCE;
	j->t0 = kz_now_ms();
	snprintf(j->worker, sizeof(j->worker), "%s", worker);
	snprintf(j->token, sizeof(j->token), "%s", token);
	snprintf(j->endpoint, sizeof(j->endpoint), "%s", endpoint);
	snprintf(j->rid, sizeof(j->rid), "%s", rid != NULL ? rid : "");
	d->resets->inflight++;
	workq_push(d->resets->q, &j->q);
}
