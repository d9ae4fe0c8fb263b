/*
 * The package-broker forward.  When the worker is configured with the
 * broker's socket (SANDBOX_BROKER_SOCKET), each run gets a process
 * listening on the sandbox loopback (SANDBOX_BROKER_PORT) that forwards
 * every connection byte for byte to kz-pkgbroker's Unix socket.  It reads
 * and changes nothing: the broker serves only the registry paths and
 * checks the run's token, so the code reaches the package indexes and
 * nothing else, with no general egress.  Like the egress relay, it lives
 * only while the run does.
 *
 * The broker accepts a run's token only from the worker it was minted for,
 * known by the uid that connects to its socket (SO_PEERCRED): each
 * connection is made with the worker's host uid (the one its code runs
 * as, sbx_host_uid) as the effective uid.  The code controls every byte
 * it sends through the forward but not the forward's credentials, so a
 * token that leaks out of one run is refused from every other worker.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "kz_io.h"
#include "banned.h"

#define FWD_CONNS 64

/*
 * The worker's uid as the effective uid (what SO_PEERCRED reports), the
 * broker's socket still reached with root's file access (the fsuid back
 * to the real uid): only who connects changes, not what may be reached.
 */
static int
as_worker(uid_t uid)
{
	uid_t ru = getuid();

	if (setresuid((uid_t)-1, uid, (uid_t)-1) != 0)
		return -1;
	(void)setfsuid(ru);
	return (uid_t)setfsuid((uid_t)-1) == ru && geteuid() == uid ? 0 : -1;
}

static void
fwd_one(int c, const char *sock, uid_t uid, pid_t parent)
{
	int up, one = 1;

	/* The broker's answers arrive in pieces; each is passed on at once
	 * rather than held back by Nagle's algorithm. */
	(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Without the worker's uid the broker would see the forward's own
	 * (root's): the client sees its connection closed instead. */
	if (as_worker(uid) != 0 ||
	    kz_sock_connect(sock, 5000, &up, NULL, 0) != 0)
		return; /* the client sees its connection closed */
	/* Connected: root is given up for good before a byte of the
	 * code's is read.  A change of uid clears the parent-death signal:
	 * it is set again, so the connection still ends with the run. */
	if (setresuid(uid, uid, uid) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
		close(up);
		return;
	}
	(void)!kz_fd_nonblock(up, false);
	sbx_pump(c, up);
	close(up);
}

static void
fwd_loop(int lfd, const char *sock, uid_t uid)
{
	pid_t self = getpid();
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
			fwd_one(c, sock, uid, self);
			_exit(0);
		}
		live++;
		close(c);
	}
}

uid_t
sbx_host_uid(const struct sbx_conf *c)
{
	return (uid_t)(c->userns ? c->userns_uid : c->uid);
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
		fwd_loop(lfd, c->broker_sock, sbx_host_uid(c));
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
