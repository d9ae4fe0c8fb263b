/*
 * CONNECT tunnels after the 200: bytes move socket -> pipe -> socket with
 * splice(2), never copied through the proxy's memory.  Each direction is a
 * half with its own pipe, made when the first byte flows, so an idle
 * tunnel holds two sockets and a few events and nothing else.  A half
 * whose reader is slow stops reading (the pipe is its bound); end of input
 * on one side is passed on as a shutdown of the other.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "conn.h"
#include "banned.h"

#define PIPE_BYTES (1024 * 1024)

struct half {
	struct tunnel *t;
	int from, to;
	int p[2];
	size_t inpipe;
	struct evbuffer *pre; /* bytes buffered before the tunnel began */
	struct event *rev, *wev;
	bool eof, done;
};

struct tunnel {
	struct conn *c;
	int fd[2]; /* client, upstream */
	struct half h[2]; /* client -> upstream, upstream -> client */
};

static void
tunnel_free(struct tunnel *t)
{
	if (t == NULL)
		return;
	for (int i = 0; i < 2; i++) {
		struct half *h = &t->h[i];

		if (h->rev != NULL)
			event_free(h->rev);
		if (h->wev != NULL)
			event_free(h->wev);
		if (h->pre != NULL)
			evbuffer_free(h->pre);
		if (h->p[0] >= 0)
			close(h->p[0]);
		if (h->p[1] >= 0)
			close(h->p[1]);
		if (t->fd[i] >= 0)
			close(t->fd[i]);
	}
	free(t);
}

/* 1: everything pending is written; 0: the reader is slow; -1: error. */
static int
flush(struct half *h)
{
	ssize_t n;

	while (evbuffer_get_length(h->pre) > 0) {
		if (evbuffer_write(h->pre, h->to) < 0)
			return errno == EAGAIN ? 0 : -1;
	}
	while (h->inpipe > 0) {
		n = splice(h->p[0], NULL, h->to, NULL, h->inpipe,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		h->inpipe -= (size_t)n;
	}
	return 1;
}

static int
make_pipe(struct half *h)
{
	if (pipe2(h->p, O_NONBLOCK | O_CLOEXEC) != 0)
		return -1;
	/* Best effort: a larger pipe means fewer, larger splices. */
	(void)fcntl(h->p[1], F_SETPIPE_SZ, PIPE_BYTES);
	return 0;
}

static void
touch(struct half *h)
{
	struct timeval now;

	event_base_gettimeofday_cached(h->t->c->px->base, &now);
	h->t->c->last = now.tv_sec;
}

/*
 * Arms or disarms one event only when its state changes: each change is
 * an epoll_ctl(2), and a bulk tunnel passes through here once per wakeup.
 */
static void
arm(struct event *ev, bool on)
{
	bool pending = event_pending(ev, EV_READ | EV_WRITE, NULL) != 0;

	if (on && !pending)
		event_add(ev, NULL);
	else if (!on && pending)
		event_del(ev);
}

/*
 * Moves what it can; returns -1 when the tunnel must close.  The pipe is
 * made only once the source has something to say (readable): an idle
 * tunnel costs no pipe descriptors.
 */
static int
pump(struct half *h, bool readable)
{
	ssize_t n;
	int r;

	for (;;) {
		if ((r = flush(h)) < 0)
			return -1;
		if (r == 0) {
			arm(h->rev, false);
			arm(h->wev, true);
			return 0;
		}
		arm(h->wev, false);
		if (h->eof) {
			(void)shutdown(h->to, SHUT_WR);
			arm(h->rev, false);
			h->done = true;
			return 0;
		}
		if (h->p[0] < 0 && !readable) {
			arm(h->rev, true);
			return 0;
		}
		if (h->p[0] < 0 && make_pipe(h) != 0)
			return -1;
		n = splice(h->from, NULL, h->p[1], NULL, PIPE_BYTES,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			h->inpipe += (size_t)n;
			touch(h);
		} else if (n == 0) {
			h->eof = true;
		} else if (errno == EAGAIN) {
			arm(h->rev, true);
			return 0;
		} else {
			return -1;
		}
	}
}

static void
on_io(evutil_socket_t fd, short what, void *arg)
{
	struct half *h = arg;
	struct tunnel *t = h->t;

	if (pump(h, (what & EV_READ) != 0) < 0 ||
	    (t->h[0].done && t->h[1].done))
		conn_free(t->c);
}

static int
half_init(struct tunnel *t, int i, int from, int to)
{
	struct half *h = &t->h[i];
	struct event_base *base = t->c->px->base;

	h->t = t;
	h->from = from;
	h->to = to;
	h->p[0] = h->p[1] = -1;
	h->pre = evbuffer_new();
	h->rev = event_new(base, from, EV_READ | EV_PERSIST, on_io, h);
	h->wev = event_new(base, to, EV_WRITE | EV_PERSIST, on_io, h);
	return h->pre && h->rev && h->wev ? 0 : -1;
}

/*
 * Turns the connection's two sockets into a spliced tunnel.  Bytes
 * already buffered (our 200, early client data, an eager server's first
 * bytes) go out first, in order.
 */
int
tunnel_start(struct conn *c)
{
	struct tunnel *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -1;
	t->c = c;
	t->fd[0] = t->fd[1] = -1;
	t->h[0].p[0] = t->h[0].p[1] = t->h[1].p[0] = t->h[1].p[1] = -1;
	c->tun = t;
	c->tun_free = tunnel_free;
	if (half_init(t, 0, c->cli->fd, c->up->fd) != 0 ||
	    half_init(t, 1, c->up->fd, c->cli->fd) != 0)
		return -1;
	if (evbuffer_add_buffer(t->h[0].pre, c->up->out) != 0 ||
	    evbuffer_add_buffer(t->h[0].pre, c->cli->in) != 0 ||
	    evbuffer_add_buffer(t->h[1].pre, c->cli->out) != 0 ||
	    evbuffer_add_buffer(t->h[1].pre, c->up->in) != 0)
		return -1;
	t->fd[0] = sio_take_fd(c->cli);
	t->fd[1] = sio_take_fd(c->up);
	c->cli = c->up = NULL;
	if (pump(&t->h[0], false) < 0 || pump(&t->h[1], false) < 0)
		return -1;
	return 0;
}
