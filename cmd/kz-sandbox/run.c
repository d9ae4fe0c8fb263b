/*
 * Runs.  At start the worker clones one init into a fresh pid and mount
 * namespace (its own cgroup, <id>/init): it pivots into the root view,
 * mounts a /proc of that pid namespace and then waits for work.  For each
 * run the agent hands it the run's descriptors and argv/env over a
 * SOCK_SEQPACKET pair; the init forks the code process, which joins the run
 * cgroup, applies rlimits, drops every privilege, loads the seccomp filter
 * and execs.  The init reaps it (and any orphan) and reports the status.
 * The agent moves stdin and output, enforces the wall clock, output and
 * pids limits, and ends every run by killing whatever is left in the run
 * cgroup.  Nothing per run touches the mount table, which is what keeps a
 * warm run close to the cost of a bare fork and exec.
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

#include "kz_frame.h"
#include "sbx.h"
#include "banned.h"

#define TICK_MS 50
#define FLOOD_EXTRA (4u << 20)
#define ZMSG_MAX (SBX_ARG_BYTES + SBX_ENV_BYTES + 8192)
#define ZFDS 4

enum { REP_FAIL = 1, REP_DONE = 2, REP_READY = 3, REP_WIPED = 4 };
struct report {
	int kind;
	int status;
	int64_t cpu_ms;
	char step[64];
	char why[192];
};

extern char **environ;

/* Set from a signal handler of the one-shot run: stop the code, tear down
 * normally. */
volatile sig_atomic_t sbx_interrupted;

static void
report(int fd, int kind, int status, const char *step, const char *why)
{
	struct report r;

	memset(&r, 0, sizeof(r));
	r.kind = kind;
	r.status = status;
	snprintf(r.step, sizeof(r.step), "%s", step ? step : "");
	snprintf(r.why, sizeof(r.why), "%s", why ? why : "");
	(void)!write(fd, &r, sizeof(r));
}

static void
reset_signals(void)
{
	sigset_t none;

	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)signal(s, SIG_DFL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
}

struct job {
	char *argv[SBX_ARGV_MAX + 1];
	char *env[SBX_ENV_MAX + 17];
	const char *cwd;
	int fd[ZFDS];		/* stdin, stdout, stderr, report */
};

#define FAIL(step, why) do { report(rep, REP_FAIL, 0, step, why); \
	_exit(127); } while (0)

/* The code process: never returns. */
static void
code_exec(struct sbx_worker *w, struct job *j)
{
	char why[192], cwd[PATH_MAX];
	int rep = j->fd[3];

	reset_signals();
	if (sbx_cg_attach(&w->cg, 0) != 0)
		FAIL("cgroup", "cannot join the run cgroup");
	if (unshare(CLONE_NEWCGROUP) < 0)
		FAIL("namespaces", "cgroup namespace");
	if (dup2(j->fd[0], 0) < 0 || dup2(j->fd[1], 1) < 0 ||
	    dup2(j->fd[2], 2) < 0 || (rep != 3 && dup3(rep, 3, O_CLOEXEC) < 0))
		FAIL("stdio", strerror(errno));
	rep = 3;
	(void)syscall(SYS_close_range, 4, ~0u, 0);
	(void)setsid();
	if (sbx_rlimit_apply(w->c, why, sizeof(why)) != 0)
		FAIL("rlimit", why);
	if (sbx_caps_drop((uid_t)w->c->uid, (gid_t)w->c->gid, why,
	    sizeof(why)) != 0)
		FAIL("capabilities", why);
	snprintf(cwd, sizeof(cwd), "%s/%s", SBX_WS, j->cwd);
	if (chdir(cwd) < 0)
		FAIL("cwd", "the working directory does not exist in the "
		    "workspace");
	if (sbx_seccomp_load(&w->prog) != 0)
		FAIL("seccomp", "seccomp: cannot load the filter");
	environ = j->env;
	execvp(j->argv[0], j->argv);
	dprintf(2, "kz-sandbox: cannot execute %s: %s\n", j->argv[0],
	    strerror(errno));
	_exit(127);
}

