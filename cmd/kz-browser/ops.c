/*
 * The op table.  Each handler runs on the loop: it checks the request,
 * finds the session and either answers at once (status, close, private
 * text) or queues a job on the session's thread (anything that talks to
 * the browser), answered when the job is done.  One session's slow page
 * therefore holds that session's queue only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_srv.h"
#include "kz_wire.h"
#include "kzb.h"
#include "banned.h"

#define PRIVATE_READ                                                           \
	"the agent cannot read the page while the member enters private text"

const char *
kzb_browser_gone(struct kzb_daemon *d, struct kzb_session *s, const char *why)
{
	/* The lease is asked first: a worker taken back explains a bridge
	 * that closed better than the bridge can. */
	if (!kzb_session_keep(d->c, s, true)) {
		d->reaped++;
		kzb_finish(d, s, "browser_reaped", "reaped", KZB_LEASE_ENDED);
		return KZB_LEASE_ENDED;
	}
	d->failed++;
	kzb_finish(d, s, "browser_failed", "failed", why);
	return why;
}

/* The session a request names (open, its lease holding), or NULL after
 * answering. */
static struct kzb_session *
named(struct kzb_daemon *d, struct kz_req *req)
{
	struct kzb_session *s;
	const char *id;

	if (kz_json_str(kz_req_json(req), "session", KZB_SID_HEX, &id, NULL,
	        0) != 0 ||
	    (s = kzb_find(d, id)) == NULL) {
		kz_req_err(req, KZ_WE_NOT_OWNER, "no such browser session");
		return NULL;
	}
	/* Nothing goes to a worker whose lease is not known to hold. */
	if (!kzb_session_keep(d->c, s, false)) {
		d->reaped++;
		kzb_finish(d, s, "browser_reaped", "reaped", KZB_LEASE_ENDED);
		kz_req_err(req, KZ_WE_UNAVAILABLE, KZB_LEASE_ENDED);
		return NULL;
	}
	s->last_used = kz_now_ms();
	return s;
}

/* The answer of a member's or the agent's op. */
static void
reply_done(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	struct kzb_session *s = j->s;

	if (s->state != KZB_OPEN)
		kz_req_err(j->req, KZ_WE_UNAVAILABLE, "the session was closed");
	else if (j->rc != 0 && j->dead)
		kz_req_err(j->req, j->o.code ? j->o.code : KZ_WE_UNAVAILABLE,
		    kzb_browser_gone(d, s, j->o.why));
	else if (j->rc != 0)
		kz_req_err(j->req, j->o.code ? j->o.code : KZ_WE_INTERNAL,
		    j->o.why);
	else {
		kz_req_ok(j->req, j->reply);
		j->reply = NULL;
	}
	kzb_job_free(j);
}

static void
queue(struct kzb_session *s, struct kz_req *req, kzb_job_fn run,
    kzb_job_fn done)
{
	struct kzb_job *j = kzb_job_new(req, run, done);

	if (j == NULL) {
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	kzb_thread_push(s, j);
}

/* ---- open ---- */

static void
lease_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	const char *url = cJSON_GetStringValue(
	    kz_json_get(kz_req_json(j->req), "url"));

	j->rc = kzb_session_open(d->c, j->s, url, &j->o);
}

static void
start_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	struct kzb_session *s = j->s;
	const char *url = cJSON_GetStringValue(
	    kz_json_get(kz_req_json(j->req), "url"));
	cJSON *page = NULL;

	if ((j->rc = kzb_session_start(d->c, s, &j->o)) != 0 ||
	    (j->rc = kzb_session_navigate(d->c, s, url, &page, &j->o)) != 0)
		return;
	/* Audit is mandatory: a session whose opening is not on record is
	 * not served. */
	if (kzb_audit(d->c, "browser_open", s, "opened", NULL, NULL) != 0) {
		cJSON_Delete(page);
		j->rc = KZ_EUNAVAIL;
		j->o.code = KZ_WE_UNAVAILABLE;
		snprintf(j->o.why, sizeof(j->o.why),
		    "the audit could not record the session");
		return;
	}
	j->reply = cJSON_CreateObject();
	cJSON_AddStringToObject(j->reply, "session", s->id);
	cJSON_AddItemToObject(j->reply, "page", page);
}

static void open_done(void *ctx, struct kzb_job *j);

/* The lease is held: from here the loop renews it while Chromium starts
 * (KZB_STARTING), on the same thread's next job. */
static void
lease_done(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;

	if (j->rc == 0 && !d->stopping) {
		j->s->state = KZB_STARTING;
		j->run = start_run;
		j->done = open_done;
		kzb_thread_push(j->s, j);
		return;
	}
	open_done(ctx, j);
}

