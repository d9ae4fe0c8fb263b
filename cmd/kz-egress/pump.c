/*
 * Moving bytes: the pinned upstream connect, request and response bodies
 * (each framed exactly once, by the strict parser), interim responses and
 * CONNECT tunnels.  Every direction has a high-water mark: a slow reader
 * stops the other side from being read, so memory per connection stays
 * bounded whatever the peers do.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "conn.h"
#include "kz_log.h"
#include "banned.h"

#define HIGH SIO_HIGH

static const char RESP_200[] = "HTTP/1.1 200 Connection established\r\n\r\n";
static const char RESP_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

static void pump_req(struct conn *c);
static void pump_resp(struct conn *c);

static void
bad_gateway(struct conn *c)
{
	conn_close_up(c);
	if (!c->resp_head_done)
		evbuffer_add(c->cli->out, eg_resp_502, strlen(eg_resp_502));
	conn_close_after_flush(c);
}

/* The request and the response are both through: next request or close. */
static void
exchange_check(struct conn *c)
{
	if (!c->resp_done)
		return;
	/* A body the origin did not wait for cannot be resynchronized. */
	if (!c->req_done)
		c->cli_close = true;
	if (c->up_close)
		conn_close_up(c);
	if (c->cli_close) {
		conn_close_up(c);
		conn_close_after_flush(c);
		return;
	}
	sio_read(c->cli, true);
	conn_await_head(c);
}

/* Bytes of a chunked body at the front of in; -1 when malformed. */
static long
scan_chunked(struct evbuffer *in, struct eg_chunk *ck, bool *done)
{
	struct evbuffer_iovec v[16];
	int nv = evbuffer_peek(in, -1, NULL, v, 16);
	long total = 0, r;

	*done = false;
	for (int i = 0; i < nv && i < 16 && !*done; i++) {
		if ((r = eg_chunk_feed(ck, v[i].iov_base, v[i].iov_len, done)) <
		    0)
			return -1;
		total += r;
	}
	return total;
}

/* Moves one message body from src to dst; returns -1 on bad framing. */
static int
move_body(struct evbuffer *src, struct evbuffer *dst, enum body_mode mode,
    uint64_t *left, struct eg_chunk *ck, bool *done)
{
	size_t n;
	long k;

	*done = false;
	while ((n = evbuffer_get_length(src)) > 0 && !*done) {
		switch (mode) {
		case BODY_LENGTH:
			if (n > *left)
				n = (size_t)*left;
			evbuffer_remove_buffer(src, dst, n);
			*left -= n;
			*done = *left == 0;
			break;
		case BODY_CHUNKED:
			if ((k = scan_chunked(src, ck, done)) < 0)
				return -1;
			evbuffer_remove_buffer(src, dst, (size_t)k);
			break;
		case BODY_UNTIL_CLOSE:
			evbuffer_add_buffer(dst, src);
			break;
		case BODY_NONE:
			*done = true;
			break;
		}
		if (evbuffer_get_length(dst) > HIGH)
			break;
	}
	return 0;
}

static void
pump_req(struct conn *c)
{
	bool done;

	if (c->req_done)
		return;
	if (move_body(c->cli->in, c->up->out, c->req_mode, &c->req_left,
	        &c->req_ck, &done) != 0) {
		kz_log(KZ_LOG_INFO, "egress.bad_request", 0,
		    "malformed request body", "reason",
		    eg_reason_str(EG_R_BAD_CHUNK), NULL);
		bad_gateway(c);
		return;
	}
	sio_flush(c->up);
	if (sio_pending(c->up) > HIGH)
		sio_read(c->cli, false);
	if (done) {
		c->req_done = true;
		exchange_check(c);
	} else if (c->cli_eof && evbuffer_get_length(c->cli->in) == 0) {
		/* The client shut its side before its body was through. */
		bad_gateway(c);
	}
}

static void
pump_resp(struct conn *c)
{
	bool done;

	if (move_body(c->up->in, c->cli->out, c->resp_mode, &c->resp_left,
	        &c->resp_ck, &done) != 0) {
		bad_gateway(c);
		return;
	}
	sio_flush(c->cli);
	if (sio_pending(c->cli) > HIGH)
		sio_read(c->up, false);
	if (done && c->resp_mode != BODY_UNTIL_CLOSE) {
		c->resp_done = true;
		exchange_check(c);
	}
}

