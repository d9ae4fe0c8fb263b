/*
 * The daemon: kz_srv's framed server with the op table of ops.c, the
 * sessions it holds (by id, in memory only: a session is a lease, not a
 * row), and a one-second tick that renews their leases, ends the ones
 * whose lease is gone, reaps the idle ones and takes the viewers'
 * frames.  The loop never waits on a browser: everything that does runs
 * on the session's own thread (async.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "kz_audit.h"
#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_srv.h"
#include "kz_wire.h"
#include "kzb.h"
#include "banned.h"

#define STOP_WAIT_S 15 /* sessions' ends at the daemon's stop */

int
kzb_audit(const struct kzb_conf *c, const char *kind,
    const struct kzb_session *s, const char *outcome, const char *reason,
    const char *action)
{
	cJSON *ev;
	char why[160], host[256] = "", origin[KZB_URL_MAX];
	int port, e;

	if (c->audit_sock[0] == '\0')
		return 0;
	ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "session", s->id);
	cJSON_AddStringToObject(ev, "actor", s->actor);
	cJSON_AddStringToObject(ev, "conversation", s->conv);
	cJSON_AddStringToObject(ev, "capability", "browser");
	if (s->worker[0] != '\0')
		cJSON_AddStringToObject(ev, "worker_id", s->worker);
	if (s->lease_id[0] != '\0')
		cJSON_AddStringToObject(ev, "lease_id", s->lease_id);
	if (kzb_url_origin(s->origin, origin, sizeof(origin), host,
	        sizeof(host), &port) == 0)
		cJSON_AddStringToObject(ev, "host", host);
	cJSON_AddStringToObject(ev, "outcome", outcome);
	if (reason != NULL)
		cJSON_AddStringToObject(ev, "reason", reason);
	if (action != NULL)
		cJSON_AddStringToObject(ev, "action", action);
	cJSON_AddNumberToObject(ev, "duration_ms",
	    (double)(kz_now_ms() - s->t0));
	e = kz_audit_send(c->audit_sock, kind, ev, KZ_AUDIT_TIMEOUT_MS, why,
	    sizeof(why));
	cJSON_Delete(ev);
	if (e != 0)
		kz_log(KZ_LOG_ERROR, "browser.audit", e, why, "kind", kind,
		    NULL);
	return e;
}

struct kzb_job *
kzb_job_new(struct kz_req *req, kzb_job_fn run, kzb_job_fn done)
{
	struct kzb_job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->req = req;
	j->run = run;
	j->done = done;
	return j;
}

void
kzb_job_free(struct kzb_job *j)
{
	if (j == NULL)
		return;
	cJSON_Delete(j->reply);
	free(j->png);
	free(j);
}

struct kzb_session *
kzb_find(struct kzb_daemon *d, const char *id)
{
	for (int64_t i = 0; i < d->c->sessions_max; i++)
		if (d->s[i] != NULL && d->s[i]->state == KZB_OPEN &&
		    strcmp(d->s[i]->id, id) == 0)
			return d->s[i];
	return NULL;
}

static int64_t
live(const struct kzb_daemon *d)
{
	int64_t n = 0;

	for (int64_t i = 0; d->s != NULL && i < d->c->sessions_max; i++)
		n += d->s[i] != NULL;
	return n;
}

/* On the session's thread: Chromium goes with the bridge, then the
 * lease, then the record of why. */
static void
end_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;

	kzb_session_end(d->c, j->s);
	(void)!kzb_audit(d->c, j->kind, j->s, j->outcome,
	    j->reason[0] ? j->reason : NULL, NULL);
}

/* A member's close is answered once the session is gone, profile and
 * lease included. */

static void
end_done(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	struct kzb_session *s = j->s;

	if (j->req != NULL && j->o.code != NULL)
		kz_req_err(j->req, j->o.code, j->reason);
	else if (j->req != NULL)
		kz_req_ok(j->req, NULL);
	kzb_job_free(j);
	kzb_thread_free(s);
	for (int64_t i = 0; i < d->c->sessions_max; i++)
		if (d->s[i] == s)
			d->s[i] = NULL;
	free(s);
	if (d->stopping && live(d) == 0)
		event_base_loopbreak(d->base);
}

