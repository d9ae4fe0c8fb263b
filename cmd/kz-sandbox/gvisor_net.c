/*
 * Under gvisor, in the run init: the host end of the sandbox's network.
 * The code runs on gVisor's own network stack (runsc --network=none), whose
 * loopback holds nothing of the host's.  The egress relay and the broker
 * forward, which under native listen on the worker's loopback, listen
 * instead on an abstract Unix socket of the worker's network namespace
 * (sbx_gv_lo_addr), named by their port; the Sentry is in a namespace of
 * its own and cannot reach it.  Inside the sandbox the loader listens on
 * 127.0.0.1 at those ports (gvloader/gvisor_fwd.c) and, for each
 * connection it accepts, asks the init over a socket pair of their own for
 * a connection to the same port; the init connects to that port's
 * abstract socket, and only to an allowed port's, and passes the
 * connected socket into gVisor, where the loader pumps between the two.
 *
 * A Unix socket, because runsc 20221219 imports no other kind of host
 * socket passed with SCM_RIGHTS: a connected TCP socket fails with EINVAL
 * and takes the rest of the message's descriptors with it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

/* The init's end of the pair, and the ports the sandbox may ask for. */
static struct {
	int fd;
	uint16_t port[SBX_GV_NET_PORTS];
} net = {-1, {0, 0}};

socklen_t
sbx_gv_lo_addr(int port, struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* sun_path[0] stays NUL: a name in the abstract namespace, which
	 * belongs to the network namespace, so it is the worker's alone. */
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, SBX_GV_LO_NAME,
	    port);
	return (
	    socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* The relay's port with an egress socket, the forward's with a broker
 * socket; 0 for one the worker does not have. */
static void
allowed_ports(const struct sbx_conf *c, uint16_t port[SBX_GV_NET_PORTS])
{
	port[0] = c->egress_sock[0] != '\0' ? (uint16_t)c->relay_port : 0;
	port[1] = c->broker_sock[0] != '\0' ? (uint16_t)c->broker_port : 0;
}

int
sbx_gv_net_boot(const struct sbx_conf *c, int ctl, char *why, size_t wlen)
{
	struct sbx_gv_hello h = {{'N', 'E', 'T', '1'}, {0, 0}};
	int sv[2] = {-1, -1}, r;

	sbx_gv_net_close();
	allowed_ports(c, h.port);
	if ((h.port[0] != 0 || h.port[1] != 0) &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		kz_why(why, wlen, "gvisor: network: socketpair: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	/* The first message on the control socket, queued before runsc
	 * runs: the loader reads it before it says it is ready. */
	r = sbx_msg_send_fds(ctl, &h, sizeof(h), &sv[1], sv[1] >= 0);
	if (sv[1] >= 0)
		close(sv[1]);
	if (r != 0) {
		kz_why(why, wlen,
		    "gvisor: network: cannot send the loader "
		    "its socket: %s",
		    strerror(errno));
		if (sv[0] >= 0)
			close(sv[0]);
		return r;
	}
	net.fd = sv[0];
	memcpy(net.port, h.port, sizeof(net.port));
	return 0;
}

int
sbx_gv_net(void)
{
	return net.fd;
}

void
sbx_gv_net_close(void)
{
	if (net.fd >= 0)
		close(net.fd);
	net.fd = -1;
}

/* A connection to the port's listener, or -errno.  Non-blocking, so that
 * a listener whose queue is full refuses at once instead of stopping the
 * init; gVisor makes the socket its own either way. */
static int
connect_port(int port)
{
	struct sockaddr_un sa;
	socklen_t len = sbx_gv_lo_addr(port, &sa);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, len) < 0) {
		int e = errno;

		close(s);
		return -e;
	}
	return s;
}

void
sbx_gv_net_serve(void)
{
	struct sbx_gv_net_req rq;
	struct sbx_gv_net_ans a;
	ssize_t n = recv(net.fd, &rq, sizeof(rq), MSG_DONTWAIT);
	int fd = -1;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		/* The loader is gone: runsc's reaping reports it. */
		sbx_gv_net_close();
		return;
	}
	if (n != (ssize_t)sizeof(rq))
		return;
	memset(&a, 0, sizeof(a));
	a.id = rq.id;
	/* Only the two listeners the worker has, whatever the sandbox
	 * asks: a loader the code took over reaches nothing more. */
	if (rq.port == 0 || (rq.port != net.port[0] && rq.port != net.port[1]))
		a.err = EACCES;
	else if ((fd = connect_port(rq.port)) < 0)
		a.err = -fd;
	(void)!sbx_msg_send_fds(net.fd, &a, sizeof(a), &fd, fd >= 0);
	if (fd >= 0)
		close(fd);
}
