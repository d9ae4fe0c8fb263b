/*
 * Refusal records, and the queue of every audit event kz-egress sends
 * (egress_refusal, egress_reload).  The log line and the egress_refusal
 * audit event carry the reason, the destination host and port and the run
 * hash; never the allowlist, a path or query, userinfo or the grant.  A
 * tunnel or exchange closed at its grant's expiry is recorded the same way,
 * grant_expired, with the outcome "closed".
 * kz_audit_send blocks until the sink has the record on disk, so events go
 * through a bounded queue to one worker thread, which sends them in batches
 * (one fdatasync in the sink for up to KZ_AUDIT_BATCH_MAX): the event loop
 * never waits on the sink.  One run's events may hold at most RUN_SHARE of
 * the queue, so a run that floods the proxy with refused requests cannot
 * crowd another run's refusal out of the audit trail while the sink is
 * slow: past its share, its events are logged only.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>
#include <cJSON.h>

#include "egress.h"
#include "kz_audit.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_log.h"
#include "banned.h"

#define QUEUE_MAX 1024
#define RUN_SHARE (QUEUE_MAX / 8)
#define RUN_HEX 32

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct {
	const char *kind; /* a literal */
	cJSON *ev;
	char run[RUN_HEX + 1]; /* its run hash, or "" */
} queue[QUEUE_MAX];
static size_t qhead, qlen;
static char audit_sock[108];
static bool audit_on;

static void
send_one(const char *kind, const cJSON *ev)
{
	char why[160];
	int r;

	r = kz_audit_send(audit_sock, kind, ev, KZ_AUDIT_TIMEOUT_MS, why,
	    sizeof(why));
	if (r != 0)
		kz_log(KZ_LOG_WARN, "egress.audit_failed", r,
		    "event not recorded by the audit sink", "kind", kind, NULL);
}

/* Up to KZ_AUDIT_BATCH_MAX events in one append; a batch the sink refuses
 * (one bad event refuses it whole) goes again one event at a time, so
 * that the others are still recorded. */
static void
send_batch(size_t n, const char *kinds[], cJSON *evs[])
{
	char why[160];
	int fd, r;

	r = kz_audit_batch_send(audit_sock, n, kinds, (const cJSON *const *)evs,
	    KZ_AUDIT_TIMEOUT_MS, &fd, why, sizeof(why));
	if (r == 0)
		r = kz_audit_batch_wait(fd, n, KZ_AUDIT_TIMEOUT_MS, why,
		    sizeof(why));
	for (size_t i = 0; i < n; i++) {
		if (r == KZ_EDENIED && n > 1)
			send_one(kinds[i], evs[i]);
		else if (r != 0)
			kz_log(KZ_LOG_WARN, "egress.audit_failed", r,
			    "event not recorded by the audit sink", "kind",
			    kinds[i], NULL);
		cJSON_Delete(evs[i]);
	}
}

static void *
worker(void *arg)
{
	const char *kinds[KZ_AUDIT_BATCH_MAX];
	cJSON *evs[KZ_AUDIT_BATCH_MAX];

	for (;;) {
		size_t n = 0;

		pthread_mutex_lock(&mu);
		while (qlen == 0)
			pthread_cond_wait(&cv, &mu);
		for (; n < KZ_AUDIT_BATCH_MAX && qlen > 0; n++) {
			kinds[n] = queue[qhead].kind;
			evs[n] = queue[qhead].ev;
			qhead = (qhead + 1) % QUEUE_MAX;
			qlen--;
		}
		pthread_mutex_unlock(&mu);
		send_batch(n, kinds, evs);
	}
	return NULL;
}

/* Events of run queued now (the caller holds mu). */
static size_t
queued_of(const char *run)
{
	size_t k = 0;

	for (size_t i = 0; i < qlen; i++)
		k += strcmp(queue[(qhead + i) % QUEUE_MAX].run, run) == 0;
	return k;
}

void
eg_audit_start(const char *sock)
{
	pthread_t t;

	if (sock == NULL || *sock == '\0')
		return;
	snprintf(audit_sock, sizeof(audit_sock), "%s", sock);
	if (pthread_create(&t, NULL, worker, NULL) != 0) {
		kz_log(KZ_LOG_ERROR, "egress.audit_failed", KZ_ESYS,
		    "cannot start the audit thread", NULL);
		return;
	}
	pthread_detach(t);
	audit_on = true;
}

void
eg_audit_event(const char *kind, cJSON *ev)
{
	const char *run = cJSON_GetStringValue(kz_json_get(ev, "run_hash"));
	const char *full = NULL;
	size_t at;

	if (run == NULL || strlen(run) > RUN_HEX)
		run = "";
	pthread_mutex_lock(&mu);
	if (!audit_on)
		full = "";
	else if (qlen == QUEUE_MAX)
		full = "audit queue full: event logged only";
	else if (*run != '\0' && queued_of(run) >= RUN_SHARE)
		full = "this run's share of the audit queue is full: event "
		       "logged only";
	else {
		at = (qhead + qlen++) % QUEUE_MAX;
		queue[at].kind = kind;
		queue[at].ev = ev;
		snprintf(queue[at].run, sizeof(queue[at].run), "%s", run);
	}
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	if (full != NULL && *full != '\0')
		kz_log(KZ_LOG_WARN, "egress.audit_failed", KZ_ETOOBIG, full,
		    "kind", kind, NULL);
	if (full != NULL)
		cJSON_Delete(ev);
}

/*
 * One record: the log line (event, at lvl) and the egress_refusal audit
 * event, both with the reason, host, port and run hash, and a request id;
 * closed, when not NULL, says what an expired grant closed (log) and makes
 * the audit event's outcome "closed".
 */
static void
record(enum kz_log_level lvl, const char *event, const char *msg,
    enum eg_reason why, const char *host, uint16_t port, const char *run,
    const char *closed)
{
	const char *reason = eg_reason_str(why);
	unsigned char rb[8];
	char rid[17], ps[8];
	cJSON *ev;

	randombytes_buf(rb, sizeof(rb));
	kz_hex(rb, sizeof(rb), rid);
	snprintf(ps, sizeof(ps), "%u", (unsigned)port);
	kz_log_set_rid(rid);
	kz_log(lvl, event, 0, msg, "reason", reason, "host", host, "port", ps,
	    "closed", closed, "run_hash", run && *run ? run : NULL, NULL);
	kz_log_set_rid(NULL);
	if (!audit_on || (ev = cJSON_CreateObject()) == NULL)
		return;
	/* The sink's host alphabet has no '_': such names go as "-". */
	cJSON_AddStringToObject(ev, "host",
	    strchr(host, '_') != NULL ? "-" : host);
	cJSON_AddNumberToObject(ev, "port", port);
	cJSON_AddStringToObject(ev, "reason", reason);
	if (run != NULL && *run != '\0')
		cJSON_AddStringToObject(ev, "run_hash", run);
	if (closed != NULL)
		cJSON_AddStringToObject(ev, "outcome", "closed");
	cJSON_AddStringToObject(ev, "rid", rid);
	eg_audit_event("egress_refusal", ev);
}

void
eg_refusal_record(enum eg_reason why, const char *host, uint16_t port,
    const char *run)
{
	eg_count_refused(why);
	record(KZ_LOG_WARN, "egress.refuse", "destination refused", why, host,
	    port, run, NULL);
}

void
eg_expiry_record(const char *host, uint16_t port, const char *run,
    const char *closed)
{
	record(KZ_LOG_INFO, "egress.expire", "grant expired: connection closed",
	    EG_R_GRANT_EXPIRED, host[0] ? host : "-", port, run, closed);
}
