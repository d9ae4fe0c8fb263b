/*
 * A browser session's bridge, the process that holds the session together
 * (browser.c forks it; browser_stub.c makes the cgroup leaf, the loopback
 * and the stub it calls for).  It joins the session's cgroup leaf and
 * leaves for a network namespace of its own; for the op it starts the
 * relay and listens at its socket before Chromium starts, while a
 * pre-started one starts Chromium first and its network only once the op
 * hands it a grant.  It then carries CDP between the one peer that
 * connects and Chromium's --remote-debugging-pipe, each NUL-terminated
 * message one kz-protocol frame.  The end of the peer or of Chromium, or
 * SIGTERM (the agent gone, or a wipe), ends it, and it takes Chromium's
 * namespaces, the relay, its socket and its cgroup leaf with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "sbx.h"
#include "sbx_browser.h"
#include "banned.h"

#define BR_MSG_MAX (32u << 20) /* one CDP message (a screenshot) */

/* Set in a bridge by SIGTERM: the agent stopping (the bridge's parent-death
 * signal) or the agent's own stop, so that it ends its session cleanly. */
static volatile sig_atomic_t br_stop;

static void
on_stop(int sig)
{
	(void)sig;
	br_stop = 1;
}

struct bridge {
	int conn, in, out; /* peer, Chromium's fd 3 and fd 4 */
	char *buf; /* Chromium's bytes not yet a whole message */
	size_t len, cap;
	int64_t io_ms;
};

/* Chromium -> peer: every whole message in what was read, one frame each. */
static int
from_chromium(struct bridge *b)
{
	char *nul;
	ssize_t n;

	if (b->cap - b->len < 65536) {
		size_t cap = b->cap ? b->cap * 2 : 1 << 20;
		char *p;

		if (cap > BR_MSG_MAX + 65536 ||
		    (p = realloc(b->buf, cap)) == NULL)
			return -1;
		b->buf = p;
		b->cap = cap;
	}
	if ((n = read(b->out, b->buf + b->len, b->cap - b->len)) <= 0)
		return n < 0 && errno == EINTR ? 0 : -1;
	b->len += (size_t)n;
	while ((nul = memchr(b->buf, '\0', b->len)) != NULL) {
		size_t m = (size_t)(nul - b->buf) + 1;
		cJSON *o = NULL;
		char why[64];
		int r = kz_json_parse_object(b->buf, m - 1, &o, why,
		    sizeof(why));

		if (r != 0 && getenv("KZ_BROWSER_DEBUG") != NULL)
			dprintf(2, "bridge: %s: %.200s\n", why, b->buf);
		if (r == 0)
			r = kz_frame_write(b->conn, o, BR_MSG_MAX,
			    (int)b->io_ms);
		cJSON_Delete(o);
		if (r != 0)
			return -1;
		memmove(b->buf, b->buf + m, b->len - m);
		b->len -= m;
	}
	return 0;
}

/* Peer -> Chromium: one frame, one message. */
static int
to_chromium(struct bridge *b)
{
	char why[64];
	cJSON *o = NULL;
	char *s;
	int r = -1;

	if (kz_frame_read(b->conn, BR_MSG_MAX, (int)b->io_ms, &o, why,
	        sizeof(why)) != 0)
		return -1;
	if ((s = cJSON_PrintUnformatted(o)) != NULL &&
	    kz_write_full(b->in, s, strlen(s) + 1, kz_now_ms() + b->io_ms) == 0)
		r = 0;
	free(s);
	cJSON_Delete(o);
	return r;
}

static void
pump(struct bridge *b)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = b->conn, .events = POLLIN},
		    {.fd = b->out, .events = POLLIN}};

		if (br_stop)
			return;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    from_chromium(b) != 0)
			return;
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    to_chromium(b) != 0)
			return;
	}
}

