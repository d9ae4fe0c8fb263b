/*
 * The seccomp allowlist from inside, run INSIDE kz-sandbox by
 * tests/e2e/t1109-sandbox-seccomp.sh.  Built statically by the test with
 * cc; not part of any binary.
 *
 *   scwalk walk ALLOWED EPERM  calls every native system call number from
 *       0 to 1023 that is not in the comma-separated list ALLOWED, by raw
 *       syscall() with zero arguments, and checks that each fails with
 *       EPERM if it is in EPERM and with ENOSYS otherwise.  Allowed
 *       numbers are never called.  Prints one "bad ..." line per call that
 *       got through or failed otherwise, one "refused NR NAME ERRNO" line
 *       for each call of names[] (newer than libseccomp 2.5.4's table),
 *       then "walked ...", and exits 1 if anything was bad.  The kernel
 *       exempts uretprobe and uprobe from every seccomp filter (the uprobes
 *       a host tracer sets must work); outside the kernel's trampoline
 *       they kill the caller with SIGILL or fail with ENXIO, so they are
 *       called in a child and either outcome (or ENOSYS) counts as refused.
 *   scwalk args   the argument rules, from both sides: "ok WHAT" or
 *       "bad WHAT: why" per check, exit 1 if any was bad.
 *   scwalk ipc    IPC, event and timer calls a tenant needs still work.
 *   scwalk probe  (on the host) names[] with zero arguments: prints
 *       "NAME NR ERRNO", so the test knows which the kernel has.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <netinet/in.h>

#define NR_MAX 1024

/* x86-64 numbers of calls newer than libseccomp 2.5.4's table. */
static const struct {
	int nr;
	const char *name;
} names[] = {
    {457, "statmount"},
    {458, "listmount"},
    {459, "lsm_get_self_attr"},
    {460, "lsm_set_self_attr"},
    {461, "lsm_list_modules"},
    {462, "mseal"},
    {463, "setxattrat"},
    {464, "getxattrat"},
    {465, "listxattrat"},
    {466, "removexattrat"},
    {467, "open_tree_attr"},
    {468, "file_getattr"},
    {469, "file_setattr"},
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* x86-64 numbers the kernel passes through seccomp filters. */
static const struct {
	int nr;
	const char *name;
} exempt[] = {
    {335, "uretprobe"},
    {336, "uprobe"},
};
#define NEXEMPT (sizeof(exempt) / sizeof(exempt[0]))

/* read, write, rt_sigreturn, pause, clone, fork, vfork, execve, exit,
 * wait4, kill, exit_group. */
static const int unsafe[] = {0, 1, 15, 34, 56, 57, 58, 59, 60, 61, 62, 231};

static int bad;

static const char *
errname(int e)
{
	switch (e) {
	case 0:
		return "0";
	case EPERM:
		return "EPERM";
	case ENOSYS:
		return "ENOSYS";
	case EAFNOSUPPORT:
		return "EAFNOSUPPORT";
	case EFAULT:
		return "EFAULT";
	case EINVAL:
		return "EINVAL";
	case EBADF:
		return "EBADF";
	case ENOENT:
		return "ENOENT";
	default:
		return strerrorname_np(e) ? strerrorname_np(e) : "E?";
	}
}

/* Marks each number of the comma-separated list in set. */
static int
parse_set(const char *s, unsigned char *set)
{
	char *e;

	while (*s != '\0') {
		long v = strtol(s, &e, 10);

		if (e == s || v < 0 || v >= NR_MAX || (*e != ',' && *e != '\0'))
			return -1;
		set[v] = 1;
		s = *e == ',' ? e + 1 : e;
	}
	return 0;
}

/* Calls exempt[i] in a child: 0 if it died of SIGILL or failed with
 * ENXIO or ENOSYS, with what happened in out. */
static int
call_exempt(size_t i, char *out, size_t len)
{
	int st, fd[2], e = 0;
	pid_t p;

	if (pipe(fd) < 0 || (p = fork()) < 0)
		return -1;
	if (p == 0) {
		long r = syscall(exempt[i].nr, 0, 0, 0, 0, 0, 0);

		e = r == -1 ? errno : 0;
		(void)write(fd[1], &e, sizeof(e));
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], &e, sizeof(e)) != sizeof(e))
		e = -1;
	close(fd[0]);
	waitpid(p, &st, 0);
	if (WIFSIGNALED(st)) {
		snprintf(out, len, "killed by signal %d", WTERMSIG(st));
		return WTERMSIG(st) == SIGILL ? 0 : -1;
	}
	snprintf(out, len, "returned %s", e < 0 ? "?" : errname(e));
	return e == ENXIO || e == ENOSYS ? 0 : -1;
}

