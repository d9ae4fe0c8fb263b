#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "kz_frame.h"
#include "kz_json.h"
#include "kz_srv.h"
#include "banned.h"

enum conn_state { C_READING, C_BUSY, C_CLOSING };

struct conn {
	LIST_ENTRY(conn) link;
	struct kz_srv *srv;
	struct bufferevent *bev;
	struct event *kick;
	struct kz_peer peer;
	enum conn_state state;
	struct kz_req *pending;
};

struct kz_req {
	struct conn *conn;
	cJSON *json;
	struct kz_peer peer;
};

struct kz_srv {
	struct event_base *base;
	struct evconnlistener *lev;
	struct kz_srv_conf c;
	char *path;
	struct kz_srv_stats st;
	LIST_HEAD(, conn) conns;
};

static void conn_process(struct conn *cn);

static void
tv_ms(struct timeval *tv, int ms)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

static void
conn_free(struct conn *cn)
{
	if (cn->pending != NULL)
		cn->pending->conn = NULL;
	LIST_REMOVE(cn, link);
	cn->srv->st.open_conns--;
	event_free(cn->kick);
	bufferevent_free(cn->bev);
	free(cn);
}

/* Queues reply; a connection in C_CLOSING is freed once it is flushed. */
static void
conn_send(struct conn *cn, cJSON *reply)
{
	char *buf = NULL;
	size_t len;

	if (reply != NULL &&
	    kz_frame_encode(reply, cn->srv->c.frame_max, &buf, &len) == 0) {
		bufferevent_write(cn->bev, buf, len);
		free(buf);
	} else if (reply != NULL) {
		/* The reply itself was too large: the client gets an error. */
		cJSON *e = kz_reply_err(NULL, KZ_WE_INTERNAL,
		    "reply exceeds the frame limit");

		if (e && kz_frame_encode(e, cn->srv->c.frame_max, &buf,
		    &len) == 0) {
			bufferevent_write(cn->bev, buf, len);
			free(buf);
		}
		cJSON_Delete(e);
	}
	cJSON_Delete(reply);
}

static void
conn_fail(struct conn *cn, const char *code, const char *reason)
{
	cn->srv->st.bad_frames++;
	conn_send(cn, kz_reply_err(NULL, code, reason));
	cn->state = C_CLOSING;
	bufferevent_disable(cn->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(cn->bev)) == 0)
		conn_free(cn);
}

static const struct kz_op *
find_op(const struct kz_srv *s, const char *op)
{
	for (const struct kz_op *o = s->c.ops; o->op != NULL; o++)
		if (strcmp(o->op, op) == 0)
			return o;
	return NULL;
}

/* Checks the envelope and the op's fields; returns the op or replies. */
static const struct kz_op *
check_request(struct conn *cn, cJSON *j)
{
	static const char *const env[] = {"v", "op", "id", NULL};
	const struct kz_op *op;
	const char *name, *id;
	int64_t v;
	char why[160];

	if (kz_json_int(j, "v", 1, 1, &v, why, sizeof(why)) != 0 ||
	    kz_json_str(j, "id", 128, &id, why, sizeof(why)) != 0 ||
	    kz_json_str(j, "op", 64, &name, why, sizeof(why)) != 0)
		goto bad;
	if ((op = find_op(cn->srv, name)) == NULL) {
		kz_why(why, sizeof(why), "unknown op '%.64s'", name);
		goto bad;
	}
	for (const cJSON *c = j->child; op->fields != NULL && c; c = c->next) {
		bool ok = false;

		for (int i = 0; !ok && env[i] != NULL; i++)
			ok = strcmp(c->string, env[i]) == 0;
		for (int i = 0; !ok && op->fields[i] != NULL; i++)
			ok = strcmp(c->string, op->fields[i]) == 0;
		if (!ok) {
			kz_why(why, sizeof(why), "unknown field '%.64s'",
			    c->string);
			goto bad;
		}
	}
	return op;
bad:
	conn_send(cn, kz_reply_err(j, KZ_WE_BAD_REQUEST, why));
	return NULL;
}

