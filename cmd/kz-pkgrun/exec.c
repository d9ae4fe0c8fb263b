/*
 * One tool run: the one-shot kz-sandbox with the runner's own settings,
 * and the same settings for the warm workers of serve (warm.c).
 *
 * The tier's boundary is kz-sandbox's (namespaces, no capabilities,
 * no_new_privs, the seccomp filter, the allowlisted read-only root, a
 * cgroup of its own with the runner's limits, no network without a
 * grant); this file only chooses its settings.  kz-sandbox is exec'd with
 * an environment of one PATH entry and descriptors 0-3 only, so nothing
 * of the runner's own process reaches it, let alone the tool.
 *
 * The tool's exit status comes back on descriptor 3, written by a small
 * shell step after the tool, which runs with 3 closed: so kz-sandbox's own
 * statuses (2 and 3: nothing ran; 1: a limit stopped the run) can never
 * be forged by a tool exiting with the same number.  A gated one-shot
 * also has descriptor 4, kz-sandbox's --start-fd: kz-sandbox makes the
 * sandbox while the runner finishes what must come before the tool (its
 * dispatch record), and runs the tool only on the runner's word.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "pkgrun.h"
#include "banned.h"

#define STATUS_FD 3
#define START_FD 4
#define ARGV_MAX 160

static const char step[] = "\"$@\" 3>&-\n"
                           "echo $? >&3\n";

#define ADD(x)                                                                 \
	do {                                                                   \
		if (*n < max - 1)                                              \
			a[*n] = (x);                                           \
		(*n)++;                                                        \
	} while (0)

/*
 * The settings every sandbox of the runner gets, one-shot or warm: the
 * invocation's ids and cgroup id, the runner's limits, timeout and output
 * bounds, the projection, the state directory and the cgroup parent.
 * Both paths take them from here, so a warm worker is exactly as confined
 * as a one-shot.
 */
static void
settings(const struct pr_conf *c, const char *sub, const struct pr_exec *x,
    const char **a, size_t *n, size_t max)
{
	static __thread char uid[24], gid[24], mem[24], pids[24], cpu[24],
	    tmo[24], rmax[24], sdir[PATH_MAX + 16];

	snprintf(uid, sizeof(uid), "%lld", (long long)x->uid);
	snprintf(gid, sizeof(gid), "%lld", (long long)x->gid);
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)c->memory);
	snprintf(pids, sizeof(pids), "%lld", (long long)c->pids);
	snprintf(cpu, sizeof(cpu), "%lld", (long long)c->cpu_milli);
	snprintf(tmo, sizeof(tmo), "%lld", (long long)c->timeout_s);
	snprintf(rmax, sizeof(rmax), "%llu", (unsigned long long)c->result_max);
	snprintf(sdir, sizeof(sdir), "%s/sandbox", c->state_dir);
	ADD(c->sandbox_bin);
	ADD(sub);
	if (c->sandbox_conf[0] != '\0') {
		ADD("--config");
		ADD(c->sandbox_conf);
	}
	ADD("--id");
	ADD(x->id);
	ADD("--uid");
	ADD(uid);
	ADD("--gid");
	ADD(gid);
	ADD("--memory");
	ADD(mem);
	ADD("--pids");
	ADD(pids);
	ADD("--cpu");
	ADD(cpu);
	ADD("--timeout");
	ADD(tmo);
	ADD("--stdout-max");
	ADD(rmax);
	ADD("--stderr-max");
	ADD(rmax);
	ADD("--projection");
	ADD(x->staging);
	ADD("--state-dir");
	ADD(sdir);
	ADD("--cgroup-parent");
	ADD("kz-pkgrun");
}

int
pr_exec_argv(const struct pr_conf *c, const struct pr_exec *x, const char **a,
    size_t max)
{
	size_t nn = 0, *n = &nn;

	settings(c, "run", x, a, n, max);
	if (x->grant_file != NULL && c->egress_sock[0] != '\0') {
		ADD("--egress-socket");
		ADD(c->egress_sock);
		ADD("--grant-file");
		ADD(x->grant_file);
	}
	ADD("--pass-fd");
	ADD("3");
	if (x->gate != NULL) {
		ADD("--start-fd");
		ADD("4");
	}
	for (int i = 0; x->env[i] != NULL; i++) {
		ADD("--env");
		ADD(x->env[i]);
	}
	ADD("--");
	ADD("/bin/sh");
	ADD("-c");
	ADD(step);
	ADD("kz-pkgrun-step");
	for (int i = 0; x->argv[i] != NULL; i++)
		ADD(x->argv[i]);
	if (nn >= max)
		return KZ_ETOOBIG;
	a[nn] = NULL;
	return 0;
}

