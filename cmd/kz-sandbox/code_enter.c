/*
 * The code process's last steps, shared by the native run init
 * (init_code.c) and the gVisor loader (gvisor_exec.c, its own static
 * binary, kz-gvisor-loader): its descriptors put in place, a stack for it
 * between clone and exec, and the working directory, the seccomp filter
 * and the exec.  Nothing here links more than libc, so the loader, which
 * every gVisor sandbox starts as its first process, maps no shared
 * library at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>

#include "sbx.h"
#include "banned.h"

extern char **environ;

#define CODE_STACK (256 * 1024)

#define FAIL(step, why)                                                        \
	do {                                                                   \
		sbx_msg_report(rep, REP_FAIL, 0, step, why);                   \
		_exit(127);                                                    \
	} while (0)

/*
 * Puts the code's descriptors in place: stdio on 0-2, each passed
 * descriptor at its number (without close-on-exec), the report pipe high
 * and close-on-exec, and nothing else open.  Everything is first moved
 * above the highest target so no placement can clobber a descriptor not
 * yet placed.  (Also the gVisor loader's, for the code it starts.)
 */
int
sbx_place_fds(struct sbx_job *j, int *rep)
{
	int n = ZFDS + j->npass, hi[ZFDS + SBX_PASS_MAX], lo = 3, base = 3;

	/* Above every target, but no higher: a fixed high base fails under
	 * a 1024 open-files limit (systemd's default soft limit). */
	for (int i = 0; i < j->npass; i++)
		if (j->target[i] >= base)
			base = j->target[i] + 1;
	for (int i = 0; i < n; i++)
		if ((hi[i] = fcntl(j->fd[i], F_DUPFD_CLOEXEC, base)) < 0)
			return -1;
	for (int i = 0; i < 3; i++)
		if (dup2(hi[i], i) < 0)
			return -1;
	for (int i = 0; i < j->npass; i++)
		if (dup2(hi[ZFDS + i], j->target[i]) < 0)
			return -1;
	*rep = hi[3];
	/* Close 3.. except the targets (ascending) and the report pipe. */
	for (int t = 3; t < base; t++) {
		bool keep = false;

		for (int i = 0; i < j->npass; i++)
			keep |= j->target[i] == t;
		if (keep) {
			if (t > lo)
				(void)syscall(SYS_close_range, lo, t - 1, 0);
			lo = t + 1;
		}
	}
	(void)syscall(SYS_close_range, lo, *rep - 1, 0);
	(void)syscall(SYS_close_range, *rep + 1, ~0u, 0);
	return 0;
}

int
sbx_seccomp_load(const struct sock_fprog *prog)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return KZ_ESYS;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog) < 0)
		return KZ_ESYS;
	return 0;
}

void
sbx_code_enter(const struct sock_fprog *prog, struct sbx_job *j, int rep)
{
	char cwd[PATH_MAX];

	snprintf(cwd, sizeof(cwd), "%s/%s", SBX_WS, j->cwd);
	if (chdir(cwd) < 0)
		FAIL("cwd",
		    "the working directory does not exist in the workspace");
	if (sbx_seccomp_load(prog) != 0)
		FAIL("seccomp", "seccomp: cannot load the filter");
	environ = j->env;
	execvp(j->argv[0], j->argv);
	dprintf(2, "kz-sandbox: cannot execute %s: %s\n", j->argv[0],
	    strerror(errno));
	_exit(127);
}

/* A stack for the code process between clone and exec, with a guard
 * page below it; allocated once and reused by every run (also the gVisor
 * loader's, for the code it starts). */
char *
sbx_code_stack(void)
{
	char *s = mmap(NULL, CODE_STACK + 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

	if (s == MAP_FAILED || mprotect(s, 4096, PROT_NONE) < 0)
		return NULL;
	return s + 4096 + CODE_STACK;
}
