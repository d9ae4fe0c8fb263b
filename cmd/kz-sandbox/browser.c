/*
 * Op browser: one Chromium session, started by the agent beside the run
 * namespace, never inside it (kz-browser(8)).
 *
 * The op forks a bridge and answers at once with the path of the bridge's
 * own socket, so the worker keeps serving runs while the session lives.
 * The bridge leaves for a network namespace of its own whose loopback holds
 * the session's egress relay and nothing else, then clones a stub into new
 * pid and mount namespaces: the stub takes a copy of the run's root view,
 * mounts its own /proc, /tmp (the profile) and /dev/shm, an /etc with the
 * managed policy, and starts Chromium under the code's boundary (uid, no
 * capabilities, no_new_privs, the worker's seccomp filter, rlimits, a
 * cgroup of its own under the worker's).  A session with webrtc (kz-browser
 * asks for it only when the operator configured TURN) differs in two
 * things: its network namespace has one more interface that routes
 * nowhere (netif.c), and Chromium's filter is the worker's browser variant,
 * which also allows NETLINK_ROUTE sockets: without them and the interface
 * Chromium's WebRTC gathers no candidate, not even a relay one.  Code in the
 * run namespace therefore cannot see Chromium's pids (so no /proc/PID/fd of the
 * pipe), its listeners, or its files.  The bridge holds the two ends of
 * --remote-debugging-pipe and carries each NUL-terminated CDP message as
 * one kz-protocol frame to the one peer that connects; when that peer or
 * Chromium goes, the whole session goes with its namespaces, and the
 * profile's tmpfs with them.  The bridge's own code is browser_bridge.c,
 * the stub's browser_stub.c.
 *
 * With SANDBOX_BROWSER_PRESTART a served worker keeps one such bridge
 * ready ahead of the op: Chromium already running on about:blank, and no
 * relay and no socket until the op hands it a grant over a control
 * socket.  It is forked once the worker is ready for a lease (serve.c:
 * at start, and after the health answer that closes a clean reset's
 * evidence), again a while after each op that took it, and every bridge,
 * used or not, ends at the next wipe (sbx_browser_wipe).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_wire.h"
#include "sbx.h"
#include "sbx_browser.h"
#include "sbx_gvisor.h"
#include "banned.h"

#define BR_MAX 8 /* sessions a worker holds at once */
#define BR_STOP_MS 4000 /* a wipe: SIGTERM, SIGKILL at half of it */

const char *const sbx_browser_fields[] = {"grant", "webrtc", NULL};

/* The bridges this agent forked, reaped at the next op. */
static pid_t bridges[BR_MAX];
static unsigned long serial;

/* The pre-started bridge (SANDBOX_BROWSER_PRESTART): its pid, the
 * agent's end of its control socket, and the path its socket will have. */
static pid_t pre_pid;
static int pre_ctl = -1;
static char pre_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static void
reap_bridges(void)
{
	for (int i = 0; i < BR_MAX; i++)
		if (bridges[i] > 0 && waitpid(bridges[i], NULL, WNOHANG) != 0)
			bridges[i] = 0;
}

/* Whether the pre-started bridge is still there; one that ended is
 * reaped and forgotten (so that its pid is never signalled again). */
static bool
pre_alive(void)
{
	if (pre_pid > 0 && waitpid(pre_pid, NULL, WNOHANG) != 0) {
		pre_pid = 0;
		if (pre_ctl >= 0)
			close(pre_ctl);
		pre_ctl = -1;
	}
	return pre_pid > 0;
}

/* Ends a pre-started bridge the op could not use. */
static void
pre_drop(void)
{
	if (pre_ctl >= 0)
		close(pre_ctl);
	pre_ctl = -1;
	if (pre_pid > 0) {
		(void)kill(pre_pid, SIGKILL);
		(void)waitpid(pre_pid, NULL, 0);
	}
	pre_pid = 0;
}

/*
 * Hands the op's grant to the pre-started bridge, which then starts the
 * relay and listens; the reply names its socket.  NULL (the bridge is
 * gone, or did not answer in time) and the op forks a bridge as without
 * SANDBOX_BROWSER_PRESTART.  Either way the agent pre-starts a
 * replacement once its reply is written.
 */