/* The response head, minus hop-by-hop fields, with our Connection. */
static void
write_resp_head(struct conn *c, const char *buf, const struct eg_head *hd,
    bool final)
{
	struct evbuffer *o = c->cli->out;
	const char *eol = memchr(buf, '\r', EG_HDR_MAX_BYTES);

	evbuffer_add(o, "HTTP/1.1", 8);
	evbuffer_add(o, buf + 8, (size_t)(eol - buf) - 8);
	evbuffer_add(o, "\r\n", 2);
	conn_add_fields(o, hd);
	if (final && c->cli_close)
		evbuffer_add(o, "Connection: close\r\n", 19);
	else if (final)
		evbuffer_add(o, "Connection: keep-alive\r\n", 24);
	evbuffer_add(o, "\r\n", 2);
}

/*
 * Passes on the interim (1xx) heads at the front of the upstream's input,
 * at most EG_INTERIM_MAX in an exchange, up to the final head: 1 with it
 * parsed into hd (its hlen bytes at *buf), 0 while more must arrive or the
 * client must read first, -1 when the exchange must end in a 502.
 */
static int
interim_heads(struct conn *c, struct eg_head *hd, char **buf, size_t *hlen)
{
	struct evbuffer *in = c->up->in;
	struct evbuffer_ptr pos;
	size_t n;

	for (;;) {
		/* The client's output is bounded here as in pump_resp: the
		 * rest waits upstream until the client has read (on_write). */
		if (sio_pending(c->cli) > HIGH) {
			sio_read(c->up, false);
			return 0;
		}
		pos = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (pos.pos < 0) {
			/* No whole head yet: wait, unless what is there
			 * can never begin one. */
			if ((n = evbuffer_get_length(in)) > EG_HDR_MAX_BYTES)
				return -1;
			if (n == 0)
				return 0;
			*buf = (char *)evbuffer_pullup(in, (ev_ssize_t)n);
			return eg_http_resp_prefix_ok(*buf, n) ? 0 : -1;
		}
		*hlen = (size_t)pos.pos + 4;
		*buf = (char *)evbuffer_pullup(in, (ev_ssize_t)*hlen);
		if (*hlen > EG_HDR_MAX_BYTES ||
		    eg_http_parse(*buf, *hlen, false, hd) != EG_R_NONE ||
		    hd->status == 101)
			return -1;
		if (hd->status >= 200)
			return 1;
		if (++c->interim > EG_INTERIM_MAX) {
			kz_log(KZ_LOG_INFO, "egress.upstream", 0,
			    "too many interim responses", "host", c->up_host,
			    NULL);
			return -1;
		}
		write_resp_head(c, *buf, hd, false);
		evbuffer_drain(in, *hlen);
		sio_flush(c->cli);
	}
}

static void
resp_head(struct conn *c)
{
	struct evbuffer *in = c->up->in;
	struct eg_head hd;
	size_t hlen;
	char *buf;
	int r;

	if ((r = interim_heads(c, &hd, &buf, &hlen)) < 0)
		bad_gateway(c);
	if (r <= 0)
		return;
	if (c->is_head || hd.status == 204 || hd.status == 304)
		c->resp_mode = BODY_NONE;
	else if (hd.chunked)
		c->resp_mode = BODY_CHUNKED;
	else if (hd.has_length)
		c->resp_mode = BODY_LENGTH;
	else
		c->resp_mode = BODY_UNTIL_CLOSE;
	c->resp_left = hd.length;
	memset(&c->resp_ck, 0, sizeof(c->resp_ck));
	c->up_close = hd.close || c->resp_mode == BODY_UNTIL_CLOSE;
	if (c->resp_mode == BODY_UNTIL_CLOSE)
		c->cli_close = true;
	write_resp_head(c, buf, &hd, true);
	evbuffer_drain(in, hlen);
	c->resp_head_done = true;
	if (c->resp_mode == BODY_NONE ||
	    (c->resp_mode == BODY_LENGTH && c->resp_left == 0)) {
		sio_flush(c->cli);
		c->resp_done = true;
		exchange_check(c);
		return;
	}
	pump_resp(c);
}

static void
cli_read(struct sio *b, void *arg)
{
	struct conn *c = arg;

	switch (c->st) {
	case ST_HEAD:
		c->px->on_head(c);
		break;
	case ST_EXCHANGE:
		pump_req(c);
		break;
	default:
		break;
	}
}

static void
up_read(struct sio *b, void *arg)
{
	struct conn *c = arg;

	switch (c->st) {
	case ST_EXCHANGE:
		if (!c->resp_head_done)
			resp_head(c);
		else
			pump_resp(c);
		break;
	case ST_CLOSING:
		break;
	default:
		/* An idle upstream has nothing to say: drop it. */
		conn_close_up(c);
		break;
	}
}