/* Splits "argv\0...\0\0env\0...\0\0cwd\0" into the job. */
static int
unpack(char *b, size_t n, struct job *j)
{
	char *p = b, *end = b + n;
	size_t k = 0;

	if (n == 0 || b[n - 1] != '\0')
		return -1;
	for (; p < end && *p != '\0' && k < SBX_ARGV_MAX; p += strlen(p) + 1)
		j->argv[k++] = p;
	j->argv[k] = NULL;
	if (k == 0 || p >= end || *p != '\0')
		return -1;
	p++;
	for (k = 0; p < end && *p != '\0' && k < SBX_ENV_MAX + 16;
	    p += strlen(p) + 1)
		j->env[k++] = p;
	j->env[k] = NULL;
	if (p >= end || *p != '\0' || ++p >= end)
		return -1;
	j->cwd = p;
	return 0;
}

static int
take(int sock, char *buf, size_t cap, struct job *j)
{
	char cb[CMSG_SPACE(sizeof(int) * ZFDS)];
	struct iovec iov = {buf, cap};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cb, .msg_controllen = sizeof(cb)};
	struct cmsghdr *c;
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

	if (n <= 0)
		return -2;
	if (n == 4 && memcmp(buf, "WIPE", 4) == 0 && mh.msg_controllen == 0)
		return 1;
	c = CMSG_FIRSTHDR(&mh);
	if (c == NULL || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int) * ZFDS)) {
		return -1;
	}
	memcpy(j->fd, CMSG_DATA(c), sizeof(int) * ZFDS);
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    unpack(buf, (size_t)n, j) != 0) {
		for (int i = 0; i < ZFDS; i++)
			close(j->fd[i]);
		return -1;
	}
	return 0;
}

static void
reap(int sock, pid_t *cur)
{
	struct rusage ru;
	struct report r;
	pid_t p;
	int st;

	while ((p = wait4(-1, &st, WNOHANG, &ru)) > 0) {
		if (p != *cur)
			continue;
		memset(&r, 0, sizeof(r));
		r.kind = REP_DONE;
		r.status = st;
		r.cpu_ms = (int64_t)ru.ru_utime.tv_sec * 1000 +
		    ru.ru_utime.tv_usec / 1000 + ru.ru_stime.tv_sec * 1000 +
		    ru.ru_stime.tv_usec / 1000;
		(void)!write(sock, &r, sizeof(r));
		*cur = 0;
	}
}

/*
 * Wipes from inside the run namespace, where the code's view is: fresh
 * tmpfs instances for the three writable places, then positive evidence
 * that each is empty and that the mount table equals the one recorded when
 * the init started.
 */
static void
z_wipe(struct sbx_worker *w, struct sbx_mnt *zm, int sock)
{
	char why[192] = "";
	unsigned bits = 0;

	if (sbx_mnt_wipe(zm, w->c, why, sizeof(why)) == 0)
		bits |= SBX_WIPE_DONE;
	bits |= sbx_mnt_empty(zm, "workspace") ? SBX_WIPE_WS : 0;
	bits |= sbx_mnt_empty(zm, "tmp") ? SBX_WIPE_TMP : 0;
	bits |= sbx_mnt_empty(zm, "dev/shm") ? SBX_WIPE_SHM : 0;
	bits |= sbx_mnt_baseline_ok(zm) ? SBX_WIPE_MOUNTS : 0;
	report(sock, REP_WIPED, (int)bits, "wipe", why);
}

/* Closes every descriptor but the init's socket and the run cgroup's
 * cgroup.procs files (the code joins through them): the init must not
 * hold the worker's listening socket or a client connection. */
static void
keep_only(const struct sbx_worker *w, int sock)
{
	int keep[SBX_CG_N + 1], n = 0;

	keep[n++] = sock;
	for (int i = 0; i < SBX_CG_N; i++)
		if (w->cg.procs_fd[i] >= 0)
			keep[n++] = w->cg.procs_fd[i];
	for (int fd = 3; fd < 65536; fd++) {
		bool k = false;

		for (int i = 0; i < n; i++)
			k |= keep[i] == fd;
		if (!k && fcntl(fd, F_GETFD) >= 0)
			close(fd);
		if (fd > 1024 && fcntl(fd, F_GETFD) < 0)
			break;
	}
}

