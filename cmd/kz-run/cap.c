/*
 * The capability a run names, checked before anything is admitted or
 * leased (kz-project checks it again at admission).  The set is closed
 * (lib/kz_cap.h): a name outside it allows nothing, and a run that asks
 * for more than its capability allows (an egress grant, linked outputs)
 * is refused whole rather than run with less than it asked for.
 */
#include <stdio.h>

#include "kz_cap.h"
#include "run.h"
#include "banned.h"

int
run_cap_check(const struct run_opts *o, char *why, size_t wlen)
{
	const char *cap = o->cap != NULL ? o->cap : "code.run";

	if (kz_cap_find(cap) == NULL) {
		kz_why(why, wlen,
		    "capability '%s' is not one of the run capabilities", cap);
		return 1;
	}
	if (o->egress && !kz_cap_allows(cap, KZ_CAP_EGRESS)) {
		kz_why(why, wlen, "capability %s does not allow egress", cap);
		return 1;
	}
	if (o->noutputs > 0 && !kz_cap_allows(cap, KZ_CAP_OUTPUTS)) {
		kz_why(why, wlen,
		    "capability %s does not allow linking outputs", cap);
		return 1;
	}
	return 0;
}
