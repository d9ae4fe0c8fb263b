/* kz-msg's exchange with a socket (call.c). */
#ifndef KZ_MSG_H
#define KZ_MSG_H

#include <stddef.h>
#include <cJSON.h>

#include "kz_err.h"

/* How long a status request waits for the first byte of its reply unless
 * -t was given: every daemon answers status from its own memory. */
#define MSG_STATUS_FIRST_MS 1000

/*
 * Judges the first n (<= 4 needed) bytes a peer sent back: 0 when they can
 * begin a kz frame of at most max bytes, else KZ_EPROTO with why saying
 * "does not speak kz frames (got '...')", the bytes shown printable.  With
 * eof, n bytes are all the peer sent.
 */
KZ_WUR int msg_sniff(const unsigned char *b, size_t n, size_t max, int eof,
    char *why, size_t wlen);

/*
 * One round trip: connect, send req, read one reply frame of at most max
 * bytes within timeout_ms; the first byte must come within first_ms
 * (<= timeout_ms).  KZ_EPROTO when the peer does not speak frames.
 */
KZ_WUR int msg_call(const char *path, const cJSON *req, size_t max,
    int timeout_ms, int first_ms, cJSON **reply, char *why, size_t wlen);

#endif
