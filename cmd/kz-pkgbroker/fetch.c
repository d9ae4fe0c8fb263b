/*
 * Upstream fetches with libevent's evhttp client.  The upstream request is
 * built from nothing: the client's headers (its Authorization above all)
 * never travel upstream.  Documents and index pages are read whole, up to
 * PKGBROKER_DOC_MAX, and rewritten.  Files are streamed: a file whose
 * declared length is over PKGBROKER_FILE_MAX is refused before a byte is
 * sent; one that grows past it while streaming has its client connection
 * cut, so the client sees an incomplete transfer (a short Content-Length
 * body or a chunked body without its last chunk), never a whole-looking
 * short file.  The client's output is bounded by the same ceiling, and so
 * is what is read of the upstream: libevent holds a whole chunk of a
 * chunked body before it hands it on, so a file's body is bounded there
 * too (a chunk declared over the ceiling is refused as it is declared),
 * and an upstream's status line and headers by PB_UPSTREAM_HEAD_MAX.
 * An https upstream is reached over bufferevent_openssl (tls.c verifies
 * it); a TLS failure before the answer is refused with its own reason.
 * A TLS stream that ends without close_notify is an error, not an end,
 * so a body the network cut short is never taken as whole.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <cJSON.h>

#include "serve.h"
#include "kz_conf.h"
#include "kz_json.h"
#include "kz_log.h"
#include "banned.h"

struct fetch {
	struct pb_srv *s;
	struct pb_ctx x;
	char host[PB_HOST_MAX + 8];
	struct evhttp_request *creq; /* NULL once answered or gone */
	struct evhttp_connection *ccon;
	struct evhttp_connection *ucon;
	SSL *ssl; /* ucon's, when the upstream is https */
	struct pb_tls tls;
	enum evhttp_request_error uerr;
	bool uerr_set, json, started, finishing;
	bool headed; /* the upstream's headers were read whole */
	bool loaded; /* counted in its run's load (load_take) */
	uint64_t sent;
};

static bool
is_file(enum pb_kind k)
{
	return k == PB_NPM_TARBALL || k == PB_PY_FILE;
}

/* The connection, and its SSL object with it, may outlive f inside
 * libevent: its callbacks are detached from f first. */
static void
fetch_free(struct fetch *f)
{
	if (f->loaded)
		pb_load_give(f->s, f->x.run);
	if (f->ssl != NULL)
		SSL_set_app_data(f->ssl, NULL);
	if (f->ucon != NULL)
		evhttp_connection_free(f->ucon);
	free(f);
}

static void
deferred_free(evutil_socket_t fd, short what, void *arg)
{
	fetch_free(arg);
}

/* The fetch is over: its upstream connection is freed from the event
 * loop, never from inside one of that connection's own callbacks. */
static void
finish(struct fetch *f)
{
	static const struct timeval now = {0, 0};

	if (f->finishing)
		return;
	f->finishing = true;
	if (event_base_once(f->s->base, -1, EV_TIMEOUT, deferred_free, f,
	        &now) != 0)
		kz_log(KZ_LOG_ERROR, "pkg.leak", KZ_ENOMEM,
		    "a finished fetch could not be freed", NULL);
}

/* The client is answered (or gone): no callback of its connection may
 * reach f after this. */
static struct evhttp_request *
take_client(struct fetch *f)
{
	struct evhttp_request *r = f->creq;

	if (f->ccon != NULL)
		pb_conn_closecb(f->s, f->ccon, NULL, NULL);
	f->creq = NULL;
	f->ccon = NULL;
	return r;
}

static void
client_closed(struct evhttp_connection *c, void *arg)
{
	struct fetch *f = arg;

	f->creq = NULL;
	f->ccon = NULL;
	finish(f);
}

static void
fail(struct fetch *f, int status, const char *code, const char *text)
{
	struct evhttp_request *r = take_client(f);

	pb_audit_refusal(f->s, &f->x, code, text, f->sent);
	if (r != NULL)
		pb_reply_refusal(r, status, code, text);
}

