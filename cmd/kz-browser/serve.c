/*
 * The daemon: kz_srv's framed server, a const op table, the sessions it
 * holds (by id, in memory only: a session is a lease, not a row) and a
 * one-second tick that renews their leases, notices a browser that
 * stopped and reaps the idle ones.  Ops run one at a time; a navigation
 * holds the loop until its page stopped loading (kz-browser(8), BUGS).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "kz_audit.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_srv.h"
#include "kz_wire.h"
#include "kzb.h"
#include "banned.h"

struct daemon {
	struct kzb_conf *c;
	struct kzb_session **s; /* sessions_max slots */
	unsigned long opened, closed, reaped, failed;
};

/* An audit record of kind; 0 once it is durable (or audit is off). */
static int
audit_act(struct daemon *d, const char *kind, const struct kzb_session *s,
    const char *outcome, const char *reason, const char *action)
{
	cJSON *ev = cJSON_CreateObject();
	char why[160], host[256] = "", origin[KZB_URL_MAX];
	int port, e;

	if (d->c->audit_sock[0] == '\0') {
		cJSON_Delete(ev);
		return 0;
	}
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
	e = kz_audit_send(d->c->audit_sock, kind, ev, KZ_AUDIT_TIMEOUT_MS, why,
	    sizeof(why));
	cJSON_Delete(ev);
	if (e != 0)
		kz_log(KZ_LOG_ERROR, "browser.audit", e, why, "kind", kind,
		    NULL);
	return e;
}

static int
audit(struct daemon *d, const char *kind, const struct kzb_session *s,
    const char *outcome, const char *reason)
{
	return audit_act(d, kind, s, outcome, reason, NULL);
}

static struct kzb_session **
slot_of(struct daemon *d, const char *id)
{
	for (int64_t i = 0; i < d->c->sessions_max; i++)
		if (d->s[i] != NULL && strcmp(d->s[i]->id, id) == 0)
			return &d->s[i];
	return NULL;
}

/* Ends the session in *slot with its audit record. */
static void
finish(struct daemon *d, struct kzb_session **slot, const char *kind,
    const char *outcome, const char *reason)
{
	struct kzb_session *s = *slot;

	kzb_view_close(s, false);
	kzb_session_end(d->c, s);
	(void)audit(d, kind, s, outcome, reason);
	free(s);
	*slot = NULL;
}

static void
op_open(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	const cJSON *j = kz_req_json(req);
	const char *actor, *conv, *url;
	struct kzb_session **slot = NULL, *s;
	struct kzb_out o = {0};
	cJSON *page = NULL, *r;

	if (!d->c->enabled) {
		kz_req_err(req, KZ_WE_REFUSED,
		    "browser sessions are turned off in this deployment");
		return;
	}
	if (kz_json_str(j, "actor", KZB_ID_MAX, &actor, NULL, 0) != 0 ||
	    kz_json_str(j, "conversation", KZB_ID_MAX, &conv, NULL, 0) != 0 ||
	    kz_json_str(j, "url", KZB_URL_MAX - 1, &url, NULL, 0) != 0 ||
	    *actor == '\0' || *conv == '\0') {
		kz_req_err(req, KZ_WE_BAD_REQUEST,
		    "open needs actor, conversation and url");
		return;
	}
	for (int64_t i = 0; i < d->c->sessions_max && slot == NULL; i++)
		if (d->s[i] == NULL)
			slot = &d->s[i];
	if (slot == NULL) {
		kz_req_err(req, KZ_WE_BUSY,
		    "as many browser sessions are open as this deployment "
		    "allows");
		return;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	*slot = s;
	for (int i = 0; i < KZB_VIEWERS_MAX; i++)
		s->view_fd[i] = -1;
	snprintf(s->actor, sizeof(s->actor), "%s", actor);
	snprintf(s->conv, sizeof(s->conv), "%s", conv);
	if (kzb_session_open(d->c, s, url, &o) != 0 ||
	    kzb_session_navigate(d->c, s, url, &page, &o) != 0) {
		d->failed++;
		finish(d, slot, "browser_failed", "failed", o.why);
		kz_req_err(req, o.code, o.why);
		return;
	}
	/* Audit is mandatory: a session whose opening is not on record is
	 * not served. */
	if (audit(d, "browser_open", s, "opened", NULL) != 0) {
		cJSON_Delete(page);
		kzb_session_end(d->c, s);
		free(s);
		*slot = NULL;
		kz_req_err(req, KZ_WE_UNAVAILABLE,
		    "the audit could not record the session");
		return;
	}
	d->opened++;
	r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "session", s->id);
	cJSON_AddItemToObject(r, "page", page);
	kz_req_ok(req, r);
}

