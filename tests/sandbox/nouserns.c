/*
 * nouserns CMD ARG...: runs CMD with user namespaces refused the way a
 * kernel with user.max_user_namespaces = 0 refuses them (clone and unshare
 * with CLONE_NEWUSER fail with ENOSPC), without changing the host's
 * setting.  For the fail-closed test of SANDBOX_USERNS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <seccomp.h>

int
main(int argc, char **argv)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;

	if (argc < 2 || ctx == NULL)
		return 2;
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSPC), SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSPC), SCMP_SYS(unshare), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	/* clone3 hides its flags in memory: refuse it, glibc falls back. */
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r != 0 || seccomp_load(ctx) != 0) {
		fprintf(stderr, "nouserns: cannot load the filter\n");
		return 2;
	}
	execvp(argv[1], argv + 1);
	perror("nouserns: exec");
	return 127;
}
