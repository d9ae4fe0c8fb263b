/*
 * Refusal records, and the queue of every audit event kz-egress sends
 * (egress_refusal, egress_reload).  The log line and the egress_refusal
 * audit event carry the reason, the destination host and port and the run
 * hash; never the allowlist, a path or query, userinfo or the grant.  A
 * tunnel or exchange closed at its grant's expiry is recorded the same way,
 * grant_expired, with the outcome "closed".
 * kz_audit_send blocks until the sink has the record on disk, so events go
 * through a bounded queue to one worker thread: the event loop never waits on
 * the sink.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>
#include <cJSON.h>

#include "egress.h"
#include "kz_audit.h"
#include "kz_key.h"
#include "kz_log.h"
#include "banned.h"

#define QUEUE_MAX 1024

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct {
	const char *kind; /* a literal */
	cJSON *ev;
} queue[QUEUE_MAX];
static size_t qhead, qlen;
static char audit_sock[108];
static bool audit_on;

static void *
worker(void *arg)
{
	char why[160];

	for (;;) {
		const char *kind;
		cJSON *ev;
		int r;

		pthread_mutex_lock(&mu);
		while (qlen == 0)
			pthread_cond_wait(&cv, &mu);
		kind = queue[qhead].kind;
		ev = queue[qhead].ev;
		qhead = (qhead + 1) % QUEUE_MAX;
		qlen--;
		pthread_mutex_unlock(&mu);
		r = kz_audit_send(audit_sock, kind, ev, KZ_AUDIT_TIMEOUT_MS,
		    why, sizeof(why));
		if (r != 0)
			kz_log(KZ_LOG_WARN, "egress.audit_failed", r,
			    "event not recorded by the audit sink", "kind",
			    kind, NULL);
		cJSON_Delete(ev);
	}
	return NULL;
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
	bool dropped = false;

	pthread_mutex_lock(&mu);
	if (qlen == QUEUE_MAX)
		dropped = true;
	else if (!audit_on)
		dropped = true;
	else {
		queue[(qhead + qlen) % QUEUE_MAX].kind = kind;
		queue[(qhead + qlen++) % QUEUE_MAX].ev = ev;
	}
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	if (dropped && audit_on)
		kz_log(KZ_LOG_WARN, "egress.audit_failed", KZ_ETOOBIG,
		    "audit queue full: event logged only", "kind", kind, NULL);
	if (dropped)
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