/* The session a request names, or NULL after answering. */
static struct kzb_session **
named(struct daemon *d, struct kz_req *req)
{
	const char *id;
	struct kzb_session **slot;

	if (kz_json_str(kz_req_json(req), "session", KZB_SID_HEX, &id, NULL,
	        0) != 0 ||
	    (slot = slot_of(d, id)) == NULL) {
		kz_req_err(req, KZ_WE_NOT_OWNER, "no such browser session");
		return NULL;
	}
	/* Nothing goes to a worker whose lease is not known to hold. */
	if (!kzb_session_keep(d->c, *slot)) {
		d->failed++;
		finish(d, slot, "browser_failed", "failed",
		    "the session's lease ended");
		kz_req_err(req, KZ_WE_UNAVAILABLE, "the session's lease ended");
		return NULL;
	}
	return slot;
}

/* After an op failed: a browser that stopped ends the session. */
static void
failed(struct daemon *d, struct kzb_session **slot, struct kz_req *req,
    const struct kzb_out *o)
{
	if ((*slot)->cdp.dead || (*slot)->cdp.crashed) {
		d->failed++;
		finish(d, slot, "browser_failed", "failed", o->why);
	}
	kz_req_err(req, o->code, o->why);
}

static void
op_navigate(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);
	struct kzb_out o = {0};
	const char *url;
	cJSON *page = NULL, *r;

	if (slot == NULL)
		return;
	if (kz_json_str(kz_req_json(req), "url", KZB_URL_MAX - 1, &url, NULL,
	        0) != 0) {
		kz_req_err(req, KZ_WE_BAD_REQUEST, "navigate needs a url");
		return;
	}
	if (kzb_session_navigate(d->c, *slot, url, &page, &o) != 0) {
		failed(d, slot, req, &o);
		return;
	}
	r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "page", page);
	kz_req_ok(req, r);
}

/* The member's input: transit-only, so never in a log line, an audit
 * record or a reply. */
static void
op_input(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);
	struct kzb_out o = {0};

	if (slot == NULL)
		return;
	if (kzb_session_input(d->c, *slot,
	        kz_json_get(kz_req_json(req), "events"), &o) != 0) {
		failed(d, slot, req, &o);
		return;
	}
	kz_req_ok(req, NULL);
}

static void
op_screenshot(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);
	struct kzb_out o = {0};
	char *png = NULL;
	cJSON *r;

	if (slot == NULL)
		return;
	if (kzb_session_screenshot(d->c, *slot, &png, &o) != 0) {
		failed(d, slot, req, &o);
		return;
	}
	r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "png_b64", png);
	free(png);
	kz_req_ok(req, r);
}

static void
op_close(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);

	if (slot == NULL)
		return;
	d->closed++;
	finish(d, slot, "browser_close", "closed", NULL);
	kz_req_ok(req, NULL);
}

static void
op_status(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	cJSON *r = cJSON_CreateObject();
	int64_t n = 0;

	for (int64_t i = 0; i < d->c->sessions_max; i++)
		n += d->s[i] != NULL;
	cJSON_AddBoolToObject(r, "enabled", d->c->enabled);
	cJSON_AddNumberToObject(r, "sessions", (double)n);
	cJSON_AddNumberToObject(r, "opened", (double)d->opened);
	cJSON_AddNumberToObject(r, "closed", (double)d->closed);
	cJSON_AddNumberToObject(r, "reaped", (double)d->reaped);
	cJSON_AddNumberToObject(r, "failed", (double)d->failed);
	kz_req_ok(req, r);
}

