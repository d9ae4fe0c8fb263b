/*
 * Escape attempts, run INSIDE kz-sandbox by tests/e2e/t1102-sandbox-escape.sh.
 * "esc NAME" performs one attempt and prints "blocked NAME: why" with exit 0
 * when the sandbox stopped it, or "ESCAPED NAME" with exit 1 when it worked.
 * Built statically by the test with cc; not part of any binary.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>

static int
sys_failed(long r)
{
	return r < 0;
}

static pid_t
sleeper(void)
{
	pid_t p = fork();

	if (p == 0) {
		pause();
		_exit(0);
	}
	return p;
}

static int
t_ptrace(void)
{
	pid_t c = sleeper();
	long r = ptrace(PTRACE_ATTACH, c, 0, 0);

	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	return sys_failed(r);
}

static int
t_traceme(void)
{
	return sys_failed(ptrace(PTRACE_TRACEME, 0, 0, 0));
}

static int
t_vmread(void)
{
	char buf[8], src[8] = "secret";
	pid_t c = sleeper();
	struct iovec l = {buf, 8}, r = {src, 8};
	long n = process_vm_readv(c, &l, 1, &r, 1, 0);

	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	return sys_failed(n);
}

static int
t_mount(void)
{
	return sys_failed(mount("none", "/tmp", "tmpfs", 0, NULL));
}
static int
t_remount(void)
{
	return sys_failed(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL));
}
static int
t_umount(void)
{
	return sys_failed(umount2("/proc", MNT_DETACH));
}
static int
t_fsopen(void)
{
	return sys_failed(syscall(SYS_fsopen, "tmpfs", 0));
}
static int
t_pivot(void)
{
	return sys_failed(syscall(SYS_pivot_root, "/tmp", "/tmp"));
}
static int
t_chroot(void)
{
	return sys_failed(chroot("/tmp"));
}
static int
t_userns(void)
{
	return sys_failed(unshare(CLONE_NEWUSER));
}
static int
t_unshare_net(void)
{
	return sys_failed(unshare(CLONE_NEWNET));
}

static int
t_setns(void)
{
	int fd = open("/proc/self/ns/mnt", O_RDONLY);

	if (fd < 0)
		return 1 == 1;
	return sys_failed(setns(fd, 0));
}

static int
t_clone_ns(void)
{
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);

	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	return sys_failed(r);
}

static int
t_clone3(void)
{
	return sys_failed(syscall(SYS_clone3, NULL, 0)) && errno == ENOSYS;
}

static int
t_keyctl(void)
{
	return sys_failed(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
	    KEY_SPEC_SESSION_KEYRING, 1));
}
static int
t_addkey(void)
{
	return sys_failed(syscall(SYS_add_key, "user", "x", "y", 1,
	    KEY_SPEC_PROCESS_KEYRING));
}

static int
t_bpf(void)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	return sys_failed(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
}

static int
t_perf(void)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	return sys_failed(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
}

static int
t_uffd(void)
{
	return sys_failed(syscall(SYS_userfaultfd, 0));
}
static int
t_iouring(void)
{
	char p[120] = {0};
	return sys_failed(syscall(SYS_io_uring_setup, 1, p));
}
static int
t_raw(void)
{
	return sys_failed(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
}
static int
t_packet(void)
{
	return sys_failed(socket(AF_PACKET, SOCK_RAW, 0));
}
static int
t_netlink(void)
{
	return sys_failed(socket(AF_NETLINK, SOCK_RAW, 0));
}
static int
t_vsock(void)
{
	return sys_failed(socket(40 /* AF_VSOCK */, SOCK_STREAM, 0));
}
static int
t_handle(void)
{
	char h[64] = {0};
	return sys_failed(
	    syscall(SYS_open_by_handle_at, AT_FDCWD, h, O_RDONLY));
}
static int
t_iopl(void)
{
	return sys_failed(syscall(SYS_iopl, 3));
}
static int
t_module(void)
{
	return sys_failed(syscall(SYS_finit_module, 0, "", 0));
}
static int
t_kexec(void)
{
	return sys_failed(syscall(SYS_kexec_load, 0, 0, NULL, 0));
}
static int
t_reboot(void)
{
	return sys_failed(
	    syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc, NULL));
}
static int
t_swapon(void)
{
	return sys_failed(syscall(SYS_swapon, "/tmp/x", 0));
}
static int
t_settime(void)
{
	struct timespec ts = {0, 0};
	return sys_failed(clock_settime(CLOCK_REALTIME, &ts));
}
static int
t_syslog(void)
{
	char b[64];
	return sys_failed(syscall(SYS_syslog, 3, b, sizeof(b)));
}
static int
t_setuid(void)
{
	return sys_failed(setuid(0));
}

