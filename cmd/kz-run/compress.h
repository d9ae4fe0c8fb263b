/*
 * Tool-result compression: an optional step that may shorten the model's
 * projection of a run's stdout or stderr.  The compressor is an operator's
 * command (RUN_COMPRESS_CMD), run by "/bin/sh -c" inside a one-shot
 * kz-sandbox with no network, its input on stdin and its result on
 * stdout.  It changes nothing but the text it returns: the input is never
 * modified, written to disk or passed anywhere but the compressor's
 * stdin, and any failure leaves the caller with the original.
 */
#ifndef RUN_COMPRESS_H
#define RUN_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* How long one compression may take, start and teardown included. */
#define RUN_COMPRESS_TIMEOUT_MS 5000
/* Input beyond this is not offered to the compressor at all. */
#define RUN_COMPRESS_IN_MAX (1u << 20)

/*
 * 0 with *out (malloc'd, NUL-terminated, the caller frees it with free())
 * strictly shorter than the input and not empty; or a negative kz_err and
 * *out untouched, when compression is off (no compress_cmd), the input is
 * empty or too big, or the compressor failed, timed out, wrote nothing or
 * wrote at least as much as it read.  kz-sandbox is the one next to this
 * binary.
 */
KZ_WUR int run_compress(const struct run_conf *c, const char *in, size_t len,
    char **out, size_t *outlen);

/* The same with the kz-sandbox binary, the command and the time bound
 * named; exposed for the unit tests. */
KZ_WUR int run_compress_exec(const char *sandbox, const char *cmd,
    int64_t timeout_ms, const char *in, size_t len, char **out, size_t *outlen);

#endif