static cJSON *
take_prestarted(const cJSON *req, const char *g)
{
	struct pollfd p = {.fd = pre_ctl, .events = POLLIN};
	size_t len = strlen(g);
	cJSON *o;
	char b;

	if (!pre_alive())
		return NULL;
	if (send(pre_ctl, g, len, MSG_NOSIGNAL) != (ssize_t)len ||
	    poll(&p, 1, SBX_BR_ACCEPT_MS) != 1 ||
	    recv(pre_ctl, &b, 1, 0) != 1 || b != 'r') {
		kz_log(KZ_LOG_WARN, "sandbox.browser", KZ_EUNAVAIL,
		    "the pre-started browser could not be used", NULL);
		pre_drop();
		return NULL;
	}
	close(pre_ctl);
	pre_ctl = -1;
	if ((o = kz_reply_ok(req)) == NULL) {
		pre_drop();
		return NULL;
	}
	cJSON_AddStringToObject(o, "bridge", pre_path);
	cJSON_AddBoolToObject(o, "prestarted", true);
	kz_log(KZ_LOG_INFO, "sandbox.browser.prestart", 0,
	    "a session took the pre-started browser", NULL);
	return o;
}

void
sbx_browser_prestart(struct sbx_worker *w)
{
	int sv[2];
	pid_t pid;

	if (!w->c->browser_prestart || !w->serve || pre_alive() ||
	    sbx_gvisor(w->c) || access(w->c->browser_bin, X_OK) != 0 ||
	    w->c->egress_sock[0] == '\0')
		return;
	if (snprintf(pre_path, sizeof(pre_path), "%s.b%lu", w->c->sock,
	        ++serial) >= (int)sizeof(pre_path) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	if ((pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (pid == 0) {
		/* Forked between requests, with the connection of the peer
		 * that asked for the last one still open: the bridge keeps
		 * none of the agent's descriptors but its control socket. */
		if (dup2(sv[1], 3) < 0)
			_exit(126);
		(void)close_range(4, ~0u, 0);
		sbx_br_bridge(w, -1, pre_path, NULL, false, serial, 3);
	}
	close(sv[1]);
	pre_ctl = sv[0];
	pre_pid = pid;
	kz_log(KZ_LOG_INFO, "sandbox.browser.prestart", 0,
	    "a browser is pre-started for the next session", NULL);
}

const char *
sbx_browser_prestart_state(const struct sbx_worker *w)
{
	if (!w->c->browser_prestart)
		return "off";
	return pre_alive() ? "ready" : "none";
}

/* Whether no browser-* cgroup is left under dir, after removing the
 * empty ones (within about a second while their processes go). */
static bool
leaves_gone(const char *dir)
{
	char p[SBX_CG_PATH + 64];
	struct dirent *e;
	bool ok = true;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "browser-", 8) != 0)
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(p)) {
			ok = false;
			continue;
		}
		for (int t = 0; t < 50 && rmdir(p) < 0 && errno == EBUSY; t++)
			usleep(20000);
		if (access(p, F_OK) == 0)
			ok = false;
	}
	closedir(d);
	return ok;
}

/*
 * The wipe's part of a reset: every bridge of the lease ends, the
 * sessions' and the pre-started one alike (SIGTERM, so that each removes
 * Chromium's namespaces and its cgroup; SIGKILL after BR_STOP_MS), and no
 * session cgroup may be left.  A bridge that did not go (reaped in time)
 * or a cgroup still there makes it false, and the reset fails closed.
 */
bool
sbx_browser_wipe(struct sbx_worker *w)
{
	pid_t all[BR_MAX + 1];
	int n = 0, left;
	bool ok = true;

	if (pre_ctl >= 0)
		close(pre_ctl);
	pre_ctl = -1;
	if (pre_pid > 0)
		all[n++] = pre_pid;
	pre_pid = 0;
	for (int i = 0; i < BR_MAX; i++)
		if (bridges[i] > 0)
			all[n++] = bridges[i];
	memset(bridges, 0, sizeof(bridges));
	for (int i = 0; i < n; i++)
		(void)kill(all[i], SIGTERM);
	for (int t = 0; t <= BR_STOP_MS / 10; t++) {
		left = 0;
		for (int i = 0; i < n; i++)
			if (all[i] > 0 && waitpid(all[i], NULL, WNOHANG) != 0)
				all[i] = 0;
			else if (all[i] > 0)
				left++;
		if (left == 0)
			break;
		if (t == BR_STOP_MS / 20)
			for (int i = 0; i < n; i++)
				if (all[i] > 0)
					(void)kill(all[i], SIGKILL);
		usleep(10000);
	}
	for (int i = 0; i < n; i++)
		if (all[i] > 0) /* not reaped in time: still ours */
			ok = false;
	for (int i = 0; i < w->cg.n; i++)
		ok = leaves_gone(w->cg.worker[i]) && ok;
	return ok;
}

