/*
 * One run.  The agent clones the run's init into a fresh pid and mount
 * namespace, puts it in the run cgroup, then lets it pivot into the root
 * view, mount its /proc and fork the code.  The code process applies
 * rlimits, drops every privilege, loads the seccomp filter and execs.  The
 * init reaps until the code exits, reports its status and exits, which ends
 * every other process of the run.  The agent meanwhile moves stdin and
 * output, enforces the wall clock, output and pids limits, and collects
 * the figures.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

enum { REP_FAIL = 1, REP_DONE = 2 };
struct report {
	int kind;
	int status;
	char step[64];
	char why[192];
};

extern char **environ;

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

/* The code process: never returns. */
static void
code_exec(struct sbx_worker *w, struct sbx_req *rq, int io[3][2], int rep)
{
	char why[192], cwd[PATH_MAX];

	reset_signals();
	if (dup2(io[0][0], 0) < 0 || dup2(io[1][1], 1) < 0 ||
	    dup2(io[2][1], 2) < 0 || (rep != 3 && dup3(rep, 3, O_CLOEXEC) < 0)) {
		report(rep, REP_FAIL, 0, "stdio", strerror(errno));
		_exit(127);
	}
	(void)syscall(SYS_close_range, 4, ~0u, 0);
	rep = 3;
	(void)setsid();
	if (sbx_rlimit_apply(w->c, why, sizeof(why)) != 0) {
		report(rep, REP_FAIL, 0, "rlimit", why);
		_exit(127);
	}
	if (sbx_caps_drop((uid_t)w->c->uid, (gid_t)w->c->gid, why,
	    sizeof(why)) != 0) {
		report(rep, REP_FAIL, 0, "capabilities", why);
		_exit(127);
	}
	snprintf(cwd, sizeof(cwd), "%s/%s", SBX_WS, rq->cwd ? rq->cwd : "");
	if (chdir(cwd) < 0) {
		report(rep, REP_FAIL, 0, "cwd", "the working directory does "
		    "not exist in the workspace");
		_exit(127);
	}
	if (sbx_seccomp_load(&w->prog) != 0) {
		report(rep, REP_FAIL, 0, "seccomp",
		    "seccomp: cannot load the filter");
		_exit(127);
	}
	environ = rq->env.v;
	execvp(rq->argv[0], rq->argv);
	dprintf(2, "kz-sandbox: cannot execute %s: %s\n", rq->argv[0],
	    strerror(errno));
	_exit(127);
}

