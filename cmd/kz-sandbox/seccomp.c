/*
 * The seccomp policy: the tables of seccomp_table.c, compiled with
 * libseccomp into a BPF program at build time (gen/filter_gen.c; filter.c
 * embeds the result, so no start pays libseccomp's milliseconds of
 * compiling, and a run only pays for one prctl()), listed and loaded.  It
 * is an allowlist: the groups of the tables name what a tenant's programs
 * may call, and any other call fails with ENOSYS, which the C library takes
 * for a kernel without it and falls back from where it can (as
 * containerd's default profile does).  That includes every call newer
 * than the installed libseccomp's table, which the filter cannot even
 * name.  The calls withheld on purpose fail with EPERM instead, as they
 * did when the filter was a deny list, so a program learns they exist and
 * are refused.  A listed name that
 * libseccomp cannot resolve on this architecture fails the build of the
 * filter, naming the call; it is never skipped.  So does a call named
 * twice.  Only the native x86-64 ABI is in the filter: i386 (int 0x80)
 * and x32 calls hit the bad-architecture action, which kills the
 * process.  kz-sandbox(8) says why each group is there; "kz-sandbox
 * seccomp" prints the list.  One variant exists, built from the same
 * tables with one more socket rule: the Chromium of a browser session
 * with WebRTC may open NETLINK_ROUTE sockets (netlink_rules).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "sbx.h"
#include "seccomp_table.h"
#include "banned.h"

static const unsigned long ns_flags[] = {CLONE_NEWNS, CLONE_NEWUTS,
    CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
    0x00000080 /* CLONE_NEWTIME */};

int
sbx_seccomp_resolve(const char *name, int *nr, char *why, size_t wlen)
{
	const struct scmp_version *v = seccomp_version();
	int n = seccomp_syscall_resolve_name(name);

	/* Names of other architectures resolve to negative pseudo-numbers. */
	if (n < 0) {
		kz_why(why, wlen,
		    "seccomp: libseccomp %u.%u.%u has no system "
		    "call %s on this architecture",
		    v->major, v->minor, v->micro, name);
		return KZ_EUNAVAIL;
	}
	*nr = n;
	return 0;
}

/* Numbers of the native calls the tables can name (x86-64 has fewer than
 * 512; the x32 ones are a different ABI). */
#define NR_MAX 1024

/* Resolves name and claims its number: libseccomp takes a second rule
 * for the same call without a word, so a call in two places of the
 * tables (two groups, allowed and withheld, a group and an argument
 * rule) fails the build instead of leaving the outcome to it. */
static int
claim(unsigned char *seen, const char *name, int *nr, char *why, size_t wlen)
{
	int r;

	if ((r = sbx_seccomp_resolve(name, nr, why, wlen)) != 0)
		return r;
	if (*nr >= NR_MAX || seen[*nr]) {
		kz_why(why, wlen, "seccomp: %s is listed twice", name);
		return KZ_EINTERNAL;
	}
	seen[*nr] = 1;
	return 0;
}

/* One unconditional rule for each call of each group. */
static int
add_groups(scmp_filter_ctx ctx, uint32_t act, const struct sbx_group *g,
    unsigned char *seen, char *why, size_t wlen)
{
	const char *const *c;
	int nr, r;

	for (; g->name != NULL; g++)
		for (c = g->calls; *c != NULL; c++) {
			if ((r = claim(seen, *c, &nr, why, wlen)) != 0)
				return r;
			if ((r = seccomp_rule_add_exact(ctx, act, nr, 0)) == 0)
				continue;
			kz_why(why, wlen, "seccomp: rule for %s: %s", *c,
			    strerror(-r));
			return KZ_EUNAVAIL;
		}
	return 0;
}

/*
 * The argument rules below never overlap where their actions differ:
 * libseccomp does not say which of two matching rules with different
 * actions wins, and an unconditional rule would drop a call's
 * conditional ones.  Each call's rules therefore split its arguments
 * into disjoint sets, one action each, and what no rule covers falls to
 * the default.  Comparisons of an int argument look at its low 32 bits,
 * as the kernel does.
 */
#define LO32 0xffffffffu
#define RULE(ctx, act, call, cmp)                                              \
	seccomp_rule_add_exact(ctx, act, SCMP_SYS(call), 1, cmp)

/* clone without a namespace flag.  clone3 is left to the default: it
 * takes its flags in memory, where a filter cannot look, and glibc falls
 * back from it to clone on ENOSYS (and libseccomp refuses a rule whose
 * action is the default's). */
static int
clone_rules(scmp_filter_ctx ctx)
{
	unsigned long all = 0;
	int r = 0;

	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		all |= ns_flags[i];
		r |= RULE(ctx, SCMP_ACT_ERRNO(EPERM), clone,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	}
	r |= RULE(ctx, SCMP_ACT_ALLOW, clone,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, all, 0));
	return r;
}

