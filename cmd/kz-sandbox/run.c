/*
 * Runs.  At start, and for every lease after (worker.c), the worker
 * clones an init into fresh pid, mount, network, IPC and UTS namespaces
 * (a served worker then moves it to its own cgroup, <id>/init): it pivots
 * into the root view, mounts a /proc of that pid namespace and then waits
 * for work.  For each
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "kz_io.h"
#include "banned.h"

#define TICK_MS 50
#define INIT_LOST_MS 5000
#define FLOOD_EXTRA (4u << 20)
#define STDIN_BUF 65536

/* Set from a signal handler of the one-shot run: stop the code, tear down
 * normally. */
volatile sig_atomic_t sbx_interrupted;

struct loop {
	struct sbx_req *rq;
	struct sbx_res *rs;
	int outfd[2];
	int infd;
	size_t in_off;
	char *inbuf; /* STDIN_BUF bytes */
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
		    (size_t)(cap - l->total[i]) :
		    n;
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
		n = read(rq->stdin_fd, l->inbuf, STDIN_BUF);
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

static void setup_fail(struct sbx_res *rs, const char *step, const char *why);

static void
got_report(struct sbx_res *rs, const struct report *r)
{
	if (r->kind == REP_FAIL && !rs->setup_failed) {
		rs->setup_failed = true;
		snprintf(rs->step, sizeof(rs->step), "%s", r->step);
		snprintf(rs->why, sizeof(rs->why), "%s", r->why);
	} else if (r->kind == REP_DONE && r->step[0] != '\0' &&
	    rs->limit == NULL) {
		/* The init says the code never started (runsc failed); a
		 * run the agent stopped first is reported by its limit. */
		if (!rs->setup_failed)
			setup_fail(rs, r->step, r->why);
	} else if (r->kind == REP_DONE) {
		rs->exited = WIFEXITED(r->status);
		rs->code = rs->exited ? WEXITSTATUS(r->status) : -1;
		rs->sig = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
		rs->cpu_ms = r->cpu_ms;
		rs->leftovers = r->leftovers;
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
		int np = 0, ip = -1, is = -1, io_[2] = {-1, -1}, ir = -1,
		    iz = -1;
		int64_t now = kz_now_ms(), t;

		if (alive && sbx_interrupted)
			stop(w, l->rs, "interrupted");
		if (alive && (now >= deadline || l->rs->limit != NULL))
			stop(w, l->rs, "timeout");
		/* The run cgroup has been killed and the init still reports
		 * nothing: it is lost, and the worker with it. */
		if (alive && now >= deadline + INIT_LOST_MS) {
			w->broken = true;
			alive = false;
			continue;
		}
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
			/* Under gvisor the run cgroup holds the sandbox, and
			 * only that (a served worker keeps it for the lease):
			 * its loader has killed what the code left, inside
			 * gVisor, and counted it. */
			if (!sbx_gvisor(w->c)) {
				l->rs->leftovers = sbx_cg_count_run(&w->cg);
				if (l->rs->leftovers != 0)
					(void)sbx_cg_kill_run(&w->cg);
			}
			ended = now;
		}
		if (!alive && now > ended + 2000)
			break;
		t = (alive && deadline > now && deadline < next_tick ?
		            deadline :
		            next_tick) -
		    now;
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
		if (poll(p, (nfds_t)np, t < 0 ? 0 : (int)t) < 0 &&
		    errno != EINTR)
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

/*
 * Captured output goes to the worker's buffers, allocated once at the
 * configured caps and reused, so a run does not grow and trim the heap;
 * a larger cap (a snapshot) gets a buffer of its own.
 */
static int
out_bufs(struct sbx_worker *w, const struct sbx_req *rq, struct sbx_res *rs)
{
	const uint64_t cfg[2] = {w->c->stdout_max, w->c->stderr_max};

	for (int i = 0; i < 2; i++) {
		if (rq->out_fd[i] >= 0)
			continue;
		if (rq->out_max[i] <= cfg[i] && w->obuf[i] == NULL &&
		    (w->obuf[i] = malloc(cfg[i] + 1)) != NULL)
			w->ocap[i] = cfg[i] + 1;
		if (rq->out_max[i] + 1 <= w->ocap[i]) {
			rs->buf[i] = w->obuf[i];
			rs->lent[i] = true;
		} else if ((rs->buf[i] = malloc(rq->out_max[i] + 1)) == NULL)
			return KZ_ENOMEM;
	}
	return 0;
}

int
sbx_run(struct sbx_worker *w, struct sbx_req *rq, struct sbx_res *rs)
{
	/* Static, not in the loop state, so that clearing the state touches
	 * no page of it: only a streamed stdin fills it. */
	static char stdin_buf[STDIN_BUF];
	int io[3][2], rep[2];
	int64_t start = kz_now_ms();
	struct sbx_cg_stats before, after;
	struct loop l;
	pid_t relay = -1, fwd;
	char fwhy[192];

	memset(rs, 0, sizeof(*rs));
	memset(&l, 0, sizeof(l));
	l.rq = rq, l.rs = rs, l.infd = l.outfd[0] = l.outfd[1] = -1;
	l.inbuf = stdin_buf;
	if (out_bufs(w, rq, rs) != 0)
		return KZ_ENOMEM;
	if (w->broken) {
		setup_fail(rs, "init", "the worker's init is gone");
		return 0;
	}
	fwd = sbx_forward_start(w->c, rq->broker_token, fwhy, sizeof(fwhy));
	explicit_bzero(rq->broker_token, sizeof(rq->broker_token));
	if (fwd < 0) {
		setup_fail(rs, "broker forward", fwhy);
		return 0;
	}
	/* The relay listens only while a run with a grant is running, so
	 * nothing on the sandbox loopback outlives it or queues for it.  It
	 * is forked before the pipes exist, so it holds none of them. */
	if (w->c->egress_sock[0] != '\0' && rq->grant != NULL &&
	    rq->grant[0] != '\0') {
		char why[192];
		int lfd;

		if (sbx_relay_listen(w->c, (int)w->c->relay_port, &lfd, why,
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
		sbx_forward_stop(fwd);
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
	rq->net = (fwd > 0 ? SBX_NET_BROKER : 0) |
	    (relay > 0 ? SBX_NET_RELAY : 0);
	{
		const int fds[ZFDS] = {io[0][0], io[1][1], io[2][1], rep[1]};

		if (sbx_msg_job_send(w->zsock, rq, fds) != 0) {
			setup_fail(rs, "init",
			    "cannot hand the run to the init");
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
	sbx_forward_stop(fwd);
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
		if (!rs->lent[i])
			free(rs->buf[i]);
		rs->buf[i] = NULL;
		rs->lent[i] = false;
	}
}
