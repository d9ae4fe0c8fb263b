/*
 * The run namespace's init.  Cloned into new pid and mount namespaces when
 * the worker starts and again for every lease, it pivots into the root
 * view, mounts /proc and records the mount table while the agent makes the
 * network, IPC and UTS namespaces (and, at the start, the cgroups and the
 * seccomp filter); then it joins those namespaces, takes the rest from the
 * agent and forks the code of each run on request (init_code.c), reaps it
 * and every orphan, and reports the status.  It also checks, from inside the
 * namespaces the code sees, what the next tenant will find there
 * (check.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

/* The signals ignored, from the SigIgn line of /proc/self/status (all of
 * them when it cannot be read). */
static uint64_t
sig_ignored(void)
{
	char st[4096], *p;
	uint64_t m = ~0ull;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return m;
	n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return m;
	st[n] = '\0';
	if ((p = strstr(st, "\nSigIgn:")) != NULL)
		m = strtoull(p + 8, NULL, 16);
	return m;
}

/*
 * The init starts with every signal the agent handled at its default
 * (sbx_clone); it resets the ones still ignored (inherited from whoever
 * started the agent) once, SIGPIPE excepted, which stays ignored for its
 * own writes.  So a code process only has to restore SIGPIPE and its mask:
 * two calls instead of one per signal.
 */
static void
init_signals(void)
{
	uint64_t ign = sig_ignored();

	for (int s = 1; s < NSIG && s <= 64; s++)
		if ((ign & (1ull << (s - 1))) && s != SIGKILL && s != SIGSTOP &&
		    s != SIGPIPE)
			(void)signal(s, SIG_DFL);
	(void)signal(SIGPIPE, SIG_IGN);
}

static void
reap(const struct sbx_worker *w, int sock, pid_t *cur)
{
	struct rusage ru;
	struct report r;
	char tail[160];
	pid_t p;
	int st;

	while ((p = wait4(-1, &st, WNOHANG, &ru)) > 0) {
		bool started = sbx_gv_started();

		/* A served worker's sandbox is gone (the run cgroup killed):
		 * the next run boots another. */
		(void)sbx_gv_reaped(p);
		if (p != *cur)
			continue;
		memset(&r, 0, sizeof(r));
		r.kind = REP_DONE;
		r.status = st;
		r.cpu_ms = sbx_cpu_ms(&ru);
		/* runsc ended before it made the container: the code never
		 * ran, and its status is runsc's, not the code's. */
		if (sbx_gvisor(w->c) && !started) {
			sbx_gv_log_tail(tail, sizeof(tail));
			snprintf(r.step, sizeof(r.step), "gvisor");
			snprintf(r.why, sizeof(r.why),
			    "gvisor: runsc ended (%s %d) before the code "
			    "started%s%.100s",
			    WIFEXITED(st) ? "exit" : "signal",
			    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
			    tail[0] ? ": " : "", tail);
		}
		(void)!write(sock, &r, sizeof(r));
		*cur = 0;
	}
}

/* Closes every descriptor but the init's socket: the init must not hold
 * the worker's listening socket or a client connection.  (The run
 * cgroup's descriptors come later, in the setup message.) */
static void
keep_only(int sock)
{
	if (sock > 3)
		(void)syscall(SYS_close_range, 3, sock - 1, 0);
	(void)syscall(SYS_close_range, sock + 1, ~0u, 0);
}

/* 0; -1 for a malformed message, -2 when the agent is gone, -3 when the
 * agent's namespaces cannot be joined. */
static int
take_setup(struct sbx_worker *w, int sock, char *buf, size_t cap)
{
	struct sock_fprog prog;
	int nfd, fds[SBX_SETUP_FDS], r;

	if ((r = sbx_msg_setup_take(sock, buf, cap, fds, &nfd, &prog)) != 0)
		return r;
	if (setns(fds[0], SBX_NS_WORKER) < 0) {
		for (int i = 0; i < nfd; i++)
			close(fds[i]);
		free(prog.filter);
		return -3;
	}
	close(fds[0]);
	w->prog = prog;
	w->cg.v2 = nfd == 2;
	w->cg.n = nfd - 1;
	for (int i = 1; i < nfd; i++)
		w->cg.procs_fd[i - 1] = fds[i];
	return 0;
}

/*
 * After a failure report: wait until the agent has sent its setup message
 * or gone, then exit.  Exiting first would let the agent's send find the
 * socket closed, and such a send discards what is queued for the sender,
 * the report included; the agent's setns would fail too.
 */
static void fail_exit(int sock) __attribute__((noreturn));

static void
fail_exit(int sock)
{
	char b;

	(void)!read(sock, &b, 1);
	_exit(1);
}

