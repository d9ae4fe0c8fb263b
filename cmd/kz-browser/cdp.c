/*
 * Chromium's DevTools protocol, spoken through the worker's bridge: each
 * CDP message is one kz-protocol frame on the bridge's socket (the bridge
 * alone holds Chromium's pipe).  Calls are synchronous, on the session's
 * own thread (async.c), and end early when the session is stopped; the
 * page's events that arrive meanwhile are remembered by name only, which
 * is all the navigation's serialisation needs, so no page content is ever
 * kept.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kzb.h"
#include "banned.h"

#define CDP_MSG_MAX (32u << 20)

void
kzb_cdp_forget(struct kzb_cdp *c)
{
	c->nev = 0;
}

/* One message to a target's session without waiting for its answer
 * (answers to ids nobody waits for are dropped by the loops below); its
 * id, or 0 when it could not be sent. */
static int64_t
send_to(struct kzb_cdp *c, const char *sid, const char *method, cJSON *params)
{
	cJSON *req = cJSON_CreateObject();
	int64_t id = ++c->next_id;

	if (req == NULL) {
		cJSON_Delete(params);
		return 0;
	}
	cJSON_AddNumberToObject(req, "id", (double)id);
	cJSON_AddStringToObject(req, "method", method);
	cJSON_AddItemToObject(req, "params",
	    params != NULL ? params : cJSON_CreateObject());
	cJSON_AddStringToObject(req, "sessionId", sid);
	if (c->dead || kz_frame_write(c->fd, req, CDP_MSG_MAX, 2000) != 0) {
		c->dead = true;
		id = 0;
	}
	cJSON_Delete(req);
	return id;
}

static cJSON *
auto_attach(void)
{
	cJSON *p = cJSON_CreateObject();

	cJSON_AddBoolToObject(p, "autoAttach", true);
	cJSON_AddBoolToObject(p, "waitForDebuggerOnStart", true);
	cJSON_AddBoolToObject(p, "flatten", true);
	return p;
}

/*
 * A target Chromium paused for us (auto-attach): a page (the session's
 * own, a popup) or an out-of-process frame gets the script before its
 * first document runs, and the same auto-attach for its own frames; then
 * every paused target, whatever it is, is let go.  Messages on the pipe
 * are handled in order, so the script is in place before the target runs.
 */
static void
attached(struct kzb_cdp *c, const cJSON *params)
{
	const cJSON *sid = kz_json_get(params, "sessionId");
	const cJSON *info = kz_json_get(params, "targetInfo");
	const cJSON *type = kz_json_get(info, "type");
	cJSON *p;

	if (!cJSON_IsString(sid) ||
	    !cJSON_IsTrue(kz_json_get(params, "waitingForDebugger")))
		return;
	if (cJSON_IsString(type) &&
	    (strcmp(type->valuestring, "page") == 0 ||
	        strcmp(type->valuestring, "iframe") == 0)) {
		/* Blink evaluates the script only while Page is enabled. */
		send_to(c, sid->valuestring, "Page.enable", NULL);
		p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "source", c->inject);
		cJSON_AddBoolToObject(p, "runImmediately", true);
		send_to(c, sid->valuestring,
		    "Page.addScriptToEvaluateOnNewDocument", p);
		send_to(c, sid->valuestring, "Target.setAutoAttach",
		    auto_attach());
	}
	send_to(c, sid->valuestring, "Runtime.runIfWaitingForDebugger", NULL);
}

static void
note_event(struct kzb_cdp *c, const cJSON *m)
{
	const cJSON *meth = kz_json_get(m, "method");
	const cJSON *from = kz_json_get(m, "sessionId");

	if (!cJSON_IsString(meth))
		return;
	if (c->inject != NULL &&
	    strcmp(meth->valuestring, "Target.attachedToTarget") == 0)
		attached(c, kz_json_get(m, "params"));
	/* A page's alert, confirm, prompt or beforeunload dialog would hold
	 * every later call on it (a screenshot, a viewer's frame) until the
	 * call's timeout: each is dismissed as it opens. */
	if (strcmp(meth->valuestring, "Page.javascriptDialogOpening") == 0 &&
	    cJSON_IsString(from)) {
		cJSON *p = cJSON_CreateObject();

		cJSON_AddBoolToObject(p, "accept", false);
		send_to(c, from->valuestring, "Page.handleJavaScriptDialog", p);
	}
	/* Only the session's own page and the browser count: a popup's or
	 * a frame's events are not the page's. */
	if (cJSON_IsString(from) && c->target_sid[0] != '\0' &&
	    strcmp(from->valuestring, c->target_sid) != 0)
		return;
	if (strcmp(meth->valuestring, "Inspector.targetCrashed") == 0 ||
	    strcmp(meth->valuestring, "Target.targetCrashed") == 0)
		c->crashed = true;
	if (c->nev < KZB_EV_MAX)
		snprintf(c->ev[c->nev++], sizeof(c->ev[0]), "%s",
		    meth->valuestring);
}

