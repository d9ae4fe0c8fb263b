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
 * profile's tmpfs with them.
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
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_wire.h"
#include "sbx.h"
#include "banned.h"

#define BR_MAX 8 /* sessions a worker holds at once */
#define BR_MSG_MAX (32u << 20) /* one CDP message (a screenshot) */
#define BR_ACCEPT_MS 10000
#define BR_STOP_MS 4000 /* a wipe: SIGTERM, SIGKILL at half of it */
#define BR_PIPE_IN 3 /* Chromium reads CDP from fd 3 ... */
#define BR_PIPE_OUT 4 /* ... and writes to fd 4 */
#define BR_POLICY "/etc/chromium/policies/managed/kaizen.json"

const char *const sbx_browser_fields[] = {"grant", "webrtc", NULL};

/* Set in a bridge by SIGTERM: the agent stopping (the bridge's parent-death
 * signal) or the agent's own stop, so that it ends its session cleanly. */
static volatile sig_atomic_t br_stop;

static void
on_stop(int sig)
{
	(void)sig;
	br_stop = 1;
}

/* The bridges this agent forked, reaped at the next op. */
static pid_t bridges[BR_MAX];
static unsigned long serial;

/* The pre-started bridge (SANDBOX_BROWSER_PRESTART): its pid, the
 * agent's end of its control socket, and the path its socket will have. */
static pid_t pre_pid;
static int pre_ctl = -1;
static char pre_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

/*
 * The managed policy: the schemes a member could type that the proxy never
 * sees, the features that would keep state or hand a file to a page, and
 * WebRTC kept off UDP that bypasses the proxy.
 */
static const char policy
    [] = "{\"URLBlocklist\":[\"file://*\",\"filesystem:*\",\"view-source:*\","
         "\"devtools://*\",\"chrome://*\",\"chrome-untrusted://*\","
         "\"chrome-extension://*\"],"
         "\"IncognitoModeAvailability\":1,\"BrowserSignin\":0,"
         "\"SyncDisabled\":true,\"AllowFileSelectionDialogs\":false,"
         "\"PasswordManagerEnabled\":false,\"DownloadRestrictions\":3,"
         "\"PrintingEnabled\":false,\"AutofillAddressEnabled\":false,"
         "\"AutofillCreditCardEnabled\":false,\"BackgroundModeEnabled\":false,"
         "\"WebRtcIPHandling\":\"disable_non_proxied_udp\","
         "\"WebRtcUdpPortRange\":\"\"}\n";

/* The view's /etc has no fontconfig: the distro's fonts, a cache in the
 * profile. */
static const char fonts_conf
    [] = "<?xml version=\"1.0\"?>\n<fontconfig>\n"
         "<dir>/usr/share/fonts</dir>\n"
         "<cachedir>/tmp/profile/fontconfig</cachedir>\n</fontconfig>\n";

/* Chromium's command line: headless (which has no --no-sandbox bar), the
 * pipe, the relay as the only proxy with loopback subtracted from the
 * implicit bypass list, and nothing that phones home. */
static const char *const flags[] = {"--headless=new", "--no-sandbox",
    "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
    "--user-data-dir=/tmp/profile", "--disk-cache-dir=/tmp/profile/cache",
    "--proxy-bypass-list=<-loopback>",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-background-networking", "--disable-component-update",
    "--disable-domain-reliability", "--disable-breakpad", "--disable-sync",
    "--disable-gpu",
    "--disable-features=MediaRouter,OptimizationHints,"
    "Translate,AutofillServerCommunication",
    "--metrics-recording-only", "--mute-audio", "--password-store=basic",
    "--use-mock-keychain", "--window-size=1280,800", NULL};

static void
reap_bridges(void)
{
	for (int i = 0; i < BR_MAX; i++)
		if (bridges[i] > 0 && waitpid(bridges[i], NULL, WNOHANG) != 0)
			bridges[i] = 0;
}

static int
write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path,
	    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	int r;

	if (fd < 0)
		return -1;
	r = kz_write_full(fd, text, strlen(text), -1);
	close(fd);
	return r == 0 ? 0 : -1;
}

/* Writes text to leaf/name. */
static int
cg_write(const char *leaf, const char *name, const char *text)
{
	char p[SBX_CG_PATH + 32];

	if (snprintf(p, sizeof(p), "%s/%s", leaf, name) >= (int)sizeof(p))
		return -1;
	return write_file(p, text, 0644);
}

/* The session's cgroup: a leaf beside the run's under the worker's, with
 * its own memory and pid limits (the run's reset never kills it). */
