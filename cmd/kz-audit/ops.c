/*
 * The daemon's ops, run on the event loop (serve.c): append checks each
 * record against its kind's schema (schema.c) and queues the whole job
 * for the writer thread, or answers busy when the queue or the peer
 * uid's share of it (quota.c) is full; status reports the store's figures
 * and the counters kept here, refusals by reason and by field; ping says
 * whether the log can still be written.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "kz_audit.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_srv.h"
#include "audit.h"
#include "banned.h"

/* A busy refusal is said in the log at most this often. */
#define BUSY_LOG_MS 10000

static const char *const extra_slots[] = {"kind", "event", "(unknown)", NULL};

/* Counter slot for a refusal's field name (always a schema name). */
static size_t
field_slot(const char *name)
{
	const char *const *names = aud_field_names();
	size_t i = 0;

	for (; names[i] != NULL; i++)
		if (strcmp(names[i], name) == 0)
			goto found;
	for (size_t k = 0; extra_slots[k] != NULL; k++, i++)
		if (strcmp(extra_slots[k], name) == 0)
			goto found;
	i--; /* the last slot: "(unknown)" */
found:
	return i < SLOTS_MAX ? i : SLOTS_MAX - 1;
}

static const char *
slot_name(size_t i)
{
	const char *const *names = aud_field_names();
	size_t n = 0;

	while (names[n] != NULL)
		n++;
	if (i < n)
		return names[i];
	for (size_t k = 0; extra_slots[k] != NULL; k++)
		if (i == n + k)
			return extra_slots[k];
	return NULL;
}

void
aud_job_free(struct job *j)
{
	if (j == NULL)
		return;
	for (size_t i = 0; i < j->n; i++)
		cJSON_Delete(j->r[i].event);
	free(j);
}

static void
count_refusal(struct daemon *d, const struct aud_refusal_info *ri,
    const char *rid)
{
	d->refused++;
	d->by_reason[ri->reason]++;
	d->by_field[field_slot(ri->field)]++;
	kz_log(KZ_LOG_WARN, "audit.refuse", KZ_EDENIED, ri->why, "reason",
	    aud_refusal_name(ri->reason), "field", ri->field, "rid", rid, NULL);
}

/*
 * Checks one record against its kind's schema into r; a refusal is
 * counted and answered (prefixed with the record's place in a batch).
 */
static int
check_rec(struct daemon *d, struct kz_req *req, const cJSON *k, const cJSON *ev,
    int idx, struct rec *r)
{
	const cJSON *id = kz_json_get(kz_req_json(req), "id");
	struct aud_refusal_info ri;
	char why[sizeof(ri.why) + 32];
	int e;

	e = aud_schema_check(cJSON_IsString(k) ? k->valuestring : NULL, ev,
	    &d->idkey, &r->event, &ri);
	if (e == KZ_EDENIED) {
		count_refusal(d, &ri,
		    cJSON_IsString(id) ? id->valuestring : NULL);
		if (idx < 0)
			snprintf(why, sizeof(why), "%s", ri.why);
		else
			snprintf(why, sizeof(why), "record %d: %s", idx,
			    ri.why);
		kz_req_err(req, KZ_WE_REFUSED, why);
		return e;
	}
	if (e != 0) {
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return e;
	}
	memcpy(r->kind, k->valuestring, strlen(k->valuestring) + 1);
	r->uid = kz_req_peer(req)->uid;
	return 0;
}

/* The request's records: kind and event, or records (a batch). */
static struct job *
job_new(struct daemon *d, struct kz_req *req)
{
	const cJSON *j = kz_req_json(req), *recs = kz_json_get(j, "records");
	const cJSON *it;
	struct job *job;
	int n = 0;

	if (recs != NULL) {
		if (kz_json_get(j, "kind") != NULL ||
		    kz_json_get(j, "event") != NULL || !cJSON_IsArray(recs) ||
		    (n = cJSON_GetArraySize(recs)) < 1 ||
		    n > KZ_AUDIT_BATCH_MAX) {
			char why[120];

			snprintf(why, sizeof(why),
			    "records must be an array of 1 to %d records, "
			    "without kind or event beside it",
			    KZ_AUDIT_BATCH_MAX);
			kz_req_err(req, KZ_WE_BAD_REQUEST, why);
			return NULL;
		}
		cJSON_ArrayForEach(it, recs)
		{
			if (!cJSON_IsObject(it) ||
			    cJSON_GetArraySize(it) != 2 ||
			    kz_json_get(it, "kind") == NULL ||
			    kz_json_get(it, "event") == NULL) {
				kz_req_err(req, KZ_WE_BAD_REQUEST,
				    "each record is an object of kind and "
				    "event only");
				return NULL;
			}
		}
	}
	if ((job = calloc(1,
	         sizeof(*job) + (size_t)(n > 0 ? n : 1) * sizeof(job->r[0]))) ==
	    NULL) {
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return NULL;
	}
	job->req = req;
	job->batch = recs != NULL;
	if (recs == NULL) {
		job->n = 1;
		if (check_rec(d, req, kz_json_get(j, "kind"),
		        kz_json_get(j, "event"), -1, &job->r[0]) == 0)
			return job;
		aud_job_free(job);
		return NULL;
	}
	cJSON_ArrayForEach(it, recs)
	{
		if (check_rec(d, req, kz_json_get(it, "kind"),
		        kz_json_get(it, "event"), (int)job->n,
		        &job->r[job->n]) != 0) {
			aud_job_free(job);
			return NULL;
		}
		job->n++;
	}
	return job;
}

