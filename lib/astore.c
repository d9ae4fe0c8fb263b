#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/time.h>
#include <adapters/libevent.h>
#include <event2/event.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_store.h"
#include "sentinel.h"
#include "store_int.h"
#include "astore_int.h"
#include "banned.h"

/*
 * The asynchronous client (kz_store.h): one connection to the primary, on
 * hiredis's libevent adapter, with a handshake (AUTH, then ROLE must say
 * master) before on_up, and for a Sentinel address a question to the
 * sentinels (lib/sentinel.c) before each connect.  This file keeps the
 * connections (to the primary and to the node an ASK named) and the
 * client's life; astore_call.c holds the calls made on them.
 */

static void astore_connect(struct kz_astore *a);

static void
schedule_retry(struct kz_astore *a)
{
	struct timeval tv = {.tv_sec = a->c.reconnect_ms / 1000,
	    .tv_usec = (a->c.reconnect_ms % 1000) * 1000};

	evtimer_add(a->retry, &tv);
}

static void
went_down(struct kz_astore *a)
{
	bool was = a->connected;

	a->ac = NULL;
	a->connected = false;
	schedule_retry(a);
	if (was && a->c.on_down != NULL)
		a->c.on_down(a, a->c.arg);
}

void
kz_astore_drop(struct kz_astore *a)
{
	redisAsyncContext *ac = a->ac;

	if (ac == NULL)
		return;
	went_down(a);
	/* Every pending hiredis callback runs now with a NULL reply. */
	redisAsyncFree(ac);
}

/*
 * The handshake failed or timed out: the connection never counted as up
 * (no on_down), and the next attempt starts over from the sentinels.
 */
static void
hs_fail(struct kz_astore *a, const char *why)
{
	snprintf(a->why, sizeof(a->why), "%s", why);
	evtimer_del(a->hs);
	kz_astore_drop(a);
}

static void
hs_timeout_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	hs_fail(arg, "store did not answer the handshake in time");
}

static void
auth_cb(redisAsyncContext *ac, void *r, void *priv)
{
	struct kz_astore *a = priv;
	redisReply *rep = r;
	char w[96];

	if (ac != a->ac || rep == NULL || rep->type != REDIS_REPLY_ERROR)
		return;
	/* The server's text may name the user; never the password. */
	snprintf(w, sizeof(w), "store refused authentication for user %s",
	    kz_store_auth_user());
	hs_fail(a, w);
}

static void
role_cb(redisAsyncContext *ac, void *r, void *priv)
{
	struct kz_astore *a = priv;
	redisReply *rep = r;

	if (ac != a->ac || rep == NULL)
		return;
	if (!kz_store_role_master(rep)) {
		hs_fail(a,
		    rep->type == REDIS_REPLY_ERROR &&
		            strncmp(rep->str, "NOAUTH", 6) == 0 ?
		        "store requires authentication" :
		        "store is not a primary (ROLE)");
		return;
	}
	evtimer_del(a->hs);
	a->why[0] = '\0';
	a->connected = true;
	if (a->c.on_up != NULL)
		a->c.on_up(a, a->c.arg);
}

static void
connect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_astore *a = ac->data;
	const char *av[3], *role[1] = {"ROLE"};
	int n;

	if (a == NULL || ac != a->ac)
		return;
	if (status != REDIS_OK) {
		/* hiredis frees the context after this callback. */
		a->ac = NULL;
		evtimer_del(a->hs);
		snprintf(a->why, sizeof(a->why), "store unreachable");
		/* A slot owner that is gone: start again from the address
		 * configured. */
		a->has_moved = false;
		schedule_retry(a);
		return;
	}
	/* Nothing is sent for a caller before ROLE says master. */
	if (((n = kz_store_auth_argv(av)) > 0 &&
	        redisAsyncCommandArgv(a->ac, auth_cb, a, n, av, NULL) !=
	            REDIS_OK) ||
	    redisAsyncCommandArgv(a->ac, role_cb, a, 1, role, NULL) != REDIS_OK)
		hs_fail(a, "store connection lost");
}

static void
disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_astore *a = ac->data;

	(void)status;
	if (a == NULL || ac != a->ac)
		return;
	evtimer_del(a->hs);
	went_down(a);
}

/* Connects to the Unix socket (hp NULL) or to hp; the handshake timer
 * covers the TCP connect too, which hiredis's async client never times
 * out. */
static void
dial(struct kz_astore *a, const struct kz_store_hostport *hp)
{
	struct timeval tv = {.tv_sec = a->c.timeout_ms / 1000,
	    .tv_usec = (a->c.timeout_ms % 1000) * 1000};
	redisAsyncContext *ac;

	ac = hp != NULL ? redisAsyncConnect(hp->host, hp->port) :
	                  redisAsyncConnectUnix(a->addr.path);
	if (ac == NULL)
		goto fail;
	if (ac->err) {
		redisAsyncFree(ac);
		goto fail;
	}
	ac->data = a;
	if (redisLibeventAttach(ac, a->base) != REDIS_OK) {
		redisAsyncFree(ac);
		goto fail;
	}
	a->ac = ac;
	redisAsyncSetConnectCallback(ac, connect_cb);
	redisAsyncSetDisconnectCallback(ac, disconnect_cb);
	evtimer_add(a->hs, &tv);
	return;
fail:
	snprintf(a->why, sizeof(a->why), "store unreachable");
	schedule_retry(a);
}

