/*
 * A session's page (session.c opens and ends the session): navigation,
 * with the member told why a page did not load, the screenshot, and the
 * member's input events, each a call on the browser's DevTools bridge
 * through hung.c.  A browser that stops ends the session; a page that
 * does not answer has its scripts stopped or is replaced (hung.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "kz_json.h"
#include "kz_wire.h"
#include "kzb.h"
#include "session_int.h"
#include "banned.h"

/* The page's URL and title, for the reply (never its content). */
static cJSON *
page_info(const struct kzb_conf *c, struct kzb_session *s)
{
	cJSON *r = NULL, *info = cJSON_CreateObject();
	const cJSON *e, *url, *title;
	char why[160];
	int64_t cur;

	/* The browser's own record of the current entry, not the page's
	 * word: a script in the page can replace anything it evaluates
	 * (JSON.stringify, the location getter) and name another site. */
	if (kzb_page_call(c, s, "Page.getNavigationHistory",
	        cJSON_CreateObject(), c->op_timeout_ms, &r, why,
	        sizeof(why)) == 0 &&
	    kz_json_int(r, "currentIndex", 0, 1 << 20, &cur, NULL, 0) == 0 &&
	    (e = cJSON_GetArrayItem(kz_json_get(r, "entries"), (int)cur)) !=
	        NULL &&
	    cJSON_IsString(url = kz_json_get(e, "url")) &&
	    cJSON_IsString(title = kz_json_get(e, "title"))) {
		cJSON_AddStringToObject(info, "url", url->valuestring);
		cJSON_AddStringToObject(info, "title", title->valuestring);
	}
	cJSON_Delete(r);
	return info;
}

/* A navigation's net error, as the member is told it. */
static void
nav_refusal(const char *err, struct kzb_out *o)
{
	if (strcmp(err, "net::ERR_BLOCKED_BY_ADMINISTRATOR") == 0)
		kzb_out_set(o, KZ_WE_REFUSED,
		    "the browser's policy blocks that address");
	else if (strcmp(err, "net::ERR_TUNNEL_CONNECTION_FAILED") == 0 ||
	    strcmp(err, "net::ERR_PROXY_CONNECTION_FAILED") == 0 ||
	    strcmp(err, "net::ERR_HTTP_RESPONSE_CODE_FAILURE") == 0)
		kzb_out_set(o, KZ_WE_REFUSED,
		    "the egress policy refused that destination");
	else {
		char why[160];

		snprintf(why, sizeof(why),
		    "the page could not be loaded (%.60s)",
		    strncmp(err, "net::", 5) == 0 ? err + 5 : "error");
		kzb_out_set(o, KZ_WE_REFUSED, why);
	}
}

/*
 * What the member's address may name, before Chromium sees it.  The
 * managed policy blocks chrome://, but Chromium handles its debug
 * addresses (chrome://crash, chrome://hang, chrome://memory-exhaust and
 * their about: aliases) before its policy, and a javascript: address runs
 * a script in the page rather than loading one; either would hold the
 * session's thread until the navigation's timeout.  A space or control
 * character is refused because Chromium drops them (even from a scheme,
 * "java\tscript:").  Everything else is the policy's to block.
 */
static bool
scheme_char(char c, bool first)
{
	return isalpha((unsigned char)c) ||
	    (!first && c != '\0' && strchr("0123456789+.-", c) != NULL);
}

int
kzb_nav_check(const char *url, struct kzb_out *o)
{
	char scheme[16];
	size_t n = 0;

	for (const char *q = url; *q; q++)
		if ((unsigned char)*q <= ' ' || *q == 0x7f) {
			kzb_out_set(o, KZ_WE_BAD_REQUEST,
			    "that is not an address");
			return KZ_EINVAL;
		}
	while (n < sizeof(scheme) - 1 && scheme_char(url[n], n == 0)) {
		scheme[n] = (char)tolower((unsigned char)url[n]);
		n++;
	}
	scheme[n] = '\0';
	if (url[n] != ':')
		return 0;
	if (strcmp(scheme, "javascript") == 0) {
		kzb_out_set(o, KZ_WE_BAD_REQUEST,
		    "a navigation names an address, not a script");
		return KZ_EINVAL;
	}
	if (strcmp(scheme, "chrome") == 0 ||
	    (strcmp(scheme, "about") == 0 && strcmp(url + n, ":blank") != 0)) {
		kzb_out_set(o, KZ_WE_REFUSED,
		    "the browser's policy blocks that address");
		return KZ_EDENIED;
	}
	return 0;
}

static void
gone(struct kzb_session *s, int e, const char *why, struct kzb_out *o)
{
	if (e == KZ_EUNAVAIL)
		kzb_out_set(o, KZ_WE_UNAVAILABLE,
		    s->cdp.crashed && !s->cdp.dead ?
		        "the page crashed; the session is closed" :
		        "the browser stopped; the session is closed");
	else if (e == KZ_ETIMEDOUT)
		/* Why it did not, and what became of the page (hung.c). */
		kzb_out_set(o, KZ_WE_UNAVAILABLE, why);
	else
		kzb_out_set(o, KZ_WE_INTERNAL, why);
}

