#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_srv.h"
#include "srv_int.h"
#include "banned.h"

/*
 * Each connection is driven by two raw events on its socket rather than a
 * bufferevent: a request costs one read() and its reply one write(), with
 * no epoll_ctl() and no FIONREAD ioctl in between.  The read event stays
 * armed while a request is being handled (the bytes of the next frames
 * are read, up to one maximal frame, but taken only after the reply); the
 * write event is armed only when the socket could not take a reply at once.
 * This file keeps each connection's reading, framing, dispatch and
 * replies; srv_accept.c holds accepting (the peer check, each peer's
 * share, eviction at the limit) and the server's life.
 */
#define READ_CHUNK 16384
/* The most bytes of requests all connections together hold before they
 * are taken, in frames of the largest size: a peer that opens many
 * connections and leaves a large frame unfinished on each (the I/O
 * timeout ends each, not their number) would otherwise hold a frame's
 * worth of the daemon's memory per connection. */
#define IN_FRAMES 8

struct kz_req {
	struct conn *conn;
	cJSON *json;
	struct kz_peer peer;
};

static void conn_process(struct conn *cn);

static void
tv_ms(struct timeval *tv, int ms)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

void
kz_srv_conn_free(struct conn *cn)
{
	if (cn->pending != NULL)
		cn->pending->conn = NULL;
	LIST_REMOVE(cn, link);
	cn->srv->st.open_conns--;
	if (cn->rev)
		event_free(cn->rev);
	if (cn->wev)
		event_free(cn->wev);
	if (cn->kick)
		event_free(cn->kick);
	if (cn->in) {
		cn->srv->in_bytes -= evbuffer_get_length(cn->in);
		evbuffer_free(cn->in);
	}
	if (cn->out)
		evbuffer_free(cn->out);
	close(cn->fd);
	free(cn);
}

/* The connection cannot go on: it is freed from the loop, never from
 * inside a caller that still holds it. */
static void
conn_abort(struct conn *cn)
{
	cn->state = C_CLOSING;
	evbuffer_drain(cn->out, evbuffer_get_length(cn->out));
	event_active(cn->kick, EV_TIMEOUT, 0);
}

/* Arms the read event with the timeout the state calls for: none while a
 * request is handled, mid-frame what is left of the I/O timeout since the
 * frame began (a peer that drips a byte now and then gets no more time),
 * else the idle timeout. */
void
kz_srv_arm_read(struct conn *cn)
{
	size_t have = evbuffer_get_length(cn->in);
	struct timeval tv;
	int64_t now, left;

	if (cn->eof || cn->state == C_CLOSING ||
	    have >= cn->srv->c.frame_max + KZ_FRAME_HDR) {
		if (cn->reading)
			event_del(cn->rev);
		cn->reading = false;
		return;
	}
	if (cn->state == C_BUSY) {
		if (!cn->reading)
			event_add(cn->rev, NULL);
		else
			event_remove_timer(cn->rev);
	} else if (have > 0) {
		now = kz_now_ms();
		if (cn->frame_t0 == 0)
			cn->frame_t0 = now;
		left = cn->srv->c.io_timeout_ms - (now - cn->frame_t0);
		tv_ms(&tv, left > 0 ? (int)left : 1);
		event_add(cn->rev, &tv);
	} else {
		cn->frame_t0 = 0;
		tv_ms(&tv, cn->srv->c.idle_timeout_ms);
		event_add(cn->rev, &tv);
	}
	cn->reading = true;
}

/* Writes what the socket takes now; the rest waits for the write event. */
static void
flush_out(struct conn *cn)
{
	struct timeval tv;
	int n;

	while (evbuffer_get_length(cn->out) > 0) {
		n = evbuffer_write(cn->out, cn->fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			conn_abort(cn);
			return;
		}
	}
	if (evbuffer_get_length(cn->out) > 0) {
		tv_ms(&tv, cn->srv->c.io_timeout_ms);
		event_add(cn->wev, &tv);
	} else {
		event_del(cn->wev);
		if (cn->state == C_CLOSING)
			event_active(cn->kick, EV_TIMEOUT, 0);
	}
}

/* Queues reply and sends it at once when the socket takes it. */
void
kz_srv_conn_send(struct conn *cn, cJSON *reply)
{
	char small[4096], *buf = NULL;
	size_t len;
	int r = KZ_ENOMEM;

	if (reply != NULL &&
	    (r = kz_frame_encode_to(reply, cn->srv->c.reply_max, small,
	         sizeof(small), &len)) == 0)
		evbuffer_add(cn->out, small, len);
	else if (r == KZ_ENOSPC &&
	    kz_frame_encode(reply, cn->srv->c.reply_max, &buf, &len) == 0) {
		evbuffer_add(cn->out, buf, len);
		free(buf);
	} else if (reply != NULL) {
		/* The reply itself was too large: the client gets an error. */
		cJSON *e = kz_reply_err(NULL, KZ_WE_INTERNAL,
		    "reply exceeds the frame limit");

		if (e &&
		    kz_frame_encode(e, cn->srv->c.reply_max, &buf, &len) == 0) {
			evbuffer_add(cn->out, buf, len);
			free(buf);
		}
		cJSON_Delete(e);
	}
	cJSON_Delete(reply);
	flush_out(cn);
}

