/*
 * Wire error codes: the closed set a reply's "error" field carries
 * (kz-protocol(7)).  Each row: the name, the code on the wire, and the exit
 * status a client that gets it exits with.
 */
#ifndef KZ_WIRE_H
#define KZ_WIRE_H

#include "kz_exit.h"

#define KZ_WIRE_CODES(X)                                                       \
	X(BAD_REQUEST, "bad_request", KZ_EXIT_USAGE)                           \
	X(FRAME_TOO_LARGE, "frame_too_large", KZ_EXIT_USAGE)                   \
	X(UNAUTHORIZED_PEER, "unauthorized_peer", KZ_EXIT_REFUSED)             \
	X(OPERATOR_ONLY, "operator_only", KZ_EXIT_REFUSED)                     \
	X(ADMISSION_CLOSED, "admission_closed", KZ_EXIT_UNAVAIL)               \
	X(STORE_UNAVAILABLE, "store_unavailable", KZ_EXIT_UNAVAIL)             \
	X(NOT_OWNER, "not_owner", KZ_EXIT_REFUSED)                             \
	X(STALE_TOKEN, "stale_token", KZ_EXIT_REFUSED)                         \
	X(AUDIENCE_CHANGED, "resource_audience_changed", KZ_EXIT_REFUSED)      \
	X(MANIFEST_CHANGED, "manifest_changed", KZ_EXIT_REFUSED)               \
	X(ISOLATION_DENIED, "isolation_denied", KZ_EXIT_REFUSED)               \
	X(REFUSED, "refused", KZ_EXIT_REFUSED)                                 \
	X(BUSY, "busy", KZ_EXIT_REFUSED)                                       \
	X(UNAVAILABLE, "unavailable", KZ_EXIT_UNAVAIL)                         \
	X(INTERNAL, "internal", KZ_EXIT_INTERNAL)

/* KZ_WE_<NAME>: the code as a string, for kz_req_err() and comparisons. */
#define KZ_WIRE_DECL_(name, code, exit) extern const char KZ_WE_##name[];
KZ_WIRE_CODES(KZ_WIRE_DECL_)
#undef KZ_WIRE_DECL_

/* Maps a kz_err from request parsing to a wire code. */
const char *kz_wire_code(int err);

#endif