static bool
seen(struct kzb_cdp *c, const char *method)
{
	for (int i = 0; i < c->nev; i++)
		if (strcmp(c->ev[i], method) == 0)
			return true;
	return false;
}

/* A message's id (0: an event, which has none). */
static int64_t
id_of(const cJSON *m)
{
	const cJSON *id = kz_json_get(m, "id");

	return cJSON_IsNumber(id) ? (int64_t)id->valuedouble : 0;
}

/* One message from the bridge within the deadline. */
static int
next(struct kzb_cdp *c, int64_t deadline, cJSON **m, char *why, size_t wlen)
{
	int64_t left = deadline - kz_now_ms();
	struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
	    {.fd = c->stop_fd, .events = POLLIN}};
	int e;

	*m = NULL;
	if (c->dead)
		return KZ_EUNAVAIL;
	if (left <= 0 || poll(p, 2, (int)left) == 0) {
		kz_why(why, wlen, "the browser did not answer in time");
		return KZ_ETIMEDOUT;
	}
	/* The session is being ended: nothing waits on its page any more. */
	if (p[1].revents & POLLIN) {
		kz_why(why, wlen, "the session was closed");
		return KZ_EUNAVAIL;
	}
	if ((e = kz_frame_read(c->fd, CDP_MSG_MAX, (int)(left > 0 ? left : 1),
	         m, NULL, 0)) != 0) {
		c->dead = true;
		kz_why(why, wlen, "the browser stopped");
		return KZ_EUNAVAIL;
	}
	return 0;
}

int
kzb_cdp_call(struct kzb_cdp *c, const char *method, cJSON *params, bool page,
    int64_t timeout_ms, cJSON **result, char *why, size_t wlen)
{
	int64_t deadline = kz_now_ms() + timeout_ms, id = ++c->next_id;
	cJSON *req = cJSON_CreateObject(), *m = NULL;
	int e;

	*result = NULL;
	if (req == NULL) {
		cJSON_Delete(params);
		return KZ_ENOMEM;
	}
	cJSON_AddNumberToObject(req, "id", (double)id);
	cJSON_AddStringToObject(req, "method", method);
	cJSON_AddItemToObject(req, "params",
	    params != NULL ? params : cJSON_CreateObject());
	if (page)
		cJSON_AddStringToObject(req, "sessionId", c->target_sid);
	e = c->dead ? KZ_EUNAVAIL :
	              kz_frame_write(c->fd, req, CDP_MSG_MAX, (int)timeout_ms);
	cJSON_Delete(req);
	if (e != 0) {
		c->dead = true;
		kz_why(why, wlen, "the browser stopped");
		return KZ_EUNAVAIL;
	}
	for (;;) {
		if ((e = next(c, deadline, &m, why, wlen)) != 0) {
			/* The page may still answer once it is unstuck. */
			if (e == KZ_ETIMEDOUT && page)
				c->late_id = id;
			return e;
		}
		if (id_of(m) == id)
			break;
		note_event(c, m);
		cJSON_Delete(m);
		/* A page whose renderer went (the session's memory limit
		 * killed it) never answers: not a wait until the timeout. */
		if (c->crashed) {
			kz_why(why, wlen, "the page crashed");
			return KZ_EUNAVAIL;
		}
	}
	return kzb_cdp_answer(m, result, why, wlen);
}

int
kzb_cdp_answer(cJSON *m, cJSON **result, char *why, size_t wlen)
{
	const cJSON *err;

	*result = NULL;
	if ((err = kz_json_get(m, "error")) != NULL) {
		const cJSON *msg = kz_json_get(err, "message");

		kz_why(why, wlen, "the browser refused it: %.120s",
		    cJSON_IsString(msg) ? msg->valuestring : "error");
		cJSON_Delete(m);
		return KZ_EDENIED;
	}
	*result = cJSON_DetachItemFromObjectCaseSensitive(m, "result");
	cJSON_Delete(m);
	if (*result == NULL)
		*result = cJSON_CreateObject();
	return *result != NULL ? 0 : KZ_ENOMEM;
}