/* The run namespace's init (pid 1 there): never returns. */
static void
zygote(struct sbx_worker *w, int sock)
{
	static char buf[ZMSG_MAX];
	struct sbx_mnt zm = {.stage = ""};
	char why[192], b = 0;
	pid_t cur = 0;
	sigset_t set;
	int sfd;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	keep_only(w, sock);
	if (read(sock, &b, 1) != 1 || b != 'g')
		_exit(1);
	if (sbx_mnt_enter(&w->mnt, why, sizeof(why)) != 0) {
		report(sock, REP_FAIL, 0, "mount", why);
		_exit(1);
	}
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	(void)sigprocmask(SIG_BLOCK, &set, NULL);
	if ((sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0) {
		report(sock, REP_FAIL, 0, "init", "signalfd");
		_exit(1);
	}
	if (sbx_mnt_record(&zm) != 0) {
		report(sock, REP_FAIL, 0, "mount", "cannot record the mount "
		    "table");
		_exit(1);
	}
	report(sock, REP_READY, 0, NULL, NULL);
	for (;;) {
		struct pollfd p[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
		struct signalfd_siginfo si;
		struct job j;
		int r;

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents) {
			(void)!read(sfd, &si, sizeof(si));
			reap(sock, &cur);
		}
		if (!p[0].revents)
			continue;
		if ((r = take(sock, buf, sizeof(buf), &j)) == -2)
			_exit(0);
		if (r == 1 && cur == 0)
			z_wipe(w, &zm, sock);
		if (r != 0 || cur != 0)
			continue;
		if ((cur = fork()) == 0) {
			close(sock);
			close(sfd);
			code_exec(w, &j);
		}
		if (cur < 0) {
			report(j.fd[3], REP_FAIL, 0, "fork", strerror(errno));
			report(sock, REP_DONE, 127 << 8, NULL, NULL);
			cur = 0;
		}
		for (int i = 0; i < ZFDS; i++)
			close(j.fd[i]);
	}
}

static int
zygote_start(struct sbx_worker *w, char *why, size_t wlen)
{
	struct report r;
	int sv[2], pidfd = -1, big = 4 << 20;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		kz_why(why, wlen, "init: socketpair: %s", strerror(errno));
		return KZ_ESYS;
	}
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	pid = sbx_clone(CLONE_NEWPID | CLONE_NEWNS, &pidfd);
	if (pid == 0) {
		close(sv[0]);
		zygote(w, sv[1]);
	}
	close(sv[1]);
	if (pidfd >= 0)
		close(pidfd);
	if (pid < 0) {
		close(sv[0]);
		kz_why(why, wlen, "namespaces: clone: %s", strerror(errno));
		return KZ_ESYS;
	}
	w->zsock = sv[0], w->zpid = pid;
	if (sbx_cg_attach_init(&w->cg, pid) != 0) {
		kz_why(why, wlen, "cgroup: cannot place the init");
		return KZ_EUNAVAIL;
	}
	if (write(sv[0], "g", 1) != 1 || read(sv[0], &r, sizeof(r)) !=
	    (ssize_t)sizeof(r) || r.kind != REP_READY) {
		kz_why(why, wlen, "%s", r.kind == REP_FAIL ? r.why :
		    "init: did not start");
		return KZ_EUNAVAIL;
	}
	/* The init's namespace holds the tree from now on; the agent keeps
	 * no reference to the writable places, so a wipe frees them. */
	(void)umount2(w->mnt.stage, MNT_DETACH);
	return 0;
}

int
sbx_wipe(struct sbx_worker *w, unsigned *bits)
{
	struct pollfd p = {.fd = w->zsock, .events = POLLIN};
	struct report r;

	*bits = 0;
	if (w->broken || send(w->zsock, "WIPE", 4, MSG_NOSIGNAL) != 4 ||
	    poll(&p, 1, 10000) != 1 ||
	    read(w->zsock, &r, sizeof(r)) != (ssize_t)sizeof(r) ||
	    r.kind != REP_WIPED) {
		w->broken = true;
		return KZ_EUNAVAIL;
	}
	*bits = (unsigned)r.status;
	w->generation++;
	return 0;
}

