/*
 * Under gvisor, inside the sandbox: the loader, kz-gvisor-loader (a
 * static binary of its own, kz-gvisor-loader.c), is the container's first
 * process (gvisor.c, mount.c's SBX_GV_LOADER), gVisor's pid 1.  It takes
 * each run's job from the run init, starts the code as the sandbox uid
 * and gid, with every capability set empty and kz-sandbox's own system
 * call filter loaded, ends the run with the code's main process and
 * answers its status.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "kz_conf.h"
#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

extern char **environ;

/*
 * sbx_caps_drop's work, in the terms gVisor's kernel has (it refuses the
 * securebits sbx_caps_drop locks; no_new_privs, which runsc sets, keeps a
 * set-user-ID file from giving anything back), in two steps: the bounding
 * and ambient sets emptied (the loader does it once, for every run it
 * starts), then, in the code process, no supplementary group and the
 * sandbox ids, which leaves the permitted and effective sets empty; each
 * checked, not trusted.
 */
static int
gv_bound(char *why, size_t wlen)
{
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
			kz_why(why, wlen, "capabilities: bounding set: %s",
			    strerror(errno));
			return KZ_ESYS;
		}
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) ==
		        1) {
			kz_why(why, wlen,
			    "capabilities: a set is not empty after the drop");
			return KZ_EDENIED;
		}
	return 0;
}

static int
gv_ids(uid_t uid, gid_t gid, char *why, size_t wlen)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	uid_t ru, eu, su;

	/* The system calls themselves, not libc's wrappers: this process
	 * shares the loader's memory (job_spawn), and with the forwarder's
	 * thread there libc would change the ids of every thread it knows,
	 * that is the loader's, by signalling them, as posix_spawn's child
	 * does not either. */
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, gid, gid, gid) < 0 ||
	    syscall(SYS_setresuid, uid, uid, uid) < 0) {
		kz_why(why, wlen, "capabilities: change id: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	memset(d, 0xff, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0 || getresuid(&ru, &eu, &su) < 0 ||
	    ru != uid || eu != uid || su != uid || getgroups(0, NULL) != 0)
		goto bad;
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			goto bad;
	return 0;
bad:
	kz_why(why, wlen, "capabilities: a set is not empty after the drop");
	return KZ_EDENIED;
}

/* The filter the agent holds (libseccomp cannot set up inside gVisor),
 * as the bundle bound it here; false when it cannot be read whole. */
