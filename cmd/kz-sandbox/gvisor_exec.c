/*
 * Under gvisor, inside the sandbox: this binary is the container's first
 * process (gvisor.c, mount.c's SBX_GV_LOADER), gVisor's pid 1.  It starts
 * the code as the sandbox uid and gid, with every capability set empty and
 * kz-sandbox's own system call filter loaded, and ends the run with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <cap-ng.h>

#include "kz_conf.h"
#include "sbx.h"
#include "banned.h"

/*
 * sbx_caps_drop's work, in the terms gVisor's kernel has (it refuses the
 * securebits sbx_caps_drop locks; no_new_privs, which runsc sets, keeps a
 * set-user-ID file from giving anything back): the bounding and ambient
 * sets emptied, no supplementary group, the sandbox ids, which leaves
 * the permitted and effective sets empty; then checked, not trusted.
 */
static int
gv_drop(uid_t uid, gid_t gid, char *why, size_t wlen)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	uid_t ru, eu, su;

	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
			kz_why(why, wlen, "capabilities: bounding set: %s",
			    strerror(errno));
			return KZ_ESYS;
		}
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0) {
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
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
			goto bad;
	return 0;
bad:
	kz_why(why, wlen, "capabilities: a set is not empty after the drop");
	return KZ_EDENIED;
}

/* The code: the sandbox uid and gid, no capability in any set (checked
 * with the kernel, here gVisor's), the filter, then the command. */
static void gv_code(const struct sock_fprog *prog, uid_t uid, gid_t gid,
    char **argv) __attribute__((noreturn));

static void
gv_code(const struct sock_fprog *prog, uid_t uid, gid_t gid, char **argv)
{
	char why[192];

	if (gv_drop(uid, gid, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-sandbox: %s\n", why);
		_exit(127);
	}
	if (sbx_seccomp_load(prog) != 0) {
		fprintf(stderr,
		    "kz-sandbox: seccomp: cannot load the filter under "
		    "gvisor: %s\n",
		    strerror(errno));
		_exit(127);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "kz-sandbox: cannot execute %s: %s\n", argv[0],
	    strerror(errno));
	_exit(127);
}

/*
 * Pid 1 of the sandbox, as the native run init is: gVisor's root, not
 * the code's uid, so its /proc entries are not the code's to read; it
 * gives up its capabilities once the code is started, reaps every
 * orphan and ends with the code's status, which runsc passes on.
 */
static int
gv_init(const struct sock_fprog *prog, uid_t uid, gid_t gid, char **argv)
{
	pid_t pid, p;
	int st, code = 127;

	if ((pid = fork()) < 0) {
		fprintf(stderr, "kz-sandbox: fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0)
		gv_code(prog, uid, gid, argv);
	capng_clear(CAPNG_SELECT_BOTH);
	(void)!capng_apply(CAPNG_SELECT_BOTH);
	(void)signal(SIGINT, SIG_IGN);
	(void)signal(SIGTERM, SIG_IGN);
	(void)signal(SIGHUP, SIG_IGN);
	(void)!sbx_seccomp_load(prog);
	/* The run ends with the code's main process, as under native: the
	 * init's exit ends gVisor's container, and whatever the code left
	 * running goes with it. */
	while ((p = waitpid(-1, &st, 0)) >= 0 || errno == EINTR)
		if (p == pid) {
			code = WIFEXITED(st) ? WEXITSTATUS(st) :
			                       128 + WTERMSIG(st);
			break;
		}
	return code;
}

int
sbx_gv_filtered_exec(const char *uid, const char *gid, char **argv)
{
	int64_t u, g;
	static struct sock_filter f[BPF_MAXINSNS + 1];
	struct sock_fprog prog;
	ssize_t n = -1;
	int fd;

	if (kz_parse_int(uid, 1, 2147483646, &u) != 0 ||
	    kz_parse_int(gid, 1, 2147483646, &g) != 0) {
		fprintf(stderr, "kz-sandbox: gvisor-exec: bad uid or gid\n");
		return KZ_EXIT_USAGE;
	}
	/* The filter the agent holds (libseccomp cannot set up inside
	 * gVisor), as the bundle bound it here. */
	if ((fd = open(SBX_GV_FILTER, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, f, sizeof(f));
		close(fd);
	}
	if (n <= 0 || n % (ssize_t)sizeof(f[0]) != 0 ||
	    n / (ssize_t)sizeof(f[0]) > BPF_MAXINSNS) {
		fprintf(stderr,
		    "kz-sandbox: seccomp: no filter under gvisor\n");
		return 127;
	}
	prog.len = (unsigned short)(n / (ssize_t)sizeof(f[0]));
	prog.filter = f;
	return gv_init(&prog, (uid_t)u, (gid_t)g, argv);
}