/* Output drained: read the other side again. */
static void
on_write(struct sio *b, void *arg)
{
	struct conn *c = arg;
	struct sio *other = b == c->cli ? c->up : c->cli;

	if (c->st == ST_CLOSING) {
		conn_free(c);
		return;
	}
	if (other == NULL)
		return;
	sio_read(other, true);
	if (c->st == ST_EXCHANGE && b == c->up)
		pump_req(c);
	else if (c->st == ST_EXCHANGE && c->resp_head_done)
		pump_resp(c);
	else if (c->st == ST_EXCHANGE)
		resp_head(c);
}

/*
 * The client's end: an error, or end of input.  A client that shuts its
 * writing side after a whole request (shutdown(SHUT_WR), as nc -N or a
 * one-shot script does) still gets its answer: once the request head is
 * taken, the request is followed through (its body, a CONNECT's tunnel,
 * which passes the shutdown on) and the connection closed after the
 * response.  Waiting for a head, or with a body that can never be
 * complete, it ends at once.
 */
static void
cli_event(struct sio *b, short what, void *arg)
{
	struct conn *c = arg;

	if (!(what & SIO_EOF) || c->st == ST_HEAD || c->st == ST_CLOSING ||
	    c->cli_eof) {
		conn_free(c);
		return;
	}
	c->cli_eof = true;
	c->cli_close = true;
	if (c->st == ST_EXCHANGE && !c->req_done)
		pump_req(c);
}

static void
on_connected(struct conn *c)
{
	struct timeval idle = {(time_t)c->p->idle_timeout, 0}, now;
	int one = 1;

	(void)setsockopt(c->up->fd, IPPROTO_TCP, TCP_NODELAY, &one,
	    sizeof(one));
	if (!c->is_connect) {
		sio_set_read_timeout(c->up, &idle);
		sio_read(c->up, true);
		conn_start_exchange(c);
		return;
	}
	evbuffer_add(c->cli->out, RESP_200, sizeof(RESP_200) - 1);
	c->st = ST_TUNNEL;
	evtimer_del(c->timer);
	event_base_gettimeofday_cached(c->px->base, &now);
	c->last = now.tv_sec;
	if (tunnel_start(c) != 0) {
		conn_free(c);
		return;
	}
	evtimer_add(c->timer, &idle);
}

static void
up_event(struct sio *b, short what, void *arg)
{
	struct conn *c = arg;

	if (what & SIO_CONNECTED) {
		on_connected(c);
		return;
	}
	switch (c->st) {
	case ST_CONNECTING:
		kz_log(KZ_LOG_INFO, "egress.upstream", 0,
		    "upstream connect failed", "host", c->up_host, NULL);
		bad_gateway(c);
		break;
	case ST_EXCHANGE:
		if ((what & SIO_EOF) && c->resp_head_done &&
		    c->resp_mode == BODY_UNTIL_CLOSE) {
			pump_resp(c);
			c->resp_done = true;
			conn_close_up(c);
			exchange_check(c);
		} else {
			bad_gateway(c);
		}
		break;
	case ST_CLOSING:
		if (b == c->cli || c->cli == NULL)
			conn_free(c);
		else
			conn_close_up(c);
		break;
	default:
		conn_close_up(c);
		break;
	}
}

struct sio *
conn_client_new(struct conn *c, int fd)
{
	return sio_new(c->px->base, fd, cli_read, on_write, cli_event, c);
}

void
conn_connect_up(struct conn *c, const struct eg_addr *a)
{
	struct timeval ct = {(time_t)c->p->connect_timeout, 0};
	struct sockaddr_storage ss;
	socklen_t sl = eg_addr_sockaddr(a, c->dest.port, &ss);

	c->up = sio_new(c->px->base, -1, up_read, on_write, up_event, c);
	if (c->up == NULL) {
		bad_gateway(c);
		return;
	}
	snprintf(c->up_host, sizeof(c->up_host), "%s", c->dest.host);
	c->up_addr = *a;
	c->up_port = c->dest.port;
	c->st = ST_CONNECTING;
	c->resp_head_done = false;
	if (sio_connect(c->up, (struct sockaddr *)&ss, sl, &ct) != 0) {
		kz_log(KZ_LOG_INFO, "egress.upstream", 0,
		    "upstream connect failed", "host", c->up_host, NULL);
		bad_gateway(c);
	}
}

void
conn_start_exchange(struct conn *c)
{
	c->st = ST_EXCHANGE;
	c->req_done = c->req_mode == BODY_NONE;
	c->resp_done = c->resp_head_done = false;
	c->interim = 0;
	c->up_close = false;
	evbuffer_add_buffer(c->up->out, c->head_out);
	if (c->expect100 && !c->req_done) {
		evbuffer_add(c->cli->out, RESP_100, sizeof(RESP_100) - 1);
		sio_flush(c->cli);
	}
	sio_flush(c->up);
	pump_req(c);
}