static bool
read_filter(struct sock_fprog *prog)
{
	static struct sock_filter f[BPF_MAXINSNS + 1];
	ssize_t n = -1;
	int fd;

	if ((fd = open(SBX_GV_FILTER, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, f, sizeof(f));
		close(fd);
	}
	if (n <= 0 || n % (ssize_t)sizeof(f[0]) != 0 ||
	    n / (ssize_t)sizeof(f[0]) > BPF_MAXINSNS) {
		fprintf(stderr,
		    "kz-sandbox: seccomp: no filter under gvisor\n");
		return false;
	}
	prog->len = (unsigned short)(n / (ssize_t)sizeof(f[0]));
	prog->filter = f;
	return true;
}

static bool
parse_ids(const char *uid, const char *gid, uid_t *u, gid_t *g)
{
	int64_t a, b;

	if (kz_parse_int(uid, 1, 2147483646, &a) != 0 ||
	    kz_parse_int(gid, 1, 2147483646, &b) != 0) {
		fprintf(stderr, "kz-sandbox: gvisor: bad uid or gid\n");
		return false;
	}
	*u = (uid_t)a, *g = (gid_t)b;
	return true;
}

#define JOB_FAIL(step, why)                                                    \
	do {                                                                   \
		sbx_msg_report(rep, REP_FAIL, 0, step, why);                   \
		_exit(127);                                                    \
	} while (0)

/*
 * One run's code, started by the loader: the job's descriptors in place
 * (sbx_place_fds: everything else arrived close-on-exec, should gVisor
 * not close it at once), its own session,
 * the sandbox ids (the bounding set is already empty), the working
 * directory, the filter, then the command with the job's environment.
 * The steps that fail are named as the native code process names them.
 */
static void job_code(const struct sock_fprog *prog, uid_t uid, gid_t gid,
    struct sbx_job *j) __attribute__((noreturn));

static void
job_code(const struct sock_fprog *prog, uid_t uid, gid_t gid, struct sbx_job *j)
{
	char why[192];
	sigset_t none;
	int rep = j->fd[3];

	(void)signal(SIGPIPE, SIG_DFL);
	(void)signal(SIGINT, SIG_DFL);
	(void)signal(SIGTERM, SIG_DFL);
	(void)signal(SIGHUP, SIG_DFL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	if (sbx_place_fds(j, &rep) != 0)
		JOB_FAIL("stdio", strerror(errno));
	(void)setsid();
	if (gv_ids(uid, gid, why, sizeof(why)) != 0)
		JOB_FAIL("capabilities", why);
	sbx_code_enter(prog, j, rep);
}

/*
 * The code process runs on a stack of its own in the loader's memory
 * (sbx_code_stack; clone with CLONE_VM | CLONE_VFORK, as the native init
 * starts it): on
 * gVisor's ptrace platform a fork copies the address space into a new
 * stub process, which costs more than the code's exec itself.  The loader
 * is suspended until the exec or the exit; the child changes none of its
 * memory but environ, restored here.
 */
struct job_arg {
	const struct sock_fprog *prog;
	uid_t uid;
	gid_t gid;
	struct sbx_job *j;
};

static int
job_main(void *arg)
{
	struct job_arg *a = arg;

	job_code(a->prog, a->uid, a->gid, a->j);
	return 127;
}

static pid_t
job_spawn(const struct sock_fprog *prog, uid_t uid, gid_t gid,
    struct sbx_job *j)
{
	static char *stack;
	struct job_arg a = {prog, uid, gid, j};
	char **saved = environ;
	pid_t pid;

	if (stack == NULL && (stack = sbx_code_stack()) == NULL)
		return -1;
	pid = clone(job_main, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	environ = saved;
	return pid;
}

/*
 * One run: the code started, waited for (orphans reaped meanwhile), then
 * everything it left killed and reaped, inside gVisor, before the answer:
 * the run ends with its main process, as under native, and the next run
 * of the lease finds none of this one's processes.
 */
static void
serve_job(const struct sock_fprog *prog, uid_t uid, gid_t gid,
    struct sbx_job *j, int ctl)
{
	struct report r;
	struct rusage ru;
	char why[160];
	pid_t pid, p;
	int st = 127 << 8;

	memset(&r, 0, sizeof(r));
	r.kind = REP_DONE;
	if (sbx_gv_fwd_run(j->net, why, sizeof(why)) != 0) {
		sbx_msg_report(j->fd[3], REP_FAIL, 0, "network", why);
		pid = -1;
	} else if ((pid = job_spawn(prog, uid, gid, j)) < 0)
		sbx_msg_report(j->fd[3], REP_FAIL, 0, "fork", strerror(errno));
	for (int i = 0; i < ZFDS + j->npass; i++)
		close(j->fd[i]);
	while (pid > 0 && ((p = wait4(-1, &st, 0, &ru)) >= 0 || errno == EINTR))
		if (p == pid) {
			r.cpu_ms = sbx_cpu_ms(&ru);
			break;
		}
	r.status = st;
	/* Until no process is left to signal (a zombie still is); bounded,
	 * should a kernel answer kill(-1) with success and nothing to reap. */
	for (int k = 0; k < 64 && kill(-1, SIGKILL) == 0; k++)
		while ((p = waitpid(-1, NULL, 0)) > 0 || errno == EINTR)
			r.leftovers += p > 0;
	(void)!write(ctl, &r, sizeof(r));
}

int
sbx_gv_serve(const char *uid, const char *gid)
{
	static char buf[ZMSG_MAX];
	struct sock_fprog prog;
	char why[192];
	uid_t u;
	gid_t g;
	int ctl, null, r;

	if (!parse_ids(uid, gid, &u, &g))
		return KZ_EXIT_USAGE;
	if (!read_filter(&prog))
		return 127;
	if (gv_bound(why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-sandbox: %s\n", why);
		return 127;
	}
	/*
	 * The control socket away from 0-2, which stay taken (so a job's
	 * descriptors never arrive there) by /dev/null: runsc's log, the
	 * loader's output until now, is not left where the code could reach
	 * it through /proc/1/fd (gVisor lets it list them).
	 */
	if ((ctl = fcntl(0, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    (null = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
		fprintf(stderr, "kz-sandbox: gvisor: serve: %s\n",
		    strerror(errno));
		return 127;
	}
	/* The way to the relay and the broker forward, or no sandbox: the
	 * run fails at its start, quoting this line of runsc's log. */
	if (sbx_gv_fwd_start(ctl, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-gvisor-loader: %s\n", why);
		return 127;
	}
	for (int i = 0; i < 3; i++)
		if (dup2(null, i) < 0)
			return 127;
	close(null);
	(void)signal(SIGINT, SIG_IGN);
	(void)signal(SIGTERM, SIG_IGN);
	(void)signal(SIGHUP, SIG_IGN);
	(void)signal(SIGPIPE, SIG_IGN);
	sbx_msg_report(ctl, REP_READY, 0, NULL, NULL);
	for (;;) {
		struct sbx_job j;

		/* The init gone, the sandbox ends with its first process. */
		if ((r = sbx_msg_take(ctl, buf, sizeof(buf), &j)) == -2)
			return 0;
		if (r == 0)
			serve_job(&prog, u, g, &j, ctl);
	}
}