/* The run namespace's init (pid 1 there): never returns. */
static void
zygote(struct sbx_worker *w, int sock)
{
	static char buf[ZMSG_MAX];
	struct sbx_mnt zm = {.stage = ""};
	char why[192], *stack;
	pid_t cur = 0;
	sigset_t set;
	int sfd, r;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* A served worker's view is a copy of its template, to which only
	 * what is each lease's own is added. */
	if (w->tmpl_fd >= 0 &&
	    (setns(w->tmpl_fd, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0)) {
		sbx_msg_report(sock, REP_FAIL, 0, "mount",
		    "mount: cannot copy the template namespace");
		fail_exit(sock);
	}
	keep_only(sock);
	init_signals();
	if ((w->tmpl_fd >= 0 ?
	            sbx_mnt_lease(&w->mnt, w->c, why, sizeof(why)) :
	            sbx_mnt_build(&w->mnt, w->c, why, sizeof(why))) != 0 ||
	    (!sbx_gvisor(w->c) &&
	        sbx_mnt_enter(&w->mnt, why, sizeof(why)) != 0)) {
		sbx_msg_report(sock, REP_FAIL, 0, "mount", why);
		fail_exit(sock);
	}
	/* Under gvisor the view stays where it was built, and is checked
	 * there. */
	if (sbx_gvisor(w->c)) {
		if (snprintf(zm.stage, sizeof(zm.stage), "%s/root",
		        w->mnt.stage) >= (int)sizeof(zm.stage)) {
			sbx_msg_report(sock, REP_FAIL, 0, "gvisor",
			    "the view's path is too long");
			fail_exit(sock);
		}
		if (sbx_gv_enter(w, why, sizeof(why)) != 0) {
			sbx_msg_report(sock, REP_FAIL, 0, "gvisor", why);
			fail_exit(sock);
		}
	}
	if ((w->c->userns || sbx_gvisor(w->c)) &&
	    sbx_ns_userns_make(w->c, &w->userns_fd, why, sizeof(why)) != 0) {
		sbx_msg_report(sock, REP_FAIL, 0, "namespaces", why);
		fail_exit(sock);
	}
	if ((stack = sbx_code_stack()) == NULL) {
		sbx_msg_report(sock, REP_FAIL, 0, "init",
		    "cannot map the code stack");
		fail_exit(sock);
	}
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	(void)sigprocmask(SIG_BLOCK, &set, NULL);
	if ((sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0) {
		sbx_msg_report(sock, REP_FAIL, 0, "init", "signalfd");
		fail_exit(sock);
	}
	/* The baseline is the wipe's evidence; a one-shot run is never
	 * wiped. */
	if (w->serve && sbx_mnt_record(&zm) != 0) {
		sbx_msg_report(sock, REP_FAIL, 0, "mount",
		    "cannot record the mount table");
		fail_exit(sock);
	}
	/* Nothing runs before the agent's cgroups and filter are here; an
	 * agent that failed or went away sends nothing (and kills us). */
	if ((r = take_setup(w, sock, buf, sizeof(buf))) != 0) {
		if (r == -1)
			sbx_msg_report(sock, REP_FAIL, 0, "init",
			    "init: bad setup message");
		if (r == -3)
			sbx_msg_report(sock, REP_FAIL, 0, "namespaces",
			    "namespaces: "
			    "the init cannot join the worker's namespaces");
		fail_exit(sock);
	}
	/* Cloned during a reset, at its lower priority: the code gets the
	 * normal one. */
	(void)setpriority(PRIO_PROCESS, 0, 0);
	sbx_msg_report(sock, REP_READY, 0, NULL, NULL);
	for (;;) {
		struct pollfd p[4] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0},
		    {sbx_gv_ctl(), POLLIN, 0}, {sbx_gv_net(), POLLIN, 0}};
		struct signalfd_siginfo si;
		struct sbx_job j;

		if (poll(p, 4, -1) < 0)
			continue;
		if (p[3].revents)
			sbx_gv_net_serve();
		/* The sandbox's answer first: a run it ended is reported with
		 * the code's status, even if runsc is reaped in the same turn.
		 */
		if (p[2].revents && sbx_gv_take(sock))
			cur = 0;
		if (p[1].revents) {
			(void)!read(sfd, &si, sizeof(si));
			reap(w, sock, &cur);
		}
		if (!p[0].revents)
			continue;
		if ((r = sbx_msg_take(sock, buf, sizeof(buf), &j)) == -2)
			_exit(0);
		if (r == 1 && cur == 0)
			sbx_check_here(&zm, sock);
		if (r == 2 && cur == 0 && sbx_gvisor(w->c))
			sbx_gv_boot_idle(w, stack);
		if (r != 0 || cur != 0)
			continue;
		if (sbx_gvisor(w->c)) {
			cur = sbx_gv_run(w, &j, buf, stack, sock);
			for (int i = 0; i < ZFDS + j.npass; i++)
				close(j.fd[i]);
			continue;
		}
		if ((cur = sbx_init_spawn(w, &j, stack)) < 0) {
			sbx_msg_report(j.fd[3], REP_FAIL, 0, "fork",
			    strerror(errno));
			sbx_msg_report(sock, REP_DONE, 127 << 8, NULL, NULL);
			cur = 0;
		}
		for (int i = 0; i < ZFDS + j.npass; i++)
			close(j.fd[i]);
	}
}

