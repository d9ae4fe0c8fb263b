/*
 * Blocking I/O with a deadline on a possibly non-blocking descriptor, and
 * the monotonic clock the deadlines are measured on.
 */
#ifndef KZ_IO_H
#define KZ_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kz_err.h"

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t kz_now_ms(void);

/*
 * Reads exactly len bytes, or writes them, before deadline_ms (a
 * kz_now_ms() instant; < 0 waits forever).  kz_read_full returns KZ_EEOF
 * when the peer closed before the first byte and KZ_EFRAME_TRUNC when it
 * closed midway; kz_write_full returns KZ_EEOF when the peer is gone.
 * Both return KZ_ETIMEDOUT at the deadline.
 */
KZ_WUR int kz_read_full(int fd, void *buf, size_t len, int64_t deadline_ms);
KZ_WUR int kz_write_full(int fd, const void *buf, size_t len,
    int64_t deadline_ms);

/*
 * Reads what one read() of path gives, at most len - 1 bytes, into buf and
 * NUL-terminates it: for /proc files, which are made at read time, and
 * small state files.  A symlink is not followed.  Returns the count (0 for
 * an empty file), or -1 when the file cannot be opened or read.
 */
ssize_t kz_read_small(const char *path, char *buf, size_t len);

#endif
