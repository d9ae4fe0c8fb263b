/*
 * The disposable child: isolation (kz-sandbox, or the operator's unshare
 * mode), the nonce and result channel, the deadline.
 *
 * Channel: the parent makes two pipes.  The child gets the nonce pipe's
 * read end as fd 3 and the result pipe's write end as fd 4, advertised in
 * KZ_PI_NONCE_FD=3 and KZ_PI_RESULT_FD=4.  The parent writes the nonce (64
 * hex characters) and closes its end; the child reads fd 3 to end of file,
 * closes it, reopens fd 4 under a new number, closes fd 4, and only then
 * loads authored code.  It writes one JSON object {"nonce":...,
 * "observation":{...}} to the new descriptor and exits.  The parent reads
 * at most result_max bytes before the deadline; more, later, or without
 * the nonce is rejected.  stdout and stderr are kept as bounded tails for
 * diagnostics and are never parsed as a result.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_key.h"
#include "pv.h"
#include "banned.h"

#define NONCE_FD 3
#define RESULT_FD 4

struct pipes {
	int nonce[2], result[2], out[2], err[2];
};

static void
pipes_close(struct pipes *p)
{
	int *all = &p->nonce[0];

	for (int i = 0; i < 8; i++)
		if (all[i] >= 0) {
			close(all[i]);
			all[i] = -1;
		}
}

/* Nothing of the validator's environment reaches the child. */
static void
child_env(const struct pv_run *r, char **env, char *home)
{
	int n = 0;

	snprintf(home, 4200, "HOME=%s", r->home);
	env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	env[n++] = "LANG=C.UTF-8";
	env[n++] = "NODE_OPTIONS=";
	env[n++] = "NO_COLOR=1";
	env[n++] = home;
	if (r->channel) {
		env[n++] = "KZ_PI_NONCE_FD=3";
		env[n++] = "KZ_PI_RESULT_FD=4";
	}
	env[n] = NULL;
}

/*
 * The unshare mode's own limits.  kz-sandbox sets the code's limits
 * itself, but its run places descriptors above 1100 before it does, so
 * it gets the soft descriptor limit raised to the hard one (a service's
 * soft limit is often 1024).
 */
static void
limits(enum pv_iso iso)
{
	struct rlimit core = {0, 0}, fsz = {256u << 20, 256u << 20};
	struct rlimit nof = {1024, 1024};

	setrlimit(RLIMIT_CORE, &core);
	if (iso == PV_ISO_SANDBOX) {
		if (getrlimit(RLIMIT_NOFILE, &nof) == 0) {
			nof.rlim_cur = nof.rlim_max;
			setrlimit(RLIMIT_NOFILE, &nof);
		}
		return;
	}
	setrlimit(RLIMIT_FSIZE, &fsz);
	setrlimit(RLIMIT_NOFILE, &nof);
}

/* The intermediate: the code's status, or 125 if its set-up failed. */
static void
unshare_wait(pid_t pid, int setup)
{
	char b;
	int st;

	/*
	 * The set-up pipe is close-on-exec: a byte means the set-up failed,
	 * end of file means the code was exec'd.  The code's own 125 and 126
	 * become 1, so only the set-up can say that isolation failed.
	 */
	if (read(setup, &b, 1) == 1)
		_exit(125);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st))
		_exit(128 + WTERMSIG(st));
	_exit(WEXITSTATUS(st) == 125 || WEXITSTATUS(st) == 126 ?
	        1 :
	        WEXITSTATUS(st));
}

/*
 * The operator's unshare mode: new network (empty: no interface up), IPC,
 * UTS, pid and mount namespaces (the view of view.c); all groups dropped;
 * an unprivileged uid; no new privileges.  The caller is the intermediate
 * process; its child is pid 1 of the new pid namespace, so killing the
 * intermediate (pdeathsig) ends every process the child started.
 */