int
kzb_cdp_wait(struct kzb_cdp *c, const char *method, int64_t timeout_ms,
    char *why, size_t wlen)
{
	int64_t deadline = kz_now_ms() + timeout_ms;
	cJSON *m;
	int e;

	while (!seen(c, method)) {
		if ((e = next(c, deadline, &m, why, wlen)) != 0)
			return e;
		note_event(c, m);
		cJSON_Delete(m);
		if (c->crashed) {
			kz_why(why, wlen, "the page crashed");
			return KZ_EUNAVAIL;
		}
	}
	return 0;
}

int
kzb_cdp_drain(struct kzb_cdp *c)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	cJSON *m;

	while (!c->dead && poll(&p, 1, 0) == 1) {
		if (next(c, kz_now_ms() + 1000, &m, NULL, 0) != 0)
			break;
		note_event(c, m);
		cJSON_Delete(m);
		/* Only names are kept; a long idle stream is not. */
		if (c->nev == KZB_EV_MAX)
			kzb_cdp_forget(c);
	}
	return c->dead ? KZ_EUNAVAIL : 0;
}

int
kzb_cdp_page(struct kzb_cdp *c, int64_t timeout_ms, char *why, size_t wlen)
{
	cJSON *p = cJSON_CreateObject(), *r = NULL;
	const cJSON *v;
	int e;

	/* With a script to inject, every new target waits for it. */
	if (c->inject != NULL) {
		if ((e = kzb_cdp_call(c, "Target.setAutoAttach", auto_attach(),
		         false, timeout_ms, &r, why, wlen)) != 0) {
			cJSON_Delete(p);
			return e;
		}
		cJSON_Delete(r);
		r = NULL;
	}
	cJSON_AddStringToObject(p, "url", "about:blank");
	if ((e = kzb_cdp_call(c, "Target.createTarget", p, false, timeout_ms,
	         &r, why, wlen)) != 0)
		return e;
	v = kz_json_get(r, "targetId");
	snprintf(c->target_id, sizeof(c->target_id), "%s",
	    cJSON_IsString(v) ? v->valuestring : "");
	p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "targetId", c->target_id);
	cJSON_AddBoolToObject(p, "flatten", true);
	cJSON_Delete(r);
	if ((e = kzb_cdp_call(c, "Target.attachToTarget", p, false, timeout_ms,
	         &r, why, wlen)) != 0)
		return e;
	v = kz_json_get(r, "sessionId");
	if (!cJSON_IsString(v) ||
	    strlen(v->valuestring) >= sizeof(c->target_sid)) {
		cJSON_Delete(r);
		kz_why(why, wlen, "the browser gave no page");
		return KZ_EPROTO;
	}
	snprintf(c->target_sid, sizeof(c->target_sid), "%s", v->valuestring);
	cJSON_Delete(r);
	if ((e = kzb_cdp_call(c, "Page.enable", NULL, true, timeout_ms, &r, why,
	         wlen)) == 0)
		cJSON_Delete(r);
	return e;
}

/* A trivial evaluation of our own in the page's main world: its answer
 * says the page's main thread runs again. */
static int64_t
probe(struct kzb_cdp *c)
{
	cJSON *p = cJSON_CreateObject();

	cJSON_AddStringToObject(p, "expression", "0");
	return send_to(c, c->target_sid, "Runtime.evaluate", p);
}

/* Waits for the answer to id, keeping the late call's answer if it comes
 * (which is the wait's end when id is the late call's). */
static int
await_id(struct kzb_cdp *c, int64_t id, int64_t deadline, cJSON **late,
    char *why, size_t wlen)
{
	cJSON *m;
	int64_t mid;
	int e;

	for (;;) {
		if ((e = next(c, deadline, &m, why, wlen)) != 0)
			return e;
		if ((mid = id_of(m)) != 0 && mid == c->late_id &&
		    *late == NULL) {
			*late = m;
			if (id == mid)
				return 0;
			continue;
		}
		if (mid != 0 && mid == id) {
			cJSON_Delete(m);
			return 0;
		}
		note_event(c, m);
		cJSON_Delete(m);
		if (c->crashed) {
			kz_why(why, wlen, "the page crashed");
			return KZ_EUNAVAIL;
		}
	}
}

