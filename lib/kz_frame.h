/*
 * The wire frame: a 4-byte big-endian length N, then N bytes of one UTF-8
 * JSON object.  N = 0 and N > max are refused before anything is allocated.
 */
#ifndef KZ_FRAME_H
#define KZ_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "kz_err.h"

#define KZ_FRAME_HDR 4
#define KZ_FRAME_MAX_DEFAULT (1024u * 1024u)
#define KZ_FRAME_MAX_LIMIT (64u * 1024u * 1024u)

/* Checks a header: KZ_EFRAME_EMPTY for 0, KZ_ETOOBIG over max. */
KZ_WUR int kz_frame_hdr(const unsigned char hdr[KZ_FRAME_HDR], size_t max,
    uint32_t *len);
/* Decodes a whole payload into an object (see kz_json_parse_object). */
KZ_WUR int kz_frame_decode(const char *payload, size_t len, cJSON **out,
    char *why, size_t wlen);
/* Encodes obj as header+payload into a malloc'd buffer. */
KZ_WUR int kz_frame_encode(const cJSON *obj, size_t max, char **out,
    size_t *outlen);
/* The same into buf without allocating; KZ_ENOSPC when it does not fit in
 * cap (then use kz_frame_encode), KZ_ETOOBIG over max. */
KZ_WUR int kz_frame_encode_to(const cJSON *obj, size_t max, char *buf,
    size_t cap, size_t *outlen);

/*
 * Blocking I/O on a (possibly non-blocking) descriptor.  timeout_ms bounds
 * the whole frame, not each read; < 0 waits forever.  kz_frame_read returns
 * KZ_EEOF when the peer closed before the first byte, KZ_EFRAME_TRUNC when
 * it closed mid-frame.
 */
KZ_WUR int kz_frame_read(int fd, size_t max, int timeout_ms, cJSON **out,
    char *why, size_t wlen);
KZ_WUR int kz_frame_write(int fd, const cJSON *obj, size_t max, int timeout_ms);
#endif