/* Takes one whole frame off the input, if there is one: 1, 0 or error. */
static int
take_frame(struct conn *cn, cJSON **out, char *why, size_t wlen)
{
	struct evbuffer *in = bufferevent_get_input(cn->bev);
	unsigned char hdr[KZ_FRAME_HDR];
	struct timeval tv;
	uint32_t n;
	int r;

	if (evbuffer_get_length(in) < KZ_FRAME_HDR)
		return 0;
	evbuffer_copyout(in, hdr, sizeof(hdr));
	if ((r = kz_frame_hdr(hdr, cn->srv->c.frame_max, &n)) != 0) {
		kz_why(why, wlen, "%s", r == KZ_ETOOBIG ?
		    "frame longer than the limit" : "zero-length frame");
		return r;
	}
	if (evbuffer_get_length(in) < KZ_FRAME_HDR + (size_t)n) {
		/* Mid-frame: the rest must arrive within the I/O timeout. */
		tv_ms(&tv, cn->srv->c.io_timeout_ms);
		bufferevent_set_timeouts(cn->bev, &tv, &tv);
		return 0;
	}
	r = kz_frame_decode((const char *)evbuffer_pullup(in,
	    KZ_FRAME_HDR + n) + KZ_FRAME_HDR, n, out, why, wlen);
	evbuffer_drain(in, KZ_FRAME_HDR + n);
	return r == 0 ? 1 : r;
}

static void
conn_process(struct conn *cn)
{
	struct timeval idle, io;
	char why[160];
	cJSON *j;
	int r;

	while (cn->state == C_READING) {
		const struct kz_op *op;
		struct kz_req *req;

		if ((r = take_frame(cn, &j, why, sizeof(why))) < 0) {
			conn_fail(cn, kz_wire_code(r), why);
			return;
		}
		if (r == 0)
			break;
		cn->srv->st.requests++;
		if ((op = check_request(cn, j)) == NULL) {
			cJSON_Delete(j);
			continue;
		}
		if ((req = calloc(1, sizeof(*req))) == NULL) {
			cJSON_Delete(j);
			conn_fail(cn, KZ_WE_INTERNAL, "out of memory");
			return;
		}
		req->conn = cn;
		req->json = j;
		req->peer = cn->peer;
		cn->pending = req;
		cn->state = C_BUSY;
		bufferevent_disable(cn->bev, EV_READ);
		op->fn(req, cn->srv->c.arg);
	}
	if (cn->state == C_READING && evbuffer_get_length(
	    bufferevent_get_input(cn->bev)) == 0) {
		tv_ms(&idle, cn->srv->c.idle_timeout_ms);
		tv_ms(&io, cn->srv->c.io_timeout_ms);
		bufferevent_set_timeouts(cn->bev, &idle, &io);
	}
}

static void
kick_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *cn = arg;

	if (cn->state == C_READING) {
		bufferevent_enable(cn->bev, EV_READ);
		conn_process(cn);
	}
}

static void
read_cb(struct bufferevent *bev, void *arg)
{
	conn_process(arg);
}

static void
write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *cn = arg;

	if (cn->state == C_CLOSING)
		conn_free(cn);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	/* EOF, error or timeout: the connection is done. */
	conn_free(arg);
}

const cJSON *
kz_req_json(const struct kz_req *req)
{
	return req->json;
}

const struct kz_peer *
kz_req_peer(const struct kz_req *req)
{
	return &req->peer;
}

void
kz_req_reply(struct kz_req *req, cJSON *reply)
{
	struct conn *cn = req->conn;

	if (cn != NULL) {
		cn->pending = NULL;
		conn_send(cn, reply);
		cn->state = C_READING;
		/* Process frames that arrived meanwhile from the loop, not
		 * from inside the handler that is replying. */
		event_active(cn->kick, EV_TIMEOUT, 0);
	} else
		cJSON_Delete(reply);
	cJSON_Delete(req->json);
	free(req);
}