/* One error reply, then the connection is closed. */
static void
conn_end(struct conn *cn, const char *code, const char *reason)
{
	kz_srv_conn_send(cn, kz_reply_err(NULL, code, reason));
	cn->state = C_CLOSING;
	kz_srv_arm_read(cn);
	if (evbuffer_get_length(cn->out) == 0)
		event_active(cn->kick, EV_TIMEOUT, 0);
}

static void
conn_fail(struct conn *cn, const char *code, const char *reason)
{
	cn->srv->st.bad_frames++;
	conn_end(cn, code, reason);
}

static const struct kz_op *
find_op(const struct kz_op *ops, const char *op)
{
	for (const struct kz_op *o = ops; o->op != NULL; o++)
		if (strcmp(o->op, op) == 0)
			return o;
	return NULL;
}

bool
kz_peer_is_operator(const struct kz_peer_policy *policy,
    const struct kz_peer *peer)
{
	/* Root and the daemon's own uid could stop or replace the daemon
	 * anyway: refusing them an operator op would protect nothing. */
	if (peer->uid == 0 || peer->uid == geteuid())
		return true;
	for (size_t i = 0; i < policy->nuids; i++)
		if (policy->uids[i] == peer->uid)
			return true;
	for (size_t i = 0; i < policy->ngids; i++)
		if (policy->gids[i] == peer->gid)
			return true;
	return false;
}

int
kz_srv_peers_load(const struct kz_conf *kc, struct kz_peer_policy *peers,
    struct kz_peer_policy *operators, char *why, size_t wlen)
{
	int r;

	if ((r = kz_peer_policy_parse(kz_conf_str(kc, "KZ_PEER_UIDS", ""),
	         kz_conf_str(kc, "KZ_PEER_GIDS", ""), peers, why, wlen)) != 0)
		return r;
	if (operators == NULL)
		return 0;
	return kz_peer_policy_parse(kz_conf_str(kc, "KZ_OPERATOR_UIDS", ""),
	    kz_conf_str(kc, "KZ_OPERATOR_GIDS", ""), operators, why, wlen);
}

/* Every member is one of the envelope's or the op's own fields. */
static bool
fields_ok(const struct kz_op *op, const cJSON *j, char *why, size_t wlen)
{
	static const char *const env[] = {"v", "op", "id", NULL};

	for (const cJSON *c = j->child; op->fields != NULL && c; c = c->next) {
		bool ok = false;

		for (int i = 0; !ok && env[i] != NULL; i++)
			ok = strcmp(c->string, env[i]) == 0;
		for (int i = 0; !ok && op->fields[i] != NULL; i++)
			ok = strcmp(c->string, op->fields[i]) == 0;
		if (!ok) {
			kz_why(why, wlen, "unknown field '%.64s'", c->string);
			return false;
		}
	}
	return true;
}

const struct kz_op *
kz_op_check(const struct kz_srv_conf *c, const cJSON *j,
    const struct kz_peer *peer, const char **code, char *why, size_t wlen)
{
	const struct kz_op *op;
	const char *name, *id;
	int64_t v;

	*code = KZ_WE_BAD_REQUEST;
	if (kz_json_int(j, "v", 1, 1, &v, why, wlen) != 0 ||
	    kz_json_str(j, "id", 128, &id, why, wlen) != 0 ||
	    kz_json_str(j, "op", 64, &name, why, wlen) != 0)
		return NULL;
	if ((op = find_op(c->ops, name)) == NULL) {
		kz_why(why, wlen, "unknown op '%.64s'", name);
		return NULL;
	}
	if (!fields_ok(op, j, why, wlen))
		return NULL;
	/* Standing before state: an operator op tells a stranger nothing
	 * about admission. */
	if ((op->flags & KZ_OP_OPERATOR) &&
	    !kz_peer_is_operator(&c->operators, peer)) {
		*code = KZ_WE_OPERATOR_ONLY;
		kz_why(why, wlen, "'%s' is for operators only", op->op);
		return NULL;
	}
	if ((op->flags & KZ_OP_ADMIT) && c->admit != NULL) {
		kz_why(why, wlen, "admission closed");
		if (!c->admit(c->arg, why, wlen)) {
			*code = KZ_WE_ADMISSION_CLOSED;
			return NULL;
		}
	}
	return op;
}

/* Checks the envelope, the op's fields and flags; returns the op or
 * replies. */
static const struct kz_op *
check_request(struct conn *cn, cJSON *j)
{
	const struct kz_op *op;
	const char *code;
	char why[160];

	if ((op = kz_op_check(&cn->srv->c, j, &cn->peer, &code, why,
	         sizeof(why))) == NULL)
		kz_srv_conn_send(cn, kz_reply_err(j, code, why));
	return op;
}

/* The length of the frame at the front of the input in *n: 0, 1 while
 * fewer bytes than a header are in, or kz_frame_hdr's error. */
