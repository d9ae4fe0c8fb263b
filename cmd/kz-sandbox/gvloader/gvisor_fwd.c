/*
 * Under gvisor, inside the sandbox: the loader's forwarder, the code's way
 * to the run's egress relay and broker forward.  The code has gVisor's
 * network only (runsc --network=none); on its loopback the forwarder
 * listens at the relay's and the broker forward's ports, those the run
 * has (sbx_gv_fwd_run), and for each connection it accepts it asks the
 * run init, over a socket pair of their own (gvisor_net.c), for a
 * connection to the same port on the host, which arrives as a connected
 * Unix socket, and copies between the two both ways, a half-close passed
 * on as one, until both ways are done, either side fails, or nothing
 * moves for five minutes.
 *
 * It is a thread of the loader, gVisor's pid 1 and root, not a process of
 * its own: the loader kills every other process at the end of each run,
 * and the code, another uid without a capability, can neither signal nor
 * trace it.  All it is given from the host is that pair, on which the init
 * connects to nothing but the two ports.  Every descriptor it holds is
 * close-on-exec, so a code process the loader starts holds none of them
 * after its exec.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

#define FWD_CONNS 64 /* as the relay's RELAY_CONNS */
#define FWD_IDLE_MS 300000 /* as the relay's RELAY_IDLE_MS */
#define FWD_ASK_MS 10000 /* for the init's answer */
#define FWD_BUF 32768

/* One way of a connection: what was read and is not yet written. */
struct half {
	char *buf;
	size_t off, len;
	bool eof, shut;
};

/* in: the code's connection (gVisor's); host: the init's, -1 until it
 * comes.  up goes from in to host, down back. */
struct conn {
	int in, host;
	uint32_t id;
	int64_t last;
	struct half up, down;
};

static struct {
	int net;
	int cmd[2]; /* the loader's requests: [0] its end, [1] the thread's */
	int lfd[SBX_GV_NET_PORTS];
	uint16_t port[SBX_GV_NET_PORTS];
	struct conn c[FWD_CONNS];
	uint32_t next_id;
} fw;

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
conn_close(struct conn *c)
{
	if (c->in >= 0)
		close(c->in);
	if (c->host >= 0)
		close(c->host);
	free(c->up.buf);
	free(c->down.buf);
	memset(c, 0, sizeof(*c));
	c->in = c->host = -1;
}

/* A connection accepted on the port at index i: a slot and a request
 * to the init; refused (closed) when every slot is taken. */
