/*
 * The asynchronous question to the sentinels: "where is primary NAME
 * now?", asked of each sentinel in turn, each with its own timer, until
 * one answers with an address.  The answer is only a candidate: the
 * caller still checks ROLE on the server itself before any write, since a
 * sentinel cut off from the others may name a primary that was demoted.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <adapters/libevent.h>
#include <event2/event.h>

#include "kz_store.h"
#include "sentinel.h"
#include "store_int.h"
#include "banned.h"

struct kz_sentq {
	struct event_base *base;
	struct kz_store_addr addr;
	int timeout_ms;
	int i; /* the sentinel being asked */
	redisAsyncContext *ac;
	struct event *timer;
	kz_sentq_fn fn;
	void *arg;
};

static void ask(struct kz_sentq *q);

/* Lets go of the current sentinel; its late callbacks find no owner. */
static void
detach(struct kz_sentq *q)
{
	redisAsyncContext *ac = q->ac;

	q->ac = NULL;
	evtimer_del(q->timer);
	if (ac != NULL) {
		ac->data = NULL;
		redisAsyncFree(ac);
	}
}

static void
next(struct kz_sentq *q)
{
	detach(q);
	q->i++;
	ask(q);
}

static void
timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	next(arg);
}

static void
connect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_sentq *q = ac->data;

	if (q == NULL || status == REDIS_OK)
		return;
	/* hiredis frees a context whose connect failed. */
	q->ac = NULL;
	next(q);
}

static void
disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_sentq *q = ac->data;

	(void)status;
	if (q == NULL)
		return;
	q->ac = NULL;
	next(q);
}

static bool
parse_addr(const redisReply *r, struct kz_store_hostport *hp)
{
	char spec[KZ_STORE_HOST_MAX + 16];
	struct kz_store_addr a;

	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING ||
	    r->element[0]->len >= KZ_STORE_HOST_MAX)
		return false;
	/* The one parser of host:port, so an answer is held to the same
	 * rules as a configured address. */
	snprintf(spec, sizeof(spec),
	    strchr(r->element[0]->str, ':') ? "tcp:[%s]:%s" : "tcp:%s:%s",
	    r->element[0]->str, r->element[1]->str);
	if (kz_store_addr_parse(spec, &a, NULL, 0) != 0)
		return false;
	*hp = a.hp[0];
	return true;
}

static void
reply_cb(redisAsyncContext *ac, void *r, void *priv)
{
	struct kz_sentq *q = priv;
	struct kz_store_hostport hp;

	if (ac->data != q)
		return;
	if (!parse_addr(r, &hp)) {
		next(q);
		return;
	}
	detach(q);
	/* The last use of q: fn may free it. */
	q->fn(&hp, q->arg);
}

static void
ask(struct kz_sentq *q)
{
	struct timeval tv = {.tv_sec = q->timeout_ms / 1000,
	    .tv_usec = (q->timeout_ms % 1000) * 1000};
	const char *av[3];
	const char *get[3] = {"SENTINEL", "get-master-addr-by-name",
	    q->addr.name};
	redisAsyncContext *ac;
	int n;

	for (; q->i < q->addr.n; q->i++) {
		ac = redisAsyncConnect(q->addr.hp[q->i].host,
		    q->addr.hp[q->i].port);
		if (ac == NULL)
			continue;
		if (ac->err || redisLibeventAttach(ac, q->base) != REDIS_OK) {
			redisAsyncFree(ac);
			continue;
		}
		ac->data = q;
		q->ac = ac;
		redisAsyncSetConnectCallback(ac, connect_cb);
		redisAsyncSetDisconnectCallback(ac, disconnect_cb);
		/* A refused AUTH shows as NOAUTH on the question. */
		if ((n = kz_store_auth_argv(av)) > 0)
			(void)redisAsyncCommandArgv(ac, NULL, NULL, n, av,
			    NULL);
		if (redisAsyncCommandArgv(ac, reply_cb, q, 3, get, NULL) !=
		    REDIS_OK) {
			detach(q);
			continue;
		}
		evtimer_add(q->timer, &tv);
		return;
	}
	q->fn(NULL, q->arg);
}

int
kz_sentq_start(struct event_base *base, const struct kz_store_addr *a,
    int timeout_ms, kz_sentq_fn fn, void *arg, struct kz_sentq **out)
{
	struct kz_sentq *q;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return KZ_ENOMEM;
	q->base = base;
	q->addr = *a;
	q->timeout_ms = timeout_ms;
	q->fn = fn;
	q->arg = arg;
	if ((q->timer = evtimer_new(base, timer_cb, q)) == NULL) {
		free(q);
		return KZ_ENOMEM;
	}
	*out = q;
	ask(q);
	return 0;
}

void
kz_sentq_free(struct kz_sentq *q)
{
	if (q == NULL)
		return;
	detach(q);
	event_free(q->timer);
	free(q);
}
