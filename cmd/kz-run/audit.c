/*
 * Audit records of a run.  Every record carries the raw actor and
 * conversation (the sink replaces them by keyed hashes before writing),
 * the capability (one of the closed set, else "unknown"), the run id, the
 * manifest digest and, for a room's turn, the admitted audience version, and
 * nothing else of the run: no output, no file names, no environment.
 *
 * Records go out without waiting for the sink and without a thread:
 * each batch is one append (kz_audit_batch_send) written at once, and its
 * acknowledgement is read only where kz-run must wait for it (the
 * dispatch record, before the code starts) and for all of them before it
 * exits.  Records made together (the lease and dispatch records at the
 * grant, the closing dispatch and release records) are held and sent as
 * one batch, so the sink makes them durable with one fdatasync.  A record
 * the sink did not acknowledge is never dropped silently
 * (run_audit_wait).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_audit.h"
#include "kz_cap.h"
#include "kz_conf.h"
#include "kz_log.h"
#include "run.h"
#include "banned.h"

#define AUDIT_INFLIGHT_MAX 16

struct arec {
	char kind[24];
	cJSON *ev;
};

/* One append on its own connection, answered once. */
struct abatch {
	int fd;
	int first, n; /* its records: r[first .. first + n) */
	bool answered;
	int err;
	char why[160];
};

struct run_aq {
	struct arec r[AUDIT_INFLIGHT_MAX];
	struct abatch b[AUDIT_INFLIGHT_MAX];
	int n, nb;
	int unsent; /* the first record not sent yet */
	bool hold; /* run_audit_hold: records wait for run_audit_flush */
	int lost;
};

struct run_aq *
run_aq_new(void)
{
	return calloc(1, sizeof(struct run_aq));
}

static void
batch_wait(struct run_aq *q, struct abatch *b)
{
	int i;

	if (b->answered)
		return;
	b->answered = true;
	if (b->fd >= 0) {
		b->err = kz_audit_batch_wait(b->fd, (size_t)b->n,
		    KZ_AUDIT_TIMEOUT_MS, b->why, sizeof(b->why));
		b->fd = -1;
	}
	for (i = b->first; i < b->first + b->n; i++) {
		cJSON_Delete(q->r[i].ev);
		q->r[i].ev = NULL;
	}
	if (b->err != 0) {
		for (i = b->first; i < b->first + b->n; i++)
			kz_log(KZ_LOG_WARN, "audit.fail", b->err, b->why,
			    "kind", q->r[i].kind, NULL);
		q->lost += b->n;
	}
}

void
run_aq_free(struct run_aq *q)
{
	int i;

	if (q == NULL)
		return;
	for (i = 0; i < q->nb; i++)
		batch_wait(q, &q->b[i]);
	for (i = 0; i < q->n; i++)
		cJSON_Delete(q->r[i].ev);
	free(q);
}

static void
fields(const struct run_ctx *x, cJSON *ev)
{
	cJSON_AddStringToObject(ev, "actor", x->o->actor);
	cJSON_AddStringToObject(ev, "conversation", x->o->conv);
	/* The sink stores member_hash under the same keyed hash kz-project
	 * records as actor_hash: one member's turn can be followed across
	 * both services' records. */
	if (x->o->member != NULL)
		cJSON_AddStringToObject(ev, "member", x->o->member);
	/* A name outside the closed set is recorded as "unknown": a raw
	 * capability the caller made up never enters the audit. */
	cJSON_AddStringToObject(ev, "capability",
	    kz_cap_find(x->o->cap) != NULL ? x->o->cap : "unknown");
	cJSON_AddStringToObject(ev, "rid", x->rid);
	if (x->manifest[0] != '\0')
		cJSON_AddStringToObject(ev, "manifest_digest", x->manifest);
	if (x->audience >= 0)
		cJSON_AddNumberToObject(ev, "audience_version",
		    (double)x->audience);
}

/* Without a queue, or with a full one, the record is sent in line. */
static int
send_now(const struct run_ctx *x, const char *kind, cJSON *ev)
{
	char why[160] = "";
	int e;

	e = kz_audit_send(x->c->audit_sock, kind, ev, KZ_AUDIT_TIMEOUT_MS, why,
	    sizeof(why));
	cJSON_Delete(ev);
	if (e != 0) {
		kz_log(KZ_LOG_WARN, "audit.fail", e, why, "kind", kind, NULL);
		if (x->aq != NULL)
			x->aq->lost++;
		return e;
	}
	return RUN_AUDIT_DONE;
}

