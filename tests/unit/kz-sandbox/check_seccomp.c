/* kz-sandbox seccomp.c: the allowlist builds, names resolve strictly, the
 * listing is consistent, and a loaded filter answers as documented; the
 * browser variant differs from it in NETLINK_ROUTE sockets alone; the
 * programs embedded at build time (filter.c) are what libseccomp compiles
 * from the tables. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "sbx.h"
#include "kz_check.h"
#include "banned.h"

START_TEST(test_build)
{
	struct sock_fprog prog, rtc;
	char why[256] = "";

	ck_assert_msg(sbx_seccomp_build(&prog, false, why, sizeof(why)) == 0,
	    "%s", why);
	ck_assert_uint_gt(prog.len, 0);
	ck_assert_uint_le(prog.len, BPF_MAXINSNS);
	ck_assert_msg(sbx_seccomp_build(&rtc, true, why, sizeof(why)) == 0,
	    "%s", why);
	ck_assert_uint_gt(rtc.len, prog.len);
	ck_assert_uint_le(rtc.len, BPF_MAXINSNS);
	sbx_seccomp_free(&prog);
	sbx_seccomp_free(&rtc);
	ck_assert_ptr_null(prog.filter);
}
END_TEST

/* Unknown names and names of other architectures (libseccomp gives those
 * negative pseudo-numbers) are errors that name the call. */
static const struct {
	const char *name;
	int nr; /* -1: must fail */
} names[] = {
    {"read", 0},
    {"execve", 59},
    {"clone", 56},
    {"ioctl", 16},
    {"kz_no_such_call", -1},
    {"socketcall", -1},
    {"recv", -1},
    {"chown32", -1},
    {"", -1},
};

START_TEST(test_resolve)
{
	char why[256] = "";
	int nr = -7, r;

	r = sbx_seccomp_resolve(names[_i].name, &nr, why, sizeof(why));
	if (names[_i].nr >= 0) {
		ck_assert_int_eq(r, 0);
		ck_assert_int_eq(nr, names[_i].nr);
	} else {
		ck_assert_int_eq(r, KZ_EUNAVAIL);
		ck_assert_int_eq(nr, -7);
		ck_assert_ptr_nonnull(strstr(why, "libseccomp"));
		ck_assert_ptr_nonnull(strstr(why, names[_i].name));
	}
}
END_TEST

static char *
listing(void)
{
	char why[256] = "", *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(fp);
	ck_assert_msg(sbx_seccomp_list(fp, why, sizeof(why)) == 0, "%s", why);
	ck_assert_int_eq(fclose(fp), 0);
	return buf;
}

static const char *const withheld[] = {
    "ptrace",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "bpf",
    "io_uring_setup",
    "keyctl",
    "perf_event_open",
    "userfaultfd",
    "personality",
    "open_by_handle_at",
    "kexec_load",
    "init_module",
    "clone3",
    NULL,
};

static bool
is_withheld(const char *name)
{
	for (int i = 0; withheld[i] != NULL; i++)
		if (strcmp(withheld[i], name) == 0)
			return true;
	return false;
}

/* Every line is "KIND NR NAME DETAIL", each number appears once, and the
 * withheld calls are refused, never allowed. */
