/*
 * Namespaces.  The run init is cloned into new pid and mount namespaces,
 * where it builds the root view; meanwhile the agent leaves the host's
 * network, IPC and UTS namespaces (it keeps the host's file system view),
 * and the init joins the agent's new ones, through a pidfd of the agent, as
 * it takes its setup.  Each code process enters a cgroup namespace rooted at
 * the run cgroup.  Every lease gets all five anew (sbx_worker_refresh), and
 * the reset proves it with their ids.  With SANDBOX_USERNS=on the code also
 * runs in a user namespace of its own, which the init makes once and maps
 * (sbx_ns_userns_make) and each code process enters (sbx_ns_userns_enter);
 * under gvisor runsc starts in one made the same way, mapped for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/sched.h>

#include "sbx.h"
#include "sbx_gvisor.h"
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
	        CLONE_CLEAR_SIGHAND,
	    .pidfd = (uint64_t)(uintptr_t)pidfd,
	    .exit_signal = SIGCHLD};
	pid_t pid;

	*pidfd = -1;
	pid = (pid_t)syscall(SYS_clone3, &a, sizeof(a));
	if (pid >= 0 || errno != ENOSYS)
		return pid;
	pid = (pid_t)syscall(SYS_clone, flags | CLONE_PIDFD | SIGCHLD, 0, pidfd,
	    0, 0);
	for (int s = 1; pid == 0 && s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)signal(s, SIG_DFL);
	return pid;
}

/*
 * NS_GET_ID (linux/nsfs.h, Linux 6.18): a namespace's 64-bit id, unique
 * for the boot and never reused; Debian 12's headers predate it.
 */
#define SBX_NS_GET_ID _IOR(0xb7, 0xd, uint64_t)

static const char *const ns_name[SBX_NS_N] = {"pid", "mnt", "net", "ipc",
    "uts"};

/* The ids of the namespaces pid sits in; 0 when one cannot be read. */
int
sbx_ns_ids(pid_t pid, struct sbx_nsid *out)
{
	char p[64];
	struct stat st;
	int fd, r = 0;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < SBX_NS_N; i++) {
		snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, ns_name[i]);
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
			r = KZ_ESYS;
			continue;
		}
		if (fstat(fd, &st) == 0)
			out->ino[i] = (uint64_t)st.st_ino;
		else
			r = KZ_ESYS;
		if (ioctl(fd, SBX_NS_GET_ID, &out->id[i]) < 0)
			out->id[i] = 0;
		close(fd);
	}
	return r;
}

/* Whether id is among the n ids of hist. */
static bool
seen_id(const uint64_t *hist, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (hist[i] == id)
			return true;
	return false;
}

/*
 * Whether every namespace in cur is one no earlier lease of this worker
 * had.  The kernel's ids are never given twice in a boot but come in
 * per-CPU batches, not in order, so each is looked up among every id the
 * worker recorded (hist, n of them; SANDBOX_LEASES_MAX bounds it).  A
 * kernel without ids leaves the inode numbers, which the kernel reuses
 * once a namespace is freed: those are compared with the previous
 * lease's, whose namespaces still existed when these were made.
 */
bool
sbx_ns_new(const struct sbx_nsid *cur, const struct sbx_nsid *prev,
    const uint64_t *hist, size_t n)
{
	for (int i = 0; i < SBX_NS_N; i++) {
		if (cur->ino[i] == 0)
			return false;
		if (cur->id[i] != 0 ? seen_id(hist, n, cur->id[i]) :
		                      n > 0 || prev->id[i] != 0 ||
		            cur->ino[i] == prev->ino[i])
			return false;
	}
	return true;
}

static int
wproc(pid_t pid, const char *file, const char *val)
{
	char p[64];
	int fd, r = 0;
	size_t n = strlen(val);

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (write(fd, val, n) != (ssize_t)n)
		r = -1;
	close(fd);
	return r;
}

/*
 * Under gvisor the namespace is runsc's, not the code's: its root is the
 * worker's second host ids, SANDBOX_GVISOR_UID and GID (runsc and its
 * gofer run as them, with capabilities inside only; the code process
 * becomes them before it executes runsc, gvisor_box.c), or the host's root
 * when they are 0; and its nobody, which runsc 20221219 makes its sandbox
 * process in root mode, is the sandbox uid and gid, so that process (the
 * Sentry) runs as the worker's own host ids.  No other host id exists inside;
 * runsc's Go runtime sets groups there, so setgroups stays allowed (over the
 * two mapped gids only).  The spec maps the sandbox ids back for the gofer
 * (gvisor.c).
 */