static int
is_exempt(int nr)
{
	for (size_t i = 0; i < NEXEMPT; i++)
		if (exempt[i].nr == nr)
			return 1;
	return 0;
}

static int
walk(const char *allowed, const char *eperm)
{
	static unsigned char skip[NR_MAX], perm[NR_MAX];
	static int got[NR_MAX];
	int nskip = 0, nref = 0;

	if (parse_set(allowed, skip) != 0 || parse_set(eperm, perm) != 0) {
		fprintf(stderr, "scwalk: bad number list\n");
		return 2;
	}
	/* A list without these is not the sandbox's: calling them with
	 * zero arguments would end, fork, stop or crash the walk. */
	for (size_t i = 0; i < sizeof(unsafe) / sizeof(unsafe[0]); i++)
		if (!skip[unsafe[i]]) {
			fprintf(stderr,
			    "scwalk: %d is not allowed; not walking\n",
			    unsafe[i]);
			return 2;
		}
	for (int nr = 0; nr < NR_MAX; nr++) {
		int want = perm[nr] ? EPERM : ENOSYS;
		long r;

		if (skip[nr]) {
			nskip++;
			continue;
		}
		if (is_exempt(nr))
			continue;
		errno = 0;
		r = syscall(nr, 0, 0, 0, 0, 0, 0);
		got[nr] = r == -1 ? errno : 0;
		if (r == -1 && errno == want) {
			nref++;
			continue;
		}
		printf("bad %d: returned %ld, %s (want %s)\n", nr, r,
		    errname(got[nr]), errname(want));
		bad++;
	}
	for (size_t i = 0; i < NEXEMPT; i++) {
		char how[64] = "allowed";

		if (skip[exempt[i].nr] || call_exempt(i, how, sizeof(how))) {
			printf("bad exempt %d %s: %s\n", exempt[i].nr,
			    exempt[i].name, how);
			bad++;
		} else {
			printf("exempt %d %s: %s\n", exempt[i].nr,
			    exempt[i].name, how);
			nref++;
		}
	}
	for (size_t i = 0; i < NNAMES; i++) {
		if (skip[names[i].nr]) {
			printf("bad %s (%d) is on the allowed list\n",
			    names[i].name, names[i].nr);
			bad++;
		} else if (got[names[i].nr] == ENOSYS)
			printf("refused %d %s ENOSYS\n", names[i].nr,
			    names[i].name);
	}
	printf("walked %d numbers: %d allowed (not called), %d refused, %d "
	       "not refused\n",
	    NR_MAX, nskip, nref, bad);
	return bad != 0;
}

static void
check(const char *what, int cond, const char *detail)
{
	if (cond)
		printf("ok %s\n", what);
	else {
		printf("bad %s: %s\n", what, detail);
		bad++;
	}
}

/* A refusal with exactly want; anything else (success included) is bad. */
static void
refused(const char *what, long r, int want)
{
	char d[96];

	snprintf(d, sizeof(d), "returned %ld, %s (want %s)", r,
	    r == -1 ? errname(errno) : "0", errname(want));
	check(what, r == -1 && errno == want, d);
}

static void
worked(const char *what, long r)
{
	char d[96];

	snprintf(d, sizeof(d), "returned %ld, %s", r, errname(errno));
	check(what, r >= 0, d);
}