static int
cg_join(const struct sbx_worker *w, unsigned long n, char leaf[][SBX_CG_PATH])
{
	const struct sbx_cg *g = &w->cg;
	char v[32];

	for (int i = 0; i < g->n; i++) {
		if (snprintf(leaf[i], SBX_CG_PATH, "%s/browser-%lu",
		        g->worker[i], n) >= SBX_CG_PATH ||
		    (mkdir(leaf[i], 0755) < 0 && errno != EEXIST))
			return -1;
		snprintf(v, sizeof(v), "%llu",
		    (unsigned long long)w->c->browser_memory);
		if ((g->v2 || i == SBX_CG_MEM) &&
		    cg_write(leaf[i],
		        g->v2 ? "memory.max" : "memory.limit_in_bytes", v) != 0)
			return -1;
		snprintf(v, sizeof(v), "%lld", (long long)w->c->browser_pids);
		if ((g->v2 || i == SBX_CG_PIDS) &&
		    cg_write(leaf[i], "pids.max", v) != 0)
			return -1;
		snprintf(v, sizeof(v), "%d", (int)getpid());
		if (cg_write(leaf[i], "cgroup.procs", v) != 0)
			return -1;
	}
	return 0;
}

/* The bridge leaves its leaf and removes it once Chromium's processes
 * are gone. */
static void
cg_remove(const struct sbx_worker *w, char leaf[][SBX_CG_PATH])
{
	const struct sbx_cg *g = &w->cg;
	char v[32];

	snprintf(v, sizeof(v), "%d", (int)getpid());
	for (int i = 0; i < g->n; i++) {
		if (leaf[i][0] == '\0')
			continue;
		/* Back where the agent started (so the worker's own cgroup
		 * can go with the worker), else beside the agent. */
		if (g->orig[i][0] == '\0' ||
		    cg_write(g->orig[i], "cgroup.procs", v) != 0)
			(void)cg_write(g->v2 ? g->agent : g->worker[i],
			    "cgroup.procs", v);
		for (int t = 0; t < 100 && rmdir(leaf[i]) < 0 && errno == EBUSY;
		     t++)
			usleep(20000);
	}
}

static int
loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		r = -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (r == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		r = -1;
	close(fd);
	return r;
}

/* Binds every entry of the view's /etc into dir, which becomes /etc. */
static int
etc_mirror(const char *dir)
{
	char src[PATH_MAX], dst[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d = opendir("/etc");
	int r = 0;

	if (d == NULL)
		return -1;
	while (r == 0 && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(src, sizeof(src), "/etc/%s", e->d_name);
		snprintf(dst, sizeof(dst), "%s/%s", dir, e->d_name);
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			char t[PATH_MAX];
			ssize_t n = readlink(src, t, sizeof(t) - 1);

			if (n < 0)
				continue;
			t[n] = '\0';
			r = symlink(t, dst);
			continue;
		}
		r = S_ISDIR(st.st_mode) ? mkdir(dst, 0755) :
		                          write_file(dst, "", 0644);
		if (r == 0)
			r = mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
	}
	closedir(d);
	return r;
}

/* In the stub (new pid and mount namespaces, a copy of the run's view):
 * what Chromium alone sees.  Returns NULL or the step that failed. */
static const char *
stub_mounts(const struct sbx_conf *c)
{
	char opt[64];

	snprintf(opt, sizeof(opt), "size=%llu,mode=1777",
	    (unsigned long long)c->browser_tmp);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return "private";
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	        "hidepid=2") < 0)
		return "proc";
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0 ||
	    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0)
		return "tmpfs";
	if (mkdir("/tmp/etc", 0755) < 0 ||
	    mount("tmpfs", "/tmp/etc", "tmpfs", MS_NOSUID | MS_NODEV,
	        "size=1m,mode=0755") < 0 ||
	    etc_mirror("/tmp/etc") < 0)
		return "etc";
	if ((mkdir("/tmp/etc/fonts", 0755) < 0 && errno != EEXIST) ||
	    write_file("/tmp/etc/fonts/fonts.conf", fonts_conf, 0644) < 0)
		return "fonts";
	if (mkdir("/tmp/etc/chromium", 0755) < 0 ||
	    mkdir("/tmp/etc/chromium/policies", 0755) < 0 ||
	    mkdir("/tmp/etc/chromium/policies/managed", 0755) < 0 ||
	    write_file("/tmp" BR_POLICY, policy, 0644) < 0)
		return "policy";
	if (mount("/tmp/etc", "/etc", NULL, MS_MOVE, NULL) < 0)
		return "move /etc";
	if (mount(NULL, "/etc", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) <
	    0)
		return "read-only /etc";
	if (rmdir("/tmp/etc") < 0 || mkdir("/tmp/profile", 0700) < 0 ||
	    chown("/tmp/profile", (uid_t)c->uid, (gid_t)c->gid) < 0)
		return "profile";
	return NULL;
}

#define DIE(what)                                                              \
	do {                                                                   \
		dprintf(2, "kz-sandbox browser: %s: %s\n", what,               \
		    strerror(errno));                                          \
		_exit(126);                                                    \
	} while (0)

/* Chromium itself: the code's boundary (with prog, the worker's filter or
 * its browser variant), then the pinned binary. */