static void
found_cb(const struct kz_store_hostport *hp, void *arg)
{
	struct kz_astore *a = arg;

	kz_sentq_free(a->sq);
	a->sq = NULL;
	if (hp == NULL) {
		snprintf(a->why, sizeof(a->why), "no sentinel named a primary");
		schedule_retry(a);
		return;
	}
	dial(a, hp);
}

static void
astore_connect(struct kz_astore *a)
{
	if (a->ac != NULL || a->sq != NULL)
		return;
	if (a->addr.kind == KZ_STORE_SENTINEL) {
		if (kz_sentq_start(a->base, &a->addr, a->c.timeout_ms, found_cb,
		        a, &a->sq) != 0)
			schedule_retry(a);
		return;
	}
	if (a->has_moved)
		dial(a, &a->moved.hp[0]);
	else
		dial(a, a->addr.kind == KZ_STORE_TCP ? &a->addr.hp[0] : NULL);
}

static void
retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	astore_connect(arg);
}

/* ---- the connection to the node an ASK named ---- */

static void
side_connect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_astore *a = ac->data;

	if (a != NULL && ac == a->side && status != REDIS_OK)
		a->side = NULL; /* hiredis frees it after this callback */
}

static void
side_disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_astore *a = ac->data;

	(void)status;
	if (a != NULL && ac == a->side)
		a->side = NULL;
}

/* Every call still out on it is answered KZ_EUNAVAIL. */
void
kz_astore_side_drop(struct kz_astore *a)
{
	redisAsyncContext *ac = a->side;

	a->side = NULL;
	if (ac != NULL)
		redisAsyncFree(ac);
}

/*
 * A connection to to, kept while ASKs name the same node.  AUTH goes
 * first on it; no ROLE check is needed, because a node that takes ASKING
 * for the slot is the primary importing it.
 */
redisAsyncContext *
kz_astore_side_get(struct kz_astore *a, const struct kz_store_addr *to)
{
	const char *av[3];
	redisAsyncContext *ac;
	int n;

	if (a->side != NULL &&
	    strcmp(a->side_to.hp[0].host, to->hp[0].host) == 0 &&
	    a->side_to.hp[0].port == to->hp[0].port)
		return a->side;
	kz_astore_side_drop(a);
	ac = redisAsyncConnect(to->hp[0].host, to->hp[0].port);
	if (ac == NULL || ac->err) {
		if (ac != NULL)
			redisAsyncFree(ac);
		return NULL;
	}
	ac->data = a;
	if (redisLibeventAttach(ac, a->base) != REDIS_OK) {
		redisAsyncFree(ac);
		return NULL;
	}
	redisAsyncSetConnectCallback(ac, side_connect_cb);
	redisAsyncSetDisconnectCallback(ac, side_disconnect_cb);
	if ((n = kz_store_auth_argv(av)) > 0 &&
	    redisAsyncCommandArgv(ac, NULL, NULL, n, av, NULL) != REDIS_OK) {
		redisAsyncFree(ac);
		return NULL;
	}
	a->side = ac;
	a->side_to = *to;
	return ac;
}

int
kz_astore_new(struct event_base *base, const struct kz_astore_conf *c,
    struct kz_astore **out, char *why, size_t wlen)
{
	struct kz_astore *a;

	if (c->sock == NULL || *c->sock == '\0') {
		kz_why(why, wlen, "no store socket configured");
		return KZ_EUNAVAIL;
	}
	if (c->dep == NULL || !kz_store_dep_ok(c->dep) || c->timeout_ms <= 0) {
		kz_why(why, wlen, "bad deployment name or timeout");
		return KZ_EINVAL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return KZ_ENOMEM;
	if (kz_store_addr_parse(c->sock, &a->addr, why, wlen) != 0) {
		free(a);
		return KZ_EINVAL;
	}
	if (kz_store_auth_usable(why, wlen) != 0) {
		free(a);
		return KZ_EUNAVAIL;
	}
	a->base = base;
	a->c = *c;
	if (a->c.reconnect_ms <= 0)
		a->c.reconnect_ms = 200;
	TAILQ_INIT(&a->calls);
	snprintf(a->prefix, sizeof(a->prefix), "kz:{%s}:", c->dep);
	if ((a->sock = strdup(c->sock)) == NULL ||
	    (a->retry = evtimer_new(base, retry_cb, a)) == NULL ||
	    (a->hs = evtimer_new(base, hs_timeout_cb, a)) == NULL) {
		kz_astore_free(a);
		return KZ_ENOMEM;
	}
	a->c.sock = a->sock;
	a->c.dep = NULL;
	astore_connect(a);
	*out = a;
	return 0;
}

void
kz_astore_free(struct kz_astore *a)
{
	struct acall *c;

	if (a == NULL)
		return;
	a->c.on_down = NULL;
	kz_astore_drop(a);
	kz_astore_side_drop(a);
	while ((c = TAILQ_FIRST(&a->calls)) != NULL)
		kz_acall_finish(c, KZ_EUNAVAIL, NULL, "store client closed");
	kz_sentq_free(a->sq);
	if (a->retry != NULL)
		event_free(a->retry);
	if (a->hs != NULL)
		event_free(a->hs);
	free(a->sock);
	free(a);
}

bool
kz_astore_connected(const struct kz_astore *a)
{
	return a->connected;
}

const char *
kz_astore_why(const struct kz_astore *a)
{
	return a->why;
}

const char *
kz_astore_prefix(const struct kz_astore *a)
{
	return a->prefix;
}

int
kz_astore_key(const struct kz_astore *a, const char *suffix, char *buf,
    size_t len)
{
	return kz_store_prefixed(a->prefix, suffix, buf, len);
}
