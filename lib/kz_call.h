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

/* kz_frame_call in its two halves, for a caller with other work to do
 * while the daemon answers: kz_frame_send connects and sends req (*fd
 * is then the caller's until kz_frame_recv, which reads the reply and
 * closes it, whatever it returns). */
KZ_WUR int kz_frame_send(const char *sockpath, const cJSON *req, int timeout_ms,
    int *fd, char *why, size_t wlen);
KZ_WUR int kz_frame_recv(int fd, int timeout_ms, cJSON **reply, char *why,
    size_t wlen);

#endif