/*
 * Clones the init into new pid and mount namespaces.  It starts on the root
 * view at once; sbx_init_go hands it the rest.
 */
int
sbx_init_start(struct sbx_worker *w, char *why, size_t wlen)
{
	int sv[2], pidfd = -1, big = 4 << 20;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		kz_why(why, wlen, "init: socketpair: %s", strerror(errno));
		return KZ_ESYS;
	}
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	pid = sbx_clone(CLONE_NEWPID | (w->tmpl_fd >= 0 ? 0 : CLONE_NEWNS),
	    &pidfd);
	if (pid == 0) {
		close(sv[0]);
		zygote(w, sv[1]);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		kz_why(why, wlen, "namespaces: clone: %s", strerror(errno));
		return KZ_ESYS;
	}
	w->zsock = sv[0], w->zpid = pid, w->zpidfd = pidfd;
	if (pidfd < 0) {
		kz_why(why, wlen, "namespaces: clone gave no pidfd");
		return KZ_ESYS;
	}
	return 0;
}

/* The template's builder: never returns. */
static void
build_template(struct sbx_worker *w, int sock)
{
	char msg[200], b;
	int n;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	keep_only(sock);
	memset(msg, 0, sizeof(msg));
	msg[0] = sbx_mnt_base(&w->mnt, w->c, msg + 1, sizeof(msg) - 1) == 0 ?
	    'y' :
	    'n';
	n = (int)strlen(msg);
	(void)!write(sock, msg, (size_t)n);
	/* Until the agent holds the namespace open. */
	(void)!read(sock, &b, 1);
	_exit(0);
}

int
sbx_template_make(struct sbx_worker *w, char *why, size_t wlen)
{
	char msg[200], p[64];
	int sv[2], pidfd = -1, r = KZ_EUNAVAIL;
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		kz_why(why, wlen, "mount: socketpair: %s", strerror(errno));
		return KZ_ESYS;
	}
	if ((pid = sbx_clone(CLONE_NEWNS, &pidfd)) == 0) {
		close(sv[0]);
		build_template(w, sv[1]);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		kz_why(why, wlen, "mount: clone: %s", strerror(errno));
		return KZ_ESYS;
	}
	n = read(sv[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
	if (n > 0 && msg[0] == 'y' &&
	    (w->tmpl_fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0)
		r = 0;
	else
		kz_why(why, wlen, "%s",
		    n > 1 && msg[0] == 'n' ?
		        msg + 1 :
		        "mount: the template was not built");
	close(sv[0]);
	(void)kill(pid, SIGKILL);
	(void)waitpid(pid, NULL, 0);
	if (pidfd >= 0)
		close(pidfd);
	return r;
}

int
sbx_init_go(struct sbx_worker *w, char *why, size_t wlen)
{
	struct report r;
	int self;
	ssize_t n;
	bool sent;

	/* A one-shot run leaves its init in the agent's cgroup, so the
	 * teardown need not wait for the pid namespace to unwind. */
	if (w->serve && sbx_cg_attach_init(&w->cg, w->zpid) != 0) {
		kz_why(why, wlen, "cgroup: cannot place the init");
		return KZ_EUNAVAIL;
	}
	if ((self = (int)syscall(SYS_pidfd_open, getpid(), 0)) < 0) {
		kz_why(why, wlen, "namespaces: pidfd_open: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	memset(&r, 0, sizeof(r));
	/* An init that failed waits for this message before it exits (see
	 * fail_exit), so its reason is still queued after the send. */
	sent = sbx_msg_setup_send(w->zsock, &w->prog, self, w->cg.procs_fd,
	    w->cg.n);
	close(self);
	if (!sent)
		n = recv(w->zsock, &r, sizeof(r), MSG_DONTWAIT);
	else
		n = read(w->zsock, &r, sizeof(r));
	if (n != (ssize_t)sizeof(r) || r.kind != REP_READY) {
		r.why[sizeof(r.why) - 1] = '\0';
		kz_why(why, wlen, "%s",
		    n == (ssize_t)sizeof(r) && r.kind == REP_FAIL ?
		        r.why :
		        "init: did not start");
		return KZ_EUNAVAIL;
	}
	return 0;
}
