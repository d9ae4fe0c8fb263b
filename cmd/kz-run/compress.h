/* Tool-result compression of the model's projection (kz-run(1)). */
#ifndef RUN_COMPRESS_H
#define RUN_COMPRESS_H

#include <stddef.h>

#include "run.h"

/* 0 with a malloc'd shorter text in *out (the caller frees it), or
 * non-zero: the caller keeps the original. */
int run_compress(const struct run_conf *c, const char *in, size_t len,
    char **out, size_t *outlen);

#endif