static void
unshare_exec(const struct pv_run *r, char **env)
{
	int sp[2];
	pid_t pid;

	if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID |
	        CLONE_NEWNS) != 0 ||
	    pv_unshare_view(r) != 0 || pipe2(sp, O_CLOEXEC) != 0)
		_exit(125);
	if ((pid = fork()) < 0)
		_exit(125);
	if (pid > 0) {
		close(sp[1]);
		unshare_wait(pid, sp[0]);
	}
	close(sp[0]);
	if (pv_unshare_proc() != 0 || setgroups(0, NULL) != 0 ||
	    setresgid(r->uid, r->uid, r->uid) ||
	    setresuid(r->uid, r->uid, r->uid) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		(void)!write(sp[1], "x", 1);
		_exit(125);
	}
	execve(r->argv[0], r->argv, env);
	(void)!write(sp[1], "x", 1);
	_exit(126);
}

/* The child side of fork: descriptors in place, then isolation, exec. */
static void
child(const struct pv_run *r, struct pipes *p)
{
	char *env[12], home[4200];
	char *sargv[PV_SBX_ARGV_MAX];
	int nul;

	setsid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (dup2(p->out[1], 1) < 0 || dup2(p->err[1], 2) < 0)
		_exit(125);
	if ((nul = open("/dev/null", O_RDONLY)) < 0 || dup2(nul, 0) < 0)
		_exit(125);
	/* The pipes were made after 0-2 were taken, so none is 3 or 4... */
	if (r->channel &&
	    (dup2(p->nonce[0], NONCE_FD) < 0 ||
	        dup2(p->result[1], RESULT_FD) < 0))
		_exit(125);
	/* ...and dup2 onto the same number would keep FD_CLOEXEC anyway. */
	if (r->channel &&
	    (fcntl(NONCE_FD, F_SETFD, 0) != 0 ||
	        fcntl(RESULT_FD, F_SETFD, 0) != 0))
		_exit(125);
	close_range(r->channel ? RESULT_FD + 1 : 3, ~0U, 0);
	if (chdir(r->cwd) != 0)
		_exit(125);
	limits(r->iso);
	child_env(r, env, home);
	if (r->iso == PV_ISO_UNSHARE)
		unshare_exec(r, env);
	if (pv_sandbox_argv(r, sargv, PV_SBX_ARGV_MAX) != 0)
		_exit(125);
	execve(r->sandbox_bin, sargv, env);
	_exit(126);
}

static void
tail_add(char *tail, size_t cap, size_t *total, const char *b, size_t n)
{
	size_t have = strnlen(tail, cap);

	*total += n;
	if (n >= cap - 1) {
		memcpy(tail, b + n - (cap - 1), cap - 1);
		tail[cap - 1] = '\0';
		return;
	}
	if (have + n >= cap) {
		size_t drop = have + n - (cap - 1);

		memmove(tail, tail + drop, have - drop);
		have -= drop;
	}
	memcpy(tail + have, b, n);
	tail[have + n] = '\0';
}

/* Reads what is ready; returns 1 when the fd reached EOF. */
static int
drain(int fd, struct pv_outcome *o, int which, size_t max)
{
	char b[4096];
	ssize_t n = read(fd, b, sizeof(b));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : 1;
	if (n == 0)
		return 1;
	if (which == 0) {
		if (o->rlen + (size_t)n > max) {
			o->over_bound = true;
			return 1;
		}
		memcpy(o->result + o->rlen, b, (size_t)n);
		o->rlen += (size_t)n;
		o->result[o->rlen] = '\0';
	} else if (which == 1)
		tail_add(o->out_tail, sizeof(o->out_tail), &o->out_bytes, b,
		    (size_t)n);
	else
		tail_add(o->err_tail, sizeof(o->err_tail), &o->err_bytes, b,
		    (size_t)n);
	return 0;
}

/*
 * kz-sandbox tears its run down (cgroup killed, mounts gone) on SIGTERM;
 * the unshare mode's intermediate takes its pid namespace with it on
 * SIGKILL.  wait_child() follows with SIGKILL after a grace period.
 */
static void
stop_child(const struct pv_run *r, pid_t pid)
{
	if (r->iso == PV_ISO_SANDBOX) {
		kill(pid, SIGTERM);
		return;
	}
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
}