/* Every second: leases renewed, stopped browsers and idle sessions
 * ended. */
static void
tick(evutil_socket_t fd, short ev, void *arg)
{
	struct daemon *d = arg;
	int64_t now = kz_now_ms();

	for (int64_t i = 0; i < d->c->sessions_max; i++) {
		struct kzb_session *s = d->s[i];

		if (s == NULL)
			continue;
		if (kzb_cdp_drain(&s->cdp) != 0 || s->cdp.crashed) {
			d->failed++;
			finish(d, &d->s[i], "browser_failed", "failed",
			    "the browser stopped; the session is closed");
		} else if (!kzb_session_keep(d->c, s)) {
			d->failed++;
			finish(d, &d->s[i], "browser_failed", "failed",
			    "the session's lease ended");
		} else if (now - s->last_used > d->c->idle_s * 1000) {
			d->reaped++;
			finish(d, &d->s[i], "browser_reaped", "reaped",
			    "the session was idle too long");
		} else
			kzb_view_frame(d->c, s);
	}
}

static void
op_agent_read(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);
	struct kzb_out o = {0};
	cJSON *r = NULL;

	if (slot == NULL)
		return;
	if (kzb_agent_read(d->c, *slot, &r, &o) != 0) {
		failed(d, slot, req, &o);
		return;
	}
	kz_req_ok(req, r);
}

static void
op_agent_propose(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);
	char id[KZB_SID_HEX + 1], summary[512];
	struct kzb_out o = {0};
	cJSON *r;

	if (slot == NULL)
		return;
	if (kzb_agent_propose(*slot, kz_json_get(kz_req_json(req), "action"),
	        id, summary, sizeof(summary), &o) != 0) {
		kz_req_err(req, o.code, o.why);
		return;
	}
	r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "confirmation", id);
	cJSON_AddStringToObject(r, "summary", summary);
	kz_req_ok(req, r);
}

static void
op_confirm(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);
	struct kzb_out o = {0};
	const char *id = cJSON_GetStringValue(
	    kz_json_get(kz_req_json(req), "confirmation"));

	if (slot == NULL)
		return;
	if (kzb_agent_confirm(*slot, id != NULL ? id : "", &o) != 0) {
		kz_req_err(req, o.code, o.why);
		return;
	}
	kz_req_ok(req, NULL);
}

struct act_ctx {
	struct daemon *d;
	struct kzb_session *s;
};

/* An approved action is on record before it takes effect. */
static int
act_audit(void *arg, const char *kind)
{
	struct act_ctx *x = arg;

	return audit_act(x->d, "browser_action", x->s, "approved", NULL, kind);
}

static void
op_agent_act(struct kz_req *req, void *arg)
{
	struct daemon *d = arg;
	struct kzb_session **slot = named(d, req);
	struct kzb_out o = {0};
	const cJSON *j = kz_req_json(req);
	struct act_ctx x;

	if (slot == NULL)
		return;
	x.d = d;
	x.s = *slot;
	if (kzb_agent_act(d->c, *slot,
	        cJSON_GetStringValue(kz_json_get(j, "confirmation")),
	        kz_json_get(j, "action"), act_audit, &x, &o) != 0) {
		failed(d, slot, req, &o);
		return;
	}
	kz_req_ok(req, NULL);
}

static void
private_set(struct kz_req *req, void *arg, bool on)
{
	struct kzb_session **slot = named(arg, req);

	if (slot == NULL)
		return;
	(*slot)->private_text = on;
	/* Every other viewer's connection is closed, not told to hide. */
	if (on)
		kzb_view_close(*slot, true);
	(*slot)->last_used = kz_now_ms();
	kz_req_ok(req, NULL);
}

static void
op_private_begin(struct kz_req *req, void *arg)
{
	private_set(req, arg, true);
}

