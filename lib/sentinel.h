/*
 * The asynchronous Sentinel question of lib/astore.c (lib/sentinel.c).
 * fn is called exactly once, from the event loop or before
 * kz_sentq_start returns: with the primary's address, or NULL when no
 * sentinel named one.  fn may free q; nothing touches q after fn.
 */
#ifndef KZ_SENTINEL_H
#define KZ_SENTINEL_H

#include "kz_store.h"

struct kz_sentq;
struct event_base;
typedef void (*kz_sentq_fn)(const struct kz_store_hostport *hp, void *arg);

KZ_WUR int kz_sentq_start(struct event_base *base,
    const struct kz_store_addr *a, int timeout_ms, kz_sentq_fn fn, void *arg,
    struct kz_sentq **out);
/* Cancels a question still out (fn is not called) and frees it. */
void kz_sentq_free(struct kz_sentq *q);

#endif