static void
gv_maps(const struct sbx_conf *c, char *um, char *gm, size_t len)
{
	snprintf(um, len, "0 %lld 1\n%d %lld 1\n", (long long)c->gv_uid,
	    SBX_GV_NOBODY, (long long)c->uid);
	snprintf(gm, len, "0 %lld 1\n%d %lld 1\n", (long long)c->gv_gid,
	    SBX_GV_NOBODY, (long long)c->gid);
}

/*
 * Otherwise the sandbox uid and gid, and nothing else, are mapped to the
 * unprivileged host ids, with setgroups denied: inside, uid 0 does not
 * exist and no group can be added.
 */
static int
userns_map(pid_t pid, const struct sbx_conf *c, char *why, size_t wlen)
{
	char um[64], gm[64];
	bool gv = sbx_gvisor(c);

	if (gv)
		gv_maps(c, um, gm, sizeof(um));
	else {
		snprintf(um, sizeof(um), "%lld %lld 1\n", (long long)c->uid,
		    (long long)c->userns_uid);
		snprintf(gm, sizeof(gm), "%lld %lld 1\n", (long long)c->gid,
		    (long long)c->userns_gid);
	}
	if ((!gv && wproc(pid, "setgroups", "deny") != 0) ||
	    wproc(pid, "uid_map", um) != 0 || wproc(pid, "gid_map", gm) != 0) {
		kz_why(why, wlen, "%s: %s",
		    gv ? "gvisor: runsc's user namespace id mapping" :
		         "namespaces: user namespace id mapping",
		    strerror(errno));
		return KZ_EUNAVAIL;
	}
	return 0;
}

/*
 * The user namespace of the code (SANDBOX_USERNS=on), or of runsc under
 * gvisor (gv_maps), made once per worker:
 * a short-lived child unshares it, the init (root of the parent namespace)
 * writes its maps and keeps a descriptor of it, and every code process
 * enters it with setns before dropping its privileges.  The pid, mount,
 * network, IPC and UTS namespaces stay owned by the host's user namespace,
 * so a capability inside grants nothing over any of them, nor over a host
 * file (no host id but the two mapped ones exists inside).
 */
int
sbx_ns_userns_make(const struct sbx_conf *c, int *nsfd, char *why, size_t wlen)
{
	char path[64], b;
	int p[2], pidfd = -1, r = KZ_EUNAVAIL;
	pid_t pid;

	*nsfd = -1;
	if (pipe2(p, O_CLOEXEC) < 0) {
		kz_why(why, wlen, "namespaces: pipe: %s", strerror(errno));
		return KZ_ESYS;
	}
	if ((pid = sbx_clone(CLONE_NEWUSER, &pidfd)) == 0) {
		close(p[1]);
		(void)!read(p[0], &b, 1); /* until the init is done */
		_exit(0);
	}
	close(p[0]);
	if (pidfd >= 0)
		close(pidfd);
	if (pid < 0) {
		kz_why(why, wlen,
		    "namespaces: the kernel refuses a user namespace: %s",
		    strerror(errno));
		close(p[1]);
		return KZ_EUNAVAIL;
	}
	if (userns_map(pid, c, why, wlen) == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		if ((*nsfd = open(path, O_RDONLY | O_CLOEXEC)) >= 0)
			r = 0;
		else
			kz_why(why, wlen, "namespaces: user namespace: %s",
			    strerror(errno));
	}
	close(p[1]);
	(void)waitpid(pid, NULL, 0);
	return r;
}

/*
 * Enters the code's user namespace: the supplementary groups go first
 * (setgroups is denied inside), then setns; the process keeps a full
 * capability set only inside the namespace until sbx_caps_drop empties it.
 */
int
sbx_ns_userns_enter(int nsfd)
{
	if (setgroups(0, NULL) < 0 || setns(nsfd, CLONE_NEWUSER) < 0)
		return -1;
	return 0;
}
