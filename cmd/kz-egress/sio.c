/*
 * A socket with an input and an output evbuffer, for the plain-HTTP path.
 * It does what the proxy needs from a bufferevent and no more, with the
 * system calls a request really needs: one read into space reserved in the
 * input buffer (a bufferevent asks FIONREAD before every read), output
 * written at once by the caller (a bufferevent's output is frozen until
 * its write event fires, which costs an epoll_ctl pair and a loop turn per
 * response), and read events left registered while the connection is kept
 * alive.  Input is bounded: reading stops while SIO_HIGH bytes wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "conn.h"
#include "banned.h"

/* One read takes at most this much; a short message fits one chain. */
#define SIO_READ 32768

static void
update_read(struct sio *s)
{
	bool want = s->reading && !s->connecting && !s->eof && s->fd >= 0 &&
	    evbuffer_get_length(s->in) < SIO_HIGH;
	bool on = event_pending(s->rev, EV_READ, NULL) != 0;

	if (want && !on)
		event_add(s->rev, s->has_rto ? &s->rto : NULL);
	else if (!want && on)
		event_del(s->rev);
}

/* Input drained below the bound: read again (the watermark). */
static void
on_in_changed(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct sio *s = arg;

	if (info->n_deleted > 0 && s->reading)
		update_read(s);
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct sio *s = arg;
	size_t have = evbuffer_get_length(s->in), want;
	struct evbuffer_iovec v[2];
	int nv;
	ssize_t n;

	if (what == EV_TIMEOUT) {
		event_del(s->rev);
		s->reading = false;
		s->eventcb(s, SIO_TIMEOUT, s->arg);
		return;
	}
	if (have >= SIO_HIGH) {
		event_del(s->rev);
		return;
	}
	want = SIO_HIGH - have < SIO_READ ? SIO_HIGH - have : SIO_READ;
	if ((nv = evbuffer_reserve_space(s->in, (ev_ssize_t)want, v, 2)) < 0) {
		event_del(s->rev);
		s->reading = false;
		s->eventcb(s, SIO_ERROR, s->arg);
		return;
	}
	n = readv(s->fd, (struct iovec *)v, nv);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		event_del(s->rev);
		s->reading = false;
		s->eof = n == 0;
		s->eventcb(s, n == 0 ? SIO_EOF : SIO_ERROR, s->arg);
		return;
	}
	for (int i = 0; i < nv; i++) {
		size_t k = v[i].iov_len < (size_t)n ? v[i].iov_len : (size_t)n;

		v[i].iov_len = k;
		n -= (ssize_t)k;
	}
	evbuffer_commit_space(s->in, v, nv);
	s->readcb(s, s->arg);
}

static void
on_writable(evutil_socket_t fd, short what, void *arg)
{
	struct sio *s = arg;
	int err = 0;
	socklen_t el = sizeof(err);

	if (what == EV_TIMEOUT) {
		event_del(s->wev);
		s->eventcb(s, SIO_TIMEOUT, s->arg);
		return;
	}
	if (s->connecting) {
		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
			err = errno;
		event_del(s->wev);
		if (err == EINPROGRESS || err == EALREADY) {
			event_add(s->wev, s->has_rto ? &s->rto : NULL);
			return;
		}
		s->connecting = false;
		s->eventcb(s, err == 0 ? SIO_CONNECTED : SIO_ERROR, s->arg);
		return;
	}
	/* The event may still be armed when sio_flush already wrote the
	 * rest: evbuffer_write of an empty buffer returns -1 and leaves
	 * errno as it was (once, the connect's EINPROGRESS), which is no
	 * error of this socket. */
	if (evbuffer_get_length(s->out) > 0 &&
	    evbuffer_write(s->out, s->fd) < 0 && errno != EAGAIN &&
	    errno != EINTR) {
		event_del(s->wev);
		s->eventcb(s, SIO_ERROR, s->arg);
		return;
	}
	if (evbuffer_get_length(s->out) > 0)
		return;
	event_del(s->wev);
	if (s->writecb != NULL)
		s->writecb(s, s->arg);
}

struct sio *
sio_new(struct event_base *base, int fd, sio_data_fn readcb,
    sio_data_fn writecb, sio_event_fn eventcb, void *arg)
{
	struct sio *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->fd = fd;
	s->readcb = readcb;
	s->writecb = writecb;
	s->eventcb = eventcb;
	s->arg = arg;
	s->base = base;
	s->in = evbuffer_new();
	s->out = evbuffer_new();
	if (s->in == NULL || s->out == NULL ||
	    evbuffer_add_cb(s->in, on_in_changed, s) == NULL ||
	    (fd >= 0 && sio_setfd(s, fd) != 0)) {
		s->fd = -1;
		sio_free(s);
		return NULL;
	}
	return s;
}

int
sio_setfd(struct sio *s, int fd)
{
	s->fd = fd;
	s->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, on_readable, s);
	s->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, on_writable, s);
	return s->rev != NULL && s->wev != NULL ? 0 : -1;
}

/* Frees s; returns its descriptor (open) when keep, else closes it. */
static int
release(struct sio *s, bool keep)
{
	int fd;

	if (s == NULL)
		return -1;
	fd = s->fd;
	if (s->rev != NULL)
		event_free(s->rev);
	if (s->wev != NULL)
		event_free(s->wev);
	if (s->in != NULL)
		evbuffer_free(s->in);
	if (s->out != NULL)
		evbuffer_free(s->out);
	free(s);
	if (!keep && fd >= 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

void
sio_free(struct sio *s)
{
	(void)release(s, false);
}

int
sio_take_fd(struct sio *s)
{
	return release(s, true);
}

void
sio_set_read_timeout(struct sio *s, const struct timeval *tv)
{
	s->has_rto = tv != NULL;
	if (tv != NULL)
		s->rto = *tv;
	if (s->rev != NULL && event_pending(s->rev, EV_READ, NULL))
		event_add(s->rev, s->has_rto ? &s->rto : NULL);
}

void
sio_read(struct sio *s, bool on)
{
	s->reading = on;
	update_read(s);
}

/*
 * Writes what is buffered now; only a remainder (or an error, reported
 * from the loop, never from inside this call) waits for a write event.
 */
void
sio_flush(struct sio *s)
{
	if (s->connecting || evbuffer_get_length(s->out) == 0)
		return;
	if (evbuffer_write(s->out, s->fd) < 0 && errno != EAGAIN &&
	    errno != EINTR) {
		event_add(s->wev, NULL);
		return;
	}
	if (evbuffer_get_length(s->out) > 0)
		event_add(s->wev, NULL);
}

size_t
sio_pending(const struct sio *s)
{
	return evbuffer_get_length(s->out);
}

/* Starts a non-blocking connect; SIO_CONNECTED or SIO_ERROR follows. */
int
sio_connect(struct sio *s, const struct sockaddr *sa, socklen_t sl,
    const struct timeval *timeout)
{
	int fd = socket(sa->sa_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, sa, sl) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	if (sio_setfd(s, fd) != 0)
		return -1;
	s->connecting = true;
	s->has_rto = timeout != NULL;
	if (timeout != NULL)
		s->rto = *timeout;
	return event_add(s->wev, timeout);
}