static void
op_private_end(struct kz_req *req, void *arg)
{
	private_set(req, arg, false);
}

static struct kzb_session *
find_session(void *arg, const char *id)
{
	struct kzb_session **slot = slot_of(arg, id);

	return slot != NULL ? *slot : NULL;
}

static const char *const f_propose[] = {"session", "action", NULL};
static const char *const f_confirm[] = {"session", "confirmation", NULL};
static const char *const f_act[] = {"session", "confirmation", "action", NULL};
static const char *const f_open[] = {"actor", "conversation", "url", NULL};
static const char *const f_nav[] = {"session", "url", NULL};
static const char *const f_sess[] = {"session", NULL};
static const char *const f_input[] = {"session", "events", NULL};
static const char *const f_none[] = {NULL};

static const struct kz_op ops[] = {
    {"open", op_open, f_open, 0},
    {"navigate", op_navigate, f_nav, 0},
    {"input", op_input, f_input, 0},
    {"screenshot", op_screenshot, f_sess, 0},
    {"close", op_close, f_sess, 0},
    {"agent-read", op_agent_read, f_sess, 0},
    {"agent-propose", op_agent_propose, f_propose, 0},
    {"confirm", op_confirm, f_confirm, 0},
    {"agent-act", op_agent_act, f_act, 0},
    {"private-begin", op_private_begin, f_sess, 0},
    {"private-end", op_private_end, f_sess, 0},
    {"status", op_status, f_none, 0},
    {NULL, NULL, NULL, 0},
};

static void
on_signal(evutil_socket_t fd, short ev, void *arg)
{
	event_base_loopbreak(arg);
}

int
kzb_serve(struct kzb_conf *c)
{
	struct daemon d = {.c = c};
	struct kz_srv_conf sc = {0};
	struct event_base *base = NULL;
	struct event *sigs[2] = {NULL, NULL}, *tk = NULL;
	struct timeval sec = {1, 0};
	struct kz_srv *srv = NULL;
	struct kzb_view *view = NULL;
	char why[200];
	int rc = KZ_EXIT_INTERNAL;

	if ((d.s = calloc((size_t)c->sessions_max, sizeof(*d.s))) == NULL)
		return KZ_EXIT_INTERNAL;
	sc.sock_path = c->sock;
	sc.frame_max = 64u << 20;
	sc.io_timeout_ms = (int)c->io_timeout_ms;
	sc.idle_timeout_ms = 600000;
	sc.peers = c->peers;
	sc.operators = c->operators;
	sc.ops = ops;
	sc.arg = &d;
	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL)
		goto out;
	if (kz_srv_new(base, &sc, &srv, why, sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "browser.listen", KZ_ESYS, why, NULL);
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	if (kzb_view_new(base, c, find_session, &d, &view, why, sizeof(why)) !=
	    0) {
		kz_log(KZ_LOG_ERROR, "browser.listen", KZ_ESYS, why, NULL);
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	sigs[0] = evsignal_new(base, SIGTERM, on_signal, base);
	sigs[1] = evsignal_new(base, SIGINT, on_signal, base);
	tk = event_new(base, -1, EV_PERSIST, tick, &d);
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
	event_base_dispatch(base);
	(void)kz_notify_stopping();
	/* Every session ends with the daemon: nothing of it outlives us. */
	for (int64_t i = 0; i < c->sessions_max; i++)
		if (d.s[i] != NULL)
			finish(&d, &d.s[i], "browser_close", "closed",
			    "the browser service stopped");
	kz_log(KZ_LOG_INFO, "browser.stop", 0, "stopped", NULL);
	rc = KZ_EXIT_OK;
out:
	if (tk != NULL)
		event_free(tk);
	for (int i = 0; i < 2; i++)
		if (sigs[i] != NULL)
			event_free(sigs[i]);
	kzb_view_free(view);
	kz_srv_free(srv);
	if (base != NULL)
		event_base_free(base);
	free(d.s);
	return rc;
}