static void
open_done(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	struct kzb_session *s = j->s;

	if (j->rc == 0 && !d->stopping) {
		s->state = KZB_OPEN;
		s->last_used = kz_now_ms();
		d->opened++;
		kz_req_ok(j->req, j->reply);
		j->reply = NULL;
	} else if (j->rc == 0) {
		kzb_finish(d, s, "browser_close", "closed",
		    "the browser service stopped");
		kz_req_err(j->req, KZ_WE_UNAVAILABLE,
		    "the browser service is stopping");
	} else {
		/* Answered once the failure is on record. */
		d->failed++;
		kzb_finish_req(d, s, "browser_failed", "failed", j->o.why,
		    j->req, j->o.code ? j->o.code : KZ_WE_INTERNAL);
	}
	kzb_job_free(j);
}

static struct kzb_session **
free_slot(struct kzb_daemon *d)
{
	for (int64_t i = 0; i < d->c->sessions_max; i++)
		if (d->s[i] == NULL)
			return &d->s[i];
	return NULL;
}

/* Sessions one actor holds: at most a quarter of BROWSER_SESSIONS_MAX
 * (at least one), so one member cannot take every place. */
static bool
actor_full(const struct kzb_daemon *d, const char *actor)
{
	int64_t n = 0, cap = d->c->sessions_max / 4;

	for (int64_t i = 0; i < d->c->sessions_max; i++)
		n += d->s[i] != NULL && strcmp(d->s[i]->actor, actor) == 0;
	return n >= (cap > 0 ? cap : 1);
}

static void
op_open(struct kz_req *req, void *arg)
{
	struct kzb_daemon *d = arg;
	const cJSON *j = kz_req_json(req);
	const char *actor, *conv, *url;
	struct kzb_session **slot, *s;

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
	if (d->stopping || (slot = free_slot(d)) == NULL) {
		kz_req_err(req, KZ_WE_BUSY,
		    "as many browser sessions are open as this deployment "
		    "allows");
		return;
	}
	if (actor_full(d, actor)) {
		kz_req_err(req, KZ_WE_BUSY,
		    "this member holds as many browser sessions as one may");
		return;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	s->cdp.fd = -1;
	s->state = KZB_OPENING;
	snprintf(s->actor, sizeof(s->actor), "%s", actor);
	snprintf(s->conv, sizeof(s->conv), "%s", conv);
	if (kzb_thread_start(d->async, s) != 0) {
		kzb_thread_free(s);
		free(s);
		kz_req_err(req, KZ_WE_INTERNAL,
		    "the session's thread could not start");
		return;
	}
	*slot = s;
	queue(s, req, lease_run, lease_done);
}

/* ---- the member's ops ---- */

static void
navigate_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	const char *url = cJSON_GetStringValue(
	    kz_json_get(kz_req_json(j->req), "url"));
	cJSON *page = NULL;

	if ((j->rc = kzb_session_navigate(d->c, j->s, url, &page, &j->o)) ==
	    0) {
		j->reply = cJSON_CreateObject();
		cJSON_AddItemToObject(j->reply, "page", page);
	}
}

static void
op_navigate(struct kz_req *req, void *arg)
{
	struct kzb_session *s = named(arg, req);
	struct kzb_out o;

	if (s == NULL)
		return;
	if (!cJSON_IsString(kz_json_get(kz_req_json(req), "url")) ||
	    strlen(cJSON_GetStringValue(
	        kz_json_get(kz_req_json(req), "url"))) >= KZB_URL_MAX) {
		kz_req_err(req, KZ_WE_BAD_REQUEST, "navigate needs a url");
		return;
	}
	if (kzb_nav_check(cJSON_GetStringValue(
	                      kz_json_get(kz_req_json(req), "url")),
	        &o) != 0) {
		kz_req_err(req, o.code, o.why);
		return;
	}
	queue(s, req, navigate_run, reply_done);
}

/* The member's input: transit-only, so never in a log line, an audit
 * record or a reply. */
static void
input_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;

	j->rc = kzb_session_input(d->c, j->s,
	    kz_json_get(kz_req_json(j->req), "events"), &j->o);
}

static void
op_input(struct kz_req *req, void *arg)
{
	struct kzb_session *s = named(arg, req);

	if (s != NULL)
		queue(s, req, input_run, reply_done);
}

static void
screenshot_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;
	char *png = NULL;

	if ((j->rc = kzb_session_screenshot(d->c, j->s, &png, &j->o)) == 0) {
		j->reply = cJSON_CreateObject();
		cJSON_AddStringToObject(j->reply, "png_b64", png);
	}
	free(png);
}

