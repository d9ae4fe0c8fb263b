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
 *
 * This file holds the daemon's start and stop, the writer thread and the
 * acknowledgements; ops.c holds the ops the loop serves (append, status,
 * ping) and the refusal counters.
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

#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_srv.h"
#include "audit.h"
#include "banned.h"

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
		aud_job_free(j);
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
	sc.ops = aud_ops;
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
