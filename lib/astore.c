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
#include "banned.h"

/*
 * The asynchronous client (kz_store.h): one connection to the primary, on
 * hiredis's libevent adapter, with a handshake (AUTH, then ROLE must say
 * master) before on_up, and for a Sentinel address a question to the
 * sentinels (lib/sentinel.c) before each connect.
 */

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

static void astore_connect(struct kz_astore *a);
static void side_drop(struct kz_astore *a);

static void
acall_unref(struct acall *c)
{
	int i;

	if (--c->refs > 0 || !c->done)
		return;
	if (c->argv != NULL) {
		for (i = 0; i < c->argc; i++)
			free(c->argv[i]);
		free(c->argv);
	}
	if (c->wait != NULL)
		event_free(c->wait);
	free(c);
}

/* Answers the caller once; the call lives on until hiredis lets go. */
static void
acall_finish(struct acall *c, int err, redisReply *r, const char *why)
{
	if (c->done)
		return;
	c->done = true;
	event_free(c->timer);
	c->timer = NULL;
	if (c->wait != NULL && evtimer_pending(c->wait, NULL)) {
		/* The backoff's reference: it will not fire now. */
		evtimer_del(c->wait);
		c->refs--;
	}
	TAILQ_REMOVE(&c->a->calls, c, link);
	c->cb(err, r, why, c->arg);
	c->refs++;
	acall_unref(c);
}

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
static void
side_drop(struct kz_astore *a)
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
static redisAsyncContext *
side_get(struct kz_astore *a, const struct kz_store_addr *to)
{
	const char *av[3];
	redisAsyncContext *ac;
	int n;

	if (a->side != NULL &&
	    strcmp(a->side_to.hp[0].host, to->hp[0].host) == 0 &&
	    a->side_to.hp[0].port == to->hp[0].port)
		return a->side;
	side_drop(a);
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
	side_drop(a);
	while ((c = TAILQ_FIRST(&a->calls)) != NULL)
		acall_finish(c, KZ_EUNAVAIL, NULL, "store client closed");
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

static void
timeout_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct acall *c = arg;
	struct kz_astore *a = c->a;

	(void)fd;
	(void)ev;
	c->refs++;
	acall_finish(c, KZ_EUNAVAIL, NULL, "store did not answer in time");
	acall_unref(c);
	/*
	 * The reply may still come, and the write may still be applied: the
	 * caller retries with the same operation id.  A fresh connection
	 * keeps later calls from queueing behind a frozen one.
	 */
	if (c->ask)
		side_drop(a);
	else
		kz_astore_drop(a);
}

static int send_eval(struct acall *c, bool full);
static void reply_cb(redisAsyncContext *ac, void *r, void *priv);
static void migrate_wait(struct acall *c, const char *why);
static void ask_count(struct acall *c);
static int resend(struct acall *c, bool ask);
static int issue(struct acall *c, redisCallbackFn *fn, int argc,
    const char **argv);

static void
reply_cb(redisAsyncContext *ac, void *r, void *priv)
{
	struct acall *c = priv;
	redisReply *rep = r;

	(void)ac;
	if (!c->done) {
		if (rep == NULL)
			acall_finish(c, KZ_EUNAVAIL, NULL,
			    "store connection lost");
		else if (rep->type == REDIS_REPLY_ERROR && c->sc != NULL &&
		    strncmp(rep->str, "NOSCRIPT", 8) == 0) {
			/* The server lost its script cache: send the source. */
			if (send_eval(c, true) != 0)
				acall_finish(c, KZ_EUNAVAIL, NULL,
				    "store connection lost");
		} else if (rep->type == REDIS_REPLY_ERROR &&
		    kz_store_err_moved_primary(rep->str)) {
			/* A failover demoted this server: nothing was
			 * written; find the primary again. */
			acall_finish(c, KZ_EUNAVAIL, NULL,
			    "store is no longer the primary");
			kz_astore_drop(c->a);
		} else if (rep->type == REDIS_REPLY_ERROR &&
		    kz_store_moved(rep->str, &c->a->moved)) {
			/* The slot has a new owner: reconnect there; the
			 * caller asks again under the same op id. */
			c->a->has_moved = true;
			acall_finish(c, KZ_EUNAVAIL, NULL, "store slot moved");
			kz_astore_drop(c->a);
		} else if (rep->type == REDIS_REPLY_ERROR && c->hops < 8 &&
		    kz_store_ask(rep->str, &c->slot, &c->ask_to)) {
			ask_count(c);
		} else if (rep->type == REDIS_REPLY_ERROR &&
		    kz_store_err_tryagain(rep->str))
			migrate_wait(c, "TRYAGAIN");
		else if (rep->type == REDIS_REPLY_ERROR)
			acall_finish(c, KZ_EPROTO, NULL, rep->str);
		else
			acall_finish(c, 0, rep, NULL);
	}
	acall_unref(c);
}