/*
 * Terminal input injection and console control: ioctl is refused for
 * TIOCSTI and TIOCLINUX and allowed for every other command.  "Neither
 * a nor b" takes two comparisons of one argument, which a libseccomp
 * rule cannot hold, so the allowed commands are spelled as rules that
 * cannot meet the two refusals: one for each bit where a and b agree
 * (a command with the other value there is neither), and one for each
 * command that agrees with both there and has neither's value in the
 * bits where they differ.
 */
static int
ioctl_rules(scmp_filter_ctx ctx)
{
	const uint32_t a = TIOCSTI, b = TIOCLINUX;
	const uint32_t diff = a ^ b, same = ~diff;
	uint32_t v = diff;
	int r = 0;

	r |= RULE(ctx, SCMP_ACT_ERRNO(EPERM), ioctl,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, LO32, a));
	r |= RULE(ctx, SCMP_ACT_ERRNO(EPERM), ioctl,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, LO32, b));
	for (int i = 0; i < 32; i++) {
		uint32_t bit = 1u << i;

		if ((same & bit) != 0)
			r |= RULE(ctx, SCMP_ACT_ALLOW, ioctl,
			    SCMP_A1(SCMP_CMP_MASKED_EQ, bit, ~a & bit));
	}
	/* Every subset of the differing bits, diff itself down to 0. */
	for (;;) {
		if (v != (a & diff) && v != (b & diff))
			r |= RULE(ctx, SCMP_ACT_ALLOW, ioctl,
			    SCMP_A1(SCMP_CMP_MASKED_EQ, LO32, (a & same) | v));
		if (v == 0)
			break;
		v = (v - 1) & diff;
	}
	return r;
}

/*
 * The browser variant's one addition: socket(AF_NETLINK, SOCK_RAW or
 * SOCK_DGRAM, NETLINK_ROUTE), with SOCK_NONBLOCK and SOCK_CLOEXEC as they
 * come, which Chromium needs to list its interfaces before WebRTC
 * gathers.  Every other netlink socket is refused as the base filter
 * refuses the family.  The allowed set is "type & 0xe is 2 (raw 3, dgram
 * 2) and the protocol's low 32 bits are 0"; its complement within the
 * family, spelled as rules that cannot meet it, is "bit 1 of the type
 * clear, or bit 2 or 3 set, or any bit of the protocol set".
 */
static int
netlink_rules(scmp_filter_ctx ctx)
{
	const uint32_t no = SCMP_ACT_ERRNO(EAFNOSUPPORT);
	const struct scmp_arg_cmp nl = SCMP_A0(SCMP_CMP_EQ, AF_NETLINK);
	int r = 0;

	_Static_assert(SOCK_RAW == 3 && SOCK_DGRAM == 2 && NETLINK_ROUTE == 0,
	    "the masks below spell raw or dgram and NETLINK_ROUTE");
	r |= seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
	    nl, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xe, 2),
	    SCMP_A2(SCMP_CMP_MASKED_EQ, LO32, NETLINK_ROUTE));
	r |= seccomp_rule_add_exact(ctx, no, SCMP_SYS(socket), 2, nl,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0x2, 0));
	r |= seccomp_rule_add_exact(ctx, no, SCMP_SYS(socket), 2, nl,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0x4, 0x4));
	r |= seccomp_rule_add_exact(ctx, no, SCMP_SYS(socket), 2, nl,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0x8, 0x8));
	for (int i = 0; i < 32; i++)
		r |= seccomp_rule_add_exact(ctx, no, SCMP_SYS(socket), 2, nl,
		    SCMP_A2(SCMP_CMP_MASKED_EQ, 1u << i, 1u << i));
	return r;
}

/*
 * Socket families AF_UNIX, AF_INET and AF_INET6 only: AF_VSOCK does not
 * respect network namespaces on these kernels, and AF_NETLINK and
 * AF_PACKET reach kernel and link surface.  Raw and packet sockets are
 * refused even in those families, and a type the kernel does not have
 * falls to the default.  A type's low four bits name it; SOCK_NONBLOCK
 * and SOCK_CLOEXEC sit above them.  With rtnl (the browser variant)
 * AF_NETLINK is split out of the refused families and netlink_rules
 * decide it.
 */
