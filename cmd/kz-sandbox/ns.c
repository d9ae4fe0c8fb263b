/*
 * Namespaces.  The agent leaves the host's network, IPC and UTS namespaces
 * once and keeps the host's file system view.  The run init is cloned into
 * a new pid and mount namespace where it builds the root view, and each
 * code process enters a cgroup namespace rooted at the run cgroup.
 */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
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
	if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0) {
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

/* fork() with namespace flags and a pidfd; the child returns 0. */
pid_t
sbx_clone(unsigned long flags, int *pidfd)
{
	*pidfd = -1;
	return (pid_t)syscall(SYS_clone, flags | CLONE_PIDFD | SIGCHLD, 0,
	    pidfd, 0, 0);
}
