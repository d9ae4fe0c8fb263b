/*
 * The reasons a request is refused, from the one table in egress.h.
 */
#include "egress.h"
#include "banned.h"

static const struct {
	const char *str;
	int status;
} reasons[EG_R_COUNT_] = {[EG_R_NONE] = {NULL, 200},
#define EG_R_ROW(name, s, st) [EG_R_##name] = {s, st},
    EG_REASONS(EG_R_ROW)
#undef EG_R_ROW
};

const char *
eg_reason_str(enum eg_reason r)
{
	/* Out of the table is a bug: it is told as one, never as allowed. */
	return (unsigned)r < EG_R_COUNT_ ? reasons[r].str : "internal";
}

int
eg_reason_status(enum eg_reason r)
{
	return (unsigned)r < EG_R_COUNT_ ? reasons[r].status : 400;
}