static void
pump(const struct pv_run *r, struct pipes *p, pid_t pid, struct pv_outcome *o)
{
	struct pollfd pf[3] = {{p->result[0], POLLIN, 0},
	    {p->out[0], POLLIN, 0}, {p->err[0], POLLIN, 0}};
	int open_n = r->channel ? 3 : 2;

	if (!r->channel)
		pf[0].fd = -1;
	while (open_n > 0) {
		int64_t left = r->deadline_ms - kz_now_ms();

		if (left <= 0) {
			o->timed_out = true;
			break;
		}
		if (poll(pf, 3, (int)(left > 1000 ? 1000 : left)) < 0 &&
		    errno != EINTR)
			break;
		for (int i = 0; i < 3; i++) {
			if (pf[i].fd < 0 ||
			    !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (drain(pf[i].fd, o, i, r->result_max)) {
				pf[i].fd = -1;
				open_n--;
			}
		}
		if (o->over_bound)
			break;
	}
	if (o->timed_out || o->over_bound)
		stop_child(r, pid);
}

/*
 * Whatever the child left behind dies with it: the validator is a child
 * subreaper, so orphans of the child come back to it and are reaped here
 * before the next phase starts.
 */
static void
reap_all(pid_t pid)
{
	int64_t stop = kz_now_ms() + 3000;
	pid_t w;
	int st;

	kill(-pid, SIGKILL);
	while (kz_now_ms() < stop) {
		w = waitpid(-1, &st, WNOHANG);
		if (w < 0 && errno == ECHILD)
			return;
		if (w <= 0)
			usleep(2000);
	}
}

static int
wait_child(const struct pv_run *r, pid_t pid, struct pv_outcome *o)
{
	bool stopping = o->timed_out || o->over_bound;
	int64_t stop = stopping ? kz_now_ms() + 5000 : r->deadline_ms;

	for (;;) {
		pid_t w = waitpid(pid, &o->status, WNOHANG);

		if (w == pid) {
			reap_all(pid);
			return 0;
		}
		if (w < 0 && errno != EINTR)
			return KZ_ESYS;
		if (kz_now_ms() >= stop) {
			if (!stopping) {
				o->timed_out = stopping = true;
				stop_child(r, pid);
			} else {
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
			}
			stop = kz_now_ms() + 5000;
		}
		usleep(5000);
	}
}

static int
make_pipes(struct pipes *p, bool channel, uid_t uid)
{
	memset(p, -1, sizeof(*p));
	if (pipe2(p->out, O_CLOEXEC) || pipe2(p->err, O_CLOEXEC))
		return KZ_ESYS;
	if (channel &&
	    (pipe2(p->nonce, O_CLOEXEC) || pipe2(p->result, O_CLOEXEC)))
		return KZ_ESYS;
	/*
	 * The child reopens its result end through /proc/self/fd under the
	 * unprivileged uid, and a pipe's inode belongs to its creator with
	 * mode 0600: hand that inode to the child's uid.  Under a kz-sandbox
	 * user namespace the child's host uid is SANDBOX_USERNS_HOST_UID,
	 * which the validator does not know, so others may write too.  That
	 * widens nothing: only a process that may already reach the child's
	 * /proc/PID/fd (root, or the child's own uid) can open the pipe.
	 */
	if (channel &&
	    (fchown(p->result[1], uid, uid) != 0 ||
	        fchmod(p->result[1], 0622) != 0))
		return KZ_ESYS;
	return 0;
}

/* Closes the child's ends, delivers the nonce, makes reads non-blocking. */
static void
parent_ends(const struct pv_run *r, struct pipes *p, struct pv_outcome *o,
    char *why, size_t wlen)
{
	close(p->out[1]), close(p->err[1]);
	p->out[1] = p->err[1] = -1;
	if (r->channel) {
		close(p->nonce[0]), close(p->result[1]);
		p->nonce[0] = p->result[1] = -1;
		/* A child that never drains it cannot stall us: 64 B fit. */
		if (write(p->nonce[1], o->nonce, PV_NONCE_BYTES * 2) !=
		    PV_NONCE_BYTES * 2)
			kz_why(why, wlen, "nonce not delivered");
		close(p->nonce[1]);
		p->nonce[1] = -1;
		fcntl(p->result[0], F_SETFL, O_NONBLOCK);
	}
	fcntl(p->out[0], F_SETFL, O_NONBLOCK);
	fcntl(p->err[0], F_SETFL, O_NONBLOCK);
}

int
pv_child_run(const struct pv_run *r, struct pv_outcome *o, char *why,
    size_t wlen)
{
	unsigned char nb[PV_NONCE_BYTES];
	struct pipes p;
	pid_t pid;
	int rc;

	memset(o, 0, sizeof(*o));
	if ((o->result = malloc(r->result_max + 1)) == NULL)
		return KZ_ENOMEM;
	o->result[0] = '\0';
	if ((rc = make_pipes(&p, r->channel, r->uid)) != 0)
		goto out;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		rc = KZ_ESYS;
		goto out;
	}
	randombytes_buf(nb, sizeof(nb));
	kz_hex(nb, sizeof(nb), o->nonce);
	sodium_memzero(nb, sizeof(nb));
	if ((pid = fork()) < 0) {
		rc = KZ_ESYS;
		goto out;
	}
	if (pid == 0)
		child(r, &p);
	parent_ends(r, &p, o, why, wlen);
	pump(r, &p, pid, o);
	rc = wait_child(r, pid, o);
	if (r->iso == PV_ISO_SANDBOX && pv_sandbox_failed(o->status))
		o->sandbox_failed = true;
	if (WIFEXITED(o->status) &&
	    (WEXITSTATUS(o->status) == 125 || WEXITSTATUS(o->status) == 126))
		o->sandbox_failed = true;
out:
	pipes_close(&p);
	return rc;
}