/* Ends a started stream without its end: the client sees it incomplete. */
static void
cut(struct fetch *f, const char *code, const char *text)
{
	struct evhttp_connection *c = f->ccon;

	take_client(f);
	pb_audit_refusal(f->s, &f->x, code, text, f->sent);
	if (c != NULL)
		evhttp_connection_free(c);
}

static void
upstream_error(enum evhttp_request_error e, void *arg)
{
	struct fetch *f = arg;

	f->uerr = e;
	f->uerr_set = true;
}

/* The upstream gave no answer: why, TLS's reason when it has one. */
static void
fail_unanswered(struct fetch *f, const char *code, const char *text)
{
	/* libevent's answer to headers over PB_UPSTREAM_HEAD_MAX, as to
	 * malformed ones. */
	if (!f->headed && f->uerr_set &&
	    (f->uerr == EVREQ_HTTP_INVALID_HEADER ||
	        f->uerr == EVREQ_HTTP_DATA_TOO_LONG)) {
		fail(f, 502, "upstream_error",
		    "the upstream's headers are malformed or over 64K");
		return;
	}
	if (f->ssl != NULL)
		(void)pb_tls_failure(&f->tls, &code, &text);
	fail(f, 502, code, text);
}

static int
upstream_status(struct fetch *f, int code)
{
	if (code == 200)
		return 0;
	if (code == 404 || code == 410)
		fail(f, 404, "not_found", "the upstream has no such package");
	else
		fail(f, 502, "upstream_error", "the upstream failed");
	return -1;
}

/* A file's headers: refused up front when its declared length is over
 * the ceiling; otherwise the reply starts, with that length. */
static int
file_start(struct fetch *f, struct evhttp_request *ureq)
{
	const char *cl = evhttp_find_header(evhttp_request_get_input_headers(
	                                        ureq),
	    "Content-Length");
	struct evkeyvalq *h;
	uint64_t len = 0;

	if (f->creq == NULL)
		return -1;
	if (upstream_status(f, evhttp_request_get_response_code(ureq)) != 0)
		return -1;
	if (cl != NULL &&
	    (kz_parse_size(cl, UINT64_MAX / 2, &len) != 0 ||
	        strspn(cl, "0123456789") != strlen(cl))) {
		fail(f, 502, "upstream_error", "the upstream's length is bad");
		return -1;
	}
	if (cl != NULL && len > f->s->c->file_max) {
		f->sent = len;
		fail(f, 403, "file_too_large",
		    "the file is over the broker's ceiling "
		    "(PKGBROKER_FILE_MAX)");
		return -1;
	}
	h = evhttp_request_get_output_headers(f->creq);
	evhttp_add_header(h, "Content-Type", "application/octet-stream");
	if (cl != NULL)
		evhttp_add_header(h, "Content-Length", cl);
	evhttp_send_reply_start(f->creq, 200, "OK");
	f->started = true;
	return 0;
}

/* One framing or none: a Transfer-Encoding other than a lone "chunked",
 * a second Content-Length, or a length beside a chunked body is refused as
 * malformed, whatever the libevent in use makes of it (Debian's 2.1.12-8
 * reads such a body as chunked and ignores the length). */
static bool
framing_ok(struct evhttp_request *ureq)
{
	const struct evkeyvalq *h = evhttp_request_get_input_headers(ureq);
	const struct evkeyval *kv;
	int n_cl = 0, n_te = 0;

	TAILQ_FOREACH(kv, h, next)
	{
		if (strcasecmp(kv->key, "Content-Length") == 0)
			n_cl++;
		else if (strcasecmp(kv->key, "Transfer-Encoding") == 0) {
			n_te++;
			if (strcasecmp(kv->value, "chunked") != 0)
				return false;
		}
	}
	return n_cl + n_te <= 1;
}

/* Refusing at the headers ends the fetch here: the upstream connection
 * is then failed by libevent and freed from the loop, whether or not its
 * done callback runs. */
