/*
 * Under gvisor, in the run init: the sandbox it keeps (gvisor.c says what
 * it is and how long it lives).  The init boots it by executing runsc
 * from a code process, as a native run's code is started, with the
 * sandbox's control socket as its standard input and runsc's log as its
 * output; hands it each run's job; takes the loader's answers; and
 * forgets it once runsc is reaped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "kz_io.h"
#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

/* The job's working directory exists in the workspace, resolved as the
 * code would: inside the view, never through a magic link. */
static bool
cwd_ok(const struct sbx_worker *w, const char *cwd)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	char root[SBX_PBUF], rel[PATH_MAX + 16];
	int dfd, fd;

	snprintf(root, sizeof(root), "%s/root", w->mnt.stage);
	snprintf(rel, sizeof(rel), "%s/%s", SBX_WS + 1, cwd);
	if ((dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	close(dfd);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* runsc's command line for the next boot, a container id of its own each
 * (the code process executes it; it shares the init's memory until
 * then). */
static char gv_arg[4][SBX_PBUF];
static char *gv_argv[16];
static unsigned long gv_runs;

static void
gv_cmdline(const struct sbx_conf *c)
{
	int n = 0;

	memcpy(gv_arg[0], "--root=", 8);
	(void)!sbx_gv_dir(c, "root", gv_arg[0] + 7, SBX_PBUF - 7);
	snprintf(gv_arg[1], SBX_PBUF, "--platform=%s", c->gv_platform);
	(void)!sbx_gv_dir(c, "bundle", gv_arg[2], SBX_PBUF);
	snprintf(gv_arg[3], SBX_PBUF, "kz-%lu", ++gv_runs);
	gv_argv[n++] = (char *)c->runsc;
	gv_argv[n++] = gv_arg[0];
	/* gVisor's own network stack, always: the code reaches the relay
	 * and the broker forward through the loader (gvisor_net.c), and
	 * no host network at all. */
	gv_argv[n++] = "--network=none";
	gv_argv[n++] = gv_arg[1];
	/* The run cgroup, which the code process joins before it executes
	 * runsc, holds and limits the whole sandbox. */
	gv_argv[n++] = "--ignore-cgroups";
	/* The spec's root is not read-only (gvisor.c): no overlay may
	 * make it writable in memory either. */
	gv_argv[n++] = "--overlay2=none";
	gv_argv[n++] = "run";
	gv_argv[n++] = "--bundle";
	gv_argv[n++] = gv_arg[2];
	gv_argv[n++] = gv_arg[3];
	gv_argv[n] = NULL;
}

/*
 * The bundle, once per init (the configuration does not change): the
 * filter, which is the agent's, sent at the setup, and the spec.
 */
static int
write_bundle(struct sbx_worker *w, char *why, size_t wlen)
{
	static bool done;
	char root[SBX_PBUF], p[SBX_PBUF], *text = NULL;
	cJSON *spec = NULL;
	int fd = -1, r = KZ_ESYS;

	if (done)
		return 0;
	if (sbx_gv_dir(w->c, "bundle/filter", p, sizeof(p)) != 0 ||
	    (fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444)) <
	        0 ||
	    kz_write_full(fd, w->prog.filter,
	        w->prog.len * sizeof(w->prog.filter[0]), -1) != 0) {
		kz_why(why, wlen, "gvisor: cannot write the filter: %s",
		    strerror(errno));
		goto out;
	}
	close(fd);
	fd = -1;
	snprintf(root, sizeof(root), "%s/root", w->mnt.stage);
	if ((spec = sbx_gv_spec(w->c, root, p)) == NULL ||
	    (text = cJSON_PrintUnformatted(spec)) == NULL) {
		kz_why(why, wlen, "gvisor: cannot make the OCI spec");
		r = KZ_ENOMEM;
		goto out;
	}
	if (sbx_gv_dir(w->c, "bundle/config.json", p, sizeof(p)) != 0 ||
	    (fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) <
	        0 ||
	    kz_write_full(fd, text, strlen(text), -1) != 0 ||
	    sbx_gv_chown(w->c, fd, "") != 0) {
		kz_why(why, wlen, "gvisor: cannot write the OCI spec: %s",
		    strerror(errno));
		goto out;
	}
	done = true;
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	free(text);
	cJSON_Delete(spec);
	return r;
}

void
sbx_gv_exec(const struct sbx_worker *w, int rep)
{
	static char *const envp[] = {SBX_GV_PATH, NULL};

	/* Root of runsc's user namespace is SANDBOX_GVISOR_UID on the host
	 * (ns.c): the host root this process still is becomes it. */
	if (w->c->gv_uid != 0 &&
	    (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)) {
		sbx_msg_report(rep, REP_FAIL, 0, "gvisor",
		    "gvisor: cannot become runsc's uid");
		_exit(127);
	}
	execve(w->c->runsc, gv_argv, envp);
	sbx_msg_report(rep, REP_FAIL, 0, "gvisor",
	    "gvisor: cannot execute runsc");
	_exit(127);
}

/* The served worker's sandbox: runsc's pid, the init's end of the
 * control socket, whether the loader said it is ready, and runsc's own
 * output (a file on the state tmpfs). */
static struct {
	pid_t pid;
	int ctl;
	bool ready;
	char log[SBX_PBUF];
} gv = {0, -1, false, ""};

static bool
gv_live(void)
{
	return gv.pid > 0;
}

bool
sbx_gv_started(void)
{
	return gv.ready;
}

static int
boot_prepare(struct sbx_worker *w, int *sfd, int *logfd, char *why, size_t wlen)
{
	int sv[2], big = 4 << 20, r;

	if ((r = write_bundle(w, why, wlen)) != 0)
		return r;
	gv_cmdline(w->c);
	if (gv.log[0] == '\0' &&
	    sbx_gv_dir(w->c, "runsc.log", gv.log, sizeof(gv.log)) != 0) {
		kz_why(why, wlen, "gvisor: the state path is too long");
		return KZ_ETOOBIG;
	}
	if ((*logfd = open(gv.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	         0600)) < 0) {
		kz_why(why, wlen, "gvisor: cannot open runsc's log: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		kz_why(why, wlen, "gvisor: socketpair: %s", strerror(errno));
		close(*logfd);
		return KZ_ESYS;
	}
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	/* No sandbox boots without its way to the relay and the forward:
	 * never one with the host's network instead. */
	if ((r = sbx_gv_net_boot(w->c, sv[0], why, wlen)) != 0) {
		close(sv[0]), close(sv[1]), close(*logfd);
		return r;
	}
	gv.ctl = sv[0], gv.ready = false;
	*sfd = sv[1];
	return 0;
}

int
sbx_gv_ctl(void)
{
	return gv.ctl;
}

bool
sbx_gv_take(int sock)
{
	struct report r;
	ssize_t n = read(gv.ctl, &r, sizeof(r));

	if (n <= 0) {
		/* The sandbox is going: runsc's reaping reports the run. */
		close(gv.ctl);
		gv.ctl = -1;
		return false;
	}
	if (n != (ssize_t)sizeof(r))
		return false;
	if (r.kind == REP_READY) {
		gv.ready = true;
		return false;
	}
	if (r.kind != REP_DONE)
		return false;
	r.step[0] = r.why[0] = '\0';
	(void)!write(sock, &r, sizeof(r));
	return true;
}

bool
sbx_gv_reaped(pid_t pid)
{
	if (pid <= 0 || pid != gv.pid)
		return false;
	gv.pid = 0;
	if (gv.ctl >= 0)
		close(gv.ctl);
	gv.ctl = -1;
	sbx_gv_net_close();
	return true;
}

void
sbx_gv_preboot(struct sbx_worker *w)
{
	if (sbx_gvisor(w->c) && w->serve && w->c->gv_preboot && !w->broken)
		(void)!sbx_msg_boot_send(w->zsock);
}

void
sbx_gv_log_tail(char *buf, size_t len)
{
	char b[4096], *e, *l;
	ssize_t n = -1;
	int fd;

	buf[0] = '\0';
	if (gv.log[0] == '\0' || (fd = open(gv.log, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	if (lseek(fd, 0, SEEK_END) > (off_t)sizeof(b) - 1)
		(void)lseek(fd, -(off_t)sizeof(b) + 1, SEEK_END);
	else
		(void)lseek(fd, 0, SEEK_SET);
	n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return;
	b[n] = '\0';
	while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r'))
		b[--n] = '\0';
	l = (e = strrchr(b, '\n')) != NULL ? e + 1 : b;
	snprintf(buf, len, "%s", l);
}

/*
 * Boots the gVisor sandbox: runsc executed by a code process, its standard
 * input the sandbox's control socket and its output runsc's log; rep takes
 * a failure before runsc runs.  0, or why says what failed.
 */
static int
gv_boot(struct sbx_worker *w, char *stack, int rep, char *why, size_t wlen)
{
	struct sbx_job bj;
	int sfd, logfd;
	pid_t pid;

	memset(&bj, 0, sizeof(bj));
	if (boot_prepare(w, &sfd, &logfd, why, wlen) != 0)
		return -1;
	bj.fd[0] = sfd, bj.fd[1] = bj.fd[2] = logfd, bj.fd[3] = rep;
	pid = sbx_init_spawn(w, &bj, stack);
	close(sfd), close(logfd);
	if (pid < 0) {
		snprintf(why, wlen, "fork: %s", strerror(errno));
		close(gv.ctl);
		gv.ctl = -1;
		sbx_gv_net_close();
		return -1;
	}
	gv.pid = pid;
	return 0;
}

void
sbx_gv_boot_idle(struct sbx_worker *w, char *stack)
{
	char why[192];
	int null;

	if (gv_live() || (null = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
		return;
	/* A failure is the next run's to report: it boots again. */
	(void)gv_boot(w, stack, null, why, sizeof(why));
	close(null);
}

/*
 * npm's configuration for the run's broker (env.c), written by the init on
 * the view's /tmp (SBX_NPMRC is there), as the native code process writes
 * it from inside: whatever the name was (a file or a symlink the code left
 * there) is removed, and the file is made anew, never through a link,
 * readable by the code and not writable by it.
 */
static int
write_npmrc(const struct sbx_worker *w, const char *content)
{
	const char *name = strrchr(SBX_NPMRC, '/') + 1;
	char tmp[SBX_PBUF];
	size_t n = strlen(content);
	int dfd, fd, r = -1;

	snprintf(tmp, sizeof(tmp), "%s/root/tmp", w->mnt.stage);
	if ((dfd = open(tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	    0)
		return -1;
	if ((unlinkat(dfd, name, 0) == 0 || errno == ENOENT) &&
	    (fd = openat(dfd, name,
	         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)) >=
	        0) {
		r = kz_write_full(fd, content, n, -1) == 0 ? 0 : -1;
		if (close(fd) < 0)
			r = -1;
	}
	close(dfd);
	return r;
}

/* A run the sandbox does not take: reported at its step, 0. */
static pid_t
refuse(const struct sbx_job *j, int sock, const char *step, const char *why)
{
	sbx_msg_report(j->fd[3], REP_FAIL, 0, step, why);
	sbx_msg_report(sock, REP_DONE, 127 << 8, NULL, NULL);
	return 0;
}

/*
 * The first passed descriptor runsc cannot hand into the sandbox, or -1.
 * runsc 20221219 imports files, pipes, devices and Unix sockets; any other
 * socket (TCP, UDP) fails there and takes the whole job message with it,
 * so the run would wait for its wall clock and say nothing.
 */
static int
not_importable(const struct sbx_job *j)
{
	for (int i = 0; i < j->npass; i++) {
		int fd = j->fd[ZFDS + i], dom = -1;
		socklen_t len = sizeof(dom);
		struct stat st;

		if (fstat(fd, &st) < 0)
			return j->target[i];
		if (S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) ||
		    S_ISCHR(st.st_mode))
			continue;
		if (!S_ISSOCK(st.st_mode) ||
		    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) < 0 ||
		    dom != AF_UNIX)
			return j->target[i];
	}
	return -1;
}

pid_t
sbx_gv_run(struct sbx_worker *w, struct sbx_job *j, const char *msg,
    char *stack, int sock)
{
	char why[192];
	int bad;

	if ((bad = not_importable(j)) >= 0) {
		snprintf(why, sizeof(why),
		    "descriptor %d is of a kind gVisor cannot take (a file, "
		    "pipe, device or Unix socket can be passed)",
		    bad);
		return refuse(j, sock, "gvisor", why);
	}
	if (!cwd_ok(w, j->cwd))
		return refuse(j, sock, "cwd",
		    "the working directory does not exist in the workspace");
	if (j->npmrc[0] != '\0' && write_npmrc(w, j->npmrc) != 0)
		return refuse(j, sock, "broker",
		    "cannot write npm's configuration for the broker");
	if (!gv_live() && gv_boot(w, stack, j->fd[3], why, sizeof(why)) != 0)
		return refuse(j, sock, "gvisor", why);
	/* The job message as the agent sent it, and its descriptors. */
	if (sbx_msg_send_fds(gv.ctl, msg, j->len, j->fd, ZFDS + j->npass) !=
	    0) {
		/* A runsc that failed at once is gone before the job: what it
		 * said is in its log. */
		char tail[120];

		sbx_gv_log_tail(tail, sizeof(tail));
		snprintf(why, sizeof(why),
		    "gvisor: cannot hand the run to the sandbox%s%s",
		    tail[0] ? ": " : "", tail);
		return refuse(j, sock, "gvisor", why);
	}
	return gv.pid;
}
