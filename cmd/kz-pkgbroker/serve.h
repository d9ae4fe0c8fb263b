/*
 * What serve.c and fetch.c share: the server and one request's context.
 */
#ifndef PB_SERVE_H
#define PB_SERVE_H

#include <event2/http.h>
#include <openssl/ssl.h>

#include "pkgbroker.h"

struct pb_srv {
	const struct pb_conf *c;
	struct event_base *base;
	struct evdns_base *dns;
	struct evhttp *http;
	SSL_CTX *tls; /* the upstreams' client context */
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
	int64_t peer_uid; /* the socket peer's uid; -1 on the TCP listener */
};

/* What one upstream connection's handshake showed (tls.c). */
struct pb_tls {
	int verr; /* the first certificate error, X509_V_OK none */
	unsigned long err; /* the OpenSSL error it failed with, 0 none */
	uint64_t nread; /* bytes the peer sent */
	bool started, done;
};

/* The client context (ca_file "" : the system's trust store). */
KZ_WUR int pb_tls_ctx_new(const char *ca_file, SSL_CTX **out, char *why,
    size_t wlen);
/* A connection to up, its name check and SNI set, noting into t (which
 * must outlive it, or be detached with SSL_set_app_data(ssl, NULL)). */
SSL *pb_tls_new(SSL_CTX *ctx, const struct pb_upstream *up, struct pb_tls *t);
/* When TLS is why a fetch failed before its answer: its code and one-line
 * reason, and true. */
bool pb_tls_failure(const struct pb_tls *t, const char **code,
    const char **text);

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