static int
socket_rules(scmp_filter_ctx ctx, bool rtnl)
{
	static const int fams[] = {AF_UNIX, AF_INET, AF_INET6};
	static const int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET,
	    SOCK_RDM, SOCK_DCCP};
	const uint32_t eafnosupport = SCMP_ACT_ERRNO(EAFNOSUPPORT);
	const int top = rtnl ? AF_NETLINK : AF_INET6;
	int r = 0;

	for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
		for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
			r |= seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW,
			    SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, fams[f]),
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, types[t]));
		r |= seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO(EPERM),
		    SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, fams[f]),
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
		r |= seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO(EPERM),
		    SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, fams[f]),
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_PACKET));
	}
	for (int fam = 0; fam < top; fam++)
		if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6)
			r |= RULE(ctx, eafnosupport, socket,
			    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam));
	r |= RULE(ctx, eafnosupport, socket, SCMP_A0(SCMP_CMP_GT, top));
	if (rtnl)
		r |= netlink_rules(ctx);
	r |= RULE(ctx, SCMP_ACT_ALLOW, socketpair,
	    SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	r |= RULE(ctx, eafnosupport, socketpair, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	return r;
}

static int
rules(scmp_filter_ctx ctx, bool rtnl, char *why, size_t wlen)
{
	unsigned char seen[NR_MAX] = {0};
	int nr, r;

	for (int i = 0; sbx_seccomp_arg_rules[i].name != NULL; i++)
		if ((r = claim(seen, sbx_seccomp_arg_rules[i].name, &nr, why,
		         wlen)) != 0)
			return r;
	if ((r = add_groups(ctx, SCMP_ACT_ALLOW, sbx_seccomp_allowed, seen, why,
	         wlen)) != 0 ||
	    (r = add_groups(ctx, SCMP_ACT_ERRNO(EPERM), sbx_seccomp_withheld,
	         seen, why, wlen)) != 0)
		return r;
	if (clone_rules(ctx) != 0 || ioctl_rules(ctx) != 0 ||
	    socket_rules(ctx, rtnl) != 0) {
		kz_why(why, wlen, "seccomp: argument rules");
		return KZ_EUNAVAIL;
	}
	return 0;
}

static int export(scmp_filter_ctx ctx, struct sock_fprog *out, char *why,
    size_t wlen)
{
	struct stat st;
	int fd, r = KZ_ESYS;
	void *buf = NULL;

	if ((fd = memfd_create("kz-seccomp", MFD_CLOEXEC)) < 0)
		return KZ_ESYS;
	if (seccomp_export_bpf(ctx, fd) != 0 || fstat(fd, &st) < 0 ||
	    st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
	    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS ||
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
sbx_seccomp_compile(struct sock_fprog *out, bool rtnl, char *why, size_t wlen)
{
	scmp_filter_ctx ctx;
	int r = KZ_EUNAVAIL;

	memset(out, 0, sizeof(*out));
	if ((ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS))) == NULL) {
		kz_why(why, wlen, "seccomp: init");
		return KZ_ENOMEM;
	}
	/* Only the native ABI: foreign architectures are killed, and no
	 * second architecture is ever added.  A binary tree of system call
	 * numbers keeps the list's cost logarithmic where the kernel's
	 * cache of always-allowed calls does not apply. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	        SCMP_ACT_KILL_PROCESS) != 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) != 0 ||
	    seccomp_arch_exist(ctx, SCMP_ARCH_NATIVE) != 0 ||
	    seccomp_arch_exist(ctx, SCMP_ARCH_X86) != -EEXIST ||
	    seccomp_arch_exist(ctx, SCMP_ARCH_X32) != -EEXIST) {
		kz_why(why, wlen, "seccomp: architecture setup");
		goto out;
	}
	if ((r = rules(ctx, rtnl, why, wlen)) != 0 ||
	    (r = export(ctx, out, why, wlen)) != 0)
		goto out;
	r = 0;
out:
	seccomp_release(ctx);
	return r;
}

static int
list_groups(FILE *fp, const char *kind, const char *errname,
    const struct sbx_group *g, char *why, size_t wlen)
{
	int nr, r;

	for (; g->name != NULL; g++)
		for (const char *const *c = g->calls; *c != NULL; c++) {
			if ((r = sbx_seccomp_resolve(*c, &nr, why, wlen)) != 0)
				return r;
			fprintf(fp, "%-6s %3d %-24s %s%s\n", kind, nr, *c,
			    errname, g->name);
		}
	return 0;
}

int
sbx_seccomp_list(void *out, char *why, size_t wlen)
{
	FILE *fp = out;
	int nr, r;

	fprintf(fp,
	    "# default ENOSYS: every call not listed here, and every "
	    "call newer than\n# libseccomp's table; x86-64 native ABI only "
	    "(i386 and x32 kill)\n");
	if ((r = list_groups(fp, "allow", "", sbx_seccomp_allowed, why,
	         wlen)) != 0)
		return r;
	for (int i = 0; sbx_seccomp_arg_rules[i].name != NULL; i++) {
		if ((r = sbx_seccomp_resolve(sbx_seccomp_arg_rules[i].name, &nr,
		         why, wlen)) != 0)
			return r;
		fprintf(fp, "%-6s %3d %-24s %s\n",
		    sbx_seccomp_arg_rules[i].kind, nr,
		    sbx_seccomp_arg_rules[i].name,
		    sbx_seccomp_arg_rules[i].rule);
	}
	return list_groups(fp, "refuse", "EPERM ", sbx_seccomp_withheld, why,
	    wlen);
}

void
sbx_seccomp_free(struct sock_fprog *prog)
{
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}