/*
 * The op: checks what a session needs, makes the bridge's socket (beside
 * the worker's, out of the view), forks the bridge and answers with the
 * socket's path; the peer connects there within SBX_BR_ACCEPT_MS.
 */
cJSON *
sbx_op_browser(struct sbx_worker *w, const cJSON *req)
{
	const char *g = NULL;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)], why[160];
	struct pollfd p = {.events = POLLIN};
	char *grant, b;
	int rp[2], slot = -1;
	bool ok, webrtc = false;
	cJSON *o;
	pid_t pid;

	reap_bridges();
	if (kz_json_str(req, "grant", 4096, &g, why, sizeof(why)) != 0 ||
	    kz_json_bool_opt(req, "webrtc", false, &webrtc, why, sizeof(why)) !=
	        0)
		return kz_reply_err(req, KZ_WE_BAD_REQUEST, why);
	/* The browser variant is compiled at the first session that needs
	 * it (most workers never run one: a filter costs milliseconds of
	 * CPU, and every warm worker start would pay them); a worker
	 * started by hand (not served) has none. */
	if (webrtc && w->prog_rtc.filter == NULL &&
	    (!w->serve ||
	        sbx_seccomp_build(&w->prog_rtc, true, why, sizeof(why)) != 0))
		return kz_reply_err(req, KZ_WE_UNAVAILABLE,
		    "this worker has no filter for WebRTC");
	/* Chromium runs in namespaces of its own beside the run namespace,
	 * not in runsc: under gvisor it would run without the layer the
	 * worker was configured for, so it does not run at all. */
	if (sbx_gvisor(w->c))
		return kz_reply_err(req, KZ_WE_UNAVAILABLE,
		    "this worker runs code under gvisor, and a browser does "
		    "not "
		    "run there yet: no session without gVisor's layer");
	if (access(w->c->browser_bin, X_OK) != 0)
		return kz_reply_err(req, KZ_WE_UNAVAILABLE,
		    "no browser is installed on this worker");
	if (w->c->egress_sock[0] == '\0')
		return kz_reply_err(req, KZ_WE_UNAVAILABLE,
		    "this worker has no egress, so it cannot browse");
	for (int i = 0; i < BR_MAX && slot < 0; i++)
		if (bridges[i] == 0)
			slot = i;
	if (slot < 0)
		return kz_reply_err(req, KZ_WE_BUSY,
		    "this worker holds as many browser sessions as it may");
	/* The pre-started bridge fits every session but one with WebRTC
	 * (its filter and its interface are made before Chromium starts). */
	if (!webrtc && pre_pid > 0) {
		w->prestart_at = kz_now_ms() + SBX_PRESTART_AFTER_MS;
		if ((o = take_prestarted(req, g)) != NULL) {
			bridges[slot] = pre_pid;
			pre_pid = 0;
			return o;
		}
	}
	if (snprintf(path, sizeof(path), "%s.b%lu", w->c->sock, ++serial) >=
	        (int)sizeof(path) ||
	    pipe2(rp, O_CLOEXEC) < 0)
		return kz_reply_err(req, KZ_WE_INTERNAL,
		    "the browser's bridge could not listen");
	if ((grant = strdup(g)) == NULL || (pid = fork()) < 0) {
		free(grant);
		close(rp[0]);
		close(rp[1]);
		return kz_reply_err(req, KZ_WE_INTERNAL,
		    "the browser's bridge could not start");
	}
	if (pid == 0) {
		/* As the pre-started bridge: none of the agent's descriptors
		 * (its listening socket, the peer's connection) but the
		 * pipe that says it is ready, so a retired worker's endpoint
		 * is not held open by its bridge. */
		if (rp[1] != 3 && dup3(rp[1], 3, O_CLOEXEC) < 0)
			_exit(126);
		(void)close_range(4, ~0u, 0);
		sbx_br_bridge(w, 3, path, grant, webrtc, serial, -1);
	}
	sodium_memzero(grant, strlen(grant));
	free(grant);
	close(rp[1]);
	p.fd = rp[0];
	ok = poll(&p, 1, SBX_BR_ACCEPT_MS) == 1 && read(rp[0], &b, 1) == 1;
	close(rp[0]);
	if (!ok) {
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		return kz_reply_err(req, KZ_WE_UNAVAILABLE,
		    "the browser could not be started on this worker");
	}
	bridges[slot] = pid;
	o = kz_reply_ok(req);
	cJSON_AddStringToObject(o, "bridge", path);
	return o;
}
