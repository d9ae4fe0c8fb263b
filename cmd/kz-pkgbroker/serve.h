/*
 * What serve.c and fetch.c share: the server and one request's context.
 */
#ifndef PB_SERVE_H
#define PB_SERVE_H

#include <event2/http.h>

#include "pkgbroker.h"

struct pb_srv {
	const struct pb_conf *c;
	struct event_base *base;
	struct evdns_base *dns;
	struct evhttp *http;
	uint64_t nreq;
};

/* One request as checked so far (on the stack of on_request; fetch.c
 * copies what it keeps). */
struct pb_ctx {
	uint64_t id;
	const char *host; /* the Host header, NULL when none */
	struct pb_route rt;
	const struct pb_upstream *up;
	char run[PB_RUN_MAX + 1]; /* the token's run hash */
};

/* Audits a refusal (the host and package, never the token or path). */
void pb_audit_refusal(struct pb_srv *s, const struct pb_ctx *x,
    const char *code, const char *text, uint64_t bytes);
/* Answers req with status and the one-line reason. */
void pb_reply_refusal(struct evhttp_request *req, int status, const char *code,
    const char *text);
/* Fetches the routed document or file from the upstream for req. */
void pb_fetch_start(struct pb_srv *s, struct evhttp_request *req,
    const struct pb_ctx *x);

#endif