static long
raw_clone(unsigned long flags)
{
	long r;

	errno = 0;
	r = syscall(SYS_clone, flags, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	if (r > 0) {
		int e = errno;

		waitpid((pid_t)r, NULL, 0);
		errno = e;
	}
	return r;
}

static void
clone_checks(void)
{
	static const struct {
		unsigned long f;
		const char *name;
	} ns[] = {
	    {CLONE_NEWNS, "clone CLONE_NEWNS"},
	    {CLONE_NEWUTS, "clone CLONE_NEWUTS"},
	    {CLONE_NEWIPC, "clone CLONE_NEWIPC"},
	    {CLONE_NEWUSER, "clone CLONE_NEWUSER"},
	    {CLONE_NEWPID, "clone CLONE_NEWPID"},
	    {CLONE_NEWNET, "clone CLONE_NEWNET"},
	    {CLONE_NEWCGROUP, "clone CLONE_NEWCGROUP"},
	};
	long r;

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		refused(ns[i].name, raw_clone(ns[i].f | SIGCHLD), EPERM);
	refused("clone CLONE_NEWUSER with high bits set",
	    raw_clone(0xdead000000000000UL | CLONE_NEWUSER | SIGCHLD), EPERM);
	worked("clone without namespace flags (fork)", raw_clone(SIGCHLD));
	errno = 0;
	r = syscall(SYS_clone3, NULL, 0);
	refused("clone3", r, ENOSYS);
}

static void
ioctl_checks(void)
{
	struct termios tio;
	struct winsize ws;
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY), s = -1, n;
	char c = 'x', sub = 6;

	if (m < 0 || grantpt(m) || unlockpt(m) ||
	    (s = open(ptsname(m), O_RDWR | O_NOCTTY)) < 0) {
		check("open a pty", 0, strerror(errno));
		return;
	}
	errno = 0;
	refused("ioctl TIOCSTI", ioctl(s, TIOCSTI, &c), EPERM);
	errno = 0;
	refused("ioctl TIOCSTI with high bits set",
	    syscall(SYS_ioctl, s, (1UL << 32) | TIOCSTI, &c), EPERM);
	errno = 0;
	refused("ioctl TIOCSTI sign-extended",
	    syscall(SYS_ioctl, s, 0xffffffff00000000UL | TIOCSTI, &c), EPERM);
	errno = 0;
	refused("ioctl TIOCLINUX", ioctl(s, TIOCLINUX, &sub), EPERM);
	errno = 0;
	worked("ioctl TCGETS", ioctl(s, TCGETS, &tio));
	errno = 0;
	worked("ioctl TIOCGWINSZ (next to TIOCSTI)", ioctl(s, TIOCGWINSZ, &ws));
	errno = 0;
	worked("ioctl FIONREAD (next to TIOCLINUX)", ioctl(m, FIONREAD, &n));
	errno = 0;
	worked("ioctl TCGETS with high bits set",
	    syscall(SYS_ioctl, s, (1UL << 32) | TCGETS, &tio));
	close(s);
	close(m);
}

static long
sock(unsigned long fam, int type)
{
	long r;

	errno = 0;
	r = syscall(SYS_socket, fam, type, 0);
	if (r >= 0)
		close((int)r);
	return r;
}