/*
 * Runtime.terminateExecution is documented to terminate the script that
 * runs then or, if none does, the next one to start, which would be our
 * own next evaluation (the agent's look at the page).  (Chromium 156, as
 * tried, spends a termination that finds the page idle at once, but that
 * is not promised.)  So a first probe asks whether the page's main thread
 * is busy at all, and only a page that does not answer it has its
 * scripts terminated; a second probe follows the termination and is
 * answered either way, by running (the page's script was terminated) or
 * by being terminated itself (the termination is spent on it).  Its
 * answer is therefore the proof that no termination is left pending and
 * that the page answers again; a page whose scripts spin again at once
 * (a timer) does not answer it.  Chromium handles the termination while
 * the script runs; the calls queued behind the script (the timed-out one,
 * the probes) run after it, in order.
 */
int
kzb_cdp_unstick(struct kzb_cdp *c, int64_t busy_ms, int64_t wait_ms,
    bool may_stop, bool *stopped, cJSON **late, char *why, size_t wlen)
{
	int64_t id;
	int e;

	*stopped = false;
	*late = NULL;
	if ((id = probe(c)) == 0)
		e = KZ_EUNAVAIL;
	else
		e = await_id(c, id, kz_now_ms() + busy_ms, late, why, wlen);
	if (e == KZ_ETIMEDOUT && may_stop) {
		*stopped = true;
		if (send_to(c, c->target_sid, "Runtime.terminateExecution",
		        NULL) == 0 ||
		    (id = probe(c)) == 0)
			e = KZ_EUNAVAIL;
		else
			e = await_id(c, id, kz_now_ms() + wait_ms, late, why,
			    wlen);
	}
	/* A screenshot's answer may follow the page's by a frame. */
	if (e == 0 && *late == NULL && c->late_id != 0)
		(void)!await_id(c, c->late_id, kz_now_ms() + busy_ms, late,
		    NULL, 0);
	c->late_id = 0;
	if (e != 0) {
		cJSON_Delete(*late);
		*late = NULL;
	}
	if (e == KZ_EUNAVAIL && c->dead)
		kz_why(why, wlen, "the browser stopped");
	return e;
}

/*
 * Every page of the browser but the session's new one: the popups the
 * closed page (or one before it in the same tab) opened.  A popup with
 * its opener shares the opener's renderer and main thread, so a page can
 * keep its scripts spinning in a popup, where the close of the page alone
 * leaves them (and the renderer) running for as long as the session
 * lasts.  The member never sees a popup; it goes with the hung page.  A
 * popup gone meanwhile, or a list or close the browser refuses, costs
 * the session nothing: its new page is attached already (a browser that
 * stopped is noticed as ever, by c->dead).
 */
static void
close_popups(struct kzb_cdp *c, int64_t timeout_ms)
{
	cJSON *r = NULL, *p, *x;
	const cJSON *ti, *type, *id;
	char why[160];

	if (kzb_cdp_call(c, "Target.getTargets", NULL, false, timeout_ms, &r,
	        why, sizeof(why)) != 0)
		return;
	cJSON_ArrayForEach(ti, kz_json_get(r, "targetInfos"))
	{
		type = kz_json_get(ti, "type");
		id = kz_json_get(ti, "targetId");
		if (!cJSON_IsString(type) || !cJSON_IsString(id) ||
		    strcmp(type->valuestring, "page") != 0 ||
		    strcmp(id->valuestring, c->target_id) == 0)
			continue;
		if (c->dead || (p = cJSON_CreateObject()) == NULL)
			break;
		cJSON_AddStringToObject(p, "targetId", id->valuestring);
		if (kzb_cdp_call(c, "Target.closeTarget", p, false, timeout_ms,
		        &x, why, sizeof(why)) == 0)
			cJSON_Delete(x);
	}
	cJSON_Delete(r);
}

int
kzb_cdp_repage(struct kzb_cdp *c, int64_t timeout_ms, char *why, size_t wlen)
{
	cJSON *p = cJSON_CreateObject(), *r = NULL;
	int e;

	c->late_id = 0;
	cJSON_AddStringToObject(p, "targetId", c->target_id);
	/* From here no event of the old page's session is the session's
	 * page's: its renderer going with it is no crash of the page the
	 * session goes on with. */
	snprintf(c->target_sid, sizeof(c->target_sid), "%s", "(closed)");
	e = kzb_cdp_call(c, "Target.closeTarget", p, false, timeout_ms, &r, why,
	    wlen);
	cJSON_Delete(r);
	/* A target already gone (the browser refuses to close it) still
	 * gets its replacement. */
	if (e != 0 && e != KZ_EDENIED)
		return e;
	kzb_cdp_forget(c);
	/* The new page first: the browser is never left without one. */
	if ((e = kzb_cdp_page(c, timeout_ms, why, wlen)) == 0)
		close_popups(c, timeout_ms);
	return e;
}
