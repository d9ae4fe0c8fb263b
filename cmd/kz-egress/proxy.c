/*
 * The proxy: libevent listeners on a Unix socket and/or loopback TCP, one
 * struct conn per client connection.  Each request is judged on its own:
 * grant, then the destination (mode, port, allowlist), then a fresh
 * resolution whose every answer is checked, then a connect to the checked
 * address.  An upstream connection is kept for the next request on the same
 * client connection only when that request passed its own checks for the
 * same host and port and the pinned address still passes: another host
 * never rides it.  Refusals are one indistinguishable 403.
 *
 * This file holds the request heads and their judgement, from a complete
 * head in the client's input to an upstream connect or a refusal; the
 * listeners, the accept path, the worker threads and the run loop are in
 * serve.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sodium.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "egress.h"
#include "kz_log.h"
#include "conn.h"
#include "banned.h"

static const char
    RESP_403[] = "HTTP/1.1 403 Forbidden\r\n"
                 "Content-Type: text/plain\r\nContent-Length: 8\r\n"
                 "Connection: close\r\n\r\nrefused\n";
static const char
    RESP_407[] = "HTTP/1.1 407 Proxy Authentication Required\r\n"
                 "Proxy-Authenticate: Basic realm=\"kz-egress\"\r\n"
                 "Proxy-Authenticate: Bearer realm=\"kz-egress\"\r\n"
                 "Content-Type: text/plain\r\nContent-Length: 15\r\n"
                 "Connection: close\r\n\r\ngrant required\n";
static const char
    RESP_400[] = "HTTP/1.1 400 Bad Request\r\n"
                 "Content-Type: text/plain\r\nContent-Length: 12\r\n"
                 "Connection: close\r\n\r\nbad request\n";
static const char
    RESP_431[] = "HTTP/1.1 431 Request Header Fields Too Large"
                 "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/* ---- answers ---- */

static void
respond(struct conn *c, const char *canned, size_t n)
{
	conn_close_up(c);
	evbuffer_add(c->cli->out, canned, n);
	conn_close_after_flush(c);
}

static void
refuse(struct conn *c, enum eg_reason reason)
{
	/* A host that is no valid name or literal is recorded as no raw
	 * text. */
	if (reason == EG_R_BAD_HOST)
		c->dest.host[0] = '\0';
	eg_refusal_record(reason, c->dest.host[0] ? c->dest.host : "-",
	    c->dest.port, c->run);
	respond(c, RESP_403, sizeof(RESP_403) - 1);
}

static void
bad_request(struct conn *c, enum eg_reason why)
{
	eg_count_bad_request();
	kz_log(KZ_LOG_INFO, "egress.bad_request", 0, "malformed request",
	    "reason", eg_reason_str(why), NULL);
	respond(c, RESP_400, sizeof(RESP_400) - 1);
}

/* Answers r with its status: a malformed request 400, a refusal 403. */
static void
reject(struct conn *c, enum eg_reason r)
{
	if (eg_reason_status(r) == 400)
		bad_request(c, r);
	else
		refuse(c, r);
}

/* ---- grants ---- */

/* A grant that fails is no run's: the connection forgets the one it
 * verified before, so the refusal is not recorded under that run. */
static enum eg_reason
forget_grant(struct conn *c, enum eg_reason r)
{
	c->g_ok = false;
	c->run[0] = '\0';
	return r;
}

static enum eg_reason
check_grant(struct conn *c, const struct eg_head *hd)
{
	char g[EG_GRANT_MAX + 1];
	unsigned char h[16];
	struct eg_claims cl;
	enum eg_reason r;
	int64_t now = (int64_t)time(NULL);

	if (eg_http_grant(hd->proxy_auth->value, hd->proxy_auth->vlen, g,
	        sizeof(g)) != 0)
		return forget_grant(c, EG_R_GRANT_MALFORMED);
	/* A kept-alive client sends the same grant again: verifying the hash
	 * of what was verified before, and its expiry, is enough. */
	crypto_generichash(h, sizeof(h), (unsigned char *)g, strlen(g), NULL,
	    0);
	if (c->g_ok && sodium_memcmp(h, c->gh, sizeof(h)) == 0) {
		sodium_memzero(g, sizeof(g));
		return now < c->g_exp ? EG_R_NONE : EG_R_GRANT_EXPIRED;
	}
	r = eg_grant_verify(c->p->pk, g, strlen(g), now, c->p->ttl, &cl);
	sodium_memzero(g, sizeof(g));
	if (r != EG_R_NONE)
		return forget_grant(c, r);
	memcpy(c->gh, h, sizeof(h));
	c->g_ok = true;
	c->g_exp = cl.exp;
	c->g_caps = cl.caps;
	snprintf(c->run, sizeof(c->run), "%s", cl.run);
	return EG_R_NONE;
}