static void
socket_checks(void)
{
	int sv[2];

	refused("socket AF_INET SOCK_RAW", sock(AF_INET, SOCK_RAW), EPERM);
	refused("socket AF_INET6 SOCK_RAW", sock(AF_INET6, SOCK_RAW), EPERM);
	refused("socket AF_INET SOCK_RAW|SOCK_CLOEXEC",
	    sock(AF_INET, SOCK_RAW | SOCK_CLOEXEC), EPERM);
	refused("socket AF_INET SOCK_PACKET", sock(AF_INET, SOCK_PACKET),
	    EPERM);
	refused("socket AF_UNIX SOCK_RAW", sock(AF_UNIX, SOCK_RAW), EPERM);
	refused("socket AF_UNSPEC", sock(AF_UNSPEC, SOCK_STREAM), EAFNOSUPPORT);
	refused("socket AF_NETLINK", sock(AF_NETLINK, SOCK_RAW), EAFNOSUPPORT);
	refused("socket AF_PACKET", sock(AF_PACKET, SOCK_RAW), EAFNOSUPPORT);
	refused("socket AF_VSOCK", sock(40, SOCK_STREAM), EAFNOSUPPORT);
	refused("socket AF_VSOCK with high bits set",
	    sock((1UL << 32) | 40, SOCK_STREAM), EAFNOSUPPORT);
	refused("socket AF_INET with high bits set",
	    sock((1UL << 32) | AF_INET, SOCK_RAW), EAFNOSUPPORT);
	worked("socket AF_UNIX SOCK_STREAM|SOCK_CLOEXEC",
	    sock(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC));
	worked("socket AF_INET SOCK_DGRAM|SOCK_NONBLOCK",
	    sock(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK));
	worked("socket AF_INET6 SOCK_STREAM", sock(AF_INET6, SOCK_STREAM));
	errno = 0;
	refused("socketpair AF_INET", socketpair(AF_INET, SOCK_STREAM, 0, sv),
	    EAFNOSUPPORT);
	errno = 0;
	worked("socketpair AF_UNIX", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
}

static void
sysv_checks(void)
{
	struct {
		long type;
		char text[4];
	} msg = {1, "hi"}, in;
	struct sembuf op = {0, 1, 0};
	int id;
	char *p;

	id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
	p = id < 0 ? (char *)-1 : shmat(id, NULL, 0);
	check("SysV shared memory",
	    p != (char *)-1 && (p[0] = 'x') == 'x' && shmdt(p) == 0 &&
	        shmctl(id, IPC_RMID, NULL) == 0,
	    strerror(errno));
	id = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
	check("SysV message queue",
	    id >= 0 && msgsnd(id, &msg, sizeof(msg.text), 0) == 0 &&
	        msgrcv(id, &in, sizeof(in.text), 1, 0) == sizeof(in.text) &&
	        msgctl(id, IPC_RMID, NULL) == 0,
	    strerror(errno));
	id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	check("SysV semaphore",
	    id >= 0 && semop(id, &op, 1) == 0 && semctl(id, 0, GETVAL) == 1 &&
	        semctl(id, 0, IPC_RMID) == 0,
	    strerror(errno));
	/* Creating a queue needs an RLIMIT_MSGQUEUE the sandbox sets to 0;
	 * ENOENT shows the calls reach the kernel. */
	errno = 0;
	refused("POSIX mq_open reaches the kernel",
	    mq_open("/kz-scwalk-none", O_RDONLY), ENOENT);
	errno = 0;
	refused("POSIX mq_unlink reaches the kernel",
	    mq_unlink("/kz-scwalk-none"), ENOENT);
}

static void
event_checks(void)
{
	struct itimerspec its = {.it_value = {0, 1000000}};
	struct epoll_event ev = {.events = EPOLLIN}, out;
	char buf[sizeof(struct inotify_event) + 64];
	struct signalfd_siginfo si;
	struct sigevent sev = {.sigev_notify = SIGEV_NONE};
	struct timespec ts;
	uint64_t one = 1, ticks;
	timer_t tm;
	sigset_t ss;
	int in, ep, efd, tfd, sfd;

	in = inotify_init1(IN_CLOEXEC);
	check("inotify",
	    in >= 0 && inotify_add_watch(in, "/tmp", IN_CREATE) >= 0 &&
	        close(open("/tmp/kz-scwalk", O_CREAT | O_WRONLY, 0600)) == 0 &&
	        read(in, buf, sizeof(buf)) > 0,
	    strerror(errno));
	efd = eventfd(0, EFD_CLOEXEC);
	ep = epoll_create1(EPOLL_CLOEXEC);
	check("eventfd and epoll",
	    efd >= 0 && ep >= 0 &&
	        epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0 &&
	        write(efd, &one, 8) == 8 && epoll_wait(ep, &out, 1, 1000) == 1,
	    strerror(errno));
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	check("timerfd",
	    tfd >= 0 && timerfd_settime(tfd, 0, &its, NULL) == 0 &&
	        read(tfd, &ticks, 8) == 8,
	    strerror(errno));
	check("POSIX timer",
	    timer_create(CLOCK_MONOTONIC, &sev, &tm) == 0 &&
	        timer_settime(tm, 0, &its, NULL) == 0 && timer_delete(tm) == 0,
	    strerror(errno));
	sigemptyset(&ss);
	sigaddset(&ss, SIGUSR1);
	sfd = sigprocmask(SIG_BLOCK, &ss, NULL) == 0 ?
	    signalfd(-1, &ss, SFD_CLOEXEC) :
	    -1;
	check("signalfd",
	    sfd >= 0 && raise(SIGUSR1) == 0 &&
	        read(sfd, &si, sizeof(si)) == sizeof(si),
	    strerror(errno));
	check("clock_gettime by system call",
	    syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) == 0,
	    strerror(errno));
	worked("memfd_create", memfd_create("scwalk", MFD_CLOEXEC));
	worked("pidfd_open", syscall(SYS_pidfd_open, getpid(), 0));
}

static int
probe(void)
{
	for (size_t i = 0; i < NNAMES; i++) {
		long r;

		errno = 0;
		r = syscall(names[i].nr, 0, 0, 0, 0, 0, 0);
		printf("%s %d %s\n", names[i].name, names[i].nr,
		    r == -1 ? errname(errno) : "0");
	}
	return 0;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "walk") == 0)
		return walk(argv[2], argv[3]);
	if (argc == 2 && strcmp(argv[1], "args") == 0) {
		clone_checks();
		ioctl_checks();
		socket_checks();
		return bad != 0;
	}
	if (argc == 2 && strcmp(argv[1], "ipc") == 0) {
		sysv_checks();
		event_checks();
		return bad != 0;
	}
	if (argc == 2 && strcmp(argv[1], "probe") == 0)
		return probe();
	fprintf(stderr,
	    "usage: scwalk walk ALLOWED EPERM | args | ipc | probe\n");
	return 2;
}
