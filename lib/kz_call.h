/*
 * The client side of the framed protocol: one request, one reply.
 */
#ifndef KZ_CALL_H
#define KZ_CALL_H

#include <cJSON.h>

#include "kz_err.h"

/* One round trip: connect to a Unix socket, send req, read the reply.
 * timeout_ms bounds the connect and each frame. */
KZ_WUR int kz_frame_call(const char *sockpath, const cJSON *req, int timeout_ms,
    cJSON **reply, char *why, size_t wlen);

#endif