/*
 * Counts c against the run its grant names, unless it already counts
 * against that run (a kept-alive client): EG_R_RUN_CONNECTIONS when the
 * run already holds its share of the proxy's connections.
 */
static enum eg_reason
hold_run(struct conn *c)
{
	if (strcmp(c->held, c->run) == 0)
		return EG_R_NONE;
	if (c->held[0] != '\0') {
		eg_run_release(c->held);
		c->held[0] = '\0';
	}
	if (!eg_run_hold(c->run, eg_run_share(c->px->max_conns)))
		return EG_R_RUN_CONNECTIONS;
	snprintf(c->held, sizeof(c->held), "%s", c->run);
	/* A grant has admitted a request: the connection is the run's now,
	 * no longer its peer's (peers.c). */
	if (c->peer[0] != '\0') {
		eg_ungranted_release(c->peer);
		c->peer[0] = '\0';
	}
	return EG_R_NONE;
}

/* ---- the request head ---- */

static void
build_head(struct conn *c, const struct eg_head *hd, const char *auth,
    size_t alen, const char *path, size_t plen)
{
	struct evbuffer *o = c->head_out;

	evbuffer_add(o, hd->method, hd->mlen);
	evbuffer_add(o, " ", 1);
	if (plen == 0 || path[0] != '/')
		evbuffer_add(o, "/", 1);
	evbuffer_add(o, path, plen);
	evbuffer_add(o, " HTTP/1.1\r\nHost: ", 17);
	evbuffer_add(o, auth, alen);
	evbuffer_add(o, "\r\n", 2);
	conn_add_fields(o, hd);
	evbuffer_add(o, "\r\n", 2);
}

/* The authority as the client wrote it, without userinfo. */
static void
authority_of(const struct eg_head *hd, const char **a, size_t *alen)
{
	const char *s = hd->target + 7, *e = s, *at;

	while (e < hd->target + hd->tlen && *e != '/' && *e != '?')
		e++;
	if ((at = memrchr(s, '@', (size_t)(e - s))) != NULL)
		s = at + 1;
	*a = s;
	*alen = (size_t)(e - s);
}

static enum eg_reason
parse_target(struct conn *c, const struct eg_head *hd, char *host, size_t hlen,
    uint16_t *port)
{
	const char *path;
	size_t plen, alen;
	const char *auth;

	c->is_connect = hd->mlen == 7 && memcmp(hd->method, "CONNECT", 7) == 0;
	if (c->is_connect) {
		if (eg_http_authority(hd->target, hd->tlen, 0, host, hlen,
		        port) != 0 ||
		    *port == 0 || memchr(hd->target, '@', hd->tlen) != NULL)
			return EG_R_BAD_TARGET;
		return EG_R_NONE;
	}
	if (eg_http_absolute(hd->target, hd->tlen, host, hlen, port, &path,
	        &plen) != 0)
		return EG_R_BAD_TARGET;
	if (hd->chunked || (hd->has_length && hd->length > 0)) {
		c->req_mode = hd->chunked ? BODY_CHUNKED : BODY_LENGTH;
		c->req_left = hd->length;
		memset(&c->req_ck, 0, sizeof(c->req_ck));
	} else {
		c->req_mode = BODY_NONE;
	}
	if (c->head_out == NULL && (c->head_out = evbuffer_new()) == NULL)
		return EG_R_INTERNAL;
	evbuffer_drain(c->head_out, evbuffer_get_length(c->head_out));
	authority_of(hd, &auth, &alen);
	build_head(c, hd, auth, alen, path, plen);
	c->is_head = hd->mlen == 4 && memcmp(hd->method, "HEAD", 4) == 0;
	return EG_R_NONE;
}

static bool
can_reuse(struct conn *c)
{
	const struct eg_policy *p = c->p;

	return c->up != NULL && !c->is_connect && c->up_host[0] != '\0' &&
	    strcmp(c->up_host, c->dest.host) == 0 &&
	    c->up_port == c->dest.port &&
	    eg_policy_check_addr(p, &c->dest, &c->up_addr) == EG_R_NONE;
}

