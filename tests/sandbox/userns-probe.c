/*
 * userns-probe PID FILE DIR VICTIM: enters the user namespace of process
 * PID (a code process of a kz-sandbox worker run with SANDBOX_USERNS=on),
 * becomes the sandbox uid 65534 there while keeping every capability
 * inside the namespace, and then tries host operations that those
 * capabilities must not reach.  Prints "caps N" (the effective set it
 * holds inside), one "blocked WHAT" or "ESCAPED WHAT" line per attempt,
 * and exits with the number of attempts that got through (2 when it could
 * not set up).  FILE is a host-only file (0600, root), DIR a root-owned
 * host directory, VICTIM the pid of a host root process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

static int esc;

static void
try(const char *what, int r)
{
	if (r < 0) {
		printf("blocked %s (%s)\n", what, strerror(errno));
		return;
	}
	printf("ESCAPED %s\n", what);
	esc++;
}

int
main(int argc, char **argv)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	char p[64], f[4096];
	int fd, r;

	if (argc != 5)
		return 2;
	snprintf(p, sizeof(p), "/proc/%s/ns/user", argv[1]);
	if ((fd = open(p, O_RDONLY)) < 0 || setgroups(0, NULL) < 0 ||
	    setns(fd, CLONE_NEWUSER) < 0) {
		perror("setns");
		return 2;
	}
	/* The sandbox uid, keeping the namespace's full set. */
	if (prctl(PR_SET_KEEPCAPS, 1) < 0 || setresgid(65534, 65534, 65534) ||
	    setresuid(65534, 65534, 65534) < 0 ||
	    syscall(SYS_capget, &h, d) < 0) {
		perror("setresuid");
		return 2;
	}
	d[0].effective = d[0].permitted;
	d[1].effective = d[1].permitted;
	if (syscall(SYS_capset, &h, d) < 0) {
		perror("capset");
		return 2;
	}
	printf("caps %08x%08x uid %d\n", d[1].effective, d[0].effective,
	    (int)getuid());
	try("read a host-only file", open(argv[2], O_RDONLY));
	snprintf(f, sizeof(f), "%s/new", argv[3]);
	try("create a file in a root directory",
	    open(f, O_WRONLY | O_CREAT, 0644));
	try("chown a host file", chown(argv[2], 65534, 65534));
	try("mount on the host", mount("tmpfs", argv[3], "tmpfs", 0, NULL));
	try("bind mount on the host",
	    mount(argv[3], argv[3], NULL, MS_BIND, NULL));
	try("signal a host root process", kill(atoi(argv[4]), 0));
	try("set the host name", sethostname("x", 1));
	try("raw socket on the host network", socket(AF_INET, SOCK_RAW, 1));
	/* An invalid command: EPERM without CAP_SYS_BOOT over the host, a
	 * harmless EINVAL with it. */
	r = (int)syscall(SYS_reboot, 0xfee1dead, 672274793, 0x0badc0de, NULL);
	try("reboot the host", r < 0 && errno == EPERM ? -1 : 0);
	return esc;
}