void
kzb_finish_req(struct kzb_daemon *d, struct kzb_session *s, const char *kind,
    const char *outcome, const char *reason, struct kz_req *req,
    const char *code)
{
	struct kzb_job *j;

	if (s->state == KZB_CLOSING) {
		if (req != NULL)
			kz_req_err(req, KZ_WE_NOT_OWNER,
			    "no such browser session");
		return;
	}
	s->state = KZB_CLOSING;
	kzb_view_close(s, false);
	kzb_thread_stop(s);
	if ((j = kzb_job_new(req, end_run, end_done)) == NULL) {
		/* The session is left to the daemon's stop; its bridge is
		 * already told to end. */
		kz_log(KZ_LOG_ERROR, "browser.end", KZ_ENOMEM,
		    "out of memory ending a session", NULL);
		if (req != NULL)
			kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	j->last = true;
	j->o.code = code;
	j->kind = kind;
	j->outcome = outcome;
	snprintf(j->reason, sizeof(j->reason), "%s", reason ? reason : "");
	kzb_thread_push(s, j);
}

void
kzb_finish(struct kzb_daemon *d, struct kzb_session *s, const char *kind,
    const char *outcome, const char *reason)
{
	kzb_finish_req(d, s, kind, outcome, reason, NULL, NULL);
}

/* The viewers' picture, taken on the thread. */
static void
frame_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;

	j->rc = kzb_session_screenshot(d->c, j->s, &j->png, &j->o);
}

static void
frame_done(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	struct kzb_session *s = j->s;

	s->frame_pending = false;
	if (s->state == KZB_OPEN) {
		if (j->rc == 0)
			kzb_view_send(s, j->png);
		else if (j->dead)
			(void)kzb_browser_gone(d, s, j->o.why);
	}
	kzb_job_free(j);
}

static void
tick_one(struct kzb_daemon *d, struct kzb_session *s, int64_t now)
{
	struct kzb_job *j;

	if (!kzb_session_keep(d->c, s, false)) {
		d->reaped++;
		kzb_finish(d, s, "browser_reaped", "reaped", KZB_LEASE_ENDED);
	} else if (now - s->last_used > d->c->idle_s * 1000) {
		d->reaped++;
		kzb_finish(d, s, "browser_reaped", "reaped",
		    "the session was idle too long");
	} else if (kzb_view_any(s) && !s->frame_pending &&
	    (j = kzb_job_new(NULL, frame_run, frame_done)) != NULL) {
		s->frame_pending = true;
		kzb_thread_push(s, j);
	}
}

/* Every second: leases renewed, sessions whose lease is gone and idle
 * ones ended, viewers' frames taken. */
static void
tick(evutil_socket_t fd, short ev, void *arg)
{
	struct kzb_daemon *d = arg;
	int64_t now = kz_now_ms();

	for (int64_t i = 0; i < d->c->sessions_max; i++)
		if (d->s[i] != NULL && d->s[i]->state == KZB_OPEN)
			tick_one(d, d->s[i], now);
		else if (d->s[i] != NULL && d->s[i]->state == KZB_STARTING)
			/* Renewed while Chromium starts; a loss shows as the
			 * start failing. */
			(void)kzb_session_keep(d->c, d->s[i], false);
}

/* The thread saw the bridge close while the session was idle. */
static void
dead_done(void *ctx, struct kzb_job *j)
{
	struct kzb_session *s = j->s;

	if (s->state == KZB_OPEN)
		(void)kzb_browser_gone(ctx, s, j->o.why);
	kzb_job_free(j);
}

static struct kzb_session *
find_session(void *arg, const char *id)
{
	return kzb_find(arg, id);
}