static int
upstream_headers(struct evhttp_request *ureq, void *arg)
{
	struct fetch *f = arg;

	f->headed = true;
	if (!framing_ok(ureq)) {
		fail(f, 502, "upstream_error",
		    "the upstream's headers are malformed or over 64K");
		finish(f);
		return -1;
	}
	if (!is_file(f->x.rt.kind) || file_start(f, ureq) == 0)
		return 0;
	finish(f);
	return -1;
}

static void
file_chunk(struct evhttp_request *ureq, void *arg)
{
	struct fetch *f = arg;
	struct evbuffer *in = evhttp_request_get_input_buffer(ureq);
	size_t n = evbuffer_get_length(in);

	if (f->creq == NULL || !f->started)
		return;
	if (f->sent + n > f->s->c->file_max) {
		f->sent += n;
		cut(f, "file_over_ceiling",
		    "the file grew past the broker's ceiling "
		    "(PKGBROKER_FILE_MAX) and was cut off");
		finish(f);
		return;
	}
	f->sent += n;
	evhttp_send_reply_chunk(f->creq, in);
}

static void
file_done(struct fetch *f, struct evhttp_request *ureq)
{
	if (f->creq == NULL)
		return;
	if (!f->started) {
		fail_unanswered(f, "upstream_error", "the upstream failed");
		return;
	}
	if (ureq == NULL || f->uerr_set) {
		/* libevent's bound on the body (pb_fetch_start): a chunk
		 * declared, or a body grown, past the ceiling. */
		if (f->uerr_set && f->uerr == EVREQ_HTTP_DATA_TOO_LONG)
			cut(f, "file_over_ceiling",
			    "the file grew past the broker's ceiling "
			    "(PKGBROKER_FILE_MAX) and was cut off");
		else
			cut(f, "upstream_cut", "the upstream stopped mid-file");
		return;
	}
	kz_log(KZ_LOG_INFO, "pkg.file", 0, NULL, "package", f->x.rt.name, NULL);
	evhttp_send_reply_end(take_client(f));
}

static void
free_body(const void *data, size_t len, void *arg)
{
	free((void *)data);
}

static void
send_doc(struct fetch *f, const char *type, char *body)
{
	struct evhttp_request *r = take_client(f);
	struct evbuffer *b = evbuffer_new();

	if (b == NULL || body == NULL) {
		if (b != NULL)
			evbuffer_free(b);
		free(body);
		pb_reply_refusal(r, 500, "internal", "out of memory");
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(r), "Content-Type",
	    type);
	/* The body travels by reference and is freed once written. */
	if (evbuffer_add_reference(b, body, strlen(body), free_body, NULL)) {
		free(body);
		evbuffer_free(b);
		pb_reply_refusal(r, 500, "internal", "out of memory");
		return;
	}
	evhttp_send_reply(r, 200, "OK", b);
	evbuffer_free(b);
	kz_log(KZ_LOG_INFO, "pkg.document", 0, NULL, "package",
	    f->x.rt.name[0] ? f->x.rt.name : "(index)", NULL);
}

static void
npm_doc(struct fetch *f, const char *body, size_t n)
{
	char why[160], base[PB_HOST_MAX + 16];
	cJSON *doc = NULL, *out;

	if (kz_json_parse_object(body, n, &doc, why, sizeof(why)) != 0) {
		fail(f, 502, "upstream_error",
		    "the upstream document is not JSON");
		return;
	}
	snprintf(base, sizeof(base), "http://%s", f->host);
	out = pb_npm_rewrite(doc, f->x.rt.name, f->x.up, base, why,
	    sizeof(why));
	cJSON_Delete(doc);
	if (out == NULL) {
		fail(f, 502, "upstream_error", why);
		return;
	}
	send_doc(f, "application/json", kz_json_print(out));
	cJSON_Delete(out);
}