void
kz_req_ok(struct kz_req *req, cJSON *fields)
{
	cJSON *r = kz_reply_ok(req->json);

	for (cJSON *c = fields ? fields->child : NULL; r && c;) {
		cJSON *next = c->next;

		cJSON_AddItemToObject(r, c->string,
		    cJSON_DetachItemViaPointer(fields, c));
		c = next;
	}
	cJSON_Delete(fields);
	kz_req_reply(req, r);
}

void
kz_req_err(struct kz_req *req, const char *code, const char *reason)
{
	kz_req_reply(req, kz_reply_err(req->json, code, reason));
}

static void
accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct kz_srv *s = arg;
	struct conn *cn;

	s->st.conns++;
	if (s->st.open_conns >= s->c.max_conns ||
	    (cn = calloc(1, sizeof(*cn))) == NULL) {
		close(fd);
		return;
	}
	cn->srv = s;
	cn->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	cn->kick = event_new(s->base, -1, 0, kick_cb, cn);
	if (cn->bev == NULL || cn->kick == NULL) {
		if (cn->bev)
			bufferevent_free(cn->bev);
		else
			close(fd);
		if (cn->kick)
			event_free(cn->kick);
		free(cn);
		return;
	}
	LIST_INSERT_HEAD(&s->conns, cn, link);
	s->st.open_conns++;
	/* Never buffer more than one maximal frame from a client. */
	bufferevent_setwatermark(cn->bev, EV_READ, 0,
	    s->c.frame_max + KZ_FRAME_HDR);
	bufferevent_setcb(cn->bev, read_cb, write_cb, event_cb, cn);
	if (kz_peer_check(fd, &s->c.peers, &cn->peer) != 0) {
		s->st.peer_refused++;
		conn_send(cn, kz_reply_err(NULL, KZ_WE_UNAUTHORIZED_PEER,
		    "peer credentials are not allowed"));
		cn->state = C_CLOSING;
		return;
	}
	bufferevent_enable(cn->bev, EV_READ | EV_WRITE);
	conn_process(cn);
}

int
kz_srv_new(struct event_base *base, const struct kz_srv_conf *c,
    struct kz_srv **out, char *why, size_t wlen)
{
	struct kz_srv *s;
	int fd, r;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return KZ_ENOMEM;
	s->base = base;
	s->c = *c;
	if (s->c.frame_max == 0)
		s->c.frame_max = KZ_FRAME_MAX_DEFAULT;
	if (s->c.io_timeout_ms <= 0)
		s->c.io_timeout_ms = 5000;
	if (s->c.idle_timeout_ms <= 0)
		s->c.idle_timeout_ms = 60000;
	if (s->c.max_conns == 0)
		s->c.max_conns = 1024;
	LIST_INIT(&s->conns);
	if ((s->path = strdup(c->sock_path)) == NULL) {
		free(s);
		return KZ_ENOMEM;
	}
	if ((r = kz_sock_listen(c->sock_path, 512, &fd, why, wlen)) != 0) {
		free(s->path);
		free(s);
		return r;
	}
	s->lev = evconnlistener_new(base, accept_cb, s,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (s->lev == NULL) {
		close(fd);
		unlink(s->path);
		free(s->path);
		free(s);
		return KZ_ENOMEM;
	}
	*out = s;
	return 0;
}

void
kz_srv_free(struct kz_srv *s)
{
	if (s == NULL)
		return;
	while (!LIST_EMPTY(&s->conns))
		conn_free(LIST_FIRST(&s->conns));
	evconnlistener_free(s->lev);
	unlink(s->path);
	free(s->path);
	free(s);
}

void
kz_srv_stats(const struct kz_srv *s, struct kz_srv_stats *out)
{
	*out = s->st;
}
