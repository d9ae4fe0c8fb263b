/*
 * The daemon.  The event loop checks each append against the schema and
 * queues it; one writer thread takes everything queued, formats it into
 * the chain, writes it with one write() and makes it durable with one
 * fdatasync(), then hands the batch back to the loop, which acknowledges
 * each record with its seq.  Appends that arrive while an fsync is in
 * flight wait in the queue and share the next one (group commit), and the
 * loop never blocks on the disk, so one slow fsync does not stall reads,
 * status or refusals.
 *
 * The queue is bounded (AUD_QUEUE_MAX records) and each peer uid may hold
 * at most its share of it (quota.c): a client flooding appends is told
 * busy once it holds its share, and the other daemons' records still go
 * in.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <unistd.h>
#include <event2/event.h>

#include "kz_audit.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_srv.h"
#include "audit.h"
#include "banned.h"

#define SLOTS_MAX 160
/* A busy refusal is said in the log at most this often. */
#define BUSY_LOG_MS 10000

struct rec {
	char kind[AUD_KIND_MAX + 1];
	uid_t uid; /* the peer's (SO_PEERCRED), stamped into the record */
	cJSON *event;
	uint64_t seq;
	int err;
};

/* One append: one record, or a batch of them queued together (so one
 * fsync makes them all durable) and answered together. */
struct job {
	STAILQ_ENTRY(job) link;
	struct kz_req *req;
	bool batch; /* the request named "records": the reply has seqs */
	size_t n;
	struct rec r[];
};
STAILQ_HEAD(jobq, job);

struct daemon {
	struct event_base *base;
	struct kz_srv *srv;
	struct aud_store *store;
	struct kz_key idkey;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct jobq in, done; /* under mu */
	struct aud_quota quota; /* what in holds, by uid; under mu */
	bool stop; /* under mu */
	struct aud_store_stats st; /* copy, under mu */
	uint64_t max_batch; /* under mu */
	int efd;
	struct event *done_ev, *sigterm, *sigint;
	/* Loop thread only. */
	uint64_t acked, errors, refused, by_reason[AUD_R_COUNT_];
	uint64_t busy;
	int64_t busy_logged_ms;
	uint64_t by_field[SLOTS_MAX];
};

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

static void
job_free(struct job *j)
{
	if (j == NULL)
		return;
	for (size_t i = 0; i < j->n; i++)
		cJSON_Delete(j->r[i].event);
	free(j);
}

