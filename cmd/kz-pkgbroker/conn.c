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
 * start out bound.
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include "serve.h"
#include "kz_log.h"
#include "banned.h"

struct pb_conn {
	const struct bufferevent *bev; /* the connection's, its key */
	char run[PB_RUN_MAX + 1];
	pb_closecb cb; /* the other close callback, NULL none */
	void *arg;
	struct pb_conn *next;
};

static struct pb_conn **
slot(struct pb_srv *s, const struct bufferevent *bev)
{
	struct pb_conn **p;

	for (p = &s->conns; *p != NULL; p = &(*p)->next)
		if ((*p)->bev == bev)
			return p;
	return NULL;
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

	if (bev == NULL || run == NULL || *run == '\0' ||
	    strlen(run) > PB_RUN_MAX || slot(s, bev) != NULL)
		return KZ_EINVAL;
	if ((pc = calloc(1, sizeof(*pc))) == NULL)
		return KZ_ENOMEM;
	pc->bev = bev;
	snprintf(pc->run, sizeof(pc->run), "%s", run);
	pc->next = s->conns;
	s->conns = pc;
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
	while (s->conns != NULL)
		drop(s, s->conns->bev);
}