/* The backoff is over: the call again, to the primary. */
static void
wait_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct acall *c = arg;

	(void)fd;
	(void)ev;
	if (!c->done && resend(c, false) != 0)
		acall_finish(c, KZ_EUNAVAIL, NULL, "store connection lost");
	acall_unref(c);
}

/*
 * The slot is half-moved (store_conn.c): the call waits the next backoff
 * step, or, when the bounded time is spent, is answered unavailable and
 * the connection is dropped, so admission closes with this reason and
 * reopens by itself after the reconnect.
 */
static void
migrate_wait(struct acall *c, const char *what)
{
	struct kz_astore *a = c->a;
	int d = kz_store_migrate_delay(c->waits++);
	struct timeval tv = {.tv_sec = d / 1000, .tv_usec = (d % 1000) * 1000};

	if (kz_now_ms() - c->t0 + d >
	        (int64_t)a->c.timeout_ms * KZ_STORE_MIGRATE_SHARE / 100 ||
	    (c->wait == NULL &&
	        (c->wait = evtimer_new(a->base, wait_cb, c)) == NULL)) {
		snprintf(a->why, sizeof(a->why),
		    "store slot %d is being migrated (%s)", c->slot, what);
		acall_finish(c, KZ_EUNAVAIL, NULL, a->why);
		kz_astore_drop(a);
		return;
	}
	c->refs++;
	evtimer_add(c->wait, &tv);
}

static void
count_cb(redisAsyncContext *ac, void *r, void *priv)
{
	struct acall *c = priv;
	redisReply *rep = r;

	(void)ac;
	if (c->done)
		;
	else if (rep == NULL || rep->type != REDIS_REPLY_INTEGER)
		acall_finish(c, KZ_EUNAVAIL, NULL, "store connection lost");
	else if (rep->integer > 0)
		migrate_wait(c, "keys still on the source");
	else {
		/* Only a redirect followed is a hop: the backoff while the
		 * slot is half-moved has its own bound, in time. */
		c->hops++;
		if (resend(c, true) != 0)
			acall_finish(c, KZ_EUNAVAIL, NULL,
			    "the node importing the slot is unreachable");
	}
	acall_unref(c);
}

/* ASK: how many of the slot's keys the migrating node still holds. */
static void
ask_count(struct acall *c)
{
	char slot[16];
	const char *av[3] = {"CLUSTER", "COUNTKEYSINSLOT", slot};

	snprintf(slot, sizeof(slot), "%d", c->slot);
	c->ask = false;
	if (issue(c, count_cb, 3, av) != 0)
		acall_finish(c, KZ_EUNAVAIL, NULL, "store connection lost");
}

static void
load_cb(redisAsyncContext *ac, void *r, void *priv)
{
	redisReply *rep = r;
	struct acall *c = priv;

	(void)ac;
	if (rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len == 40) {
		memcpy(c->sc->sha, rep->str, 40);
		c->sc->sha[40] = '\0';
	}
	acall_unref(c);
}

/* On the node an ASK named, every command of a call goes after ASKING,
 * which holds for the one command after it. */
static int
issue(struct acall *c, redisCallbackFn *fn, int argc, const char **argv)
{
	redisAsyncContext *ac = c->ask ? c->a->side : c->a->ac;
	const char *asking[1] = {"ASKING"};

	if (ac == NULL ||
	    (c->ask && fn == reply_cb &&
	        redisAsyncCommandArgv(ac, NULL, NULL, 1, asking, NULL) !=
	            REDIS_OK) ||
	    redisAsyncCommandArgv(ac, fn, c, argc, argv, NULL) != REDIS_OK)
		return KZ_EUNAVAIL;
	c->refs++;
	return 0;
}

/* The call again, from the start: to the primary, or to the node an ASK
 * named once the slot's keys are all there. */