static void *
writer(void *arg)
{
	struct daemon *d = arg;
	struct jobq batch;
	struct job *j;
	uint64_t one = 1;
	char why[200];

	pthread_mutex_lock(&d->mu);
	for (;;) {
		size_t n = 0;
		int cr;

		while (STAILQ_EMPTY(&d->in) && !d->stop)
			pthread_cond_wait(&d->cv, &d->mu);
		if (STAILQ_EMPTY(&d->in))
			break;
		STAILQ_INIT(&batch);
		STAILQ_CONCAT(&batch, &d->in);
		aud_quota_clear(&d->quota);
		pthread_mutex_unlock(&d->mu);
		STAILQ_FOREACH(j, &batch, link)
		for (size_t i = 0; i < j->n; i++, n++)
			j->r[i].err = aud_store_add(d->store, j->r[i].kind,
			    j->r[i].uid, j->r[i].event, &j->r[i].seq, why,
			    sizeof(why));
		if ((cr = aud_store_commit(d->store, why, sizeof(why))) != 0) {
			kz_log(KZ_LOG_ERROR, "audit.write", cr, why, NULL);
			STAILQ_FOREACH(j, &batch, link)
			for (size_t i = 0; i < j->n; i++)
				if (j->r[i].err == 0)
					j->r[i].err = cr;
		}
		pthread_mutex_lock(&d->mu);
		aud_store_stats(d->store, &d->st);
		if (n > d->max_batch)
			d->max_batch = n;
		STAILQ_CONCAT(&d->done, &batch);
		if (write(d->efd, &one, sizeof(one)) < 0) {
			/* The counter is already non-zero: the loop wakes. */
		}
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* The reply with seq (the last record's) and, for a batch, every seq. */
static cJSON *
acked_fields(const struct job *j)
{
	cJSON *f = cJSON_CreateObject(), *a;

	if (f == NULL ||
	    !cJSON_AddNumberToObject(f, "seq", (double)j->r[j->n - 1].seq))
		goto fail;
	if (j->batch) {
		if ((a = cJSON_AddArrayToObject(f, "seqs")) == NULL)
			goto fail;
		for (size_t i = 0; i < j->n; i++)
			if (!cJSON_AddItemToArray(a,
			        cJSON_CreateNumber((double)j->r[i].seq)))
				goto fail;
	}
	return f;
fail:
	cJSON_Delete(f);
	return NULL;
}

/* A batch is acknowledged only when every record of it is durable; the
 * first failed record names the error. */
static void
reply_job(struct daemon *d, struct job *j)
{
	cJSON *f;
	size_t i;

	for (i = 0; i < j->n && j->r[i].err == 0; i++)
		;
	if (i == j->n && (f = acked_fields(j)) != NULL) {
		d->acked += j->n;
		kz_req_ok(j->req, f);
		return;
	}
	d->errors++;
	if (i < j->n && j->r[i].err == KZ_ETOOBIG)
		kz_req_err(j->req, KZ_WE_BAD_REQUEST,
		    "event is over the record size limit");
	else if (i < j->n)
		kz_req_err(j->req, KZ_WE_UNAVAILABLE,
		    "the audit log cannot be written");
	else
		kz_req_err(j->req, KZ_WE_INTERNAL, "out of memory");
}

static void
drain_done(struct daemon *d)
{
	struct jobq done;
	struct job *j;

	STAILQ_INIT(&done);
	pthread_mutex_lock(&d->mu);
	STAILQ_CONCAT(&done, &d->done);
	pthread_mutex_unlock(&d->mu);
	while ((j = STAILQ_FIRST(&done)) != NULL) {
		STAILQ_REMOVE_HEAD(&done, link);
		reply_job(d, j);
		job_free(j);
	}
}

static void
done_cb(evutil_socket_t fd, short ev, void *arg)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		kz_log(KZ_LOG_WARN, "audit.wake", KZ_ESYS, "eventfd read",
		    NULL);
	drain_done(arg);
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
		job_free(job);
		return NULL;
	}
	cJSON_ArrayForEach(it, recs)
	{
		if (check_rec(d, req, kz_json_get(it, "kind"),
		        kz_json_get(it, "event"), (int)job->n,
		        &job->r[job->n]) != 0) {
			job_free(job);
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
		job_free(job);
		kz_req_err(req, KZ_WE_UNAVAILABLE,
		    "the audit log cannot be written");
	} else if (q != AUD_Q_OK) {
		job_free(job);
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
static const struct kz_op ops[] = {{"append", op_append, append_fields, 0},
    {"status", op_status, no_fields, 0}, {"ping", op_ping, no_fields, 0},
    {NULL, NULL, NULL, 0}};

static void
signal_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct daemon *d = arg;

	kz_log(KZ_LOG_INFO, "audit.stop", 0, "stopping", NULL);
	event_base_loopexit(d->base, NULL);
}

static int
daemon_start(struct daemon *d, struct aud_cfg *c, char *why, size_t wlen)
{
	struct kz_srv_conf sc;
	int r;

	memset(&sc, 0, sizeof(sc));
	sc.sock_path = c->socket;
	sc.frame_max = (size_t)c->frame_max;
	sc.peers = c->peers;
	sc.ops = ops;
	sc.arg = d;
	if ((d->base = event_base_new()) == NULL)
		return KZ_ENOMEM;
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->efd < 0)
		return KZ_ESYS;
	d->done_ev = event_new(d->base, d->efd, EV_READ | EV_PERSIST, done_cb,
	    d);
	d->sigterm = evsignal_new(d->base, SIGTERM, signal_cb, d);
	d->sigint = evsignal_new(d->base, SIGINT, signal_cb, d);
	if (d->done_ev == NULL || d->sigterm == NULL || d->sigint == NULL ||
	    event_add(d->done_ev, NULL) < 0 || event_add(d->sigterm, NULL) ||
	    event_add(d->sigint, NULL))
		return KZ_ENOMEM;
	if (pthread_create(&d->thr, NULL, writer, d) != 0)
		return KZ_ESYS;
	if ((r = kz_srv_new(d->base, &sc, &d->srv, why, wlen)) != 0) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thr, NULL);
		d->thr = 0;
		return r;
	}
	return 0;
}