struct loop {
	struct sbx_req *rq;
	struct sbx_res *rs;
	int outfd[2];
	int infd;
	size_t in_off;
	char inbuf[65536];
	size_t in_len;
	bool in_eof;
	uint64_t total[2];
};

static void
sink(struct loop *l, int i, const char *buf, size_t n)
{
	uint64_t cap = l->rq->out_max[i];
	size_t keep = 0;

	if (l->total[i] < cap)
		keep = (size_t)(cap - l->total[i]) < n ?
		    (size_t)(cap - l->total[i]) : n;
	l->total[i] += n;
	if (keep < n)
		l->rs->trunc[i] = true;
	if (keep == 0)
		return;
	if (l->rq->out_fd[i] >= 0) {
		(void)!kz_write_full(l->rq->out_fd[i], buf, keep, -1);
		return;
	}
	memcpy(l->rs->buf[i] + l->rs->len[i], buf, keep);
	l->rs->len[i] += keep;
}

/* Moves stdin: from the request buffer, or streamed from a descriptor. */
static void
feed(struct loop *l, short rev_src)
{
	struct sbx_req *rq = l->rq;
	ssize_t n;

	if (l->infd < 0)
		return;
	if (rq->stdin_fd >= 0 && l->in_off == l->in_len && !l->in_eof &&
	    (rev_src & (POLLIN | POLLHUP))) {
		n = read(rq->stdin_fd, l->inbuf, sizeof(l->inbuf));
		l->in_off = 0;
		l->in_len = n > 0 ? (size_t)n : 0;
		l->in_eof = n <= 0;
	}
	if (rq->stdin_fd < 0) {
		if (l->in_off < rq->stdin_len) {
			n = write(l->infd, rq->stdin_buf + l->in_off,
			    rq->stdin_len - l->in_off);
			if (n > 0)
				l->in_off += (size_t)n;
			else if (errno != EAGAIN)
				l->in_off = rq->stdin_len;
		}
		if (l->in_off >= rq->stdin_len) {
			close(l->infd);
			l->infd = -1;
		}
		return;
	}
	if (l->in_off < l->in_len) {
		n = write(l->infd, l->inbuf + l->in_off, l->in_len - l->in_off);
		if (n > 0)
			l->in_off += (size_t)n;
		else if (errno != EAGAIN)
			l->in_eof = true, l->in_off = l->in_len;
	}
	if (l->in_eof && l->in_off >= l->in_len) {
		close(l->infd);
		l->infd = -1;
	}
}

static void
drain(struct loop *l, int i, bool *open_)
{
	char buf[65536];
	ssize_t n = read(l->outfd[i], buf, sizeof(buf));

	if (n > 0)
		sink(l, i, buf, (size_t)n);
	else if (n == 0 || errno != EAGAIN) {
		close(l->outfd[i]);
		l->outfd[i] = -1;
		*open_ = false;
	}
}

/* Ends the run: everything in the run cgroup is killed (again at every
 * tick while the code is alive, so a process that was still joining is
 * caught too). */
static void
stop(struct sbx_worker *w, struct sbx_res *rs, const char *why)
{
	if (rs->limit == NULL)
		rs->limit = why;
	(void)sbx_cg_kill_run(&w->cg);
}

static void
got_report(struct sbx_res *rs, const struct report *r)
{
	if (r->kind == REP_FAIL && !rs->setup_failed) {
		rs->setup_failed = true;
		snprintf(rs->step, sizeof(rs->step), "%s", r->step);
		snprintf(rs->why, sizeof(rs->why), "%s", r->why);
	} else if (r->kind == REP_DONE) {
		rs->exited = WIFEXITED(r->status);
		rs->code = rs->exited ? WEXITSTATUS(r->status) : -1;
		rs->sig = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
		rs->cpu_ms = r->cpu_ms;
	}
}