static void
accept_one(int i)
{
	struct sbx_gv_net_req rq = {0, fw.port[i]};
	int one = 1,
	    s = accept4(fw.lfd[i], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct conn *c = NULL;

	if (s < 0)
		return;
	for (int k = 0; k < FWD_CONNS && c == NULL; k++)
		if (fw.c[k].in < 0)
			c = &fw.c[k];
	if (c == NULL || (c->up.buf = malloc(FWD_BUF)) == NULL ||
	    (c->down.buf = malloc(FWD_BUF)) == NULL) {
		if (c != NULL)
			conn_close(c);
		close(s);
		return;
	}
	/* What the relay answers goes on to the code as it comes. */
	(void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->in = s, c->id = rq.id = ++fw.next_id, c->last = now_ms();
	if (send(fw.net, &rq, sizeof(rq), MSG_NOSIGNAL) != sizeof(rq))
		conn_close(c);
}

/* The init's answer: the host connection for a waiting slot, or an
 * error, which closes the code's connection. */
static void
take_answer(void)
{
	struct sbx_gv_net_ans a;
	int fd;
	ssize_t n = sbx_msg_recv_fd(fw.net, &a, sizeof(a), MSG_DONTWAIT, &fd);

	if (n <= 0)
		return;
	for (int k = 0; k < FWD_CONNS; k++) {
		struct conn *c = &fw.c[k];

		if (c->in < 0 || c->host >= 0 || c->id != a.id)
			continue;
		if (n != (ssize_t)sizeof(a) || a.err != 0 || fd < 0) {
			conn_close(c);
			break;
		}
		c->host = fd, fd = -1, c->last = now_ms();
		break;
	}
	if (fd >= 0)
		close(fd);
}

/*
 * One way's turn: read when its buffer is empty, write what it holds,
 * and pass the end on (shutdown for writing) once all is written.  A side
 * that fails ends that way only; the other still passes, for it may hold
 * the answer that explains why (as the relay's pump does).  True when
 * anything moved.
 */
static bool
half_step(struct half *h, int src, int dst, short rev)
{
	bool moved = false;
	ssize_t n;

	if (h->shut)
		return false;
	if (h->len == 0 && !h->eof && (rev & (POLLIN | POLLHUP | POLLERR))) {
		n = recv(src, h->buf, FWD_BUF, 0);
		if (n > 0)
			h->off = 0, h->len = (size_t)n, moved = true;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			h->eof = moved = true;
	}
	if (h->len > 0) {
		n = send(dst, h->buf + h->off, h->len, MSG_NOSIGNAL);
		if (n > 0)
			h->off += (size_t)n, h->len -= (size_t)n, moved = true;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			h->len = 0, h->eof = moved = true;
	}
	if (h->eof && h->len == 0) {
		(void)shutdown(dst, SHUT_WR);
		h->shut = moved = true;
	}
	return moved;
}

/* The events each descriptor of a slot waits for (a slot still waiting
 * for the init waits on nothing). */
static void
conn_events(const struct conn *c, struct pollfd *in, struct pollfd *host)
{
	*in = (struct pollfd){c->host >= 0 ? c->in : -1, 0, 0};
	*host = (struct pollfd){c->host, 0, 0};
	if (c->host < 0)
		return;
	if (!c->up.eof && c->up.len == 0)
		in->events |= POLLIN;
	if (c->down.len > 0)
		in->events |= POLLOUT;
	if (!c->down.eof && c->down.len == 0)
		host->events |= POLLIN;
	if (c->up.len > 0)
		host->events |= POLLOUT;
	/* A side nothing waits on is not polled: its hang-up, with bytes
	 * still to write to the other, would wake the loop at once, and
	 * again, until the other side takes them. */
	if (in->events == 0)
		in->fd = -1;
	if (host->events == 0)
		host->fd = -1;
}

/* A slot's turn; it is closed when both ways are done, when it idles
 * past its bound, or when a side it waits on reports a hang-up or an
 * error and yet nothing moved (so that it is not polled in a loop). */
static void
conn_step(struct conn *c, const struct pollfd *in, const struct pollfd *host,
    int64_t now)
{
	bool moved, hup;

	if (c->in < 0)
		return;
	if (c->host < 0) {
		if (now - c->last > FWD_ASK_MS)
			conn_close(c);
		return;
	}
	moved = half_step(&c->up, c->in, c->host, in->revents);
	moved |= half_step(&c->down, c->host, c->in, host->revents);
	hup = ((in->revents | host->revents) & (POLLHUP | POLLERR)) != 0;
	if (moved)
		c->last = now;
	if ((c->up.shut && c->down.shut) || (hup && !moved) ||
	    now - c->last > FWD_IDLE_MS)
		conn_close(c);
}

static int listen_port(int port, int *fd, char *why, size_t wlen);

/*
 * The loader's request before each run: listen at the ports of what
 * listens for this run on the host (SBX_NET_*: the relay with a grant,
 * the forward with a token), and at no other, as the native loopback has
 * them; the answer, 0 or an errno value, once that is so.  Nothing of a
 * run is left connected by then: the loader killed its processes.
 */
static void
take_cmd(void)
{
	char m;
	int32_t err = 0;

	if (recv(fw.cmd[1], &m, 1, 0) != 1)
		return;
	for (int i = 0; i < SBX_GV_NET_PORTS; i++) {
		bool want = fw.port[i] != 0 && (m & (1 << i)) != 0;

		if (want && fw.lfd[i] < 0 &&
		    listen_port(fw.port[i], &fw.lfd[i], NULL, 0) != 0)
			err = errno != 0 ? errno : EIO;
		if (!want && fw.lfd[i] >= 0) {
			close(fw.lfd[i]);
			fw.lfd[i] = -1;
		}
	}
	(void)!send(fw.cmd[1], &err, sizeof(err), MSG_NOSIGNAL);
}

int
sbx_gv_fwd_run(int net, char *why, size_t wlen)
{
	char m = (char)net;
	int32_t err = EIO;

	if (fw.net < 0)
		return net == 0 ? 0 : KZ_EUNAVAIL;
	if (send(fw.cmd[0], &m, 1, MSG_NOSIGNAL) != 1 ||
	    recv(fw.cmd[0], &err, sizeof(err), 0) != (ssize_t)sizeof(err) ||
	    err != 0) {
		kz_why(why, wlen, "cannot listen for the run: %s",
		    strerror(err));
		return KZ_ESYS;
	}
	return 0;
}

static void *
fwd_loop(void *arg)
{
	enum { NP = 2 + SBX_GV_NET_PORTS + 2 * FWD_CONNS };
	struct pollfd p[NP];
	int nconn;

	(void)arg;
	for (;;) {
		p[NP - 1] = (struct pollfd){fw.cmd[1], POLLIN, 0};
		p[0] = (struct pollfd){fw.net, POLLIN, 0};
		nconn = 0;
		for (int k = 0; k < FWD_CONNS; k++) {
			nconn += fw.c[k].in >= 0;
			conn_events(&fw.c[k], &p[1 + SBX_GV_NET_PORTS + 2 * k],
			    &p[2 + SBX_GV_NET_PORTS + 2 * k]);
		}
		/* A full table leaves new connections queued, not refused. */
		for (int i = 0; i < SBX_GV_NET_PORTS; i++)
			p[1 + i] = (struct pollfd){nconn < FWD_CONNS ?
			        fw.lfd[i] :
			        -1,
			    POLLIN, 0};
		if (poll(p, NP, 1000) < 0 && errno != EINTR)
			return NULL;
		/* The init gone, the sandbox goes with it. */
		if (p[0].revents & (POLLHUP | POLLERR))
			return NULL;
		if (p[0].revents & POLLIN)
			take_answer();
		if (p[NP - 1].revents & POLLIN)
			take_cmd();
		for (int i = 0; i < SBX_GV_NET_PORTS; i++)
			if (p[1 + i].revents & POLLIN)
				accept_one(i);
		for (int k = 0; k < FWD_CONNS; k++)
			conn_step(&fw.c[k], &p[1 + SBX_GV_NET_PORTS + 2 * k],
			    &p[2 + SBX_GV_NET_PORTS + 2 * k], now_ms());
	}
}

/* The init's hello, the first message on the control socket: the ports,
 * and the pair's end when there is one. */
static int
take_hello(int ctl, struct sbx_gv_hello *h, char *why, size_t wlen)
{
	ssize_t n = sbx_msg_recv_fd(ctl, h, sizeof(*h), 0, &fw.net);

	if (n != (ssize_t)sizeof(*h) || memcmp(h->magic, "NET1", 4) != 0 ||
	    ((h->port[0] != 0 || h->port[1] != 0) != (fw.net >= 0))) {
		kz_why(why, wlen,
		    "network: no forwarding socket from the "
		    "run init");
		return KZ_EPROTO;
	}
	return 0;
}

static int
listen_port(int port, int *fd, char *why, size_t wlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	    .sin_port = htons((uint16_t)port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	int one = 1;

	/* SO_REUSEADDR, for a port whose last run's connections wait out
	 * their TIME_WAIT: no one may bind it beside a listener all the
	 * same.  No SO_REUSEPORT, with which the code could. */
	if (s < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(s, 64) < 0) {
		int e = errno;

		if (why != NULL)
			kz_why(why, wlen,
			    "network: cannot listen on 127.0.0.1:%d: %s", port,
			    strerror(e));
		if (s >= 0)
			close(s);
		errno = e;
		return KZ_ESYS;
	}
	*fd = s;
	return 0;
}

int
sbx_gv_fwd_start(int ctl, char *why, size_t wlen)
{
	struct sbx_gv_hello h;
	pthread_attr_t a;
	pthread_t t;
	int r;

	for (int k = 0; k < FWD_CONNS; k++)
		fw.c[k].in = fw.c[k].host = -1;
	fw.lfd[0] = fw.lfd[1] = -1;
	fw.cmd[0] = fw.cmd[1] = -1;
	if ((r = take_hello(ctl, &h, why, wlen)) != 0)
		return r;
	if (fw.net < 0)
		return 0; /* neither relay nor forward: nothing to do */
	/* Every port is listened at once here, so that a port the sandbox
	 * cannot have refuses the boot; each run then keeps those of its own
	 * (sbx_gv_fwd_run). */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fw.cmd) < 0) {
		kz_why(why, wlen, "network: socketpair: %s", strerror(errno));
		return KZ_ESYS;
	}
	for (int i = 0; i < SBX_GV_NET_PORTS; i++) {
		fw.port[i] = h.port[i];
		if (h.port[i] != 0 &&
		    (r = listen_port(h.port[i], &fw.lfd[i], why, wlen)) != 0)
			return r;
	}
	if (pthread_attr_init(&a) != 0 ||
	    pthread_attr_setstacksize(&a, 256 * 1024) != 0 ||
	    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) != 0 ||
	    pthread_create(&t, &a, fwd_loop, NULL) != 0) {
		kz_why(why, wlen, "network: cannot start the forwarder");
		return KZ_ESYS;
	}
	(void)pthread_attr_destroy(&a);
	return 0;
}
