/*
 * Privilege drop for the code: lock the securebits so uid 0 can never mean
 * capabilities again, switch to the unprivileged uid/gid with no
 * supplementary groups, and empty every capability set (effective,
 * permitted, inheritable, bounding, ambient) with libcap-ng; then check the
 * result instead of trusting it.
 */
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <cap-ng.h>

#include "sbx.h"
#include "banned.h"

static bool
all_clear(void)
{
	if (capng_get_caps_process() != 0 ||
	    capng_have_capabilities(CAPNG_SELECT_CAPS) != CAPNG_NONE)
		return false;
	for (int c = 0; c <= CAP_LAST_CAP; c++) {
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) > 0)
			return false;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) > 0)
			return false;
	}
	return true;
}

int
sbx_caps_drop(uid_t uid, gid_t gid, char *why, size_t wlen)
{
	uid_t ru, eu, su;

	if (uid == 0 || gid == 0) {
		kz_why(why, wlen, "capabilities: refusing uid or gid 0");
		return KZ_EDENIED;
	}
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
	    SECBIT_NO_CAP_AMBIENT_RAISE |
	    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0, 0, 0) < 0) {
		kz_why(why, wlen, "capabilities: securebits: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	capng_clear(CAPNG_SELECT_ALL);
	if (capng_change_id((int)uid, (int)gid, CAPNG_DROP_SUPP_GRP |
	    CAPNG_CLEAR_BOUNDING | CAPNG_CLEAR_AMBIENT) != 0) {
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