static void
supervise(struct sbx_worker *w, struct loop *l, int rep,
    const struct sbx_cg_stats *before)
{
	int64_t start = kz_now_ms(), deadline = start + l->rq->timeout_ms;
	int64_t next_tick = start + TICK_MS, ended = 0;
	bool alive = true, o[2] = {true, true};
	struct report r;

	while (alive || o[0] || o[1]) {
		struct pollfd p[6];
		int np = 0, ip = -1, is = -1, io_[2] = {-1, -1}, ir = -1, iz = -1;
		int64_t now = kz_now_ms(), t;

		if (alive && sbx_interrupted)
			stop(w, l->rs, "interrupted");
		if (alive && (now >= deadline || l->rs->limit != NULL))
			stop(w, l->rs, "timeout");
		if (now >= next_tick) {
			struct sbx_cg_stats st;

			sbx_cg_stats(&w->cg, &st);
			if (alive && st.pids_max_hits > before->pids_max_hits)
				stop(w, l->rs, "pids");
			next_tick = now + TICK_MS;
		}
		/* The code is gone: its leftovers go with it, then the
		 * output drains to EOF (bounded). */
		if (!alive && ended == 0) {
			l->rs->leftovers = sbx_cg_count_run(&w->cg);
			if (l->rs->leftovers != 0)
				(void)sbx_cg_kill_run(&w->cg);
			ended = now;
		}
		if (!alive && now > ended + 2000)
			break;
		t = (alive ? (deadline < next_tick ? deadline : next_tick) :
		    next_tick) - now;
		if (alive)
			p[iz = np++] = (struct pollfd){w->zsock, POLLIN, 0};
		if (rep >= 0)
			p[ir = np++] = (struct pollfd){rep, POLLIN, 0};
		for (int i = 0; i < 2; i++)
			if (o[i])
				p[io_[i] = np++] = (struct pollfd){l->outfd[i],
				    POLLIN, 0};
		if (l->infd >= 0) {
			if (l->rq->stdin_fd >= 0 && l->in_off == l->in_len &&
			    !l->in_eof)
				p[is = np++] = (struct pollfd){l->rq->stdin_fd,
				    POLLIN, 0};
			else
				p[ip = np++] = (struct pollfd){l->infd, POLLOUT,
				    0};
		}
		if (poll(p, (nfds_t)np, t < 0 ? 0 : (int)t) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (io_[i] >= 0 && p[io_[i]].revents)
				drain(l, i, &o[i]);
			if (l->total[i] > l->rq->out_max[i] * 2 + FLOOD_EXTRA &&
			    alive)
				stop(w, l->rs, "output");
		}
		if ((ip >= 0 && p[ip].revents) || (is >= 0 && p[is].revents))
			feed(l, is >= 0 ? p[is].revents : 0);
		if (ip >= 0 && l->infd >= 0 &&
		    (p[ip].revents & (POLLERR | POLLHUP))) {
			close(l->infd);
			l->infd = -1;
		}
		if (ir >= 0 && p[ir].revents) {
			if (read(rep, &r, sizeof(r)) == (ssize_t)sizeof(r))
				got_report(l->rs, &r);
			else
				rep = -1;
		}
		if (iz >= 0 && p[iz].revents) {
			ssize_t n = read(w->zsock, &r, sizeof(r));

			if (n == (ssize_t)sizeof(r) && r.kind == REP_DONE)
				got_report(l->rs, &r);
			else if (n <= 0) {
				w->broken = true;
				(void)sbx_cg_kill_run(&w->cg);
			} else
				continue;
			alive = false;
		}
	}
	/* A setup failure report can trail the status. */
	if (rep >= 0 && read(rep, &r, sizeof(r)) == (ssize_t)sizeof(r))
		got_report(l->rs, &r);
}

static int
pipes(int io[3][2], int rep[2])
{
	for (int i = 0; i < 3; i++)
		io[i][0] = io[i][1] = -1;
	rep[0] = rep[1] = -1;
	for (int i = 0; i < 3; i++)
		if (pipe2(io[i], O_CLOEXEC) < 0)
			return KZ_ESYS;
	if (pipe2(rep, O_CLOEXEC) < 0)
		return KZ_ESYS;
	(void)!kz_fd_nonblock(io[0][1], true);
	(void)!kz_fd_nonblock(io[1][0], true);
	(void)!kz_fd_nonblock(io[2][0], true);
	(void)!kz_fd_nonblock(rep[0], true);
	return 0;
}

