/*
 * Privilege drop for the code: lock the securebits so uid 0 can never mean
 * capabilities again, switch to the unprivileged uid/gid with no
 * supplementary groups, and empty every capability set (effective,
 * permitted, inheritable, bounding, ambient) with libcap-ng; then check the
 * result with the kernel instead of trusting it: capget for the first
 * three, the CapBnd and CapAmb lines of /proc/self/status for the bounding
 * and ambient sets (one read instead of a prctl per capability and set, 82
 * system calls at about a microsecond each here).  The bounding and
 * ambient sets are emptied once in the agent (sbx_caps_bound), which every
 * run init and code process is cloned from and inherits them from:
 * libcap-ng reads /proc/<pid>/status several times to clear them, a
 * quarter of a millisecond here, while the check below is one read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <cap-ng.h>

#include "sbx.h"
#include "banned.h"

/* The value of a "Name:\t<hex>" line of a status text; false if absent. */
static bool
status_hex(const char *st, const char *name, uint64_t *v)
{
	size_t n = strlen(name);
	char *end;

	for (const char *p = st; p != NULL;
	     p = strchr(p, '\n'), p = p != NULL ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == ':') {
			*v = strtoull(p + n + 1, &end, 16);
			return end != p + n + 1 && *end == '\n';
		}
	return false;
}

/* Whether the kernel reports empty bounding and ambient sets. */
static bool
bound_clear(void)
{
	char st[4096];
	uint64_t bnd = ~0ull, amb = ~0ull;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return false;
	st[n] = '\0';
	return status_hex(st, "CapBnd", &bnd) &&
	    status_hex(st, "CapAmb", &amb) && bnd == 0 && amb == 0;
}

static bool
all_clear(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];

	memset(d, 0xff, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return false;
	return bound_clear();
}

int
sbx_caps_bound(char *why, size_t wlen)
{
	/* No capng_get_caps_process() first: capng_apply reads the sets it
	 * needs itself, and the check below reads what the kernel holds. */
	capng_clear(CAPNG_SELECT_BOUNDS | CAPNG_SELECT_AMBIENT);
	if (capng_apply(CAPNG_SELECT_BOUNDS | CAPNG_SELECT_AMBIENT) != 0 ||
	    !bound_clear()) {
		kz_why(why, wlen,
		    "capabilities: cannot empty the bounding and ambient sets");
		return KZ_EDENIED;
	}
	return 0;
}

int
sbx_caps_drop(uid_t uid, gid_t gid, bool userns, char *why, size_t wlen)
{
	uid_t ru, eu, su;

	if (uid == 0 || gid == 0) {
		kz_why(why, wlen, "capabilities: refusing uid or gid 0");
		return KZ_EDENIED;
	}
	if (prctl(PR_SET_SECUREBITS,
	        SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
	            SECBIT_NO_SETUID_FIXUP_LOCKED |
	            SECBIT_NO_CAP_AMBIENT_RAISE |
	            SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	        0, 0, 0) < 0) {
		kz_why(why, wlen, "capabilities: securebits: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	/* Entering a user namespace refills the bounding set (inside it):
	 * empty it again, with the calls libcap-ng would make, minus its
	 * /proc reads. */
	for (int c = 0; userns && c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
			kz_why(why, wlen, "capabilities: bounding set: %s",
			    strerror(errno));
			return KZ_ESYS;
		}
	/* The state may hold the init's pid (sbx_caps_bound ran there, in
	 * the same memory): capset must name this process. */
	capng_setpid((int)getpid());
	capng_clear(CAPNG_SELECT_ALL);
	/* In a user namespace setgroups is denied; the groups were emptied
	 * before it was made, and the check below holds either way. */
	if (capng_change_id((int)uid, (int)gid,
	        userns ? 0 : CAPNG_DROP_SUPP_GRP) != 0) {
		kz_why(why, wlen, "capabilities: change id: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	if (getresuid(&ru, &eu, &su) < 0 || ru != uid || eu != uid ||
	    su != uid || getegid() != gid || getgid() != gid ||
	    getgroups(0, NULL) != 0 || !all_clear()) {
		kz_why(why, wlen, "capabilities: the drop did not hold");
		return KZ_EDENIED;
	}
	return 0;
}