static void
daemon_stop(struct daemon *d)
{
	if (d->thr) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thr, NULL);
		/* What was queued is on disk: say so to whoever still
		 * listens, then let the loop flush those replies once. */
		drain_done(d);
		event_base_loop(d->base, EVLOOP_NONBLOCK);
	}
	kz_srv_free(d->srv);
	if (d->done_ev)
		event_free(d->done_ev);
	if (d->sigterm)
		event_free(d->sigterm);
	if (d->sigint)
		event_free(d->sigint);
	if (d->efd >= 0)
		close(d->efd);
	if (d->base)
		event_base_free(d->base);
	aud_store_free(d->store);
	kz_key_wipe(&d->idkey);
}

int
aud_serve(struct aud_cfg *c)
{
	struct daemon d;
	struct kz_key akey;
	struct aud_store_stats st;
	char why[300], file[64], seq[24];
	int r, rc = 0;

	memset(&d, 0, sizeof(d));
	d.efd = -1;
	STAILQ_INIT(&d.in);
	STAILQ_INIT(&d.done);
	pthread_mutex_init(&d.mu, NULL);
	pthread_cond_init(&d.cv, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((r = aud_keys_load(c->keyfile, &akey, &d.idkey, why,
	         sizeof(why))) != 0) {
		kz_log(KZ_LOG_ERROR, "audit.key", r, why, NULL);
		rc = KZ_EXIT_USAGE;
		goto out;
	}
	r = aud_store_open(c->dir, c->max_file, &akey, &d.store, why,
	    sizeof(why));
	kz_key_wipe(&akey);
	if (r != 0) {
		kz_log(KZ_LOG_ERROR, "audit.open", r, why, NULL);
		rc = r == KZ_ECRYPTO ? KZ_EXIT_REFUSED :
		    r == KZ_EEXIST   ? KZ_EXIT_UNAVAIL :
		                       KZ_EXIT_INTERNAL;
		goto out;
	}
	aud_store_stats(d.store, &d.st);
	if ((r = daemon_start(&d, c, why, sizeof(why))) != 0) {
		kz_log(KZ_LOG_ERROR, "audit.listen", r, why, NULL);
		rc = r == KZ_EEXIST ? KZ_EXIT_UNAVAIL : KZ_EXIT_INTERNAL;
		goto out;
	}
	st = d.st;
	aud_file_name(st.file_idx, file, sizeof(file));
	snprintf(seq, sizeof(seq), "%llu", (unsigned long long)st.last_seq);
	if (st.truncated_bytes > 0)
		kz_log(KZ_LOG_WARN, "audit.recover", 0,
		    "cut what a crash left after the last sync, a torn "
		    "tail or a hole (kept in FILE.cut)",
		    "file", file, NULL);
	kz_log(KZ_LOG_INFO, "audit.start", 0, "serving", "file", file,
	    "last_seq", seq, NULL);
	if (kz_notify_ready("serving") != 0)
		kz_log(KZ_LOG_WARN, "audit.notify", KZ_ESYS,
		    "cannot tell the service manager it is ready", NULL);
	event_base_dispatch(d.base);
	(void)kz_notify_stopping();
out:
	daemon_stop(&d);
	pthread_mutex_destroy(&d.mu);
	pthread_cond_destroy(&d.cv);
	return rc;
}
