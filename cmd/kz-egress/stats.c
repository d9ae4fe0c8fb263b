/*
 * What this proxy process has decided since it started, and the status
 * socket that reports it.  The proxy's own sockets speak HTTP, so status
 * has a socket of its own (SANDBOX_EGRESS_STATUS_SOCKET) served by the
 * shared frame server on the first event loop.  Counters are updated from
 * every proxy thread: atomics for the hot path, a mutex for the table of
 * refusal reasons (a closed set of short names; a refusal is already a
 * slow path that logs and audits).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "egress.h"
#include "kz_call.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_srv.h"
#include "banned.h"

/* Room for every reason: none is ever counted only in the total. */
#define REASONS_MAX EG_R_COUNT_

static atomic_ulong allowed, bad_requests, refused, reloads;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* In the order first seen (status lists them so); EG_R_NONE ends it. */
static struct {
	enum eg_reason r;
	unsigned long n;
} by_reason[REASONS_MAX];
static struct {
	struct eg_policy *p;
	atomic_size_t *nconns;
	struct kz_srv *srv;
} st;

void
eg_count_allowed(void)
{
	atomic_fetch_add(&allowed, 1);
}

void
eg_count_reload(void)
{
	atomic_fetch_add(&reloads, 1);
}

void
eg_count_bad_request(void)
{
	atomic_fetch_add(&bad_requests, 1);
}

void
eg_count_refused(enum eg_reason reason)
{
	size_t i;

	atomic_fetch_add(&refused, 1);
	pthread_mutex_lock(&mu);
	for (i = 0; i < REASONS_MAX && by_reason[i].r != EG_R_NONE; i++)
		if (by_reason[i].r == reason)
			break;
	/* Past the table's end a reason is counted only in the total. */
	if (i < REASONS_MAX) {
		by_reason[i].r = reason;
		by_reason[i].n++;
	}
	pthread_mutex_unlock(&mu);
}

static int
add_counts(cJSON *o)
{
	cJSON *r;
	int e = 0;

	if (!cJSON_AddNumberToObject(o, "allowed",
	        (double)atomic_load(&allowed)) ||
	    !cJSON_AddNumberToObject(o, "refused",
	        (double)atomic_load(&refused)) ||
	    !cJSON_AddNumberToObject(o, "bad_requests",
	        (double)atomic_load(&bad_requests)) ||
	    !cJSON_AddNumberToObject(o, "open_conns",
	        (double)atomic_load(st.nconns)) ||
	    !cJSON_AddNumberToObject(o, "reloads",
	        (double)atomic_load(&reloads)) ||
	    !cJSON_AddNumberToObject(o, "generation", (double)st.p->gen) ||
	    (r = cJSON_AddObjectToObject(o, "refused_by_reason")) == NULL)
		return KZ_ENOMEM;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < REASONS_MAX && by_reason[i].r != EG_R_NONE; i++)
		if (!cJSON_AddNumberToObject(r, eg_reason_str(by_reason[i].r),
		        (double)by_reason[i].n))
			e = KZ_ENOMEM;
	pthread_mutex_unlock(&mu);
	return e;
}

static void
op_status(struct kz_req *req, void *arg)
{
	cJSON *o = eg_policy_status_json(st.p);

	if (o == NULL || add_counts(o) != 0) {
		cJSON_Delete(o);
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	kz_req_ok(req, o);
}

void
eg_status_set_policy(struct eg_policy *p)
{
	struct eg_policy *old = st.p;

	st.p = p != NULL ? eg_policy_ref(p) : NULL;
	eg_policy_free(old);
}

int
eg_status_query(const char *sock, cJSON **out, char *why, size_t wlen)
{
	cJSON *req = cJSON_CreateObject(), *rep = NULL;
	int r;

	*out = NULL;
	if (req == NULL || !cJSON_AddNumberToObject(req, "v", 1) ||
	    !cJSON_AddStringToObject(req, "op", "status") ||
	    !cJSON_AddStringToObject(req, "id", "kz-egress-status")) {
		cJSON_Delete(req);
		return KZ_ENOMEM;
	}
	r = kz_frame_call(sock, req, 5000, &rep, why, wlen);
	cJSON_Delete(req);
	if (r != 0)
		return r;
	if (!cJSON_IsTrue(kz_json_get(rep, "ok")) ||
	    !cJSON_IsString(kz_json_get(rep, "mode"))) {
		snprintf(why, wlen, "the daemon refused status: %s",
		    cJSON_IsString(kz_json_get(rep, "error")) ?
		        kz_json_get(rep, "error")->valuestring :
		        "no mode");
		cJSON_Delete(rep);
		return KZ_EPROTO;
	}
	*out = rep;
	return 0;
}

static const char *const no_fields[] = {NULL};
/* status is for any allowed peer: it admits nothing and needs no operator. */
static const struct kz_op ops[] = {
    {"status", op_status, no_fields, 0},
    {NULL, NULL, NULL, 0},
};

int
eg_status_start(struct event_base *base, struct eg_policy *p,
    atomic_size_t *nconns, struct kz_srv **out)
{
	struct kz_srv_conf sc = {0};
	char why[200];

	*out = NULL;
	eg_status_set_policy(p);
	st.nconns = nconns;
	if (p->status_sock[0] == '\0')
		return 0;
	if (p->peers_err != 0) {
		kz_log(KZ_LOG_ERROR, "egress.config", KZ_ECONF, p->peers_why,
		    NULL);
		return KZ_ECONF;
	}
	sc.peers = p->peers;
	sc.sock_path = p->status_sock;
	sc.io_timeout_ms = 5000;
	sc.idle_timeout_ms = 60000;
	sc.max_conns = 64;
	sc.ops = ops;
	if (kz_srv_new(base, &sc, out, why, sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "egress.listen", KZ_ESYS, why, NULL);
		return KZ_ESYS;
	}
	return 0;
}