/* Accepts the one peer the session serves, within a bound. */
static int
take_peer(const struct sbx_worker *w, int lfd)
{
	struct kz_peer_policy pol;
	struct kz_peer peer;
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	char why[128];
	int fd;

	if (kz_peer_policy_parse(w->c->peer_uids, w->c->peer_gids, &pol, why,
	        sizeof(why)) != 0 ||
	    poll(&p, 1, SBX_BR_ACCEPT_MS) != 1 ||
	    (fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return -1;
	(void)!kz_fd_nonblock(fd, false);
	if (kz_peer_check(fd, &pol, &peer) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The session's network: the relay on the loopback of the bridge's own
 * namespace, with the grant (wiped here), and the bridge's socket.
 * Returns 0 with *relay (-1 if it could not fork), else -1. */
static int
session_net(const struct sbx_worker *w, const char *path, char *grant,
    bool webrtc, pid_t *relay, int *lfd)
{
	char why[160];
	int rfd = -1;

	if (sbx_relay_listen(w->c, (int)w->c->relay_port, &rfd, why,
	        sizeof(why)) != 0 ||
	    kz_sock_listen(path, 1, lfd, why, sizeof(why)) != 0) {
		if (rfd >= 0)
			close(rfd);
		sodium_memzero(grant, strlen(grant));
		kz_log(KZ_LOG_ERROR, "sandbox.browser", KZ_ESYS,
		    "the browser's namespace could not be made", NULL);
		return -1;
	}
	/* Without it WebRTC gathers nothing, which fails closed: a warning,
	 * not a refusal of the session. */
	if (webrtc && sbx_webrtc_if(why, sizeof(why)) != 0)
		kz_log(KZ_LOG_WARN, "sandbox.browser", KZ_ESYS, why, NULL);
	*relay = sbx_relay_start(rfd, w->c->egress_sock, grant);
	sodium_memzero(grant, strlen(grant));
	close(rfd);
	return 0;
}

/* A pre-started bridge, Chromium running on about:blank with no relay:
 * waits for the op's grant on ctl (one message), or for the end. */
static int
await_grant(int ctl, int out, char *grant, size_t cap)
{
	for (;;) {
		/* Chromium's end of the pipe only for its hang-up: what it
		 * writes waits there for the session's peer. */
		struct pollfd p[2] = {{.fd = ctl, .events = POLLIN},
		    {.fd = out, .events = 0}};
		ssize_t n;

		if (br_stop)
			return -1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (p[1].revents & (POLLHUP | POLLERR))
			return -1;
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if ((n = recv(ctl, grant, cap - 1, 0)) <= 0)
			return n < 0 && errno == EINTR ? 0 : -1;
		grant[n] = '\0';
		return 0;
	}
}

/* The bridge process: never returns.  With ctl >= 0 it is the
 * pre-started one: grant is NULL until the op sends it on ctl. */
void
sbx_br_bridge(struct sbx_worker *w, int ready, const char *path, char *grant,
    bool webrtc, unsigned long n, int ctl)
{
	char leaf[SBX_CG_N][SBX_CG_PATH] = {{0}}, ns[64], pgrant[4097];
	int in[2] = {-1, -1}, out[2] = {-1, -1}, mntns, st;
	int pidfd = -1, lfd = -1;
	struct bridge b = {.conn = -1, .io_ms = w->c->io_timeout_ms};
	pid_t relay = -1, pid = -1;
	struct sigaction sa;

	/* Not killed with the agent but told: Chromium's namespaces and the
	 * session's cgroup are removed by this process, so nothing of the
	 * session outlives the worker either. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGINT, &sa, NULL);
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGPIPE, SIG_IGN);
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)w->zpid);
	if ((mntns = open(ns, O_RDONLY | O_CLOEXEC)) < 0 ||
	    sbx_br_cg_join(w, n, leaf) != 0 || unshare(CLONE_NEWNET) < 0 ||
	    sbx_br_loopback_up() != 0) {
		kz_log(KZ_LOG_ERROR, "sandbox.browser", KZ_ESYS,
		    "the browser's namespace could not be made", NULL);
		goto out;
	}
	if (ctl < 0) {
		if (session_net(w, path, grant, webrtc, &relay, &lfd) != 0)
			goto out;
		/* The socket exists, in the bridge's own network namespace
		 * (no entry of it in the code's /proc/net/unix): the op may
		 * answer. */
		(void)!write(ready, "r", 1);
		close(ready);
		ready = -1;
		if (relay < 0)
			goto out;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		goto out;
	if ((pid = sbx_clone(CLONE_NEWPID | CLONE_NEWNS, &pidfd)) < 0)
		goto out;
	if (pid == 0)
		sbx_br_stub(w, webrtc, mntns, in[0], out[1]);
	close(pidfd);
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	b.in = in[1];
	b.out = out[0];
	if (ctl >= 0) {
		/* Pre-started: the session's network only now, the relay
		 * forked without Chromium's pipe (relay.c). */
		if (await_grant(ctl, b.out, pgrant, sizeof(pgrant)) != 0 ||
		    session_net(w, path, pgrant, false, &relay, &lfd) != 0 ||
		    relay < 0)
			goto out;
		(void)!send(ctl, "r", 1, MSG_NOSIGNAL);
		close(ctl);
		ctl = -1;
	}
	if ((b.conn = take_peer(w, lfd)) >= 0)
		pump(&b);
out:
	sodium_memzero(pgrant, sizeof(pgrant));
	if (ready >= 0)
		close(ready);
	if (ctl >= 0)
		close(ctl);
	if (lfd >= 0)
		(void)unlink(path);
	if (pid > 0) {
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, &st, 0);
	}
	if (relay > 0) {
		(void)kill(relay, SIGKILL);
		(void)waitpid(relay, NULL, 0);
	}
	sbx_br_cg_remove(w, leaf);
	/* The worker is stopping: its cgroup, once the agent's teardown has
	 * emptied it, may have been left for this leaf; a busy one stays. */
	for (int i = 0; br_stop && i < w->cg.n; i++)
		(void)rmdir(w->cg.worker[i]);
	_exit(0);
}
