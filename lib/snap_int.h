/*
 * What snap.c (the layout, one snapshot's offer, check, commit and drop,
 * and the directory's lock) and snap_space.c (the scan of the directory,
 * the ledger, eviction and expiry) share and no other module needs.
 */
#ifndef KZ_SNAP_INT_H
#define KZ_SNAP_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kz_snap.h"

/* An ACTOR or a file name in it is looked at only when shorter. */
#define NAME_MAX_ 96

/* The wall clock, and a file's mtime, in ms since the epoch. */
int64_t kz_snap_wall_ms(void);
int64_t kz_snap_mtime_ms(const struct stat *st);
/* Whether s is suf with something before it. */
int kz_snap_ends_with(const char *s, const char *suf);
/* DIR opened and flocked exclusively, or -1. */
int kz_snap_lock_dir(const char *base);
/* Under the lock on bfd: makes room for a commit (snap_space.c). */
int kz_snap_make_room(int bfd, const char *actor, const char *self,
    uint64_t need, const struct kz_snap_bounds *b, uint64_t *total,
    int *evicted, char *why, size_t wlen);
/* Under the lock on bfd: the ledger DIR/.usage replaced (snap_space.c). */
void kz_snap_ledger_write(int bfd, uint64_t total);

#endif