static void
chromium_exec(const struct sbx_worker *w, const struct sock_fprog *prog, int in,
    int out)
{
	const struct sbx_conf *c = w->c;
	const char *argv[64];
	char why[192];
	char *env[] = {"HOME=/tmp/profile", "PATH=/usr/bin:/bin",
	    "LANG=C.UTF-8", "TMPDIR=/tmp", "XDG_CONFIG_HOME=/tmp/profile",
	    "XDG_CACHE_HOME=/tmp/profile/cache", "FONTCONFIG_PATH=/etc/fonts",
	    NULL};
	char proxy[64];
	size_t n = 0;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	/* Every source above every target first: with few descriptors open
	 * (a pre-started bridge keeps almost none) one may sit at 3 or 4.
	 * Chromium's own chatter names the pages it visits: not the
	 * worker's log. */
	if (nul < 0 || (nul = fcntl(nul, F_DUPFD_CLOEXEC, 16)) < 0 ||
	    (in = fcntl(in, F_DUPFD_CLOEXEC, 16)) < 0 ||
	    (out = fcntl(out, F_DUPFD_CLOEXEC, 16)) < 0 ||
	    dup2(in, BR_PIPE_IN) < 0 || dup2(out, BR_PIPE_OUT) < 0 ||
	    dup2(nul, 0) < 0 || dup2(nul, 1) < 0 ||
	    (getenv("KZ_BROWSER_DEBUG") == NULL && dup2(nul, 2) < 0))
		DIE("pipe");
	for (int fd = BR_PIPE_OUT + 1; fd < 1024; fd++)
		(void)close(fd);
	(void)setsid();
	if (sbx_rlimit_apply(c, why, sizeof(why)) != 0 ||
	    sbx_caps_drop((uid_t)c->uid, (gid_t)c->gid, false, why,
	        sizeof(why)) != 0) {
		dprintf(2, "kz-sandbox browser: %s\n", why);
		_exit(126);
	}
	if (chdir("/tmp/profile") < 0)
		DIE("chdir");
	if (sbx_seccomp_load(prog) != 0)
		DIE("seccomp");
	argv[n++] = c->browser_bin;
	for (size_t i = 0; flags[i] != NULL; i++)
		argv[n++] = flags[i];
	snprintf(proxy, sizeof(proxy), "--proxy-server=http://127.0.0.1:%d",
	    (int)c->relay_port);
	argv[n++] = proxy;
	argv[n++] = "about:blank";
	argv[n] = NULL;
	execve(c->browser_bin, (char *const *)argv, env);
	DIE("exec");
}

/* The stub: pid 1 of Chromium's namespace; when it exits, the kernel kills
 * everything in it and the profile's tmpfs goes with the namespace. */
static void
stub(const struct sbx_worker *w, bool webrtc, int mntns, int in, int out)
{
	pid_t pid;
	int st;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (setns(mntns, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0)
		DIE("mount namespace");
	const char *step;

	if ((step = stub_mounts(w->c)) != NULL)
		DIE(step);
	close(mntns);
	if ((pid = fork()) < 0)
		DIE("fork");
	if (pid == 0)
		chromium_exec(w, webrtc ? &w->prog_rtc : &w->prog, in, out);
	close(in);
	close(out);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	/* Chromium's children are killed with the namespace; its status is
	 * the session's. */
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
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
	    poll(&p, 1, BR_ACCEPT_MS) != 1 ||
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

	if (sbx_relay_listen((int)w->c->relay_port, &rfd, why, sizeof(why)) !=
	        0 ||
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
static void
bridge_main(struct sbx_worker *w, int ready, const char *path, char *grant,
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
	    cg_join(w, n, leaf) != 0 || unshare(CLONE_NEWNET) < 0 ||
	    loopback_up() != 0) {
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
		stub(w, webrtc, mntns, in[0], out[1]);
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
	cg_remove(w, leaf);
	/* The worker is stopping: its cgroup, once the agent's teardown has
	 * emptied it, may have been left for this leaf; a busy one stays. */
	for (int i = 0; br_stop && i < w->cg.n; i++)
		(void)rmdir(w->cg.worker[i]);
	_exit(0);
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
	    poll(&p, 1, BR_ACCEPT_MS) != 1 || recv(pre_ctl, &b, 1, 0) != 1 ||
	    b != 'r') {
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
	    access(w->c->browser_bin, X_OK) != 0 ||
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
		bridge_main(w, -1, pre_path, NULL, false, serial, 3);
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
 * socket's path; the peer connects there within BR_ACCEPT_MS.
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
	/* A worker started by hand (not served) has no variant. */
	if (webrtc && w->prog_rtc.filter == NULL)
		return kz_reply_err(req, KZ_WE_UNAVAILABLE,
		    "this worker has no filter for WebRTC");
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
		close(rp[0]);
		if (pre_ctl >= 0)
			close(pre_ctl);
		bridge_main(w, rp[1], path, grant, webrtc, serial, -1);
	}
	sodium_memzero(grant, strlen(grant));
	free(grant);
	close(rp[1]);
	p.fd = rp[0];
	ok = poll(&p, 1, BR_ACCEPT_MS) == 1 && read(rp[0], &b, 1) == 1;
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