START_TEST(test_list)
{
	static unsigned char seen[1024];
	char *buf = listing(), *line, *save = NULL;
	int nallow = 0, nrefuse = 0;

	for (line = strtok_r(buf, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char kind[8], name[32], detail[16];
		int nr;

		if (line[0] == '#')
			continue;
		ck_assert_msg(sscanf(line, "%7s %d %31s %15s", kind, &nr, name,
		                  detail) == 4,
		    "bad line: %s", line);
		ck_assert_msg(nr >= 0 && nr < 1024 && !seen[nr],
		    "number listed twice: %s", line);
		seen[nr] = 1;
		if (strcmp(kind, "allow") == 0 || strcmp(kind, "args") == 0) {
			ck_assert_msg(!is_withheld(name), "allowed: %s", line);
			nallow++;
		} else {
			ck_assert_str_eq(kind, "refuse");
			nrefuse++;
		}
	}
	ck_assert_int_gt(nallow, 200);
	ck_assert_int_gt(nrefuse, 50);
	free(buf);
	buf = listing();
	ck_assert_ptr_nonnull(strstr(buf, "\nallow    0 read "));
	ck_assert_ptr_nonnull(strstr(buf, "\nargs    16 ioctl "));
	ck_assert_ptr_nonnull(
	    strstr(buf, "\nrefuse 101 ptrace                   EPERM"));
	ck_assert_ptr_nonnull(
	    strstr(buf, "\nrefuse 435 clone3                   ENOSYS"));
	free(buf);
}
END_TEST

/* In a child with the filter loaded: each check's number is its exit
 * code when it fails. */
static int
filtered(void)
{
	struct termios tio;
	char c = 'x';
	int fd = open("/dev/null", O_RDONLY);
	int s[2];

	if (fd < 0 || getppid() <= 0)
		return 1;
	if (syscall(457, 0, 0, 0, 0) != -1 || errno != ENOSYS)
		return 2; /* statmount, newer than libseccomp 2.5.4 */
	if (ptrace(PTRACE_TRACEME, 0, 0, 0) != -1 || errno != EPERM)
		return 3;
	if (syscall(SYS_ioctl, fd, (1UL << 32) | TIOCSTI, &c) != -1 ||
	    errno != EPERM)
		return 4;
	if (ioctl(fd, TCGETS, &tio) != -1 || errno != ENOTTY)
		return 5;
	if (socket(AF_NETLINK, SOCK_DGRAM, 0) != -1 || errno != EAFNOSUPPORT)
		return 6;
	if (socket(AF_INET, SOCK_RAW, 1) != -1 || errno != EPERM)
		return 7;
	if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
		return 8;
	if (syscall(SYS_unshare, 0x10000000) != -1 || errno != EPERM)
		return 9;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, s) != 0)
		return 10;
	if (syscall(SYS_sync) != -1 || errno != ENOSYS)
		return 11;
	return 0;
}

/* socket() under each filter: 0 where it must succeed, else the errno.
 * The variant allows NETLINK_ROUTE raw and datagram sockets and nothing
 * else the base filter refuses. */
