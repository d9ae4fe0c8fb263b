/*
 * A session is a lease, not a stored row: the worker comes from kz-lease
 * for the workspace key of actor and conversation, the grant from
 * "kz-egress grant" (as kz-run gets one), the opening URL's destination is
 * admitted by "kz-egress check" before any navigation, and Chromium is the
 * worker's (op browser), reached through its bridge.  Ending the session
 * closes the bridge (the worker kills Chromium's namespaces, and the
 * profile's tmpfs with them) and releases the lease.
 *
 * This file keeps the session's life: the opening address and its
 * admission, the lease, the grant, the bridge, renewal and the end;
 * session_page.c holds what a session does with its page: navigate,
 * screenshot and input.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_call.h"
#include "kz_conf.h"
#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_sock.h"
#include "kz_wire.h"
#include "kzb.h"
#include "session_int.h"
#include "banned.h"

void
kzb_out_set(struct kzb_out *o, const char *code, const char *why)
{
	o->code = code;
	snprintf(o->why, sizeof(o->why), "%s", why);
}

/* A daemon's wire code as our own constant (the reply it came in is
 * freed before the code is used). */
static const char *
wire(const char *code)
{
#define KZB_WIRE_(name, str, exit)                                             \
	if (code != NULL && strcmp(code, str) == 0)                            \
		return KZ_WE_##name;
	KZ_WIRE_CODES(KZB_WIRE_)
#undef KZB_WIRE_
	return KZ_WE_INTERNAL;
}

static cJSON *
request(const char *op, const char *id)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddNumberToObject(r, "v", 1);
	cJSON_AddStringToObject(r, "op", op);
	cJSON_AddStringToObject(r, "id", id);
	return r;
}

const char *
kzb_str(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void
copy(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src != NULL ? src : "");
}