int
kzb_session_navigate(const struct kzb_conf *c, struct kzb_session *s,
    const char *url, cJSON **page, struct kzb_out *o)
{
	cJSON *p = cJSON_CreateObject(), *r = NULL;
	const char *err;
	char why[200] = "";
	int e;

	*page = NULL;
	kzb_cdp_forget(&s->cdp);
	/* A page the member goes to gets its own chance to be stopped
	 * rather than closed. */
	s->page_stopped = false;
	cJSON_AddStringToObject(p, "url", url);
	if ((e = kzb_page_call(c, s, "Page.navigate", p, c->nav_timeout_ms, &r,
	         why, sizeof(why))) != 0) {
		if (e == KZ_EDENIED) {
			kzb_out_set(o, KZ_WE_BAD_REQUEST,
			    "that is not an address");
			return e;
		}
		gone(s, e, why, o);
		return e;
	}
	/* Serialised: the next navigation waits for this one's page, an
	 * error page included, to stop loading. */
	if ((e = kzb_page_wait(c, s, "Page.frameStoppedLoading",
	         c->nav_timeout_ms, why, sizeof(why))) != 0) {
		cJSON_Delete(r);
		gone(s, e, why, o);
		return e;
	}
	if ((err = kzb_str(r, "errorText")) != NULL && *err != '\0') {
		nav_refusal(err, o);
		cJSON_Delete(r);
		return KZ_EDENIED;
	}
	cJSON_Delete(r);
	*page = page_info(c, s);
	return 0;
}

int
kzb_session_screenshot(const struct kzb_conf *c, struct kzb_session *s,
    char **png, struct kzb_out *o)
{
	cJSON *p = cJSON_CreateObject(), *r = NULL;
	const char *d;
	char why[200] = "";
	int e;

	*png = NULL;
	cJSON_AddStringToObject(p, "format", "png");
	if ((e = kzb_page_call(c, s, "Page.captureScreenshot", p,
	         c->op_timeout_ms, &r, why, sizeof(why))) != 0) {
		gone(s, e, why, o);
		return e;
	}
	if ((d = kzb_str(r, "data")) == NULL || (*png = strdup(d)) == NULL) {
		cJSON_Delete(r);
		kzb_out_set(o, KZ_WE_INTERNAL, "the browser gave no picture");
		return KZ_EPROTO;
	}
	cJSON_Delete(r);
	return 0;
}

static int
mouse(const struct kzb_conf *c, struct kzb_session *s, const char *type,
    double x, double y, char *why, size_t wlen)
{
	cJSON *p = cJSON_CreateObject(), *r = NULL;
	int e;

	cJSON_AddStringToObject(p, "type", type);
	cJSON_AddNumberToObject(p, "x", x);
	cJSON_AddNumberToObject(p, "y", y);
	cJSON_AddStringToObject(p, "button", "left");
	cJSON_AddNumberToObject(p, "clickCount", 1);
	e = kzb_page_call(c, s, "Input.dispatchMouseEvent", p, c->op_timeout_ms,
	    &r, why, wlen);
	cJSON_Delete(r);
	return e;
}

/* One event; KZ_EINVAL when it is not one. */
static int
input_one(const struct kzb_conf *c, struct kzb_session *s, const cJSON *ev,
    char *why, size_t wlen)
{
	const char *type = NULL, *text = NULL;
	int64_t x, y;
	cJSON *p, *r = NULL;
	int e;

	if (kz_json_str(ev, "type", 8, &type, NULL, 0) != 0)
		return KZ_EINVAL;
	if (strcmp(type, "text") == 0) {
		if (kz_json_str(ev, "text", 1024, &text, NULL, 0) != 0)
			return KZ_EINVAL;
		p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "text", text);
		e = kzb_page_call(c, s, "Input.insertText", p, c->op_timeout_ms,
		    &r, why, wlen);
		cJSON_Delete(r);
		return e;
	}
	if (strcmp(type, "click") != 0 ||
	    kz_json_int(ev, "x", 0, 100000, &x, NULL, 0) != 0 ||
	    kz_json_int(ev, "y", 0, 100000, &y, NULL, 0) != 0)
		return KZ_EINVAL;
	if ((e = mouse(c, s, "mousePressed", (double)x, (double)y, why,
	         wlen)) != 0)
		return e;
	return mouse(c, s, "mouseReleased", (double)x, (double)y, why, wlen);
}

int
kzb_session_input(const struct kzb_conf *c, struct kzb_session *s,
    const cJSON *events, struct kzb_out *o)
{
	const cJSON *ev;
	char why[160];
	int e;

	if (!cJSON_IsArray(events) || cJSON_GetArraySize(events) > 64) {
		kzb_out_set(o, KZ_WE_BAD_REQUEST,
		    "input is a list of at most 64 events");
		return KZ_EINVAL;
	}
	cJSON_ArrayForEach(ev, events)
	{
		if ((e = input_one(c, s, ev, why, sizeof(why))) == KZ_EINVAL) {
			kzb_out_set(o, KZ_WE_BAD_REQUEST,
			    "an input event is {type: text, text} or {type: "
			    "click, x, y}");
			return e;
		}
		if (e != 0) {
			gone(s, e, why, o);
			return e;
		}
	}
	return 0;
}