static int
front_frame(struct conn *cn, uint32_t *n)
{
	unsigned char hdr[KZ_FRAME_HDR];

	if (evbuffer_get_length(cn->in) < KZ_FRAME_HDR)
		return 1;
	evbuffer_copyout(cn->in, hdr, sizeof(hdr));
	return kz_frame_hdr(hdr, cn->srv->c.frame_max, n);
}

/* Takes one whole frame off the input, if there is one: 1, 0 or error. */
static int
take_frame(struct conn *cn, cJSON **out, char *why, size_t wlen)
{
	uint32_t n;
	int r;

	if ((r = front_frame(cn, &n)) == 1)
		return 0;
	if (r != 0) {
		kz_why(why, wlen, "%s",
		    r == KZ_ETOOBIG ? "frame longer than the limit" :
		                      "zero-length frame");
		return r;
	}
	/* mid-frame: kz_srv_arm_read() sets the I/O timeout */
	if (evbuffer_get_length(cn->in) < KZ_FRAME_HDR + (size_t)n)
		return 0;
	r = kz_frame_decode((const char *)evbuffer_pullup(cn->in,
	                        KZ_FRAME_HDR + n) +
	        KZ_FRAME_HDR,
	    n, out, why, wlen);
	evbuffer_drain(cn->in, KZ_FRAME_HDR + n);
	cn->srv->in_bytes -= KZ_FRAME_HDR + n;
	cn->frame_t0 = 0; /* the next frame's time starts when it does */
	return r == 0 ? 1 : r;
}

/* Runs the frames that are in; called only from the loop's callbacks,
 * so it may free the connection. */
static void
conn_process(struct conn *cn)
{
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
		op->fn(req, cn->srv->c.arg);
	}
	if (cn->state == C_READING && cn->eof) {
		/* The peer is done and every whole frame is answered. */
		cn->state = C_CLOSING;
		if (evbuffer_get_length(cn->out) == 0) {
			kz_srv_conn_free(cn);
			return;
		}
	}
	kz_srv_arm_read(cn);
}

void
kz_srv_kick_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *cn = arg;

	if (cn->state == C_READING)
		conn_process(cn);
	else if (cn->state == C_CLOSING && evbuffer_get_length(cn->out) == 0)
		kz_srv_conn_free(cn);
}

/* The bound was met: said in the log at most once every ten seconds (a
 * peer that keeps meeting it does not flood the log). */
static void
busy_note(struct kz_srv *s)
{
	int64_t now = kz_now_ms();

	if (now - s->busy_logged_ms < 10000)
		return;
	s->busy_logged_ms = now;
	kz_log(KZ_LOG_WARN, "srv.busy", KZ_EUNAVAIL,
	    "connections hold as many unfinished requests as the server "
	    "takes: the next one is refused busy",
	    NULL);
}

/* Whether the input begins with a whole frame (or a bad header, which
 * take_frame refuses on its own). */
static bool
whole_frame(struct conn *cn)
{
	uint32_t n;
	int r = front_frame(cn, &n);

	return r < 0 ||
	    (r == 0 && evbuffer_get_length(cn->in) >= KZ_FRAME_HDR + (size_t)n);
}

void
kz_srv_read_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *cn = arg;
	size_t room = cn->srv->c.frame_max + KZ_FRAME_HDR -
	    evbuffer_get_length(cn->in);
	struct evbuffer_iovec v;
	ssize_t n;

	if (ev & EV_TIMEOUT) {
		kz_srv_conn_free(cn); /* idle, or a frame too slow to arrive */
		return;
	}
	if (room > READ_CHUNK)
		room = READ_CHUNK;
	if (room == 0 ||
	    evbuffer_reserve_space(cn->in, (ev_ssize_t)room, &v, 1) < 1) {
		kz_srv_arm_read(cn);
		return;
	}
	n = read(fd, v.iov_base, v.iov_len < room ? v.iov_len : room);
	if (n > 0) {
		v.iov_len = (size_t)n;
		evbuffer_commit_space(cn->in, &v, 1);
		cn->srv->in_bytes += (size_t)n;
		/* Over the bound, a connection whose input is no whole frame
		 * yet is told busy and closed: its bytes are given back, and
		 * whole frames (every small request) are still taken. */
		if (cn->srv->in_bytes > IN_FRAMES * cn->srv->c.frame_max &&
		    !whole_frame(cn)) {
			busy_note(cn->srv);
			conn_end(cn, KZ_WE_BUSY,
			    "the server holds as many unfinished requests as "
			    "it "
			    "takes");
			return;
		}
	} else if (n == 0)
		cn->eof = true;
	else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		kz_srv_conn_free(cn); /* reset by the peer */
		return;
	}
	if (cn->state == C_READING)
		conn_process(cn);
	else if (cn->eof || n > 0)
		kz_srv_arm_read(cn);
}

void
kz_srv_write_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *cn = arg;

	if (ev & EV_TIMEOUT) {
		kz_srv_conn_free(cn); /* the peer does not take its reply */
		return;
	}
	flush_out(cn);
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
		cn->state = C_READING;
		kz_srv_conn_send(cn, reply);
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