static void
on_signal(evutil_socket_t fd, short ev, void *arg)
{
	struct kzb_daemon *d = arg;
	struct timeval wait = {STOP_WAIT_S, 0};

	if (d->stopping)
		return;
	d->stopping = true;
	/* Every session ends with the daemon: nothing of it outlives us.
	 * The loop runs on until their ends are done, within a bound. */
	for (int64_t i = 0; i < d->c->sessions_max; i++)
		if (d->s[i] != NULL && d->s[i]->state == KZB_OPEN)
			kzb_finish(d, d->s[i], "browser_close", "closed",
			    "the browser service stopped");
	if (live(d) == 0)
		event_base_loopbreak(d->base);
	else
		event_base_loopexit(d->base, &wait);
}

static int
listen_all(struct kzb_daemon *d, struct kz_srv **srv, struct kzb_view **view)
{
	struct kz_srv_conf sc = {0};
	char why[200];

	sc.sock_path = d->c->sock;
	/* A request is small (the largest, 64 input events, is well under
	 * the default); a reply may hold a screenshot.  A request frame as
	 * large as a reply would be parsed on the loop, which would hold
	 * every session (and its lease renewals) for as long. */
	sc.frame_max = KZ_FRAME_MAX_DEFAULT;
	sc.reply_max = KZB_REPLY_MAX;
	sc.io_timeout_ms = (int)d->c->io_timeout_ms;
	sc.idle_timeout_ms = 600000;
	sc.peers = d->c->peers;
	sc.operators = d->c->operators;
	sc.ops = kzb_ops;
	sc.arg = d;
	if (kz_srv_new(d->base, &sc, srv, why, sizeof(why)) != 0 ||
	    kzb_view_new(d->base, d->c, find_session, d, view, why,
	        sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "browser.listen", KZ_ESYS, why, NULL);
		return KZ_ESYS;
	}
	return 0;
}

int
kzb_serve(struct kzb_conf *c)
{
	struct kzb_daemon d = {.c = c};
	struct event *sigs[2] = {NULL, NULL}, *tk = NULL;
	struct timeval sec = {1, 0};
	struct kz_srv *srv = NULL;
	struct kzb_view *view = NULL;
	int rc = KZ_EXIT_INTERNAL;

	if ((d.s = calloc((size_t)c->sessions_max, sizeof(*d.s))) == NULL)
		return KZ_EXIT_INTERNAL;
	signal(SIGPIPE, SIG_IGN);
	if ((d.base = event_base_new()) == NULL ||
	    kzb_async_new(d.base, &d, dead_done, &d.async) != 0)
		goto out;
	if (listen_all(&d, &srv, &view) != 0) {
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	sigs[0] = evsignal_new(d.base, SIGTERM, on_signal, &d);
	sigs[1] = evsignal_new(d.base, SIGINT, on_signal, &d);
	tk = event_new(d.base, -1, EV_PERSIST, tick, &d);
	if (sigs[0] == NULL || sigs[1] == NULL || tk == NULL ||
	    evsignal_add(sigs[0], NULL) || evsignal_add(sigs[1], NULL) ||
	    event_add(tk, &sec))
		goto out;
	kz_log(KZ_LOG_INFO, "browser.start", 0,
	    c->enabled ? "serving" : "serving; browser sessions are off",
	    "socket", c->sock, NULL);
	if (kz_notify_ready("serving") != 0)
		kz_log(KZ_LOG_WARN, "browser.notify", KZ_ESYS,
		    "cannot tell the service manager it is ready", NULL);
	event_base_dispatch(d.base);
	(void)kz_notify_stopping();
	kz_log(KZ_LOG_INFO, "browser.stop", 0,
	    live(&d) == 0 ? "stopped" : "stopped with sessions still ending",
	    NULL);
	rc = KZ_EXIT_OK;
out:
	if (tk != NULL)
		event_free(tk);
	for (int i = 0; i < 2; i++)
		if (sigs[i] != NULL)
			event_free(sigs[i]);
	kzb_view_free(view);
	/* A session still ending holds a thread: the process is exiting, so
	 * its memory and the async queue it posts to are left for it. */
	if (live(&d) == 0) {
		kz_srv_free(srv);
		kzb_async_free(d.async);
		free(d.s);
		if (d.base != NULL)
			event_base_free(d.base);
	}
	return rc;
}