static void
py_page(struct fetch *f, const char *body, size_t n)
{
	bool index = f->x.rt.kind == PB_PY_INDEX;
	char why[160], page[PB_PATH_MAX + PB_PATH_MAX];
	struct pb_pylist l;

	int k = snprintf(page, sizeof(page), "%s/simple%s", f->x.up->prefix,
	    f->x.rt.upath);

	if (k < 0 || (size_t)k >= sizeof(page) ||
	    pb_py_parse(body, n, page, f->x.up, &f->s->c->pyfiles, index, &l,
	        why, sizeof(why))) {
		fail(f, 502, "upstream_error", why);
		return;
	}
	send_doc(f,
	    f->json ? "application/vnd.pypi.simple.v1+json" :
	              "application/vnd.pypi.simple.v1+html",
	    pb_py_render(&l, f->x.rt.name, index, f->json));
	pb_pylist_release(&l);
}

static void
doc_done(struct fetch *f, struct evhttp_request *ureq)
{
	struct evbuffer *in;
	size_t n;
	char *body;

	if (f->creq == NULL)
		return;
	if (ureq == NULL || evhttp_request_get_response_code(ureq) == 0) {
		if (f->headed && f->uerr_set &&
		    f->uerr == EVREQ_HTTP_DATA_TOO_LONG)
			fail(f, 502, "document_too_large",
			    "the upstream document is over PKGBROKER_DOC_MAX");
		else
			fail_unanswered(f, "upstream_unavailable",
			    "the upstream did not answer");
		return;
	}
	if (upstream_status(f, evhttp_request_get_response_code(ureq)) != 0)
		return;
	in = evhttp_request_get_input_buffer(ureq);
	n = evbuffer_get_length(in);
	if ((body = (char *)evbuffer_pullup(in, -1)) == NULL && n > 0) {
		fail(f, 500, "internal", "out of memory");
		return;
	}
	if (f->x.rt.kind == PB_NPM_DOC)
		npm_doc(f, body == NULL ? "" : body, n);
	else
		py_page(f, body == NULL ? "" : body, n);
}

static void
upstream_done(struct evhttp_request *ureq, void *arg)
{
	struct fetch *f = arg;

	if (is_file(f->x.rt.kind))
		file_done(f, ureq);
	else
		doc_done(f, ureq);
	finish(f);
}

/* The path asked of the upstream: its prefix and the routed path; the
 * Python files' paths are on the index's origin already. */
static int
upstream_path(const struct fetch *f, char *out, size_t len)
{
	const struct pb_route *r = &f->x.rt;
	int n;

	if (r->kind == PB_PY_FILE)
		n = snprintf(out, len, "%s", r->upath);
	else if (r->kind == PB_PY_INDEX || r->kind == PB_PY_PROJECT)
		n = snprintf(out, len, "%s/simple%s", f->x.up->prefix,
		    r->upath);
	else
		n = snprintf(out, len, "%s%s", f->x.up->prefix, r->upath);
	return n > 0 && (size_t)n < len ? 0 : KZ_ETOOBIG;
}

static struct evhttp_request *
upstream_request(struct fetch *f)
{
	const struct pb_upstream *up = f->x.up;
	struct evhttp_request *u = evhttp_request_new(upstream_done, f);
	struct evkeyvalq *h;
	char host[PB_HOST_MAX + 8];

	if (u == NULL)
		return NULL;
	h = evhttp_request_get_output_headers(u);
	if (up->port == (up->tls ? 443 : 80))
		snprintf(host, sizeof(host), "%s", up->host);
	else
		snprintf(host, sizeof(host), "%s:%d", up->host, up->port);
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "User-Agent", "kz-pkgbroker/" KZ_VERSION);
	if (f->x.rt.kind == PB_NPM_DOC)
		evhttp_add_header(h, "Accept",
		    "application/vnd.npm.install-v1+json; q=1.0, "
		    "application/json; q=0.8");
	else if (!is_file(f->x.rt.kind))
		evhttp_add_header(h, "Accept", "text/html");
	evhttp_request_set_error_cb(u, upstream_error);
	evhttp_request_set_header_cb(u, upstream_headers);
	if (is_file(f->x.rt.kind))
		evhttp_request_set_chunked_cb(u, file_chunk);
	return u;
}

