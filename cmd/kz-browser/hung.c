/*
 * A page that keeps its main thread busy (a script that spins, once or
 * from a timer) answers none of our calls, and every op of the session
 * would wait its whole bound and fail, again and again.  So every call on
 * the session's page goes through here: a call that times out has the
 * page's scripts stopped (cdp.c, kzb_cdp_unstick) and still gets its
 * answer if the page gives it then; a page that does not answer even
 * after that, or that needs stopping a second time before the next
 * navigation, is closed and a blank page takes its place, so that one
 * hostile page costs the member one bounded wait, never the session.
 * Each stop and each close is logged and audited (browser_page).
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "kz_log.h"
#include "kzb.h"
#include "banned.h"

/* How long the page may take to answer a probe before its scripts are
 * stopped, and to answer once they are. */
#define BUSY_MS 500
#define STOP_WAIT_MS 2000

static void
record(const struct kzb_conf *c, const struct kzb_session *s, const char *event,
    const char *outcome, const char *method, const char *why)
{
	kz_log(KZ_LOG_WARN, event, 0, why, "worker", s->worker, "lease",
	    s->lease_id, "call", method, NULL);
	/* Not refused for want of a record: the stop and the close are the
	 * daemon's own defence, and kzb_audit logs a record it could not
	 * make. */
	(void)!kzb_audit(c, "browser_page", s, outcome, why, NULL);
}

/* The hung page closed and a blank one in its place: KZ_ETIMEDOUT with
 * KZB_PAGE_CLOSED, or KZ_EUNAVAIL (the browser gone) when no new page
 * could be made. */
static int
close_page(const struct kzb_conf *c, struct kzb_session *s, const char *method,
    char *why, size_t wlen)
{
	char w[160];
	int e;

	if ((e = kzb_cdp_repage(&s->cdp, c->op_timeout_ms, w, sizeof(w))) !=
	    0) {
		/* A browser that cannot give the session a page is one the
		 * session cannot go on with. */
		s->cdp.dead = true;
		kz_log(KZ_LOG_ERROR, "browser.page_close", e, w, "worker",
		    s->worker, "lease", s->lease_id, "call", method, NULL);
		kz_why(why, wlen, "the browser stopped");
		return KZ_EUNAVAIL;
	}
	s->page_stopped = false;
	record(c, s, "browser.page_close", "closed", method,
	    "the page kept its scripts busy and was closed");
	kz_why(why, wlen, "%s", KZB_PAGE_CLOSED);
	return KZ_ETIMEDOUT;
}

/*
 * After a page call timed out: 0 (the page answers again; *late, if not
 * NULL, may hold the call's answer; *now says its scripts were stopped
 * for it), or the call's error and its reason in why.  A page is probed
 * before anything is done to it, every time: one that answers was slow,
 * not busy, and is left alone.  A busy page is stopped once; busy again
 * before the next navigation, it is closed.
 */
static int
rescue(const struct kzb_conf *c, struct kzb_session *s, const char *method,
    cJSON **late, bool *now, char *why, size_t wlen)
{
	cJSON *got = NULL;
	int e;

	e = kzb_cdp_unstick(&s->cdp, BUSY_MS, STOP_WAIT_MS, !s->page_stopped,
	    now, &got, why, wlen);
	if (e == KZ_ETIMEDOUT)
		return close_page(c, s, method, why, wlen);
	if (e != 0)
		return e;
	if (*now) {
		s->page_stopped = true;
		record(c, s, "browser.page_stop", "stopped", method,
		    "the page kept its scripts busy; they were stopped");
	}
	if (late != NULL)
		*late = got;
	else
		cJSON_Delete(got);
	return 0;
}

/* A call the page did not answer even once it answers again: a page
 * whose scripts were just stopped (rescue) says so; one that was not
 * busy was slow for another reason. */
static int
no_answer(bool now, char *why, size_t wlen)
{
	kz_why(why, wlen, "%s",
	    now ? KZB_PAGE_STOPPED : "the browser did not answer in time");
	return KZ_ETIMEDOUT;
}

/*
 * Chromium's answer to a page call while the page's frame is between two
 * documents: a navigation of the page's own (a script that sets
 * location) that has not committed, which a script spinning in the old
 * document holds there.  It is no refusal of the call: the call is made
 * again once the navigation has had a moment, and if the frame is still
 * between documents, the page is treated as one that does not answer.
 */
#define TRANSIT_MS 250

static bool
in_transit(int e, const char *why)
{
	return e == KZ_EDENIED && strstr(why, "Not attached to an active page");
}

/* TRANSIT_MS, or less if the session is being ended meanwhile. */
static void
settle(const struct kzb_session *s)
{
	struct pollfd p = {s->cdp.stop_fd, POLLIN, 0};

	(void)poll(&p, s->cdp.stop_fd >= 0 ? 1 : 0, TRANSIT_MS);
}

int
kzb_page_call(const struct kzb_conf *c, struct kzb_session *s,
    const char *method, cJSON *params, int64_t timeout_ms, cJSON **result,
    char *why, size_t wlen)
{
	cJSON *late = NULL, *again;
	bool now = false, moving;
	int e;

	again = params != NULL ? cJSON_Duplicate(params, true) : NULL;
	e = kzb_cdp_call(&s->cdp, method, params, true, timeout_ms, result, why,
	    wlen);
	if (in_transit(e, why)) {
		settle(s);
		e = kzb_cdp_call(&s->cdp, method, again, true, timeout_ms,
		    result, why, wlen);
		again = NULL;
	}
	cJSON_Delete(again);
	moving = in_transit(e, why);
	if (e != KZ_ETIMEDOUT && !moving)
		return e;
	if ((e = rescue(c, s, method, &late, &now, why, wlen)) != 0)
		return e;
	/* A page that answers again but whose frame is still between two
	 * documents was not busy: the op is not answered, and says why
	 * (KZ_ETIMEDOUT carries the member's reason, as for a stop). */
	if (late == NULL && moving && !now) {
		kz_why(why, wlen,
		    "the page is between two documents (a navigation of its "
		    "own); try again");
		return KZ_ETIMEDOUT;
	}
	if (late == NULL)
		return no_answer(now, why, wlen);
	/* A call whose own script the termination ended with the page's
	 * (the agent's click set off a handler that spins) is answered with
	 * an error ("Execution was terminated"): the stop is its answer,
	 * not a browser that refused the call. */
	if ((e = kzb_cdp_answer(late, result, why, wlen)) == KZ_EDENIED && now)
		return no_answer(now, why, wlen);
	return e;
}

int
kzb_page_wait(const struct kzb_conf *c, struct kzb_session *s,
    const char *method, int64_t timeout_ms, char *why, size_t wlen)
{
	bool now = false;
	int e;

	if ((e = kzb_cdp_wait(&s->cdp, method, timeout_ms, why, wlen)) !=
	    KZ_ETIMEDOUT)
		return e;
	if ((e = rescue(c, s, method, NULL, &now, why, wlen)) != 0)
		return e;
	/* A load held by a script finishes once the script is stopped. */
	if (kzb_cdp_wait(&s->cdp, method, BUSY_MS, why, wlen) == 0)
		return 0;
	return no_answer(now, why, wlen);
}