static void
closeall(int io[3][2], int rep[2])
{
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			if (io[i][j] >= 0)
				close(io[i][j]);
	for (int j = 0; j < 2; j++)
		if (rep[j] >= 0)
			close(rep[j]);
}

static void
setup_fail(struct sbx_res *rs, const char *step, const char *why)
{
	rs->setup_failed = true;
	snprintf(rs->step, sizeof(rs->step), "%s", step);
	snprintf(rs->why, sizeof(rs->why), "%s", why);
}

static int
add_str(char *buf, size_t cap, size_t *len, const char *s)
{
	size_t n = strlen(s) + 1;

	if (*len + n > cap)
		return KZ_ETOOBIG;
	memcpy(buf + *len, s, n);
	*len += n;
	return 0;
}

/* Hands the job to the init: argv, env, cwd and four descriptors. */
static int
send_job(struct sbx_worker *w, struct sbx_req *rq, const int fds[ZFDS])
{
	static char buf[ZMSG_MAX];
	char cb[CMSG_SPACE(sizeof(int) * ZFDS)];
	struct iovec iov = {buf, 0};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cb, .msg_controllen = sizeof(cb)};
	struct cmsghdr *c;
	size_t len = 0;
	int r = 0;

	for (size_t i = 0; r == 0 && rq->argv[i] != NULL; i++)
		r = add_str(buf, sizeof(buf), &len, rq->argv[i]);
	r |= add_str(buf, sizeof(buf), &len, "");
	for (size_t i = 0; r == 0 && i < rq->env.n; i++)
		r = add_str(buf, sizeof(buf), &len, rq->env.v[i]);
	r |= add_str(buf, sizeof(buf), &len, "");
	r |= add_str(buf, sizeof(buf), &len, rq->cwd ? rq->cwd : "");
	if (r != 0)
		return KZ_ETOOBIG;
	iov.iov_len = len;
	memset(cb, 0, sizeof(cb));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * ZFDS);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * ZFDS);
	return sendmsg(w->zsock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 :
	    KZ_ESYS;
}

int
sbx_run(struct sbx_worker *w, struct sbx_req *rq, struct sbx_res *rs)
{
	int io[3][2], rep[2];
	int64_t start = kz_now_ms();
	struct sbx_cg_stats before, after;
	struct loop l;
	pid_t relay = -1;

	memset(rs, 0, sizeof(*rs));
	memset(&l, 0, sizeof(l));
	l.rq = rq, l.rs = rs, l.infd = l.outfd[0] = l.outfd[1] = -1;
	for (int i = 0; i < 2; i++)
		if (rq->out_fd[i] < 0 &&
		    (rs->buf[i] = malloc(rq->out_max[i] + 1)) == NULL)
			return KZ_ENOMEM;
	if (w->broken) {
		setup_fail(rs, "init", "the worker's init is gone");
		return 0;
	}
	/* The relay listens only while a run with a grant is running, so
	 * nothing on the sandbox loopback outlives it or queues for it.  It
	 * is forked before the pipes exist, so it holds none of them. */
	if (w->c->egress_sock[0] != '\0' && rq->grant != NULL &&
	    rq->grant[0] != '\0') {
		char why[192];
		int lfd;

		if (sbx_relay_listen((int)w->c->relay_port, &lfd, why,
		    sizeof(why)) != 0) {
			setup_fail(rs, "relay", why);
			return 0;
		}
		relay = sbx_relay_start(lfd, w->c->egress_sock, rq->grant);
		close(lfd);
	}
	if (pipes(io, rep) != 0) {
		closeall(io, rep);
		setup_fail(rs, "pipes", strerror(errno));
		if (relay > 0) {
			(void)kill(relay, SIGKILL);
			(void)waitpid(relay, NULL, 0);
		}
		return 0;
	}
	sbx_cg_reset_peak(&w->cg);
	sbx_cg_stats(&w->cg, &before);
	if (rq->grant != NULL)
		explicit_bzero(rq->grant, strlen(rq->grant));
	{
		const int fds[ZFDS] = {io[0][0], io[1][1], io[2][1], rep[1]};

		if (send_job(w, rq, fds) != 0) {
			setup_fail(rs, "init", "cannot hand the run to the "
			    "init");
			w->broken = true;
			goto out;
		}
	}
	close(io[0][0]), close(io[1][1]), close(io[2][1]), close(rep[1]);
	io[0][0] = io[1][1] = io[2][1] = rep[1] = -1;
	l.infd = io[0][1], l.outfd[0] = io[1][0], l.outfd[1] = io[2][0];
	io[0][1] = io[1][0] = io[2][0] = -1;
	supervise(w, &l, rep[0], &before);
	rs->wall_ms = kz_now_ms() - start;
	sbx_cg_stats(&w->cg, &after);
	rs->peak = after.peak;
	if (rs->limit == NULL && after.oom_kills > before.oom_kills)
		rs->limit = "memory";
	if (rs->limit == NULL && after.pids_max_hits > before.pids_max_hits)
		rs->limit = "pids";
	if (!rs->setup_failed && !rs->exited && rs->sig == 0)
		rs->sig = SIGKILL;
out:
	if (relay > 0) {
		(void)kill(relay, SIGKILL);
		(void)waitpid(relay, NULL, 0);
	}
	for (int i = 0; i < 2; i++)
		if (l.outfd[i] >= 0)
			close(l.outfd[i]);
	if (l.infd >= 0)
		close(l.infd);
	closeall(io, rep);
	w->generation++;
	return 0;
}