/* The upstream connection: plain, or TLS over bufferevent_openssl. */
static struct evhttp_connection *
upstream_connect(struct pb_srv *s, struct fetch *f)
{
	const struct pb_upstream *up = f->x.up;
	struct bufferevent *bev;
	struct evhttp_connection *c;

	if (!up->tls)
		return evhttp_connection_base_new(s->base, s->dns, up->host,
		    (ev_uint16_t)up->port);
	if (s->tls == NULL ||
	    (f->ssl = pb_tls_new(s->tls, up, &f->tls)) == NULL)
		return NULL;
	/* On failure the bufferevent frees the SSL object with itself. */
	bev = bufferevent_openssl_socket_new(s->base, -1, f->ssl,
	    BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL) {
		SSL_free(f->ssl);
		f->ssl = NULL;
		return NULL;
	}
	c = evhttp_connection_base_bufferevent_new(s->base, s->dns, bev,
	    up->host, (ev_uint16_t)up->port);
	if (c == NULL) {
		SSL_set_app_data(f->ssl, NULL);
		f->ssl = NULL;
		bufferevent_free(bev);
	}
	return c;
}

void
pb_fetch_start(struct pb_srv *s, struct evhttp_request *req,
    const struct pb_ctx *x)
{
	struct fetch *f = calloc(1, sizeof(*f));
	struct evhttp_request *u = NULL;
	char path[PB_PATH_MAX * 2];
	uint64_t body;
	int r;

	if (f == NULL) {
		pb_reply_refusal(req, 500, "internal", "out of memory");
		return;
	}
	f->s = s, f->x = *x, f->creq = req;
	snprintf(f->host, sizeof(f->host), "%s", x->host);
	f->x.host = f->host;
	if ((r = pb_load_take(s, x->run)) != 0) {
		if (r == KZ_ETOOBIG)
			fail(f, 503, "busy",
			    "the run has " PB_RUN_FETCHES_TEXT
			    " fetches in flight already");
		else if (r == KZ_EUNAVAIL)
			fail(f, 503, "busy",
			    "the broker has PKGBROKER_FETCHES_MAX fetches in "
			    "flight already");
		else
			pb_reply_refusal(req, 500, "internal", "out of memory");
		free(f);
		return;
	}
	f->loaded = true;
	f->json = pb_py_accept(
	              evhttp_find_header(evhttp_request_get_input_headers(req),
	                  "Accept")) == 1;
	f->ccon = evhttp_request_get_connection(req);
	if (upstream_path(f, path, sizeof(path)) != 0 ||
	    (f->ucon = upstream_connect(s, f)) == NULL ||
	    (u = upstream_request(f)) == NULL) {
		pb_reply_refusal(req, 500, "internal", "cannot reach upstream");
		fetch_free(f);
		return;
	}
	evhttp_connection_set_timeout(f->ucon, (int)s->c->upstream_timeout_s);
	evhttp_connection_set_retries(f->ucon, 0);
	/* What is held of the upstream's answer is bounded: its headers,
	 * its body (libevent holds a whole chunk of a chunked body before
	 * it hands it on: a chunk declared past the bound is refused as it
	 * is declared), and what is read ahead of libevent's parser (a
	 * chunk-size line that never ends), past which reading waits until
	 * the client connection's timeout ends the fetch. */
	body = is_file(x->rt.kind) ? s->c->file_max : s->c->doc_max;
	evhttp_connection_set_max_headers_size(f->ucon, PB_UPSTREAM_HEAD_MAX);
	evhttp_connection_set_max_body_size(f->ucon, (ev_ssize_t)body);
	bufferevent_setwatermark(evhttp_connection_get_bufferevent(f->ucon),
	    EV_READ, 0, (size_t)body + PB_UPSTREAM_HEAD_MAX);
	pb_conn_closecb(s, f->ccon, client_closed, f);
	if (evhttp_make_request(f->ucon, u, EVHTTP_REQ_GET, path) != 0) {
		/* evhttp_make_request frees u on failure. */
		fail(f, 502, "upstream_unavailable",
		    "the upstream did not answer");
		finish(f);
	}
}