/* The run's init (pid 1 of its namespace): never returns. */
static void
run_init(struct sbx_worker *w, struct sbx_req *rq, int io[3][2], int rep,
    int go)
{
	char why[192], b = 0;
	pid_t code;
	int st = 0;

	if (read(go, &b, 1) != 1 || b != 'g')
		_exit(1);
	close(go);
	if (unshare(CLONE_NEWCGROUP) < 0) {
		report(rep, REP_FAIL, 0, "namespaces", "cgroup namespace");
		_exit(1);
	}
	if (sbx_mnt_enter(&w->mnt, why, sizeof(why)) != 0) {
		report(rep, REP_FAIL, 0, "mount", why);
		_exit(1);
	}
	if ((code = fork()) < 0) {
		report(rep, REP_FAIL, 0, "fork", strerror(errno));
		_exit(1);
	}
	if (code == 0)
		code_exec(w, rq, io, rep);
	for (int i = 0; i < 3; i++)
		close(io[i][i == 0 ? 0 : 1]);
	for (;;) {
		int s;
		pid_t p = waitpid(-1, &s, 0);

		if (p == code) {
			st = s;
			break;
		}
		if (p < 0 && errno != EINTR)
			break;
	}
	report(rep, REP_DONE, st, NULL, NULL);
	_exit(0);
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

static void
stop(struct sbx_res *rs, int pidfd, const char *why)
{
	if (rs->limit == NULL)
		rs->limit = why;
	(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

static void
supervise(struct sbx_worker *w, struct loop *l, int pidfd, int rep,
    const struct sbx_cg_stats *before)
{
	int64_t start = kz_now_ms(), deadline = start + l->rq->timeout_ms;
	int64_t next_tick = start + TICK_MS;
	bool alive = true, o[2] = {true, true};
	struct report r;

	while (alive || o[0] || o[1]) {
		struct pollfd p[6];
		int np = 0, ip = -1, is = -1, io_[2] = {-1, -1}, ir = -1, id = -1;
		int64_t now = kz_now_ms(), t;

		if (alive && now >= deadline)
			stop(l->rs, pidfd, "timeout");
		if (now >= next_tick) {
			struct sbx_cg_stats st;

			sbx_cg_stats(&w->cg, &st);
			if (alive && st.pids_max_hits > before->pids_max_hits)
				stop(l->rs, pidfd, "pids");
			next_tick = now + TICK_MS;
		}
		/* Once the init is gone every writer is gone: drain, bounded. */
		if (!alive && now > deadline + 2000)
			break;
		t = (alive ? (deadline < next_tick ? deadline : next_tick) :
		    next_tick) - now;
		if (alive)
			p[id = np++] = (struct pollfd){pidfd, POLLIN, 0};
		if (rep >= 0)
			p[ir = np++] = (struct pollfd){rep, POLLIN, 0};
		for (int i = 0; i < 2; i++)
			if (o[i])
				p[io_[i] = np++] = (struct pollfd){l->outfd[i],
				    POLLIN, 0};
		if (l->infd >= 0) {
			bool need_src = l->rq->stdin_fd >= 0 &&
			    l->in_off == l->in_len && !l->in_eof;

			if (need_src)
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
				stop(l->rs, pidfd, "output");
		}
		if ((ip >= 0 && p[ip].revents) || (is >= 0 && p[is].revents))
			feed(l, is >= 0 ? p[is].revents : 0);
		if (ip >= 0 && (p[ip].revents & (POLLERR | POLLHUP))) {
			close(l->infd);
			l->infd = -1;
		}
		if (ir >= 0 && p[ir].revents) {
			ssize_t n = read(rep, &r, sizeof(r));

			if (n == (ssize_t)sizeof(r) && r.kind == REP_FAIL &&
			    !l->rs->setup_failed) {
				l->rs->setup_failed = true;
				snprintf(l->rs->step, sizeof(l->rs->step), "%s",
				    r.step);
				snprintf(l->rs->why, sizeof(l->rs->why), "%s",
				    r.why);
			} else if (n == (ssize_t)sizeof(r) &&
			    r.kind == REP_DONE) {
				l->rs->exited = WIFEXITED(r.status);
				l->rs->code = WIFEXITED(r.status) ?
				    WEXITSTATUS(r.status) : -1;
				l->rs->sig = WIFSIGNALED(r.status) ?
				    WTERMSIG(r.status) : 0;
				l->rs->exited |= !WIFSIGNALED(r.status) &&
				    l->rs->sig == 0 && l->rs->code >= 0;
			} else if (n <= 0)
				rep = -1;
		}
		if (id >= 0 && p[id].revents)
			alive = false;
	}
}

static int
pipes(int io[3][2], int *rep, int *go)
{
	int rp[2], gp[2];

	for (int i = 0; i < 3; i++)
		io[i][0] = io[i][1] = -1;
	for (int i = 0; i < 3; i++)
		if (pipe2(io[i], O_CLOEXEC) < 0)
			return KZ_ESYS;
	if (pipe2(rp, O_CLOEXEC) < 0)
		return KZ_ESYS;
	if (pipe2(gp, O_CLOEXEC) < 0) {
		close(rp[0]);
		close(rp[1]);
		return KZ_ESYS;
	}
	rep[0] = rp[0], rep[1] = rp[1], go[0] = gp[0], go[1] = gp[1];
	(void)!kz_fd_nonblock(io[0][1], true);
	(void)!kz_fd_nonblock(io[1][0], true);
	(void)!kz_fd_nonblock(io[2][0], true);
	return 0;
}

static void
closeall(int io[3][2], int rep[2], int go[2])
{
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			if (io[i][j] >= 0)
				close(io[i][j]);
	for (int j = 0; j < 2; j++) {
		if (rep[j] >= 0)
			close(rep[j]);
		if (go[j] >= 0)
			close(go[j]);
	}
}

static void
setup_fail(struct sbx_res *rs, const char *step, const char *why)
{
	rs->setup_failed = true;
	snprintf(rs->step, sizeof(rs->step), "%s", step);
	snprintf(rs->why, sizeof(rs->why), "%s", why);
}

int
sbx_run(struct sbx_worker *w, struct sbx_req *rq, struct sbx_res *rs)
{
	int io[3][2], rep[2] = {-1, -1}, go[2] = {-1, -1}, pidfd = -1;
	int64_t start = kz_now_ms();
	struct sbx_cg_stats before, after;
	struct loop l;
	struct rusage ru;
	pid_t pid, relay = -1;
	int st;

	memset(rs, 0, sizeof(*rs));
	memset(&l, 0, sizeof(l));
	l.rq = rq, l.rs = rs;
	for (int i = 0; i < 2; i++)
		if (rq->out_fd[i] < 0 &&
		    (rs->buf[i] = malloc(rq->out_max[i] + 1)) == NULL)
			return KZ_ENOMEM;
	if (pipes(io, rep, go) != 0) {
		closeall(io, rep, go);
		setup_fail(rs, "pipes", strerror(errno));
		return 0;
	}
	sbx_cg_reset_peak(&w->cg);
	sbx_cg_stats(&w->cg, &before);
	if (w->relay_fd >= 0 && rq->grant != NULL && rq->grant[0] != '\0')
		relay = sbx_relay_start(w->relay_fd, w->c->egress_sock,
		    rq->grant);
	if (rq->grant != NULL)
		explicit_bzero(rq->grant, strlen(rq->grant));
	pid = sbx_clone(CLONE_NEWPID | CLONE_NEWNS, &pidfd);
	if (pid == 0) {
		close(io[0][1]), close(io[1][0]), close(io[2][0]);
		close(rep[0]), close(go[1]);
		run_init(w, rq, io, rep[1], go[0]);
	}
	close(io[0][0]), close(io[1][1]), close(io[2][1]);
	close(rep[1]), close(go[0]);
	io[0][0] = io[1][1] = io[2][1] = rep[1] = go[0] = -1;
	if (pid < 0 || sbx_cg_attach(&w->cg, pid) != 0 ||
	    write(go[1], "g", 1) != 1) {
		setup_fail(rs, pid < 0 ? "namespaces" : "cgroup",
		    pid < 0 ? "clone of the run init failed" :
		    "cannot place the run in its cgroup");
		if (pid > 0)
			(void)kill(pid, SIGKILL);
	} else {
		l.infd = io[0][1], l.outfd[0] = io[1][0], l.outfd[1] = io[2][0];
		io[0][1] = io[1][0] = io[2][0] = -1;
		supervise(w, &l, pidfd, rep[0], &before);
	}
	if (pid > 0 && wait4(pid, &st, 0, &ru) == pid)
		rs->cpu_ms = (int64_t)ru.ru_utime.tv_sec * 1000 +
		    ru.ru_utime.tv_usec / 1000 + ru.ru_stime.tv_sec * 1000 +
		    ru.ru_stime.tv_usec / 1000;
	rs->wall_ms = kz_now_ms() - start;
	sbx_cg_stats(&w->cg, &after);
	rs->peak = after.peak;
	if (rs->limit == NULL && after.oom_kills > before.oom_kills)
		rs->limit = "memory";
	if (rs->limit == NULL && after.pids_max_hits > before.pids_max_hits)
		rs->limit = "pids";
	if (!rs->setup_failed && !rs->exited && rs->sig == 0)
		rs->sig = SIGKILL;	/* the init itself was killed */
	rs->leftovers = sbx_cg_count_run(&w->cg);
	if (rs->leftovers != 0)
		(void)sbx_cg_kill_run(&w->cg);
	if (relay > 0) {
		(void)kill(relay, SIGKILL);
		(void)waitpid(relay, NULL, 0);
	}
	for (int i = 0; i < 2; i++)
		if (l.outfd[i] >= 0)
			close(l.outfd[i]);
	if (l.infd >= 0)
		close(l.infd);
	if (pidfd >= 0)
		close(pidfd);
	closeall(io, rep, go);
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
	w->relay_fd = -1;
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
	if (c->egress_sock[0] != '\0' &&
	    (r = sbx_relay_listen((int)c->relay_port, &w->relay_fd, why,
	    wlen)) != 0)
		return r;
	return 0;
}

void
sbx_worker_release(struct sbx_worker *w)
{
	sbx_cg_teardown(&w->cg);
	sbx_mnt_release(&w->mnt);
	sbx_seccomp_free(&w->prog);
	if (w->relay_fd >= 0)
		close(w->relay_fd);
	w->relay_fd = -1;
}
