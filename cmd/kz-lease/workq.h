/*
 * A few threads for blocking work, completed on the event loop: an item
 * is pushed on the loop, run on a thread, and handed back to the loop
 * through an eventfd.  The resets (reset.c) and the chores (chores.c) each
 * run on one.
 */
#ifndef LEASE_WORKQ_H
#define LEASE_WORKQ_H

#include <stdbool.h>
#include <sys/queue.h>
#include <event2/event.h>

#include "kz_err.h"

#define WORKQ_THREADS_MAX 64

/* The first member of every item a workq carries. */
struct workq_item {
	TAILQ_ENTRY(workq_item) link;
};

struct workq_conf {
	int nthreads; /* 1 to WORKQ_THREADS_MAX */
	/* On a thread: the blocking part.  It may touch only its item and
	 * what ctx holds that never changes. */
	void (*run)(void *ctx, struct workq_item *it);
	/* On the loop, after run: the item is the caller's again. */
	void (*done)(void *ctx, struct workq_item *it);
	/* Frees an item still queued when the workq is freed. */
	void (*drop)(struct workq_item *it);
	void *ctx;
};

struct workq;

KZ_WUR int workq_new(struct event_base *base, const struct workq_conf *c,
    struct workq **out);
/* Queues it for a thread (loop thread only). */
void workq_push(struct workq *q, struct workq_item *it);
/*
 * Stops the threads, waiting up to wait_ms for those still running an
 * item; queued items are dropped.  False when one is still blocked after
 * the wait: q (and the ctx its threads use) then stays allocated for it,
 * as the process is about to exit.  NULL-safe.
 */
bool workq_free(struct workq *q, int wait_ms);

#endif