int
kzb_egress_run(const char *const *av, char *out, size_t olen)
{
	size_t t = 0;
	ssize_t n;
	int p[2], st, fd;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		if ((fd = open("/dev/null", O_WRONLY)) >= 0)
			dup2(fd, 2);
		execv(av[0], (char *const *)av);
		_exit(127);
	}
	close(p[1]);
	while (out != NULL && t < olen - 1 &&
	    (n = read(p[0], out + t, olen - 1 - t)) > 0)
		t += (size_t)n;
	close(p[0]);
	if (out != NULL) {
		out[t] = '\0';
		out[strcspn(out, "\r\n")] = '\0';
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
grant(const struct kzb_conf *c, const char *sid, char *g, size_t glen)
{
	/* With TURN on, the grant carries the capability that lets the
	 * relay CONNECT to exactly the TURN server and nothing else. */
	const char *av[10] = {c->egress_bin, "grant", "--field-key",
	    c->key_file, "--run", sid};
	int n = 6;

	if (c->turn_host[0] != '\0') {
		av[n++] = "--cap";
		av[n++] = "turn";
	}
	if (c->egress_conf[0] != '\0') {
		av[n++] = "--config";
		av[n++] = c->egress_conf;
	}
	av[n] = NULL;
	return kzb_egress_run(av, g, glen) == 0 && g[0] != '\0' ? 0 :
	                                                          KZ_EUNAVAIL;
}

/* A destination under the egress policy (with the TURN capability when
 * turn): 0 admitted. */
static int
admitted(const struct kzb_conf *c, const char *host, int port, bool turn)
{
	char p[8], line[256];
	const char *av[10] = {c->egress_bin, "check"};
	int n = 2;

	snprintf(p, sizeof(p), "%d", port);
	if (c->egress_conf[0] != '\0') {
		av[n++] = "--config";
		av[n++] = c->egress_conf;
	}
	if (turn) {
		av[n++] = "--cap";
		av[n++] = "turn";
	}
	av[n++] = host;
	av[n++] = p;
	av[n] = NULL;
	return kzb_egress_run(av, line, sizeof(line)) == 0 ? 0 : KZ_EDENIED;
}

int
kzb_url_origin(const char *url, char *origin, size_t olen, char *host,
    size_t hlen, int *port)
{
	const char *h, *end;
	size_t hl, sl;
	bool tls;

	origin[0] = '\0';
	/* Chromium reads a backslash as a slash and drops tabs and newlines:
	 * an address whose authority it would see differently is refused. */
	for (const char *q = url; *q; q++)
		if (*q == '\\' || (unsigned char)*q <= ' ' || *q == 0x7f)
			return KZ_EINVAL;
	if (strncmp(url, "http://", 7) == 0)
		tls = false, sl = 7;
	else if (strncmp(url, "https://", 8) == 0)
		tls = true, sl = 8;
	else
		return KZ_EINVAL;
	h = url + sl;
	end = h + strcspn(h, "/?#");
	/* No userinfo: a URL that carries credentials is not admitted. */
	if (memchr(h, '@', (size_t)(end - h)) != NULL || end == h || *h == '[')
		return KZ_EINVAL;
	*port = tls ? 443 : 80;
	{
		const char *colon = memchr(h, ':', (size_t)(end - h));
		int64_t v;
		char pb[8];

		hl = (size_t)((colon ? colon : end) - h);
		if (colon != NULL) {
			size_t pl = (size_t)(end - colon - 1);

			if (pl == 0 || pl >= sizeof(pb))
				return KZ_EINVAL;
			memcpy(pb, colon + 1, pl);
			pb[pl] = '\0';
			if (kz_parse_int(pb, 1, 65535, &v) != 0)
				return KZ_EINVAL;
			*port = (int)v;
		}
	}
	if (hl == 0 || hl >= hlen || (size_t)(end - url) >= olen)
		return KZ_EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	for (char *q = host; *q; q++)
		if (*q >= 'A' && *q <= 'Z')
			*q = (char)(*q - 'A' + 'a');
	snprintf(origin, olen, "%.*s%s", (int)sl, url, host);
	if (*port != (tls ? 443 : 80))
		snprintf(origin + strlen(origin), olen - strlen(origin), ":%d",
		    *port);
	return 0;
}

static int
lease(const struct kzb_conf *c, struct kzb_session *s, struct kzb_out *o)
{
	unsigned char b[16];
	char opid[33], why[160];
	cJSON *req = request("lease", s->id), *rep = NULL;
	const char *code;
	int64_t ttl, sent = kz_now_ms();
	int e;

	randombytes_buf(b, sizeof(b));
	kz_hex(b, sizeof(b), opid);
	cJSON_AddStringToObject(req, "actor", s->actor);
	cJSON_AddStringToObject(req, "conversation", s->conv);
	cJSON_AddStringToObject(req, "op_id", opid);
	cJSON_AddStringToObject(req, "run_id", s->id);
	e = kz_frame_call(c->lease_sock, req, (int)c->io_timeout_ms, &rep, why,
	    sizeof(why));
	cJSON_Delete(req);
	if (e != 0) {
		kzb_out_set(o, KZ_WE_UNAVAILABLE,
		    "the lease service could not be reached");
		return KZ_EUNAVAIL;
	}
	if (!cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		code = kzb_str(rep, "error");
		kzb_out_set(o, wire(code),
		    code != NULL && strcmp(code, KZ_WE_BUSY) == 0 ?
		        "no worker is free for a browser session now" :
		        "the lease service refused a worker for this session");
		cJSON_Delete(rep);
		return KZ_EDENIED;
	}
	copy(s->worker, sizeof(s->worker), kzb_str(rep, "worker"));
	copy(s->lease_id, sizeof(s->lease_id), kzb_str(rep, "lease_id"));
	copy(s->token, sizeof(s->token), kzb_str(rep, "token"));
	copy(s->endpoint, sizeof(s->endpoint), kzb_str(rep, "endpoint"));
	e = kz_json_int(rep, "ttl_ms", 100, 86400000, &ttl, NULL, 0);
	cJSON_Delete(rep);
	if (e != 0 || s->lease_id[0] == '\0' || s->endpoint[0] == '\0') {
		kzb_out_set(o, KZ_WE_INTERNAL,
		    "the lease service answered badly");
		return KZ_EPROTO;
	}
	s->leased = true;
	s->ttl_ms = ttl;
	s->valid_until = sent + ttl;
	s->next_renew = sent + ttl / 3;
	return 0;
}

/* The worker's op browser: the bridge's socket, connected. */
static int
bridge(const struct kzb_conf *c, struct kzb_session *s, const char *g,
    struct kzb_out *o)
{
	cJSON *req = request("browser", s->id), *rep = NULL;
	const char *code, *reason, *path;
	char why[160];
	int e;

	cJSON_AddStringToObject(req, "grant", g);
	/* Only with TURN does the worker give Chromium what WebRTC needs to
	 * gather (an interface, NETLINK_ROUTE): without it, nothing. */
	if (c->turn_host[0] != '\0')
		cJSON_AddTrueToObject(req, "webrtc");
	e = kz_frame_call(s->endpoint, req, (int)c->io_timeout_ms, &rep, why,
	    sizeof(why));
	cJSON_Delete(req);
	if (e != 0) {
		kzb_out_set(o, KZ_WE_UNAVAILABLE, "the worker did not answer");
		return KZ_EUNAVAIL;
	}
	if (!cJSON_IsTrue(kz_json_get(rep, "ok")) ||
	    (path = kzb_str(rep, "bridge")) == NULL) {
		code = kzb_str(rep, "error");
		reason = kzb_str(rep, "reason");
		/* The worker's reasons name no path or address. */
		kzb_out_set(o, wire(code),
		    reason != NULL ? reason : "the worker refused the browser");
		cJSON_Delete(rep);
		return KZ_EDENIED;
	}
	e = kz_sock_connect(path, (int)c->io_timeout_ms, &s->cdp.fd, why,
	    sizeof(why));
	cJSON_Delete(rep);
	if (e != 0) {
		kzb_out_set(o, KZ_WE_UNAVAILABLE,
		    "the worker's browser could not be reached");
		return KZ_EUNAVAIL;
	}
	(void)!kz_fd_nonblock(s->cdp.fd, false);
	return 0;
}

int
kzb_session_open(const struct kzb_conf *c, struct kzb_session *s,
    const char *url, struct kzb_out *o)
{
	char host[256];
	unsigned char b[16];
	int port;

	s->cdp.fd = -1;
	randombytes_buf(b, sizeof(b));
	kz_hex(b, sizeof(b), s->id);
	s->t0 = kz_now_ms();
	if (kzb_url_origin(url, s->origin, sizeof(s->origin), host,
	        sizeof(host), &port) != 0) {
		kzb_out_set(o, KZ_WE_BAD_REQUEST,
		    "a session opens on an http or https address without "
		    "credentials in it");
		return KZ_EINVAL;
	}
	if (admitted(c, host, port, false) != 0) {
		kzb_out_set(o, KZ_WE_REFUSED,
		    "the egress policy does not admit the opening address");
		return KZ_EDENIED;
	}
	return lease(c, s, o);
}

int
kzb_session_start(const struct kzb_conf *c, struct kzb_session *s,
    struct kzb_out *o)
{
	char g[KZB_GRANT_MAX], why[160];
	int e;

	/* TURN configured here but not admitted by the egress policy is a
	 * deployment whose two halves disagree: refused, not run without. */
	if (c->turn_host[0] != '\0' &&
	    admitted(c, c->turn_host, c->turn_port, true) != 0) {
		kzb_out_set(o, KZ_WE_UNAVAILABLE,
		    "the egress policy does not admit the TURN server");
		return KZ_EUNAVAIL;
	}
	if ((e = kzb_turn_script(c, s->id, &s->cdp.inject, o)) != 0)
		return e;
	if (grant(c, s->id, g, sizeof(g)) != 0) {
		kzb_out_set(o, KZ_WE_UNAVAILABLE,
		    "no egress grant could be made");
		return KZ_EUNAVAIL;
	}
	e = bridge(c, s, g, o);
	sodium_memzero(g, sizeof(g));
	if (e != 0)
		return e;
	if ((e = kzb_cdp_page(&s->cdp, c->nav_timeout_ms, why, sizeof(why))) !=
	    0) {
		kzb_out_set(o, KZ_WE_UNAVAILABLE,
		    e == KZ_ETIMEDOUT ? "the browser did not start in time" :
		                        "the browser did not start");
		return e;
	}
	return 0;
}

bool
kzb_session_keep(const struct kzb_conf *c, struct kzb_session *s, bool force)
{
	cJSON *req, *rep = NULL;
	int64_t sent = kz_now_ms(), ttl;
	char why[160];
	int e;

	if (!s->leased || sent >= s->valid_until - 500)
		return false;
	if (sent < s->next_renew && !force)
		return true;
	req = request("renew", s->id);
	cJSON_AddStringToObject(req, "lease_id", s->lease_id);
	cJSON_AddStringToObject(req, "token", s->token);
	cJSON_AddNumberToObject(req, "ttl_ms", (double)s->ttl_ms);
	e = kz_frame_call(c->lease_sock, req, (int)c->io_timeout_ms, &rep, why,
	    sizeof(why));
	cJSON_Delete(req);
	if (e == 0 && cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		if (kz_json_int(rep, "ttl_ms", 100, 86400000, &ttl, NULL, 0) !=
		    0)
			ttl = s->ttl_ms;
		s->valid_until = sent + ttl;
		s->next_renew = sent + ttl / 3;
	} else if (e == 0) {
		/* Refused: the lease is gone (stale token, not owner). */
		s->leased = false;
	} else
		s->next_renew = sent + 500;
	cJSON_Delete(rep);
	return s->leased;
}

void
kzb_session_end(const struct kzb_conf *c, struct kzb_session *s)
{
	cJSON *req, *rep = NULL;
	char why[160];

	if (s->cdp.fd >= 0) {
		/* The bridge ends Chromium as soon as its peer is gone and
		 * closes its side only once Chromium's namespaces are: wait
		 * for that, so the worker's reset finds none of it. */
		char b[4096];
		int64_t until = kz_now_ms() + 5000;
		struct pollfd p = {.fd = s->cdp.fd, .events = POLLIN};

		(void)shutdown(s->cdp.fd, SHUT_WR);
		while (kz_now_ms() < until && poll(&p, 1, 200) >= 0)
			if ((p.revents & (POLLIN | POLLHUP)) &&
			    read(s->cdp.fd, b, sizeof(b)) <= 0)
				break;
		close(s->cdp.fd);
		s->cdp.fd = -1;
	}
	if (!s->leased)
		return;
	req = request("release", s->id);
	cJSON_AddStringToObject(req, "lease_id", s->lease_id);
	cJSON_AddStringToObject(req, "token", s->token);
	cJSON_AddStringToObject(req, "run_id", s->id);
	(void)!kz_frame_call(c->lease_sock, req, (int)c->io_timeout_ms, &rep,
	    why, sizeof(why));
	cJSON_Delete(req);
	cJSON_Delete(rep);
	s->leased = false;
}
