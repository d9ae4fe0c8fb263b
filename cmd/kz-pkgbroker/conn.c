/*
 * The run each connection on the broker's socket is bound to.  A worker's
 * broker forward opens every connection with a bind request carrying its
 * run's token (serve.c); from then on the connection takes only tokens of
 * that run.  The binding lives exactly as long as its connection: it is
 * dropped by the connection's close callback, which this module owns and
 * passes on to whoever else asked for it (fetch.c, while a fetch streams
 * to the client).
 *
 * A binding is found by the connection's bufferevent, which evhttp makes
 * for each accepted connection through pb_conn_bev and frees with it: a
 * new connection that gets the address of a freed one's bufferevent drops
 * whatever binding was still filed under it, so no connection can ever
 * start out bound.  Every request looks its connection up, so the
 * bindings are a hash table on that pointer: a lookup costs the same with
 * one connection open or thousands.  (libevent 2.1 gives an
 * evhttp_connection no pointer of the caller's to keep the binding on.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include "serve.h"
#include "kz_log.h"
#include "banned.h"

/* Buckets of the table: it doubles while it holds more bindings than
 * buckets, up to this many; past it the chains grow (each connection
 * holds a descriptor, so they are bounded by RLIMIT_NOFILE anyway). */
#define BUCKETS_MIN 64
#define BUCKETS_MAX (1u << 20)

struct pb_conn {
	const struct bufferevent *bev; /* the connection's, its key */
	char run[PB_RUN_MAX + 1];
	pb_closecb cb; /* the other close callback, NULL none */
	void *arg;
	struct pb_conn *next; /* in its bucket */
};

/* A bucket of n (a power of two) for a pointer: its bits mixed (the
 * finalizer of MurmurHash3), since allocations share their low bits. */
static size_t
bucket(const struct bufferevent *bev, size_t n)
{
	uint64_t h = (uint64_t)(uintptr_t)bev;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (size_t)h & (n - 1);
}

static struct pb_conn **
slot(struct pb_srv *s, const struct bufferevent *bev)
{
	struct pb_conn **p;

	if (s->nbuckets == 0 || bev == NULL)
		return NULL;
	for (p = &s->conns[bucket(bev, s->nbuckets)]; *p != NULL;
	     p = &(*p)->next)
		if ((*p)->bev == bev)
			return p;
	return NULL;
}

/* Room for one more binding: the table doubled when it is full.  A
 * table that cannot grow stays as it is, slower but whole. */
static int
grow(struct pb_srv *s)
{
	size_t n = s->nbuckets == 0 ? BUCKETS_MIN : s->nbuckets * 2;
	struct pb_conn **t, *pc;

	if (s->nconns < s->nbuckets || s->nbuckets >= BUCKETS_MAX)
		return 0;
	if ((t = calloc(n, sizeof(*t))) == NULL)
		return s->nbuckets == 0 ? KZ_ENOMEM : 0;
	for (size_t i = 0; i < s->nbuckets; i++)
		while ((pc = s->conns[i]) != NULL) {
			s->conns[i] = pc->next;
			pc->next = t[bucket(pc->bev, n)];
			t[bucket(pc->bev, n)] = pc;
		}
	free(s->conns);
	s->conns = t;
	s->nbuckets = n;
	return 0;
}

static void
drop(struct pb_srv *s, const struct bufferevent *bev)
{
	struct pb_conn **p = slot(s, bev), *pc;

	if (p == NULL)
		return;
	pc = *p;
	*p = pc->next;
	s->nconns--;
	free(pc);
}

struct bufferevent *
pb_conn_bev(struct event_base *base, void *arg)
{
	/* What evhttp makes when it is given none. */
	struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);

	if (bev != NULL)
		drop(arg, bev);
	return bev;
}

static const struct bufferevent *
key(struct evhttp_connection *ec)
{
	return ec == NULL ? NULL : evhttp_connection_get_bufferevent(ec);
}

static void
closed(struct evhttp_connection *ec, void *arg)
{
	struct pb_srv *s = arg;
	struct pb_conn **p = slot(s, key(ec));
	pb_closecb cb = NULL;
	void *cbarg = NULL;

	if (p != NULL)
		cb = (*p)->cb, cbarg = (*p)->arg;
	drop(s, key(ec));
	if (cb != NULL)
		cb(ec, cbarg);
}

const char *
pb_conn_run(struct pb_srv *s, struct evhttp_connection *ec)
{
	struct pb_conn **p = slot(s, key(ec));

	return p == NULL ? NULL : (*p)->run;
}

int
pb_conn_bind(struct pb_srv *s, struct evhttp_connection *ec, const char *run)
{
	const struct bufferevent *bev = key(ec);
	struct pb_conn *pc;

	size_t b;

	if (bev == NULL || run == NULL || *run == '\0' ||
	    strlen(run) > PB_RUN_MAX || slot(s, bev) != NULL)
		return KZ_EINVAL;
	if (grow(s) != 0 || (pc = calloc(1, sizeof(*pc))) == NULL)
		return KZ_ENOMEM;
	pc->bev = bev;
	snprintf(pc->run, sizeof(pc->run), "%s", run);
	b = bucket(bev, s->nbuckets);
	pc->next = s->conns[b];
	s->conns[b] = pc;
	s->nconns++;
	evhttp_connection_set_closecb(ec, closed, s);
	return 0;
}

void
pb_conn_closecb(struct pb_srv *s, struct evhttp_connection *ec, pb_closecb cb,
    void *arg)
{
	struct pb_conn **p = slot(s, key(ec));

	if (p == NULL) {
		evhttp_connection_set_closecb(ec, cb, arg);
		return;
	}
	(*p)->cb = cb;
	(*p)->arg = arg;
}

void
pb_conn_release(struct pb_srv *s)
{
	for (size_t i = 0; i < s->nbuckets; i++)
		while (s->conns[i] != NULL)
			drop(s, s->conns[i]->bev);
	free(s->conns);
	s->conns = NULL;
	s->nbuckets = 0;
}

size_t
pb_conn_count(const struct pb_srv *s)
{
	return s->nconns;
}