void
sbx_res_release(struct sbx_res *rs)
{
	for (int i = 0; i < 2; i++) {
		free(rs->buf[i]);
		rs->buf[i] = NULL;
	}
}

static int
state_dir(struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen)
{
	if (mkdir(c->state_dir, 0700) < 0 && errno != EEXIST) {
		kz_why(why, wlen, "state: cannot create the state directory: "
		    "%s", strerror(errno));
		return KZ_ESYS;
	}
	if (strlen(c->state_dir) + strlen(c->id) + 2 > 1024) {
		kz_why(why, wlen, "state: the state directory path is too long");
		return KZ_ETOOBIG;
	}
	memcpy(m->stage, c->state_dir, strlen(c->state_dir));
	m->stage[strlen(c->state_dir)] = '/';
	memcpy(m->stage + strlen(c->state_dir) + 1, c->id, strlen(c->id) + 1);
	/* A stale empty directory from a crashed worker is removed; a busy
	 * one means another worker has this id. */
	if (mkdir(m->stage, 0700) < 0 && (errno != EEXIST ||
	    rmdir(m->stage) < 0 || mkdir(m->stage, 0700) < 0)) {
		kz_why(why, wlen, "state: worker directory in use: %s",
		    strerror(errno));
		return KZ_EEXIST;
	}
	m->made_dir = true;
	return 0;
}

int
sbx_worker_init(struct sbx_worker *w, struct sbx_conf *c, bool serve,
    char *why, size_t wlen)
{
	int r;

	memset(w, 0, sizeof(*w));
	w->c = c;
	w->serve = serve;
	w->zsock = -1;
	sbx_cg_init(&w->cg);
	if (c->id[0] == '\0')
		snprintf(c->id, sizeof(c->id), "run-%d", (int)getpid());
	if ((r = sbx_seccomp_build(&w->prog, why, wlen)) != 0)
		return r;
	if ((r = state_dir(&w->mnt, c, why, wlen)) != 0)
		return r;
	if ((r = sbx_cg_setup(&w->cg, c, serve, why, wlen)) != 0)
		return r;
	if ((r = sbx_ns_enter_worker(c, why, wlen)) != 0)
		return r;
	if ((r = sbx_mnt_build(&w->mnt, c, why, wlen)) != 0)
		return r;
	return zygote_start(w, why, wlen);
}

void
sbx_worker_release(struct sbx_worker *w)
{
	if (w->zsock >= 0)
		close(w->zsock);
	if (w->zpid > 0) {
		(void)kill(w->zpid, SIGKILL);
		(void)waitpid(w->zpid, NULL, 0);
	}
	w->zsock = -1, w->zpid = 0;
	sbx_cg_teardown(&w->cg);
	sbx_mnt_release(&w->mnt);
	sbx_seccomp_free(&w->prog);
}