/*
 * A warm worker has the egress socket whenever the runner has one: its
 * relay listens only during a run whose op carries a grant, so a run
 * without one has loopback only, as a one-shot without a grant does.
 */
int
pr_serve_argv(const struct pr_conf *c, const struct pr_exec *x,
    const char *sock, const char *pidfile, const char **a, size_t max)
{
	size_t nn = 0, *n = &nn;

	settings(c, "serve", x, a, n, max);
	if (c->egress_sock[0] != '\0') {
		ADD("--egress-socket");
		ADD(c->egress_sock);
	}
	ADD("--socket");
	ADD(sock);
	ADD("--pid-file");
	ADD(pidfile);
	if (nn >= max)
		return KZ_ETOOBIG;
	a[nn] = NULL;
	return 0;
}

/* fd at number to, open across exec (dup2 of a descriptor onto its own
 * number would leave its close-on-exec flag). */
static int
keep(int fd, int to)
{
	if (fd == to)
		return fcntl(fd, F_SETFD, 0);
	return dup2(fd, to);
}

static void
child(const char *const *argv, int out, int err, int st, int go, int pdeathsig)
{
	static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	int nul;

	setsid();
	(void)prctl(PR_SET_PDEATHSIG, pdeathsig);
	/* Out of the way of the status descriptor before that is set. */
	if (go >= 0 && go <= STATUS_FD &&
	    (go = fcntl(go, F_DUPFD_CLOEXEC, START_FD + 1)) < 0)
		_exit(KZ_EXIT_UNAVAIL);
	if ((nul = open("/dev/null", O_RDONLY)) < 0 || dup2(nul, 0) < 0 ||
	    dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
	    (st >= 0 && keep(st, STATUS_FD) < 0) ||
	    (go >= 0 && keep(go, START_FD) < 0))
		_exit(KZ_EXIT_UNAVAIL);
	close_range(go >= 0 ? START_FD + 1 :
	        st >= 0     ? STATUS_FD + 1 :
	                      STATUS_FD,
	    ~0U, 0);
	execve(argv[0], (char *const *)argv, env);
	_exit(KZ_EXIT_UNAVAIL);
}

int
pr_exec_spawn(const char *const *argv, int out, int err, int st, int pdeathsig,
    pid_t *pid)
{
	if ((*pid = fork()) < 0)
		return KZ_ESYS;
	if (*pid == 0)
		child(argv, out, err, st, -1, pdeathsig);
	return 0;
}

struct sink {
	int fd;
	char *buf;
	size_t len, max;
	bool cut;
};

/* Reads what is there; false at end of file. */
static bool
drain(struct sink *s)
{
	char tmp[16384];
	ssize_t n = read(s->fd, tmp, sizeof(tmp));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	if (s->len < s->max) {
		size_t take = (size_t)n < s->max - s->len ? (size_t)n :
		                                            s->max - s->len;

		memcpy(s->buf + s->len, tmp, take);
		s->len += take;
		s->cut |= take < (size_t)n;
	} else
		s->cut = true;
	return true;
}

/* Collects the three pipes until each is closed or the deadline. */
static int
collect(struct sink *s, int n, int64_t deadline)
{
	struct pollfd p[3];
	int open = n;

	for (int i = 0; i < n; i++)
		p[i].fd = s[i].fd, p[i].events = POLLIN;
	while (open > 0) {
		int64_t left = deadline - kz_now_ms();
		int r;

		if (left <= 0)
			return KZ_ETIMEDOUT;
		if ((r = poll(p, (nfds_t)n, (int)left)) < 0 && errno != EINTR)
			return KZ_ESYS;
		for (int i = 0; r > 0 && i < n; i++)
			if (p[i].fd >= 0 && p[i].revents != 0 &&
			    !drain(&s[i])) {
				p[i].fd = -1;
				open--;
			}
	}
	return 0;
}

