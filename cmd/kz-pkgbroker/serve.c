/*
 * The broker's HTTP server (libevent's evhttp: no HTTP is parsed here).
 * Each request is checked in a fixed order before anything is fetched:
 * HTTP/1.1 and GET, the peer (on the Unix socket), the Host, the binding
 * of a socket connection to its run, the path (the closed set of route.c),
 * the registry being configured, and a current run token presented by the
 * worker it was minted for (the socket peer's uid, token.c) through the
 * forward of its own run.  A refusal answers once with a one-line reason
 * in the status line and the body, and is audited with the host and the
 * package name, never the token, the path or the query.
 *
 * A connection on the socket is a worker's broker forward: its first
 * request, sent by the forward before a byte of the code's, is a bind
 * (GET PB_BIND_PATH with the run's token), which binds the connection to
 * that token's run (conn.c); every later request on it must carry a token
 * of that run.  The next tenant of the worker has the same uid but not
 * the previous run's forward, so a token it finds is refused
 * (token_other_run).  The TCP listener has no bind.  The bind's Host is
 * checked as every request's is, before the bind is looked at: one with
 * no Host, or a Host that names neither the broker (PB_BIND_HOST, which
 * the forward sends) nor PKGBROKER_HOSTS, binds nothing.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <sodium.h>
#include <cJSON.h>

#include "serve.h"
#include "kz_audit.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "banned.h"

static const char *
registry_of(enum pb_kind k)
{
	return k == PB_NPM_DOC || k == PB_NPM_TARBALL ? "npm" :
	    k == PB_NONE                              ? NULL :
	                                                "pypi";
}

/* The host part of a Host header when it is a plain host name or IPv4
 * literal (what an audit record may carry), else false. */
static bool
host_part(const char *hdr, char *out, size_t len)
{
	size_t n;

	if (hdr == NULL)
		return false;
	n = strcspn(hdr, ":");
	if (n == 0 || n >= len || n > PB_HOST_MAX ||
	    strspn(hdr,
	        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	        "0123456789.-") != n)
		return false;
	snprintf(out, len, "%.*s", (int)n, hdr);
	return true;
}

void
pb_audit_refusal(struct pb_srv *s, const struct pb_ctx *x, const char *code,
    const char *text, uint64_t bytes)
{
	const char *reg = registry_of(x->rt.kind);
	cJSON *ev = cJSON_CreateObject();
	char host[PB_HOST_MAX + 1], why[160], rid[32];
	int r = KZ_ENOMEM;

	snprintf(rid, sizeof(rid), "pb-%llu", (unsigned long long)x->id);
	if (ev == NULL || !cJSON_AddStringToObject(ev, "rid", rid) ||
	    !cJSON_AddStringToObject(ev, "error", code) ||
	    !cJSON_AddStringToObject(ev, "reason", text) ||
	    !cJSON_AddStringToObject(ev, "outcome", "refused") ||
	    (reg != NULL && !cJSON_AddStringToObject(ev, "registry", reg)) ||
	    (x->rt.name[0] != '\0' &&
	        !cJSON_AddStringToObject(ev, "package", x->rt.name)) ||
	    (host_part(x->host, host, sizeof(host)) &&
	        !cJSON_AddStringToObject(ev, "host", host)) ||
	    (x->run[0] != '\0' &&
	        !cJSON_AddStringToObject(ev, "run_hash", x->run)) ||
	    (bytes > 0 && !cJSON_AddNumberToObject(ev, "bytes", (double)bytes)))
		goto out;
	kz_log_obj(KZ_LOG_WARN, "pkg.refuse", 0, ev, text);
	if (s->c->audit_sock[0] == '\0') {
		r = 0;
		goto out;
	}
	r = kz_audit_send(s->c->audit_sock, "pkg_refusal", ev,
	    KZ_AUDIT_TIMEOUT_MS, why, sizeof(why));
out:
	if (r != 0)
		kz_log(KZ_LOG_ERROR, "pkg.audit_failed", r,
		    "a refusal was not recorded by the audit sink", NULL);
	cJSON_Delete(ev);
}

