/*
 * The code process the run init starts for each job (init.c).  Cloned on
 * a stack of its own in the init's memory, it joins the run cgroup, the
 * code's user namespace (when there is one) and a new cgroup namespace,
 * puts the job's descriptors in place, writes npm's configuration for the
 * broker, sets the limits, drops its capabilities, and enters the code
 * (code_enter.c: the working directory, the seccomp filter, the exec).
 * Under gvisor it executes runsc instead (gvisor_box.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

extern char **environ;

static void
code_signals(void)
{
	sigset_t none;

	(void)signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
}

struct spawn {
	struct sbx_worker *w;
	struct sbx_job *j;
};

static void code_exec(struct sbx_worker *w, struct sbx_job *j)
    __attribute__((noreturn));

static int
code_main(void *arg)
{
	struct spawn *sp = arg;

	code_exec(sp->w, sp->j);
	return 127;
}

#define FAIL(step, why)                                                        \
	do {                                                                   \
		sbx_msg_report(rep, REP_FAIL, 0, step, why);                   \
		_exit(127);                                                    \
	} while (0)

/*
 * npm's configuration for the run's broker (env.c), in the run's /tmp,
 * written while the code process still holds its capabilities: whatever
 * the name was (a file or a symlink the code left there) is removed, and
 * the file is made anew, never through a link, readable by the code and
 * not writable by it.
 */
static int
write_npmrc(const char *content)
{
	size_t n = strlen(content);
	int fd;

	if (unlink(SBX_NPMRC) < 0 && errno != ENOENT)
		return -1;
	if ((fd = open(SBX_NPMRC,
	         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)) <
	    0)
		return -1;
	if (write(fd, content, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/*
 * The code process: never returns.  It runs on its own stack in the
 * init's memory (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does),
 * so starting it copies no page tables and takes no copy-on-write faults;
 * the init is suspended until the exec or the exit, and only system calls
 * and libcap-ng's state (unused by the init) are touched meanwhile.  The
 * credentials, descriptor table, signal state, rlimits and seccomp filter
 * are the child's own (no CLONE_FILES, CLONE_SIGHAND or CLONE_THREAD).
 */
static void
code_exec(struct sbx_worker *w, struct sbx_job *j)
{
	char why[192];
	int rep = j->fd[3];

	code_signals();
	if (sbx_cg_attach(&w->cg, 0) != 0)
		FAIL("cgroup", "cannot join the run cgroup");
	if (w->userns_fd >= 0 && sbx_ns_userns_enter(w->userns_fd) != 0)
		FAIL("namespaces", "cannot enter the user namespace");
	if (unshare(CLONE_NEWCGROUP) < 0)
		FAIL("namespaces", "cgroup namespace");
	if (sbx_place_fds(j, &rep) != 0)
		FAIL("stdio", strerror(errno));
	(void)setsid();
	/* Under gvisor the rest of the boundary is runsc's to apply, from
	 * the spec: the limits, the ids, no capabilities, the directory. */
	if (sbx_gvisor(w->c))
		sbx_gv_exec(w, rep);
	if (j->npmrc[0] != '\0' && write_npmrc(j->npmrc) != 0)
		FAIL("broker",
		    "cannot write npm's configuration for the broker");
	if (sbx_rlimit_apply(w->c, why, sizeof(why)) != 0)
		FAIL("rlimit", why);
	if (sbx_caps_drop((uid_t)w->c->uid, (gid_t)w->c->gid, w->userns_fd >= 0,
	        why, sizeof(why)) != 0)
		FAIL("capabilities", why);
	sbx_code_enter(&w->prog, j, rep);
}

/* Starts the code of one job (under gvisor, runsc for the sandbox);
 * returns its pid or -1. */
pid_t
sbx_init_spawn(struct sbx_worker *w, struct sbx_job *j, char *stack)
{
	char **saved = environ;
	struct spawn sp = {w, j};
	pid_t pid;

	pid = clone(code_main, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &sp);
	environ = saved; /* the child pointed it at the job's env */
	return pid;
}