static void
op_screenshot(struct kz_req *req, void *arg)
{
	struct kzb_session *s = named(arg, req);

	if (s != NULL)
		queue(s, req, screenshot_run, reply_done);
}

static void
op_close(struct kz_req *req, void *arg)
{
	struct kzb_daemon *d = arg;
	struct kzb_session *s = named(d, req);

	if (s == NULL)
		return;
	d->closed++;
	kzb_finish_req(d, s, "browser_close", "closed", NULL, req, NULL);
}

static void
private_set(struct kz_req *req, void *arg, bool on)
{
	struct kzb_session *s = named(arg, req);

	if (s == NULL)
		return;
	/* At once, whatever the session's thread is doing: every other
	 * viewer's connection is closed, not told to hide. */
	atomic_store(&s->private_text, on);
	if (on)
		kzb_view_close(s, true);
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

static void
op_status(struct kz_req *req, void *arg)
{
	struct kzb_daemon *d = arg;
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

/* ---- the agent's ops ---- */

static void
read_run(void *ctx, struct kzb_job *j)
{
	struct kzb_daemon *d = ctx;

	j->rc = kzb_agent_read(d->c, j->s, &j->reply, &j->o);
}

/* A tree read while private text began is not handed over. */
static void
read_done(void *ctx, struct kzb_job *j)
{
	if (j->rc == 0 && atomic_load(&j->s->private_text)) {
		cJSON_Delete(j->reply);
		j->reply = NULL;
		j->rc = KZ_EDENIED;
		j->o.code = KZ_WE_REFUSED;
		snprintf(j->o.why, sizeof(j->o.why), "%s", PRIVATE_READ);
	}
	reply_done(ctx, j);
}

static void
op_agent_read(struct kz_req *req, void *arg)
{
	struct kzb_session *s = named(arg, req);

	if (s != NULL)
		queue(s, req, read_run, read_done);
}

static void
propose_run(void *ctx, struct kzb_job *j)
{
	char id[KZB_SID_HEX + 1], summary[512];

	(void)ctx;
	if ((j->rc = kzb_agent_propose(j->s,
	         kz_json_get(kz_req_json(j->req), "action"), id, summary,
	         sizeof(summary), &j->o)) == 0) {
		j->reply = cJSON_CreateObject();
		cJSON_AddStringToObject(j->reply, "confirmation", id);
		cJSON_AddStringToObject(j->reply, "summary", summary);
	}
}

static void
op_agent_propose(struct kz_req *req, void *arg)
{
	struct kzb_session *s = named(arg, req);

	if (s != NULL)
		queue(s, req, propose_run, reply_done);
}

static void
confirm_run(void *ctx, struct kzb_job *j)
{
	const char *id = cJSON_GetStringValue(
	    kz_json_get(kz_req_json(j->req), "confirmation"));

	(void)ctx;
	j->rc = kzb_agent_confirm(j->s, id != NULL ? id : "", &j->o);
}

static void
op_confirm(struct kz_req *req, void *arg)
{
	struct kzb_session *s = named(arg, req);

	if (s != NULL)
		queue(s, req, confirm_run, reply_done);
}

struct act_ctx {
	struct kzb_daemon *d;
	struct kzb_session *s;
};

/* An approved action is on record before it takes effect. */
static int
act_audit(void *arg, const char *kind)
{
	struct act_ctx *x = arg;

	return kzb_audit(x->d->c, "browser_action", x->s, "approved", NULL,
	    kind);
}

static void
act_run(void *ctx, struct kzb_job *j)
{
	struct act_ctx x = {ctx, j->s};
	const cJSON *r = kz_req_json(j->req);

	j->rc = kzb_agent_act(x.d->c, j->s,
	    cJSON_GetStringValue(kz_json_get(r, "confirmation")),
	    kz_json_get(r, "action"), act_audit, &x, &j->o);
}

static void
op_agent_act(struct kz_req *req, void *arg)
{
	struct kzb_session *s = named(arg, req);

	if (s != NULL)
		queue(s, req, act_run, reply_done);
}

static const char *const f_propose[] = {"session", "action", NULL};
static const char *const f_confirm[] = {"session", "confirmation", NULL};
static const char *const f_act[] = {"session", "confirmation", "action", NULL};
static const char *const f_open[] = {"actor", "conversation", "url", NULL};
static const char *const f_nav[] = {"session", "url", NULL};
static const char *const f_sess[] = {"session", NULL};
static const char *const f_input[] = {"session", "events", NULL};
static const char *const f_none[] = {NULL};

const struct kz_op kzb_ops[] = {
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
