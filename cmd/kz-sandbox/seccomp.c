/*
 * The seccomp policy, built once per worker with libseccomp and exported as
 * a BPF program, so a run only pays for one prctl().  Default allow, with a
 * deny list of the calls that reach kernel surface an unprivileged program
 * has no business with (kz-sandbox(8) says why for each).  Only the native
 * x86-64 ABI is in the filter: i386 (int 0x80) and x32 calls hit the
 * bad-architecture action, which kills the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "sbx.h"
#include "banned.h"

/* Refused with EPERM. */
static const char *const deny[] = {
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
	"pidfd_getfd", "kcmp",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init",
	"kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	"open_by_handle_at", "name_to_handle_at",
	"iopl", "ioperm", "modify_ldt",
	"swapon", "swapoff", "reboot", "acct",
	"clock_settime", "clock_adjtime", "settimeofday", "adjtimex",
	"syslog", "sethostname", "setdomainname", "vhangup",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"quotactl", "quotactl_fd", "lookup_dcookie", "uselib", "nfsservctl",
	"personality",
	NULL,
};

static const unsigned long ns_flags[] = {CLONE_NEWNS, CLONE_NEWUTS,
    CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
    0x00000080 /* CLONE_NEWTIME */};

static int
rules(scmp_filter_ctx ctx, char *why, size_t wlen)
{
	const int eperm = SCMP_ACT_ERRNO(EPERM);
	int r = 0;

	for (int i = 0; deny[i] != NULL; i++) {
		int nr = seccomp_syscall_resolve_name(deny[i]);

		if (nr == __NR_SCMP_ERROR)
			continue;	/* not on this architecture */
		if ((r = seccomp_rule_add(ctx, eperm, nr, 0)) != 0) {
			kz_why(why, wlen, "seccomp: rule %s", deny[i]);
			return r;
		}
	}
	/* glibc falls back from clone3 to clone on ENOSYS; clone3 takes its
	 * flags in memory, where a filter cannot look. */
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3),
	    0);
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
		r |= seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	/* Terminal injection and console control. */
	r |= seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	r |= seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	/* Socket families: AF_UNIX (1), AF_INET (2), AF_INET6 (10) only. */
	for (int fam = 0; fam < 10; fam++)
		if (fam != AF_UNIX && fam != AF_INET)
			r |= seccomp_rule_add(ctx,
			    SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam));
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT),
	    SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GT, AF_INET6));
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT),
	    SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	/* Raw and packet sockets even where a family would allow them. */
	r |= seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
	r |= seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_PACKET));
	if (r != 0)
		kz_why(why, wlen, "seccomp: argument rules");
	return r;
}

static int
export(scmp_filter_ctx ctx, struct sock_fprog *out, char *why, size_t wlen)
{
	struct stat st;
	int fd, r = KZ_ESYS;
	void *buf = NULL;

	if ((fd = memfd_create("kz-seccomp", MFD_CLOEXEC)) < 0)
		return KZ_ESYS;
	if (seccomp_export_bpf(ctx, fd) != 0 || fstat(fd, &st) < 0 ||
	    st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
	    (buf = malloc((size_t)st.st_size)) == NULL ||
	    pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		kz_why(why, wlen, "seccomp: export");
		free(buf);
		goto out;
	}
	out->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
	out->filter = buf;
	r = 0;
out:
	close(fd);
	return r;
}

int
sbx_seccomp_build(struct sock_fprog *out, char *why, size_t wlen)
{
	scmp_filter_ctx ctx;
	int r = KZ_EUNAVAIL;

	memset(out, 0, sizeof(*out));
	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		kz_why(why, wlen, "seccomp: init");
		return KZ_ENOMEM;
	}
	/* Only the native ABI: foreign architectures are killed, and no
	 * second architecture is ever added. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS) != 0 ||
	    seccomp_arch_exist(ctx, SCMP_ARCH_NATIVE) != 0 ||
	    seccomp_arch_exist(ctx, SCMP_ARCH_X86) != -EEXIST ||
	    seccomp_arch_exist(ctx, SCMP_ARCH_X32) != -EEXIST) {
		kz_why(why, wlen, "seccomp: architecture setup");
		goto out;
	}
	if (rules(ctx, why, wlen) != 0 || export(ctx, out, why, wlen) != 0)
		goto out;
	r = 0;
out:
	seccomp_release(ctx);
	return r;
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
sbx_seccomp_free(struct sock_fprog *prog)
{
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}