static void
on_verdict(const struct eg_verdict *v, void *arg)
{
	struct conn *c = arg;

	c->lk = NULL;
	if (v->reason != EG_R_NONE) {
		refuse(c, v->reason);
		return;
	}
	/* The host's addresses were read at start; one it gained since (an
	 * interface brought up, a rotated IPv6 temporary address) is the
	 * host's all the same: the kernel's route says, and a route that
	 * cannot be asked refuses too. */
	if (eg_addr_is_local(&v->pinned) != 0) {
		refuse(c, EG_R_OWN_ADDRESS);
		return;
	}
	eg_count_allowed();
	conn_connect_up(c, &v->pinned);
}

static void
judge(struct conn *c)
{
	const struct eg_policy *p = c->p;
	struct eg_verdict v;

	if (can_reuse(c)) {
		eg_count_allowed();
		conn_start_exchange(c);
		return;
	}
	conn_close_up(c);
	c->st = ST_LOOKUP;
	if (c->dest.literal) {
		memset(&v, 0, sizeof(v));
		v.reason = eg_policy_check_addr(p, &c->dest, &c->dest.lit);
		v.pinned = c->dest.lit;
		on_verdict(&v, c);
		return;
	}
	if ((c->lk = eg_dns_check(c->px->dns, p, &c->dest, on_verdict, c)) ==
	    NULL)
		refuse(c, EG_R_RESOLVE_FAILED);
}

/* One complete request head is in the client's input: judge it. */
static void
handle_head(struct conn *c, size_t hlen)
{
	struct evbuffer *in = c->cli->in;
	char *buf = (char *)evbuffer_pullup(in, (ev_ssize_t)hlen);
	char host[EG_HOST_MAX + 3];
	struct eg_head hd;
	uint16_t port = 0;
	enum eg_reason r;

	evtimer_del(c->timer);
	/* A new request is admitted under the policy in force now, its
	 * grant verified again under that policy's key and lifetime: what
	 * the previous one verified (a key since rotated) proves nothing. */
	if (c->p != c->px->p) {
		eg_policy_free(c->p);
		c->p = eg_policy_ref(c->px->p);
		c->g_ok = false;
	}
	memset(&c->dest, 0, sizeof(c->dest));
	if ((r = eg_http_parse(buf, hlen, true, &hd)) != EG_R_NONE ||
	    (r = parse_target(c, &hd, host, sizeof(host), &port)) !=
	        EG_R_NONE) {
		reject(c, r);
		return;
	}
	c->dest.port = port;
	if (hd.proxy_auth == NULL) {
		respond(c, RESP_407, sizeof(RESP_407) - 1);
		return;
	}
	if ((r = check_grant(c, &hd)) != EG_R_NONE ||
	    (r = eg_dest_init(&c->dest, host, port, c->is_connect,
	         c->g_caps)) != EG_R_NONE ||
	    (r = eg_policy_check_dest(c->p, &c->dest)) != EG_R_NONE ||
	    (r = hold_run(c)) != EG_R_NONE) {
		reject(c, r);
		return;
	}
	c->cli_close = hd.close;
	c->expect100 = hd.expect_continue;
	evbuffer_drain(in, hlen);
	conn_arm_expiry(c);
	judge(c);
}

/*
 * Looks for a complete head in the client's input (state ST_HEAD): the
 * worker's on_head, which conn_await_head and pump.c call.
 */
void
eg_process_input(struct conn *c)
{
	struct evbuffer *in = c->cli->in;
	struct evbuffer_ptr pos;
	size_t len = evbuffer_get_length(in);
	unsigned char ch;

	if (len == 0)
		return;
	if (evbuffer_copyout(in, &ch, 1) == 1 && !eg_http_can_start(ch)) {
		reject(c, EG_R_NOT_HTTP);
		return;
	}
	pos = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (pos.pos < 0) {
		if (len > EG_HDR_MAX_BYTES)
			respond(c, RESP_431, sizeof(RESP_431) - 1);
		return;
	}
	if ((size_t)pos.pos + 4 > EG_HDR_MAX_BYTES) {
		respond(c, RESP_431, sizeof(RESP_431) - 1);
		return;
	}
	handle_head(c, (size_t)pos.pos + 4);
}
