/*
 * Audit records of a run.  Every record carries the raw actor and
 * conversation (the sink replaces them by keyed hashes before writing),
 * the capability (one of the closed set, else "unknown"), the run id, the
 * manifest digest and, for a room's turn, the admitted audience version, and
 * nothing else of the run: no output, no file names, no environment.
 *
 * Records are sent concurrently: each goes out at once on its own
 * connection from a thread of its own, and the sink's group commit makes
 * records sent together share one fsync.  kz-run waits for a record's
 * acknowledgement only where it must (the dispatch record, before the
 * code starts) and for all of them before it exits; a record the sink did
 * not acknowledge is never dropped silently (run_audit_wait).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_audit.h"
#include "kz_cap.h"
#include "kz_conf.h"
#include "kz_log.h"
#include "run.h"
#include "banned.h"

#define AUDIT_INFLIGHT_MAX 16

struct arec {
	pthread_t thr;
	bool running;
	const char *sock;
	char kind[24];
	cJSON *ev;
	int err;
	char why[160];
};

struct run_aq {
	struct arec r[AUDIT_INFLIGHT_MAX];
	int n;
	int lost;
};

struct run_aq *
run_aq_new(void)
{
	return calloc(1, sizeof(struct run_aq));
}

void
run_aq_free(struct run_aq *q)
{
	int i;

	if (q == NULL)
		return;
	for (i = 0; i < q->n; i++) {
		if (q->r[i].running)
			pthread_join(q->r[i].thr, NULL);
		cJSON_Delete(q->r[i].ev);
	}
	free(q);
}

static void *
send_one(void *arg)
{
	struct arec *r = arg;

	r->err = kz_audit_send(r->sock, r->kind, r->ev, KZ_AUDIT_TIMEOUT_MS,
	    r->why, sizeof(r->why));
	return NULL;
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
	r->sock = x->c->audit_sock;
	snprintf(r->kind, sizeof(r->kind), "%s", kind);
	r->ev = ev;
	if (pthread_create(&r->thr, NULL, send_one, r) != 0) {
		r->ev = NULL;
		return send_now(x, kind, ev);
	}
	r->running = true;
	return q->n++;
}

static int
wait_one(struct run_aq *q, struct arec *r)
{
	if (!r->running)
		return r->err;
	pthread_join(r->thr, NULL);
	r->running = false;
	cJSON_Delete(r->ev);
	r->ev = NULL;
	if (r->err != 0) {
		kz_log(KZ_LOG_WARN, "audit.fail", r->err, r->why, "kind",
		    r->kind, NULL);
		q->lost++;
	}
	return r->err;
}

int
run_audit_wait(const struct run_ctx *x, int ticket)
{
	struct run_aq *q = x->aq;
	int i, e = 0, f;

	if (ticket == RUN_AUDIT_DONE)
		return 0;
	if (ticket < 0 && ticket != RUN_AUDIT_ALL)
		return ticket;
	if (q == NULL)
		return 0;
	if (ticket >= 0)
		return ticket < q->n ? wait_one(q, &q->r[ticket]) : KZ_EINVAL;
	for (i = 0; i < q->n; i++)
		if ((f = wait_one(q, &q->r[i])) != 0 && e == 0)
			e = f;
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
