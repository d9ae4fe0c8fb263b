/*
 * What astore.c (the asynchronous client's connections) and astore_call.c
 * (the calls made on them) share and no other module needs.
 */
#ifndef KZ_ASTORE_INT_H
#define KZ_ASTORE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <async.h>

#include "kz_store.h"

struct acall {
	struct kz_astore *a;
	struct event *timer;
	kz_astore_cb cb;
	void *arg;
	struct kz_script *sc;
	int nkeys, argc;
	char **argv; /* a copy, for the EVAL after NOSCRIPT */
	int refs; /* hiredis callbacks still to come */
	bool done; /* cb has been called */
	bool ask; /* sent to the node an ASK named (ask_to) */
	int hops, waits, slot;
	int64_t t0;
	struct kz_store_addr ask_to;
	struct event *wait; /* the backoff while the slot is half-moved */
	TAILQ_ENTRY(acall) link;
};

struct kz_astore {
	struct event_base *base;
	struct kz_astore_conf c;
	char *sock;
	char prefix[KZ_STORE_DEP_MAX + 8];
	struct kz_store_addr addr;
	redisAsyncContext *ac;
	redisAsyncContext *side; /* to side_to, the node an ASK named */
	struct kz_store_addr side_to;
	struct kz_sentq *sq; /* a Sentinel question still out */
	struct kz_store_addr moved; /* where MOVED sent us, if has_moved */
	bool has_moved;
	bool connected; /* the handshake is done: ROLE said master */
	struct event *retry, *hs;
	char why[128]; /* why the last attempt failed */
	TAILQ_HEAD(, acall) calls;
};

/* Answers the caller once; the call lives on until hiredis lets go. */
void kz_acall_finish(struct acall *c, int err, redisReply *r, const char *why);
/* Every call still out on the connection to the node an ASK named is
 * answered KZ_EUNAVAIL. */
void kz_astore_side_drop(struct kz_astore *a);
/* A connection to the node an ASK named (to), kept while ASKs name it;
 * NULL when it cannot be made. */
redisAsyncContext *kz_astore_side_get(struct kz_astore *a,
    const struct kz_store_addr *to);

#endif
