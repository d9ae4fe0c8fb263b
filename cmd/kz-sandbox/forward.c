/*
 * The package-broker forward.  When the worker is configured with the
 * broker's socket (SANDBOX_BROKER_SOCKET), each run gets a process
 * listening on the sandbox loopback (SANDBOX_BROKER_PORT) that forwards
 * every connection byte for byte to kz-pkgbroker's Unix socket.  It reads
 * and changes nothing: the broker serves only the registry paths and
 * checks the run's token, so the code reaches the package indexes and
 * nothing else, with no general egress.  Like the egress relay, it lives
 * only while the run does.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "kz_io.h"
#include "banned.h"

#define FWD_CONNS 64

static void
fwd_one(int c, const char *sock)
{
	int up, one = 1;

	/* The broker's answers arrive in pieces; each is passed on at once
	 * rather than held back by Nagle's algorithm. */
	(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (kz_sock_connect(sock, 5000, &up, NULL, 0) != 0)
		return; /* the client sees its connection closed */
	(void)!kz_fd_nonblock(up, false);
	sbx_pump(c, up);
	close(up);
}

static void
fwd_loop(int lfd, const char *sock)
{
	int live = 0;

	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		while (waitpid(-1, NULL, WNOHANG) > 0)
			live--;
		if (c < 0)
			continue;
		if (live >= FWD_CONNS) {
			close(c);
			continue;
		}
		if (fork() == 0) {
			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(lfd);
			fwd_one(c, sock);
			_exit(0);
		}
		live++;
		close(c);
	}
}

pid_t
sbx_forward_start(const struct sbx_conf *c, char *why, size_t wlen)
{
	pid_t pid;
	int lfd;

	if (c->broker_sock[0] == '\0')
		return 0;
	if (sbx_relay_listen((int)c->broker_port, &lfd, why, wlen) != 0)
		return -1;
	if ((pid = fork()) < 0) {
		kz_why(why, wlen, "broker forward: fork: %s", strerror(errno));
		close(lfd);
		return -1;
	}
	if (pid == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		fwd_loop(lfd, c->broker_sock);
		_exit(0);
	}
	close(lfd);
	return pid;
}

void
sbx_forward_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	(void)kill(pid, SIGKILL);
	(void)waitpid(pid, NULL, 0);
}