/* The records not sent yet go out as one batch (not waited for). */
static void
flush(const struct run_ctx *x, struct run_aq *q)
{
	const char *kinds[AUDIT_INFLIGHT_MAX];
	const cJSON *evs[AUDIT_INFLIGHT_MAX];
	struct abatch *b;
	int i;

	if (q->unsent == q->n)
		return;
	b = &q->b[q->nb++];
	b->first = q->unsent;
	b->n = q->n - q->unsent;
	for (i = 0; i < b->n; i++) {
		kinds[i] = q->r[b->first + i].kind;
		evs[i] = q->r[b->first + i].ev;
	}
	q->unsent = q->n;
	b->err = kz_audit_batch_send(x->c->audit_sock, (size_t)b->n, kinds, evs,
	    KZ_AUDIT_TIMEOUT_MS, &b->fd, b->why, sizeof(b->why));
	/* A batch that could not be sent is answered already: it failed. */
	if (b->err != 0)
		batch_wait(q, b);
}

int
run_audit(const struct run_ctx *x, const char *kind, cJSON *ev)
{
	struct run_aq *q = x->aq;
	struct arec *r;

	if (ev == NULL) {
		if (q != NULL)
			q->lost++;
		return KZ_ENOMEM;
	}
	if (x->c->audit_sock[0] == '\0') {
		cJSON_Delete(ev);
		return RUN_AUDIT_DONE;
	}
	fields(x, ev);
	if (q == NULL || q->n == AUDIT_INFLIGHT_MAX)
		return send_now(x, kind, ev);
	r = &q->r[q->n];
	snprintf(r->kind, sizeof(r->kind), "%s", kind);
	r->ev = ev;
	q->n++;
	if (!q->hold)
		flush(x, q);
	return q->n - 1;
}

void
run_audit_hold(const struct run_ctx *x)
{
	if (x->aq != NULL)
		x->aq->hold = true;
}

void
run_audit_flush(const struct run_ctx *x)
{
	if (x->aq == NULL)
		return;
	x->aq->hold = false;
	flush(x, x->aq);
}

int
run_audit_wait(const struct run_ctx *x, int ticket)
{
	struct run_aq *q = x->aq;
	struct abatch *b;
	int i, e = 0;

	if (ticket == RUN_AUDIT_DONE)
		return 0;
	if (ticket < 0 && ticket != RUN_AUDIT_ALL)
		return ticket;
	if (q == NULL)
		return 0;
	if (ticket >= q->n)
		return KZ_EINVAL;
	/* Waiting for a record sends whatever is held with it. */
	run_audit_flush(x);
	if (ticket >= 0) {
		/* The flush sent it: some batch holds it. */
		for (b = q->b; ticket >= b->first + b->n; b++)
			;
		batch_wait(q, b);
		return b->err;
	}
	for (i = 0; i < q->nb; i++) {
		batch_wait(q, &q->b[i]);
		if (q->b[i].err != 0 && e == 0)
			e = q->b[i].err;
	}
	return e == 0 && q->lost > 0 ? KZ_EUNAVAIL : e;
}

void
run_denied(const struct run_ctx *x, const char *kind, const char *stage,
    const char *error, const char *reason)
{
	cJSON *ev = cJSON_CreateObject();

	/* The first refusal is the members' one line (--json). */
	if (x->res != NULL && x->res->refusal[0] == '\0')
		snprintf(x->res->refusal, sizeof(x->res->refusal), "%s",
		    reason);
	if (ev == NULL)
		return;
	/* The admission and projection kinds carry a decision, the
	 * isolation denial an error code (kz-audit's closed schema). */
	if (strcmp(kind, "isolation_denial") != 0)
		cJSON_AddStringToObject(ev, "decision", "denied");
	else
		cJSON_AddStringToObject(ev, "error", error);
	cJSON_AddStringToObject(ev, "stage", stage);
	cJSON_AddStringToObject(ev, "outcome", error);
	cJSON_AddStringToObject(ev, "reason", reason);
	(void)run_audit(x, kind, ev);
}
