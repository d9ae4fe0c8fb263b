/*
 * Namespaces.  The run init is cloned into new pid and mount namespaces,
 * where it builds the root view; meanwhile the agent leaves the host's
 * network, IPC and UTS namespaces (it keeps the host's file system view),
 * and the init joins the agent's new ones, through a pidfd of the agent, as
 * it takes its setup.  Each code process enters a cgroup namespace rooted at
 * the run cgroup.
 */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/sched.h>

#include "sbx.h"
#include "banned.h"

static int
loopback_up(char *why, size_t wlen)
{
	struct ifreq ifr;
	int fd, r = 0;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		kz_why(why, wlen, "network: socket: %s", strerror(errno));
		return KZ_ESYS;
	}
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		r = KZ_ESYS;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (r == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		r = KZ_ESYS;
	if (r != 0)
		kz_why(why, wlen, "network: cannot bring up loopback: %s",
		    strerror(errno));
	close(fd);
	return r;
}

int
sbx_ns_enter_worker(const struct sbx_conf *c, char *why, size_t wlen)
{
	if (unshare(SBX_NS_WORKER) < 0) {
		kz_why(why, wlen, "namespaces: unshare: %s", strerror(errno));
		return KZ_ESYS;
	}
	if (sethostname(c->hostname, strlen(c->hostname)) < 0 ||
	    setdomainname("", 0) < 0) {
		kz_why(why, wlen, "namespaces: sethostname: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	return loopback_up(why, wlen);
}

/*
 * fork() with namespace flags and a pidfd; the child returns 0.  clone3
 * with CLONE_CLEAR_SIGHAND hands the child every signal the agent handles
 * at its default already (ignored ones stay ignored); where clone3 is not
 * available (ENOSYS, e.g. under a container's filter) the child of a plain
 * clone resets every disposition itself.
 */
pid_t
sbx_clone(unsigned long flags, int *pidfd)
{
	struct clone_args a = {.flags = flags | CLONE_PIDFD |
	    CLONE_CLEAR_SIGHAND, .pidfd = (uint64_t)(uintptr_t)pidfd,
	    .exit_signal = SIGCHLD};
	pid_t pid;

	*pidfd = -1;
	pid = (pid_t)syscall(SYS_clone3, &a, sizeof(a));
	if (pid >= 0 || errno != ENOSYS)
		return pid;
	pid = (pid_t)syscall(SYS_clone, flags | CLONE_PIDFD | SIGCHLD, 0,
	    pidfd, 0, 0);
	for (int s = 1; pid == 0 && s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)signal(s, SIG_DFL);
	return pid;
}