void
pb_reply_refusal(struct evhttp_request *req, int status, const char *code,
    const char *text)
{
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char line[256];
	cJSON *o = cJSON_CreateObject();
	char *txt = NULL;

	/* One line, in the status line (what pip and npm print) and as
	 * npm's {"error": ...} body. */
	snprintf(line, sizeof(line), "%s (%s)", text, code);
	if (o != NULL && cJSON_AddStringToObject(o, "error", line))
		txt = kz_json_print(o);
	cJSON_Delete(o);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Connection", "close");
	if (status == 401)
		evhttp_add_header(h, "WWW-Authenticate",
		    "Basic realm=\"kz-pkgbroker\"");
	if (b != NULL && txt != NULL)
		evbuffer_add_printf(b, "%s\n", txt);
	evhttp_send_reply(req, status, line, b);
	free(txt);
	if (b != NULL)
		evbuffer_free(b);
}

static void
refuse(struct pb_srv *s, struct evhttp_request *req, const struct pb_ctx *x,
    int status, const char *code, const char *text)
{
	pb_audit_refusal(s, x, code, text, 0);
	pb_reply_refusal(req, status, code, text);
}

/* The Unix socket's peer must be one the configuration admits, and its
 * uid is kept for the token's binding; a TCP listener has no peer
 * credentials (x->peer_uid -1) and relies on the token alone. */