/* An append the queue or the peer's share has no room for: answered busy,
 * counted, and said in the log at most once every BUSY_LOG_MS, naming
 * the uid (a flooding peer does not flood the log too). */
static void
refuse_busy(struct daemon *d, struct kz_req *req, uid_t uid,
    enum aud_quota_res q)
{
	int64_t now = aud_now_ms();
	char u[24];

	d->busy++;
	if (now - d->busy_logged_ms >= BUSY_LOG_MS) {
		d->busy_logged_ms = now;
		snprintf(u, sizeof(u), "%lu", (unsigned long)uid);
		kz_log(KZ_LOG_WARN, "audit.busy", KZ_EUNAVAIL,
		    q == AUD_Q_SHARE ? "a peer uid holds its share of the "
		                       "queue: its next appends are busy" :
		                       "the queue is full: appends are busy",
		    "uid", u, NULL);
	}
	kz_req_err(req, KZ_WE_BUSY,
	    q == AUD_Q_SHARE ? "this peer has its share of appends in flight" :
	                       "too many appends in flight");
}

/* Queued whole, under one lock: the writer takes all of a batch or none. */
static void
op_append(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	uid_t uid = kz_req_peer(req)->uid;
	enum aud_quota_res q = AUD_Q_OK;
	struct job *job;
	bool failed;

	if ((job = job_new(d, req)) == NULL)
		return;
	pthread_mutex_lock(&d->mu);
	failed = d->st.failed;
	if (!failed &&
	    (q = aud_quota_admit(&d->quota, uid, job->n)) == AUD_Q_OK) {
		STAILQ_INSERT_TAIL(&d->in, job, link);
		pthread_cond_signal(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	if (failed) {
		aud_job_free(job);
		kz_req_err(req, KZ_WE_UNAVAILABLE,
		    "the audit log cannot be written");
	} else if (q != AUD_Q_OK) {
		aud_job_free(job);
		refuse_busy(d, req, uid, q);
	}
}

static int
add_num(cJSON *o, const char *k, uint64_t v)
{
	return cJSON_AddNumberToObject(o, k, (double)v) ? 0 : KZ_ENOMEM;
}

static cJSON *
refusal_counts(const struct daemon *d, bool by_field)
{
	cJSON *o = cJSON_CreateObject();

	for (size_t i = 0; o != NULL && !by_field && i < AUD_R_COUNT_; i++)
		if (add_num(o, aud_refusal_name((enum aud_refusal)i),
		        d->by_reason[i]) != 0)
			goto fail;
	for (size_t i = 0; o != NULL && by_field && i < SLOTS_MAX; i++) {
		const char *n = slot_name(i);

		if (n != NULL && d->by_field[i] != 0 &&
		    add_num(o, n, d->by_field[i]) != 0)
			goto fail;
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

static void
op_status(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct aud_store_stats st;
	struct kz_srv_stats ss;
	uint64_t maxb;
	char file[64];
	cJSON *o = cJSON_CreateObject();

	pthread_mutex_lock(&d->mu);
	st = d->st;
	maxb = d->max_batch;
	pthread_mutex_unlock(&d->mu);
	kz_srv_stats(d->srv, &ss);
	aud_file_name(st.file_idx, file, sizeof(file));
	if (o == NULL || add_num(o, "acked", d->acked) ||
	    add_num(o, "append_errors", d->errors) ||
	    add_num(o, "busy", d->busy) || add_num(o, "records", st.records) ||
	    add_num(o, "last_seq", st.last_seq) ||
	    add_num(o, "batches", st.batches) ||
	    add_num(o, "fsyncs", st.fsyncs) || add_num(o, "max_batch", maxb) ||
	    add_num(o, "rotations", st.rotations) ||
	    add_num(o, "recovered_bytes_cut", st.truncated_bytes) ||
	    add_num(o, "refused", d->refused) ||
	    add_num(o, "bad_frames", ss.bad_frames) ||
	    add_num(o, "peer_refused", ss.peer_refused) ||
	    add_num(o, "open_conns", ss.open_conns) ||
	    !cJSON_AddStringToObject(o, "file", file) ||
	    !cJSON_AddBoolToObject(o, "writable", !st.failed) ||
	    !cJSON_AddItemToObject(o, "refused_by_reason",
	        refusal_counts(d, false)) ||
	    !cJSON_AddItemToObject(o, "refused_by_field",
	        refusal_counts(d, true))) {
		cJSON_Delete(o);
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	kz_req_ok(req, o);
}

/* A sink that can no longer write answers no ping: the clients that ping
 * before they act (kz-run, kz-reset) then act on nothing they could not
 * record, rather than learn it from the first record. */
static void
op_ping(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	bool failed;

	pthread_mutex_lock(&d->mu);
	failed = d->st.failed;
	pthread_mutex_unlock(&d->mu);
	if (failed)
		kz_req_err(req, KZ_WE_UNAVAILABLE,
		    "the audit log cannot be written");
	else
		kz_req_ok(req, NULL);
}

static const char *const append_fields[] = {"kind", "event", "records", NULL};
static const char *const no_fields[] = {NULL};
const struct kz_op aud_ops[] = {{"append", op_append, append_fields, 0},
    {"status", op_status, no_fields, 0}, {"ping", op_ping, no_fields, 0},
    {NULL, NULL, NULL, 0}};
