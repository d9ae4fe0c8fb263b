/*
 * What a browser session's Chromium sees and runs under (browser.c forks
 * the bridge that calls these): the session's cgroup leaf beside the
 * run's, its network namespace's loopback, and the stub, pid 1 of
 * Chromium's pid namespace, with its mounts (a copy of the run's view,
 * its own /proc, the profile's tmpfs, an empty read-only /workspace and
 * /projection, an /etc with the managed policy) and Chromium's exec under the
 * code's boundary.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_io.h"
#include "sbx.h"
#include "sbx_browser.h"
#include "banned.h"

#define BR_PIPE_IN 3 /* Chromium reads CDP from fd 3 ... */
#define BR_PIPE_OUT 4 /* ... and writes to fd 4 */
#define BR_POLICY "/etc/chromium/policies/managed/kaizen.json"

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
int
sbx_br_cg_join(const struct sbx_worker *w, unsigned long n,
    char leaf[][SBX_CG_PATH])
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
		/* Swap must not extend the limit (v1: where swap is
		 * accounted). */
		if (g->v2)
			(void)cg_write(leaf[i], "memory.swap.max", "0");
		else if (i == SBX_CG_MEM)
			(void)cg_write(leaf[i], "memory.memsw.limit_in_bytes",
			    v);
		snprintf(v, sizeof(v), "%lld", (long long)w->c->browser_pids);
		if ((g->v2 || i == SBX_CG_PIDS) &&
		    cg_write(leaf[i], "pids.max", v) != 0)
			return -1;
		/* A page's scripts and workers are code too: bounded like a
		 * run, so one session cannot take the host's CPUs. */
		if (g->v2)
			snprintf(v, sizeof(v), "%lld 100000",
			    (long long)w->c->browser_cpu_milli * 100);
		else
			snprintf(v, sizeof(v), "%lld",
			    (long long)w->c->browser_cpu_milli * 100);
		if (!g->v2 && i == SBX_CG_CPU &&
		    (cg_write(leaf[i], "cpu.cfs_period_us", "100000") != 0 ||
		        cg_write(leaf[i], "cpu.cfs_quota_us", v) != 0))
			return -1;
		if (g->v2 && cg_write(leaf[i], "cpu.max", v) != 0)
			return -1;
		snprintf(v, sizeof(v), "%d", (int)getpid());
		if (cg_write(leaf[i], "cgroup.procs", v) != 0)
			return -1;
	}
	return 0;
}

/* The bridge leaves its leaf and removes it once Chromium's processes
 * are gone. */
void
sbx_br_cg_remove(const struct sbx_worker *w, char leaf[][SBX_CG_PATH])
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

int
sbx_br_loopback_up(void)
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
	/* The run's workspace and projection are the code's, not the
	 * browser's: a compromised renderer (no sandbox of its own) neither
	 * reads nor plants the member's files there. */
	if (mount("tmpfs", SBX_WS, "tmpfs",
	        MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
	        "size=4k,mode=0555") < 0)
		return "workspace";
	if (c->projection[0] != '\0' &&
	    mount("tmpfs", SBX_PROJ, "tmpfs",
	        MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
	        "size=4k,mode=0555") < 0)
		return "projection";
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
void
sbx_br_stub(const struct sbx_worker *w, bool webrtc, int mntns, int in, int out)
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