static void
finish(struct pr_exec_out *o, int wst, const struct sink *st)
{
	int64_t v;
	char b[16];

	o->exit_status = -1;
	if (WIFSIGNALED(wst)) {
		o->sig = WTERMSIG(wst);
		return;
	}
	switch (WEXITSTATUS(wst)) {
	case KZ_EXIT_OK:
		snprintf(b, sizeof(b), "%.*s", (int)st->len, st->buf);
		b[strcspn(b, "\n")] = '\0';
		if (kz_parse_int(b, 0, 255, &v) == 0)
			o->exit_status = (int)v;
		else
			o->setup_failed = true; /* the step never reported */
		break;
	case KZ_EXIT_USAGE:
	case KZ_EXIT_UNAVAIL:
	case KZ_EXIT_INTERNAL:
		o->setup_failed = true;
		break;
	default: /* 1: a limit stopped it; 128+N: the step was killed */
		o->sig = WEXITSTATUS(wst) > 128 ? WEXITSTATUS(wst) - 128 : 0;
		break;
	}
}

/* pipes[3] is the start pipe of a gated run, else both -1. */
static int
spawn(const char *const *argv, int pipes[4][2], pid_t *pid)
{
	for (int i = 0; i < 3; i++)
		if (pipe2(pipes[i], O_CLOEXEC) != 0)
			return KZ_ESYS;
	if ((*pid = fork()) < 0)
		return KZ_ESYS;
	if (*pid == 0)
		child(argv, pipes[0][1], pipes[1][1], pipes[2][1], pipes[3][0],
		    SIGKILL);
	for (int i = 0; i < 3; i++) {
		close(pipes[i][1]);
		pipes[i][1] = -1;
	}
	if (pipes[3][0] >= 0)
		close(pipes[3][0]);
	pipes[3][0] = -1;
	return 0;
}

/* The gate's answer: one byte starts the tool, a close withholds it. */
static void
open_gate(const struct pr_exec *x, int pipes[4][2])
{
	if (pipes[3][1] < 0)
		return;
	if (x->gate(x->gate_arg) == 0)
		(void)!write(pipes[3][1], "g", 1);
	close(pipes[3][1]);
	pipes[3][1] = -1;
}

int
pr_exec_run(const struct pr_conf *c, const struct pr_exec *x,
    struct pr_exec_out *o, char *why, size_t wlen)
{
	const char *argv[ARGV_MAX];
	int pipes[4][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}}, wst = 0, r;
	struct sink s[3];
	char stbuf[16];
	pid_t pid = -1;

	memset(o, 0, sizeof(*o));
	memset(s, 0, sizeof(s));
	if (pr_exec_argv(c, x, argv, ARGV_MAX) != 0) {
		kz_why(why, wlen, "too many arguments for the sandbox");
		return KZ_ETOOBIG;
	}
	for (int i = 0; i < 2; i++)
		if ((s[i].buf = malloc(c->result_max)) == NULL) {
			r = KZ_ENOMEM;
			goto out;
		}
	s[0].max = s[1].max = c->result_max;
	s[2].buf = stbuf, s[2].max = sizeof(stbuf);
	if (x->gate != NULL && pipe2(pipes[3], O_CLOEXEC) != 0) {
		r = KZ_ESYS;
		kz_why(why, wlen, "cannot make the start pipe");
		goto out;
	}
	if ((r = spawn(argv, pipes, &pid)) != 0) {
		kz_why(why, wlen, "cannot start the sandbox: %s",
		    strerror(errno));
		goto out;
	}
	for (int i = 0; i < 3; i++)
		s[i].fd = pipes[i][0];
	open_gate(x, pipes);
	/* kz-sandbox enforces the timeout itself; this is the backstop. */
	r = collect(s, 3, kz_now_ms() + (c->timeout_s + 15) * 1000);
	if (r != 0)
		(void)kill(-pid, SIGTERM);
	while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
		;
	finish(o, wst, &s[2]);
	if (r != 0)
		o->setup_failed = true, kz_why(why, wlen, "the sandbox hung");
	o->out = s[0].buf, o->outlen = s[0].len;
	o->err = s[1].buf, o->errlen = s[1].len;
	o->truncated = s[0].cut;
	s[0].buf = s[1].buf = NULL;
	r = 0;
out:
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			if (pipes[i][j] >= 0)
				close(pipes[i][j]);
	free(s[0].buf);
	free(s[1].buf);
	return r;
}
