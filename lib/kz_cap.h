/*
 * Run capabilities: the closed set a run may name.  Each states what it
 * allows beyond running member code in a leased sandbox.  A name outside
 * the set is unknown and allows nothing: kz-project refuses it at
 * admission and kz-run before dispatch, and both audit the refusal as an
 * isolation denial.  Documented in kz-run(1) and kz-protocol(7).
 */
#ifndef KZ_CAP_H
#define KZ_CAP_H

#include <stdbool.h>

/* What a capability allows besides running code. */
#define KZ_CAP_EGRESS 0x1u /* an egress grant may be issued to the run */
#define KZ_CAP_OUTPUTS 0x2u /* declared outputs may be linked to the room */

/* name, the string a run names, what it allows, and in a few words why. */
#define KZ_CAPS(X)                                                             \
	X(CODE_RUN, "code.run", KZ_CAP_OUTPUTS,                                \
	    "run code; declared outputs may be linked; no egress")             \
	X(CODE_RUN_EGRESS, "code.run.egress", KZ_CAP_OUTPUTS | KZ_CAP_EGRESS,  \
	    "run code with the egress proxy; declared outputs may be linked")  \
	X(CODE_RUN_PRIVATE, "code.run.private", 0,                             \
	    "run code privately: nothing is linked to the room, no egress")

struct kz_cap {
	const char *name;
	unsigned allows; /* KZ_CAP_* */
	const char *what;
};

/* The capability called name, or NULL when name is not in the set. */
const struct kz_cap *kz_cap_find(const char *name);
/* Whether the capability called name exists and allows every bit of
 * want; an unknown name allows nothing. */
bool kz_cap_allows(const char *name, unsigned want);
/* The set, terminated by {NULL}: for --help and the man pages' tests. */
extern const struct kz_cap kz_caps[];

#endif