static bool
peer_ok(struct pb_srv *s, struct evhttp_request *req, struct pb_ctx *x)
{
	struct evhttp_connection *ec = evhttp_request_get_connection(req);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(ec);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct kz_peer p;
	int fd = bev == NULL ? -1 : bufferevent_getfd(bev);

	if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return false;
	if (ss.ss_family != AF_UNIX) {
		int one = 1;

		/* A file's headers and its first bytes are separate writes:
		 * with Nagle's algorithm against the client's delayed ACK each
		 * would wait up to 200 ms. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		return true;
	}
	if (kz_peer_check(fd, &s->c->peers, &p) != 0)
		return false;
	x->peer_uid = (int64_t)p.uid;
	return true;
}

/* The request's token; on a socket connection (but for its bind) it
 * must be of the run the connection is bound to, x->bound. */
static enum pb_tok
check_token(struct pb_srv *s, struct evhttp_request *req, struct pb_ctx *x,
    bool binding)
{
	const char *auth = evhttp_find_header(evhttp_request_get_input_headers(
	                                          req),
	    "Authorization");
	char tok[PB_TOKEN_MAX + 1];
	struct pb_claims cl;
	enum pb_tok t;

	if (!s->c->have_pk)
		return PB_TOK_FORGED; /* nothing can verify: fail closed */
	if ((t = pb_token_from_auth(auth, tok, sizeof(tok))) != PB_TOK_OK)
		return t;
	t = pb_token_verify(s->c->pk, tok, strlen(tok), (int64_t)time(NULL),
	    s->c->token_ttl_max, &cl);
	sodium_memzero(tok, sizeof(tok));
	if (t != PB_TOK_OK)
		return t;
	/* A genuine token from the wrong worker, or through another run's
	 * forward, is audited under the run it was minted for: that run's
	 * token is out. */
	snprintf(x->run, sizeof(x->run), "%s", cl.run);
	if ((t = pb_token_peer(&cl, x->peer_uid)) != PB_TOK_OK ||
	    x->peer_uid < 0 || binding)
		return t;
	return pb_token_run(&cl, x->bound);
}

/* GET PB_BIND_PATH, no query: the forward's first request. */
static bool
is_bind(struct evhttp_request *req)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *path = u == NULL ? NULL : evhttp_uri_get_path(u);

	return path != NULL && strcmp(path, PB_BIND_PATH) == 0 &&
	    evhttp_uri_get_query(u) == NULL && evhttp_uri_get_host(u) == NULL;
}

/*
 * A socket connection's binding: its first request must be the bind, and
 * only its first.  True when req goes on to be served (x->bound set);
 * false when it was answered here: a refusal (which closes the
 * connection) or the bind's success, which the forward reads and never
 * passes on to the code.
 */
static bool
bind_step(struct pb_srv *s, struct evhttp_request *req, struct pb_ctx *x)
{
	struct evhttp_connection *ec = evhttp_request_get_connection(req);
	const char *run = pb_conn_run(s, ec);
	bool bind = is_bind(req);
	enum pb_tok t;

	if (run != NULL && !bind) {
		snprintf(x->bound, sizeof(x->bound), "%s", run);
		return true;
	}
	if (run != NULL) {
		snprintf(x->run, sizeof(x->run), "%s", run);
		refuse(s, req, x, 403, "bind_again",
		    "the connection is bound to its run already");
		return false;
	}
	if (!bind) {
		refuse(s, req, x, 403, "bind_missing",
		    "the connection was not bound to a run first: the socket "
		    "serves only a run's broker forward");
		return false;
	}
	if ((t = check_token(s, req, x, true)) != PB_TOK_OK) {
		refuse(s, req, x, t == PB_TOK_MISSING ? 401 : 403,
		    pb_tok_code(t), pb_tok_text(t));
		return false;
	}
	if (pb_conn_bind(s, ec, x->run) != 0) {
		refuse(s, req, x, 500, "internal",
		    "cannot bind the connection");
		return false;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Length", "0");
	evhttp_send_reply(req, 200, "Bound", NULL);
	return false;
}

/*
 * The Host, checked for every request before anything is done under it,
 * the bind included.  A bind on the socket may also name the broker
 * itself, PB_BIND_HOST, as the forward's does; a request that is not a
 * bind may not.
 */
static bool
host_ok(struct pb_srv *s, struct evhttp_request *req, const struct pb_ctx *x)
{
	if (pb_host_allowed(s->c->hosts, x->host))
		return true;
	return x->peer_uid >= 0 && is_bind(req) &&
	    pb_host_allowed(PB_BIND_HOST, x->host);
}

/* The checks before the path: HTTP/1.1, GET, the peer, the Host, the
 * socket connection's binding. */
static bool
admit(struct pb_srv *s, struct evhttp_request *req, struct pb_ctx *x)
{
	if (req->major != 1 || req->minor < 1) {
		/* HTTP/1.0 has no chunked encoding: a cut body would look
		 * whole, so it is never served. */
		refuse(s, req, x, 505, "http_version", "HTTP/1.1 is required");
		return false;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		refuse(s, req, x, 405, "method_refused", "only GET is served");
		return false;
	}
	if (!peer_ok(s, req, x)) {
		refuse(s, req, x, 403, "peer_refused",
		    "this peer may not use the broker");
		return false;
	}
	if (!host_ok(s, req, x)) {
		refuse(s, req, x, 403, "host_refused",
		    "that host is not the broker's (PKGBROKER_HOSTS)");
		return false;
	}
	if (x->peer_uid >= 0 && !bind_step(s, req, x))
		return false;
	return true;
}

static bool
route(struct pb_srv *s, struct evhttp_request *req, struct pb_ctx *x)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *path = u == NULL ? NULL : evhttp_uri_get_path(u);
	char why[160] = "not a path of the registry protocols (no query is "
	                "served)";

	if (u == NULL || evhttp_uri_get_query(u) != NULL ||
	    evhttp_uri_get_host(u) != NULL ||
	    pb_route(path, &x->rt, why, sizeof(why)) != 0) {
		refuse(s, req, x, 404, "path_refused", why);
		return false;
	}
	x->up = registry_of(x->rt.kind)[0] == 'n' ? &s->c->npm :
	    x->rt.files_origin                    ? &s->c->pyfiles :
	                                            &s->c->pypi;
	if (x->up->url[0] == '\0') {
		refuse(s, req, x, 404, "registry_off",
		    "this registry path is not configured");
		return false;
	}
	/* A distribution file is fetched only beneath the upstream's own
	 * path: its origin may serve other repositories too. */
	if (x->rt.kind == PB_PY_FILE &&
	    !pb_upstream_under(x->up, x->rt.upath)) {
		refuse(s, req, x, 404, "path_refused",
		    "a file outside the index's path on its origin");
		return false;
	}
	return true;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct pb_srv *s = arg;
	struct pb_ctx x;
	enum pb_tok t;

	memset(&x, 0, sizeof(x));
	x.id = ++s->nreq;
	x.peer_uid = -1;
	x.host = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Host");
	if (!admit(s, req, &x) || !route(s, req, &x))
		return;
	if ((t = check_token(s, req, &x, false)) != PB_TOK_OK) {
		refuse(s, req, &x, t == PB_TOK_MISSING ? 401 : 403,
		    pb_tok_code(t), pb_tok_text(t));
		return;
	}
	pb_fetch_start(s, req, &x);
}

static void
on_signal(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopexit(arg, NULL);
}

static int
listen_all(struct pb_srv *s, char *why, size_t wlen)
{
	int fd, r;

	if ((r = kz_sock_listen(s->c->sock, 128, &fd, why, wlen)) != 0)
		return r;
	if (evhttp_accept_socket_with_handle(s->http, fd) == NULL) {
		close(fd);
		kz_why(why, wlen, "cannot serve the socket");
		return KZ_ESYS;
	}
	if (s->c->listen_addr[0] != '\0' &&
	    evhttp_bind_socket_with_handle(s->http, s->c->listen_addr,
	        (ev_uint16_t)s->c->listen_port) == NULL) {
		kz_why(why, wlen, "cannot listen on PKGBROKER_LISTEN: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	return 0;
}

static int
srv_init(struct pb_srv *s, const struct pb_conf *c, char *why, size_t wlen)
{
	int r;

	memset(s, 0, sizeof(*s));
	s->c = c;
	if ((s->base = event_base_new()) == NULL ||
	    (s->dns = evdns_base_new(s->base,
	         EVDNS_BASE_INITIALIZE_NAMESERVERS)) == NULL ||
	    (s->http = evhttp_new(s->base)) == NULL)
		return KZ_ENOMEM;
	if ((c->npm.tls || c->pypi.tls || c->pyfiles.tls) &&
	    (r = pb_tls_ctx_new(c->ca_file, &s->tls, why, wlen)) != 0)
		return r;
	/* Every method reaches on_request, so each refusal has its reason
	 * and its audit record rather than libevent's bare 501. */
	evhttp_set_allowed_methods(s->http,
	    EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
	        EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	        EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(s->http, 16384);
	evhttp_set_max_body_size(s->http, 4096);
	evhttp_set_timeout(s->http, (int)c->upstream_timeout_s * 2);
	evhttp_set_gencb(s->http, on_request, s);
	evhttp_set_bevcb(s->http, pb_conn_bev, s);
	return 0;
}

static void
srv_release(struct pb_srv *s)
{
	if (s->http != NULL)
		evhttp_free(s->http);
	pb_conn_release(s);
	free(s->loads);
	if (s->dns != NULL)
		evdns_base_free(s->dns, 0);
	if (s->base != NULL)
		event_base_free(s->base);
	SSL_CTX_free(s->tls);
}

int
pb_serve(const struct pb_conf *c)
{
	struct event *sig[2] = {NULL, NULL};
	struct pb_srv s;
	char why[192] = "";
	int r;

	signal(SIGPIPE, SIG_IGN);
	if ((r = srv_init(&s, c, why, sizeof(why))) != 0 ||
	    (r = listen_all(&s, why, sizeof(why))))
		goto out;
	sig[0] = evsignal_new(s.base, SIGTERM, on_signal, s.base);
	sig[1] = evsignal_new(s.base, SIGINT, on_signal, s.base);
	if (sig[0] == NULL || sig[1] == NULL || evsignal_add(sig[0], NULL) ||
	    evsignal_add(sig[1], NULL)) {
		r = KZ_ENOMEM;
		goto out;
	}
	kz_log(KZ_LOG_INFO, "pkg.serve", 0, "serving", "npm",
	    c->npm.url[0] ? "on" : "off", "pypi", c->pypi.url[0] ? "on" : "off",
	    "audit", c->audit_sock[0] ? "on" : "off", NULL);
	if (kz_notify_ready("serving") != 0)
		kz_log(KZ_LOG_WARN, "pkg.notify", 0,
		    "the service manager was not told of readiness", NULL);
	event_base_dispatch(s.base);
	(void)kz_notify_stopping();
out:
	if (r != 0)
		kz_log(KZ_LOG_ERROR, "pkg.serve_failed", r, why, NULL);
	for (int i = 0; i < 2; i++)
		if (sig[i] != NULL)
			event_free(sig[i]);
	srv_release(&s);
	unlink(c->sock);
	return r;
}