static int
t_tiocsti(void)
{
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY), s;
	char c = 'x';

	if (m < 0 || grantpt(m) || unlockpt(m))
		return 1;
	if ((s = open(ptsname(m), O_RDWR | O_NOCTTY)) < 0)
		return 1;
	return sys_failed(ioctl(s, TIOCSTI, &c)) && errno == EPERM;
}

/* i386 and x32 syscalls must not run: the process is killed. */
static int
killed_by(void (*fn)(void))
{
	int st;
	pid_t p = fork();

	if (p == 0) {
		fn();
		_exit(0);
	}
	waitpid(p, &st, 0);
	return WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 3);
}

static void
i386_getpid(void)
{
	long r;

	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
	_exit(r > 0 ? 0 : 3);
}

static void
x32_getpid(void)
{
	long r = syscall(0x40000000 | 39);

	_exit(r > 0 ? 0 : 3);
}

static int
t_i386(void)
{
	return killed_by(i386_getpid);
}
static int
t_x32(void)
{
	return killed_by(x32_getpid);
}

static int
t_loopback(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	const char *port = getenv("HOSTPORT");
	int s = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_port = htons(port ? (unsigned short)strtol(port, 0, 10) : 1);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sys_failed(connect(s, (struct sockaddr *)&sa, sizeof(sa)));
}

static int
t_outside(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	inet_pton(AF_INET, "10.0.0.1", &sa.sin_addr);
	return sys_failed(connect(s, (struct sockaddr *)&sa, sizeof(sa))) ||
	    sys_failed(send(s, "x", 1, 0));
}

static int
t_pidsbomb(void)
{
	int n = 0;

	for (int i = 0; i < 10000; i++) {
		pid_t p = fork();

		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0)
			break;
		n++;
	}
	printf("forked %d\n", n);
	kill(0, SIGKILL);
	return n < 10000;
}

static const struct {
	const char *name;
	int (*fn)(void);
} tests[] = {
    {"ptrace", t_ptrace},
    {"traceme", t_traceme},
    {"vmread", t_vmread},
    {"mount", t_mount},
    {"remount", t_remount},
    {"umount", t_umount},
    {"fsopen", t_fsopen},
    {"pivot_root", t_pivot},
    {"chroot", t_chroot},
    {"userns", t_userns},
    {"unshare_net", t_unshare_net},
    {"setns", t_setns},
    {"clone_ns", t_clone_ns},
    {"clone3", t_clone3},
    {"keyctl", t_keyctl},
    {"add_key", t_addkey},
    {"bpf", t_bpf},
    {"perf", t_perf},
    {"userfaultfd", t_uffd},
    {"io_uring", t_iouring},
    {"raw_socket", t_raw},
    {"packet_socket", t_packet},
    {"netlink", t_netlink},
    {"vsock", t_vsock},
    {"handle", t_handle},
    {"iopl", t_iopl},
    {"module", t_module},
    {"kexec", t_kexec},
    {"reboot", t_reboot},
    {"swapon", t_swapon},
    {"settime", t_settime},
    {"syslog", t_syslog},
    {"setuid", t_setuid},
    {"tiocsti", t_tiocsti},
    {"i386", t_i386},
    {"x32", t_x32},
    {"loopback", t_loopback},
    {"outside", t_outside},
    {"pids", t_pidsbomb},
};

int
main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof(tests) / sizeof(tests[0]);
	     i++) {
		if (strcmp(argv[1], tests[i].name) != 0)
			continue;
		errno = 0;
		if (tests[i].fn()) {
			printf("blocked %s: %s\n", argv[1], strerror(errno));
			return 0;
		}
		printf("ESCAPED %s\n", argv[1]);
		return 1;
	}
	if (argc > 1 && strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
			printf("%s\n", tests[i].name);
		return 0;
	}
	fprintf(stderr, "usage: esc NAME|list\n");
	return 2;
}
