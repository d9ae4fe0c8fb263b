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
 *
 * The next tenant of the same worker has the same uid; what it does not
 * have is this forward, started for one run with that run's token.  Each
 * connection is first bound to the run: before a byte of the code's is
 * read, the forward sends a request of its own, GET /-/kz/bind with the
 * run's token (kz-pkgbroker's PB_BIND_PATH), and reads the broker's
 * answer, which never reaches the code.  From then on the broker takes on
 * that connection only tokens of this run.  Only a 200 with an empty body
 * starts the pump; anything else closes the code's connection.  A run
 * without a token has no forward: it has no run to bind to.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "kz_io.h"
#include "banned.h"

#define FWD_CONNS 64
#define FWD_BIND_MS 5000
#define FWD_HEAD_MAX 1024 /* the broker's answer to the bind, head only */

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

/* Reads the answer's head, a byte at a time so that nothing past it is
 * taken: true when it is a 200 with Content-Length 0. */
static bool
bind_answer(int up, int64_t deadline)
{
	char h[FWD_HEAD_MAX + 1];
	size_t n = 0;

	while (n < FWD_HEAD_MAX) {
		struct pollfd p = {.fd = up, .events = POLLIN};
		int64_t left = deadline - kz_now_ms();

		if (left <= 0 || poll(&p, 1, (int)left) != 1 ||
		    read(up, h + n, 1) != 1)
			return false;
		n++;
		if (n >= 4 && memcmp(h + n - 4, "\r\n\r\n", 4) == 0)
			break;
	}
	h[n] = '\0';
	if (n < 4 || memcmp(h + n - 4, "\r\n\r\n", 4) != 0 ||
	    strncmp(h, "HTTP/1.1 200 ", 13) != 0)
		return false;
	for (const char *l = strstr(h, "\r\n"); l != NULL;
	     l = strstr(l + 2, "\r\n"))
		if (strncasecmp(l + 2, "Content-Length:", 15) == 0)
			return strncmp(l + 2 + 15 + strspn(l + 2 + 15, " \t"),
			           "0\r\n", 3) == 0;
	return false;
}

/* The connection's first request: it binds the connection to the run. */
static bool
bind_run(int up, const char *token)
{
	char rq[SBX_BROKER_TOKEN_MAX + 128];
	int64_t deadline = kz_now_ms() + FWD_BIND_MS;
	int n, r;

	n = snprintf(rq, sizeof(rq),
	    "GET /-/kz/bind HTTP/1.1\r\nHost: kz-pkgbroker\r\n"
	    "Authorization: Bearer %s\r\n\r\n",
	    token);
	r = n > 0 && (size_t)n < sizeof(rq) ?
	    kz_write_full(up, rq, (size_t)n, deadline) :
	    KZ_EINVAL;
	explicit_bzero(rq, sizeof(rq));
	return r == 0 && bind_answer(up, deadline);
}

static void
fwd_one(int c, const char *sock, uid_t uid, pid_t parent, char *token)
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
	/* Bound before the first byte of the code's is read: nothing the
	 * code sends can come before the bind. */
	if (!bind_run(up, token)) {
		explicit_bzero(token, strlen(token));
		close(up);
		return;
	}
	explicit_bzero(token, strlen(token));
	sbx_pump(c, up);
	close(up);
}

static void
fwd_loop(int lfd, const char *sock, uid_t uid, char *token)
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
			fwd_one(c, sock, uid, self, token);
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
sbx_forward_start(const struct sbx_conf *c, const char *token, char *why,
    size_t wlen)
{
	char tok[SBX_BROKER_TOKEN_MAX + 1];
	pid_t pid;
	int lfd;

	/* Without the run's token the forward could bind no connection:
	 * the run gets none (fail closed). */
	if (c->broker_sock[0] == '\0' || token == NULL || *token == '\0' ||
	    strlen(token) > SBX_BROKER_TOKEN_MAX)
		return 0;
	if (sbx_relay_listen(c, (int)c->broker_port, &lfd, why, wlen) != 0)
		return -1;
	if ((pid = fork()) < 0) {
		kz_why(why, wlen, "broker forward: fork: %s", strerror(errno));
		close(lfd);
		return -1;
	}
	if (pid == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(tok, sizeof(tok), "%s", token);
		fwd_loop(lfd, c->broker_sock, sbx_host_uid(c), tok);
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
