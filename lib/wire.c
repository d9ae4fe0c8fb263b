#include <string.h>

#include "kz_err.h"
#include "kz_exit.h"
#include "kz_wire.h"
#include "banned.h"

#define KZ_WIRE_DEF_(name, code, exit) const char KZ_WE_##name[] = code;
KZ_WIRE_CODES(KZ_WIRE_DEF_)
#undef KZ_WIRE_DEF_

static const struct {
	const char *code;
	enum kz_exit exit;
} wire_exits[] = {
#define KZ_WIRE_ROW_(name, code, exit) {code, exit},
    KZ_WIRE_CODES(KZ_WIRE_ROW_)
#undef KZ_WIRE_ROW_
};

enum kz_exit
kz_exit_for_wire(const char *code)
{
	if (code == NULL)
		return KZ_EXIT_INTERNAL;
	for (size_t i = 0; i < sizeof(wire_exits) / sizeof(wire_exits[0]); i++)
		if (strcmp(code, wire_exits[i].code) == 0)
			return wire_exits[i].exit;
	return KZ_EXIT_REFUSED;
}

enum kz_exit
kz_exit_for_err(int err)
{
	switch (err) {
	case 0:
		return KZ_EXIT_OK;
	case KZ_EUNAVAIL:
	case KZ_ETIMEDOUT:
	case KZ_EEOF:
	case KZ_EPEER:
		return KZ_EXIT_UNAVAIL;
	case KZ_EDENIED:
	case KZ_ECRYPTO:
		return KZ_EXIT_REFUSED;
	case KZ_ENOMEM:
	case KZ_ESYS:
	case KZ_EINTERNAL:
	case KZ_ESTATE:
		return KZ_EXIT_INTERNAL;
	default:
		return KZ_EXIT_USAGE;
	}
}

const char *
kz_wire_code(int err)
{
	switch (err) {
	case KZ_ETOOBIG:
		return KZ_WE_FRAME_TOO_LARGE;
	case KZ_EPEER:
		return KZ_WE_UNAUTHORIZED_PEER;
	case KZ_ENOMEM:
	case KZ_EINTERNAL:
	case KZ_ESYS:
		return KZ_WE_INTERNAL;
	case KZ_EUNAVAIL:
		return KZ_WE_UNAVAILABLE;
	default:
		return KZ_WE_BAD_REQUEST;
	}
}
