/*
 * What serve.c and fetch.c share: the server and one request's context.
 */
#ifndef PB_SERVE_H
#define PB_SERVE_H

#include <event2/http.h>
#include <openssl/ssl.h>

#include "pkgbroker.h"

struct pb_conn;
struct pb_srv {
	const struct pb_conf *c;
	struct event_base *base;
	struct evdns_base *dns;
	struct evhttp *http;
	SSL_CTX *tls; /* the upstreams' client context */
	uint64_t nreq;
	/* The socket's bound connections, a hash table of nbuckets chains
	 * on their bufferevent (conn.c), nconns in all. */
	struct pb_conn **conns;
	size_t nbuckets, nconns;
	/* The fetches in flight of each run that has any (fetch.c), and
	 * of all runs (at most PKGBROKER_FETCHES_MAX). */
	struct pb_load *loads;
	size_t nloads, caploads;
	int64_t inflight;
};

/* One run's fetches in flight: at most PB_RUN_FETCHES, so that one
 * run's code cannot hold the broker's memory for every other run. */
struct pb_load {
	char run[PB_RUN_MAX + 1];
	unsigned n;
};

/* Counts one more fetch of run: KZ_ETOOBIG when the run has
 * PB_RUN_FETCHES in flight, KZ_EUNAVAIL when the broker has
 * PKGBROKER_FETCHES_MAX (load.c). */
KZ_WUR int pb_load_take(struct pb_srv *s, const char *run);
/* One fetch of run is over. */
void pb_load_give(struct pb_srv *s, const char *run);

/* One request as checked so far (on the stack of on_request; fetch.c
 * copies what it keeps). */
struct pb_ctx {
	uint64_t id;
	const char *host; /* the Host header, NULL when none */
	struct pb_route rt;
	const struct pb_upstream *up;
	char run[PB_RUN_MAX + 1]; /* the token's run hash */
	int64_t peer_uid; /* the socket peer's uid; -1 on the TCP listener */
	/* The run the socket connection is bound to; "" on the TCP
	 * listener. */
	char bound[PB_RUN_MAX + 1];
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
/*
 * conn.c: the run each socket connection is bound to.  pb_conn_bev is
 * evhttp's bevcb (arg the pb_srv).  pb_conn_bind binds ec to run (once;
 * KZ_EINVAL when it is bound already) and takes ec's close callback;
 * pb_conn_run is the run ec is bound to, NULL when none.  Whoever else
 * wants ec's close callback sets it with pb_conn_closecb.
 */
typedef void (*pb_closecb)(struct evhttp_connection *, void *);
struct bufferevent *pb_conn_bev(struct event_base *base, void *arg);
KZ_WUR int pb_conn_bind(struct pb_srv *s, struct evhttp_connection *ec,
    const char *run);
const char *pb_conn_run(struct pb_srv *s, struct evhttp_connection *ec);
void pb_conn_closecb(struct pb_srv *s, struct evhttp_connection *ec,
    pb_closecb cb, void *arg);
/* Drops every binding (the server is going away). */
void pb_conn_release(struct pb_srv *s);
/* The bindings held: one for each bound connection still open. */
size_t pb_conn_count(const struct pb_srv *s);
/* Fetches the routed document or file from the upstream for req. */
void pb_fetch_start(struct pb_srv *s, struct evhttp_request *req,
    const struct pb_ctx *x);

#endif