void
pv_err_line(const struct pv_outcome *o, char *out, size_t olen)
{
	size_t n = strnlen(o->err_tail, sizeof(o->err_tail)), s, k = 0;

	while (
	    n > 0 && (o->err_tail[n - 1] == '\n' || o->err_tail[n - 1] == '\r'))
		n--;
	for (s = n; s > 0 && o->err_tail[s - 1] != '\n'; s--)
		;
	for (size_t i = s; i < n && k + 1 < olen; i++)
		out[k++] = (o->err_tail[i] >= 0x20 && o->err_tail[i] < 0x7f) ?
		    o->err_tail[i] :
		    '?';
	if (olen > 0)
		out[k] = '\0';
}

void
pv_outcome_release(struct pv_outcome *o)
{
	free(o->result);
	sodium_memzero(o->nonce, sizeof(o->nonce));
	o->result = NULL;
}

int
pv_observation(const struct pv_outcome *o, cJSON **obs, char *why, size_t wlen)
{
	cJSON *root = NULL, *ob;
	const char *nonce;
	int r;

	if (o->timed_out) {
		kz_why(why, wlen, "child missed the deadline");
		return KZ_ETIMEDOUT;
	}
	if (o->over_bound) {
		kz_why(why, wlen, "observation over the size bound");
		return KZ_ETOOBIG;
	}
	if (o->rlen == 0) {
		kz_why(why, wlen, "no observation on the result channel");
		return KZ_EPROTO;
	}
	if ((r = kz_json_parse_object(o->result, o->rlen, &root, why, wlen)) !=
	    0)
		return r;
	if (kz_json_str(root, "nonce", 128, &nonce, why, wlen) != 0 ||
	    strlen(nonce) != strlen(o->nonce) ||
	    !kz_ct_equal(nonce, o->nonce, strlen(o->nonce))) {
		cJSON_Delete(root);
		kz_why(why, wlen, "observation does not carry the nonce");
		return KZ_ECRYPTO;
	}
	ob = cJSON_DetachItemFromObjectCaseSensitive(root, "observation");
	cJSON_Delete(root);
	if (!cJSON_IsObject(ob)) {
		cJSON_Delete(ob);
		kz_why(why, wlen, "observation missing");
		return KZ_EPROTO;
	}
	*obs = ob;
	return 0;
}
