#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/time.h>
#include <event2/event.h>

#include "kz_io.h"
#include "kz_store.h"
#include "astore_int.h"
#include "store_int.h"
#include "banned.h"

/*
 * The asynchronous client's calls (kz_store.h): a command or a script,
 * answered once, by its reply or by its timeout, after the redirects
 * (NOSCRIPT, MOVED, ASK, TRYAGAIN) that the store sends it are followed.
 * The connections they go out on are astore.c's.
 */

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
void
kz_acall_finish(struct acall *c, int err, redisReply *r, const char *why)
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
timeout_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct acall *c = arg;
	struct kz_astore *a = c->a;

	(void)fd;
	(void)ev;
	c->refs++;
	kz_acall_finish(c, KZ_EUNAVAIL, NULL, "store did not answer in time");
	acall_unref(c);
	/*
	 * The reply may still come, and the write may still be applied: the
	 * caller retries with the same operation id.  A fresh connection
	 * keeps later calls from queueing behind a frozen one.
	 */
	if (c->ask)
		kz_astore_side_drop(a);
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
			kz_acall_finish(c, KZ_EUNAVAIL, NULL,
			    "store connection lost");
		else if (rep->type == REDIS_REPLY_ERROR && c->sc != NULL &&
		    strncmp(rep->str, "NOSCRIPT", 8) == 0) {
			/* The server lost its script cache: send the source. */
			if (send_eval(c, true) != 0)
				kz_acall_finish(c, KZ_EUNAVAIL, NULL,
				    "store connection lost");
		} else if (rep->type == REDIS_REPLY_ERROR &&
		    kz_store_err_moved_primary(rep->str)) {
			/* A failover demoted this server: nothing was
			 * written; find the primary again. */
			kz_acall_finish(c, KZ_EUNAVAIL, NULL,
			    "store is no longer the primary");
			kz_astore_drop(c->a);
		} else if (rep->type == REDIS_REPLY_ERROR &&
		    kz_store_moved(rep->str, &c->a->moved)) {
			/* The slot has a new owner: reconnect there; the
			 * caller asks again under the same op id. */
			c->a->has_moved = true;
			kz_acall_finish(c, KZ_EUNAVAIL, NULL,
			    "store slot moved");
			kz_astore_drop(c->a);
		} else if (rep->type == REDIS_REPLY_ERROR && c->hops < 8 &&
		    kz_store_ask(rep->str, &c->slot, &c->ask_to)) {
			ask_count(c);
		} else if (rep->type == REDIS_REPLY_ERROR &&
		    kz_store_err_tryagain(rep->str))
			migrate_wait(c, "TRYAGAIN");
		else if (rep->type == REDIS_REPLY_ERROR)
			kz_acall_finish(c, KZ_EPROTO, NULL, rep->str);
		else
			kz_acall_finish(c, 0, rep, NULL);
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
		kz_acall_finish(c, KZ_EUNAVAIL, NULL, "store connection lost");
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
		kz_acall_finish(c, KZ_EUNAVAIL, NULL, a->why);
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
		kz_acall_finish(c, KZ_EUNAVAIL, NULL, "store connection lost");
	else if (rep->integer > 0)
		migrate_wait(c, "keys still on the source");
	else {
		/* Only a redirect followed is a hop: the backoff while the
		 * slot is half-moved has its own bound, in time. */
		c->hops++;
		if (resend(c, true) != 0)
			kz_acall_finish(c, KZ_EUNAVAIL, NULL,
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
		kz_acall_finish(c, KZ_EUNAVAIL, NULL, "store connection lost");
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
	if (ask && kz_astore_side_get(c->a, &c->ask_to) == NULL)
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