static int
resend(struct acall *c, bool ask)
{
	c->ask = ask;
	if (ask && side_get(c->a, &c->ask_to) == NULL)
		return KZ_EUNAVAIL;
	if (c->sc != NULL)
		return send_eval(c, false);
	return issue(c, reply_cb, c->argc, (const char **)c->argv);
}

/*
 * EVALSHA when the sha is known; otherwise EVAL with the source (which
 * also caches it server-side) followed by a SCRIPT LOAD that teaches us
 * the sha for next time.
 */
static int
send_eval(struct acall *c, bool full)
{
	const char *av[EVAL_MAX_ARGS + 3];
	char nk[16];
	int e;

	snprintf(nk, sizeof(nk), "%d", c->nkeys);
	full = full || c->sc->sha[0] == '\0';
	av[0] = full ? "EVAL" : "EVALSHA";
	av[1] = full ? c->sc->src : c->sc->sha;
	av[2] = nk;
	memcpy(av + 3, c->argv, (size_t)c->argc * sizeof(*av));
	if ((e = issue(c, reply_cb, c->argc + 3, av)) != 0 || !full)
		return e;
	av[0] = "SCRIPT";
	av[1] = "LOAD";
	av[2] = c->sc->src;
	(void)issue(c, load_cb, 3, av);
	return 0;
}

static int
acall_new(struct kz_astore *a, kz_astore_cb cb, void *arg, int argc,
    const char **argv, struct acall **out)
{
	struct timeval tv = {.tv_sec = a->c.timeout_ms / 1000,
	    .tv_usec = (a->c.timeout_ms % 1000) * 1000};
	struct acall *c;
	int i;

	if (a->ac == NULL || !a->connected)
		return KZ_EUNAVAIL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return KZ_ENOMEM;
	c->a = a;
	c->cb = cb;
	c->arg = arg;
	c->t0 = kz_now_ms();
	if ((c->argv = calloc((size_t)argc + 1, sizeof(char *))) == NULL)
		goto nomem;
	for (c->argc = 0; c->argc < argc; c->argc++)
		if ((c->argv[c->argc] = strdup(argv[c->argc])) == NULL)
			goto nomem;
	if ((c->timer = evtimer_new(a->base, timeout_cb, c)) == NULL)
		goto nomem;
	evtimer_add(c->timer, &tv);
	TAILQ_INSERT_TAIL(&a->calls, c, link);
	*out = c;
	return 0;
nomem:
	for (i = 0; i < c->argc; i++)
		free(c->argv[i]);
	free(c->argv);
	free(c);
	return KZ_ENOMEM;
}

/* Withdraws a call that never reached hiredis; cb is not called. */
static void
acall_abort(struct acall *c)
{
	c->cb = NULL;
	c->done = true;
	event_free(c->timer);
	c->timer = NULL;
	TAILQ_REMOVE(&c->a->calls, c, link);
	c->refs++;
	acall_unref(c);
}

/*
 * After the caller's reference is taken and the call is sent: a send that
 * failed before hiredis held the call withdraws it and says so; otherwise
 * hiredis answers later and only the caller's reference is let go.
 */
static int
settle(struct acall *c, int sent)
{
	if (sent != 0 && c->refs == 1) {
		c->refs--;
		acall_abort(c);
		return sent;
	}
	acall_unref(c);
	return 0;
}

int
kz_astore_cmd(struct kz_astore *a, int argc, const char **argv, kz_astore_cb cb,
    void *arg)
{
	struct acall *c;
	int e;

	if (argc < 1 || argc > EVAL_MAX_ARGS)
		return KZ_EINVAL;
	if ((e = acall_new(a, cb, arg, argc, argv, &c)) != 0)
		return e;
	c->refs++;
	return settle(c, issue(c, reply_cb, argc, (const char **)c->argv));
}

int
kz_astore_eval(struct kz_astore *a, struct kz_script *sc, int nkeys, int argc,
    const char **argv, kz_astore_cb cb, void *arg)
{
	const char *av[EVAL_MAX_ARGS + 1];
	struct acall *c;
	int e;

	if (argc < nkeys || argc >= EVAL_MAX_ARGS)
		return KZ_EINVAL;
	memcpy(av, argv, (size_t)argc * sizeof(*argv));
	if (kz_pool_is_script(sc))
		av[argc++] = kz_store_scope();
	if ((e = acall_new(a, cb, arg, argc, av, &c)) != 0)
		return e;
	c->sc = sc;
	c->nkeys = nkeys;
	c->refs++;
	return settle(c, send_eval(c, false));
}