#define HI (1UL << 32) /* above the int the kernel reads */
static const struct {
	unsigned long fam, type, proto;
	int base, rtc;
} sockets[] = {
    {AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, EAFNOSUPPORT, 0},
    {AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE, EAFNOSUPPORT, 0},
    {AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE,
        EAFNOSUPPORT, 0},
    {AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_ROUTE, EAFNOSUPPORT, 0},
    {AF_NETLINK, SOCK_RAW, HI | NETLINK_ROUTE, EAFNOSUPPORT, 0},
    /* Every other netlink protocol, also with high bits over it. */
    {AF_NETLINK, SOCK_RAW, NETLINK_GENERIC, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_RAW, NETLINK_AUDIT, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_RAW, NETLINK_XFRM, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT, EAFNOSUPPORT,
        EAFNOSUPPORT},
    {AF_NETLINK, SOCK_RAW, HI | NETLINK_AUDIT, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_RAW, 0x80000000UL, EAFNOSUPPORT, EAFNOSUPPORT},
    /* Other types of the family, NETLINK_ROUTE or not. */
    {AF_NETLINK, SOCK_STREAM, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_SEQPACKET, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_PACKET, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, SOCK_RDM, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, 0, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, 7, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_NETLINK, 11, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    {HI | AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, EAFNOSUPPORT, EAFNOSUPPORT},
    /* The families the base filter refuses stay refused. */
    {AF_PACKET, SOCK_RAW, 0, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_PACKET, SOCK_DGRAM, 0, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_KEY, SOCK_RAW, 2, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_VSOCK, SOCK_STREAM, 0, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_ALG, SOCK_SEQPACKET, 0, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_BLUETOOTH, SOCK_RAW, 0, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_APPLETALK, SOCK_DGRAM, 0, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_ROSE, SOCK_DGRAM, 0, EAFNOSUPPORT, EAFNOSUPPORT},
    {AF_INET, SOCK_RAW, 1, EPERM, EPERM},
    {AF_INET6, SOCK_PACKET, 0, EPERM, EPERM},
    {AF_INET, SOCK_DGRAM, 0, 0, 0},
    {AF_UNIX, SOCK_STREAM, 0, 0, 0},
};

/* In a child with prog loaded: the first row that answered otherwise,
 * plus one (0: all as expected). */
static int
sockets_filtered(bool rtc)
{
	for (size_t i = 0; i < sizeof(sockets) / sizeof(sockets[0]); i++) {
		int want = rtc ? sockets[i].rtc : sockets[i].base;
		long fd = syscall(SYS_socket, sockets[i].fam, sockets[i].type,
		    sockets[i].proto);

		if (want == 0 ? fd < 0 : fd != -1 || errno != want)
			return (int)i + 1;
		if (fd >= 0)
			close((int)fd);
	}
	return 0;
}

/* The variant answers every other check as the base filter does, and
 * glibc's interface listing (netlink) works under it only. */
static int
variant_filtered(void)
{
	struct ifaddrs *ifa = NULL;
	int r;

	if ((r = sockets_filtered(true)) != 0)
		return r;
	if (getifaddrs(&ifa) != 0)
		return 99;
	freeifaddrs(ifa);
	r = filtered();
	return r == 6 ? 0 : r != 0 ? 100 + r : 98; /* 6: netlink, allowed */
}

static void
in_child(const struct sock_fprog *prog, int (*f)(void), const char *what)
{
	int st;
	pid_t p;

	if ((p = fork()) == 0)
		_exit(sbx_seccomp_load(prog) != 0 ? 200 : f());
	ck_assert_int_gt(p, 0);
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	ck_assert_msg(WIFEXITED(st), "%s: the child was killed (%d)", what, st);
	ck_assert_msg(WEXITSTATUS(st) == 0, "%s: check %d failed", what,
	    WEXITSTATUS(st));
}

static int
base_filtered(void)
{
	struct ifaddrs *ifa = NULL;
	int r;

	if ((r = sockets_filtered(false)) != 0)
		return r;
	if (getifaddrs(&ifa) == 0) {
		freeifaddrs(ifa);
		return 99;
	}
	return 0;
}

START_TEST(test_variant)
{
	struct sock_fprog prog, rtc;
	char why[256] = "";

	ck_assert_msg(sbx_seccomp_build(&prog, false, why, sizeof(why)) == 0,
	    "%s", why);
	ck_assert_msg(sbx_seccomp_build(&rtc, true, why, sizeof(why)) == 0,
	    "%s", why);
	in_child(&prog, base_filtered, "base");
	in_child(&rtc, variant_filtered, "variant");
	sbx_seccomp_free(&prog);
	sbx_seccomp_free(&rtc);
}
END_TEST

START_TEST(test_loaded)
{
	struct sock_fprog prog;
	char why[256] = "";
	int st;
	pid_t p;

	ck_assert_msg(sbx_seccomp_build(&prog, false, why, sizeof(why)) == 0,
	    "%s", why);
	if ((p = fork()) == 0)
		_exit(sbx_seccomp_load(&prog) != 0 ? 100 : filtered());
	ck_assert_int_gt(p, 0);
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	ck_assert_msg(WIFEXITED(st), "the child was killed (%d)", st);
	ck_assert_msg(WEXITSTATUS(st) == 0, "check %d failed", WEXITSTATUS(st));
	sbx_seccomp_free(&prog);
}
END_TEST

/* What every worker loads is the tables compiled, instruction for
 * instruction: an embedded program that drifted from seccomp.c (a stale
 * build, a hand edit) fails here. */
START_TEST(test_embedded)
{
	struct sock_fprog c, e;
	char why[256] = "";

	ck_assert_msg(sbx_seccomp_compile(&c, _i == 1, why, sizeof(why)) == 0,
	    "%s", why);
	ck_assert_msg(sbx_seccomp_build(&e, _i == 1, why, sizeof(why)) == 0,
	    "%s", why);
	ck_assert_uint_gt(e.len, 100);
	ck_assert_uint_eq(e.len, c.len);
	ck_assert_msg(memcmp(e.filter, c.filter, e.len * sizeof(*e.filter)) ==
	        0,
	    "the embedded program (variant %d) differs from the tables", _i);
	sbx_seccomp_free(&c);
	sbx_seccomp_free(&e);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-seccomp");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_build);
	tcase_add_loop_test(tc, test_resolve, 0,
	    sizeof(names) / sizeof(names[0]));
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_loaded);
	tcase_add_test(tc, test_variant);
	tcase_add_loop_test(tc, test_embedded, 0, 2);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
