#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/time.h>
#include <adapters/libevent.h>
#include <event2/event.h>
#include <sodium.h>

#include "kz_json.h"
#include "kz_store.h"
#include "banned.h"

#define EVAL_MAX_ARGS 64

struct kz_store {
	redisContext *rc;
	char prefix[KZ_STORE_DEP_MAX + 8];
};

static bool
dep_ok(const char *dep)
{
	size_t n = strlen(dep);

	/* Braces would break the hash tag; keep names plain. */
	return n > 0 && n <= KZ_STORE_DEP_MAX &&
	    strspn(dep,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

int
kz_store_open(const char *sock, const char *dep, int timeout_ms,
    struct kz_store **out, char *why, size_t wlen)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000,
	    .tv_usec = (timeout_ms % 1000) * 1000};
	struct kz_store *s;

	if (sock == NULL || *sock == '\0') {
		kz_why(why, wlen, "no store socket configured");
		return KZ_EUNAVAIL;
	}
	if (!dep_ok(dep)) {
		kz_why(why, wlen, "bad deployment name");
		return KZ_EINVAL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return KZ_ENOMEM;
	snprintf(s->prefix, sizeof(s->prefix), "kz:{%s}:", dep);
	s->rc = redisConnectUnixWithTimeout(sock, tv);
	if (s->rc == NULL || s->rc->err ||
	    redisSetTimeout(s->rc, tv) != REDIS_OK) {
		kz_why(why, wlen, "store unreachable");
		kz_store_free(s);
		return KZ_EUNAVAIL;
	}
	*out = s;
	return 0;
}

void
kz_store_free(struct kz_store *s)
{
	if (s == NULL)
		return;
	if (s->rc != NULL)
		redisFree(s->rc);
	free(s);
}

const char *
kz_store_prefix(const struct kz_store *s)
{
	return s->prefix;
}

/* prefix + suffix into buf; the same for both clients. */
static int
prefixed(const char *prefix, const char *suffix, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s%s", prefix, suffix);

	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : 0;
}

int
kz_store_key(const struct kz_store *s, const char *suffix, char *buf,
    size_t len)
{
	return prefixed(s->prefix, suffix, buf, len);
}

int
kz_store_cmd(struct kz_store *s, int argc, const char **argv, redisReply **out,
    char *why, size_t wlen)
{
	redisReply *r;

	if (s->rc->err) {
		kz_why(why, wlen, "store connection lost");
		return KZ_EUNAVAIL;
	}
	r = redisCommandArgv(s->rc, argc, argv, NULL);
	if (r == NULL) {
		/* Timeout or lost connection: the outcome is unknown. */
		kz_why(why, wlen, "store did not answer");
		return KZ_EUNAVAIL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		kz_why(why, wlen, "%.200s", r->str);
		freeReplyObject(r);
		return KZ_EPROTO;
	}
	*out = r;
	return 0;
}

const char *
kz_store_refusal(const cJSON *res, const char **reason)
{
	const cJSON *e = kz_json_get(res, "err");
	const cJSON *w = kz_json_get(res, "reason");

	if (!cJSON_IsString(e))
		return NULL;
	if (reason != NULL)
		*reason = cJSON_IsString(w) ? w->valuestring : "";
	return e->valuestring;
}

static int
load(struct kz_store *s, struct kz_script *sc, char *why, size_t wlen)
{
	const char *argv[3] = {"SCRIPT", "LOAD", sc->src};
	redisReply *r;
	int e;

	if ((e = kz_store_cmd(s, 3, argv, &r, why, wlen)) != 0)
		return e;
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		freeReplyObject(r);
		kz_why(why, wlen, "SCRIPT LOAD gave no sha");
		return KZ_EPROTO;
	}
	memcpy(sc->sha, r->str, 40);
	sc->sha[40] = '\0';
	freeReplyObject(r);
	return 0;
}

int
kz_store_eval(struct kz_store *s, struct kz_script *sc, int nkeys, int argc,
    const char **argv, redisReply **out, char *why, size_t wlen)
{
	const char *av[EVAL_MAX_ARGS + 3];
	char nk[16];
	int e;

	if (argc < nkeys || argc > EVAL_MAX_ARGS)
		return KZ_EINVAL;
	if (sc->sha[0] == '\0' && (e = load(s, sc, why, wlen)) != 0)
		return e;
	snprintf(nk, sizeof(nk), "%d", nkeys);
	av[0] = "EVALSHA";
	av[1] = sc->sha;
	av[2] = nk;
	memcpy(av + 3, argv, (size_t)argc * sizeof(*argv));
	e = kz_store_cmd(s, argc + 3, av, out, why, wlen);
	if (e == KZ_EPROTO && why != NULL && strncmp(why, "NOSCRIPT", 8) == 0) {
		/* The server lost its script cache (restart, failover). */
		if ((e = load(s, sc, why, wlen)) != 0)
			return e;
		e = kz_store_cmd(s, argc + 3, av, out, why, wlen);
	}
	return e;
}

int
kz_store_runid(struct kz_store *s, char *buf, size_t len, char *why,
    size_t wlen)
{
	const char *argv[2] = {"INFO", "server"};
	redisReply *r;
	const char *p;
	size_t n;
	int e;

	if ((e = kz_store_cmd(s, 2, argv, &r, why, wlen)) != 0)
		return e;
	e = KZ_EPROTO;
	if (r->type == REDIS_REPLY_STRING &&
	    (p = strstr(r->str, "run_id:")) != NULL) {
		p += 7;
		n = strspn(p, "0123456789abcdef");
		if (n > 0 && n < len) {
			memcpy(buf, p, n);
			buf[n] = '\0';
			e = 0;
		}
	}
	freeReplyObject(r);
	if (e != 0)
		kz_why(why, wlen, "INFO gave no run id");
	return e;
}

void
kz_store_opid(char out[KZ_OPID_HEX + 1])
{
	unsigned char b[KZ_OPID_HEX / 2];
	static const char hx[] = "0123456789abcdef";
	size_t i;

	randombytes_buf(b, sizeof(b));
	for (i = 0; i < sizeof(b); i++) {
		out[2 * i] = hx[b[i] >> 4];
		out[2 * i + 1] = hx[b[i] & 15];
	}
	out[KZ_OPID_HEX] = '\0';
}

/* ---- asynchronous client ---- */

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
	TAILQ_ENTRY(acall) link;
};

struct kz_astore {
	struct event_base *base;
	struct kz_astore_conf c;
	char *sock;
	char prefix[KZ_STORE_DEP_MAX + 8];
	redisAsyncContext *ac;
	bool connected;
	struct event *retry;
	TAILQ_HEAD(, acall) calls;
};

static void astore_connect(struct kz_astore *a);

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

static void
connect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_astore *a = ac->data;

	if (a == NULL || ac != a->ac)
		return;
	if (status != REDIS_OK) {
		/* hiredis frees the context after this callback. */
		a->ac = NULL;
		schedule_retry(a);
		return;
	}
	a->connected = true;
	if (a->c.on_up != NULL)
		a->c.on_up(a, a->c.arg);
}

static void
disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct kz_astore *a = ac->data;

	(void)status;
	if (a == NULL || ac != a->ac)
		return;
	went_down(a);
}

static void
astore_connect(struct kz_astore *a)
{
	redisAsyncContext *ac;

	if (a->ac != NULL)
		return;
	ac = redisAsyncConnectUnix(a->sock);
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
	return;
fail:
	schedule_retry(a);
}

static void
retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	astore_connect(arg);
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
	if (c->dep == NULL || !dep_ok(c->dep) || c->timeout_ms <= 0) {
		kz_why(why, wlen, "bad deployment name or timeout");
		return KZ_EINVAL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return KZ_ENOMEM;
	a->base = base;
	a->c = *c;
	if (a->c.reconnect_ms <= 0)
		a->c.reconnect_ms = 200;
	TAILQ_INIT(&a->calls);
	snprintf(a->prefix, sizeof(a->prefix), "kz:{%s}:", c->dep);
	if ((a->sock = strdup(c->sock)) == NULL ||
	    (a->retry = evtimer_new(base, retry_cb, a)) == NULL) {
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
	while ((c = TAILQ_FIRST(&a->calls)) != NULL)
		acall_finish(c, KZ_EUNAVAIL, NULL, "store client closed");
	if (a->retry != NULL)
		event_free(a->retry);
	free(a->sock);
	free(a);
}

bool
kz_astore_connected(const struct kz_astore *a)
{
	return a->connected;
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
	return prefixed(a->prefix, suffix, buf, len);
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
	kz_astore_drop(a);
}

static int send_eval(struct acall *c, bool full);

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
		} else if (rep->type == REDIS_REPLY_ERROR)
			acall_finish(c, KZ_EPROTO, NULL, rep->str);
		else
			acall_finish(c, 0, rep, NULL);
	}
	acall_unref(c);
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

static int
issue(struct acall *c, redisCallbackFn *fn, int argc, const char **argv)
{
	if (c->a->ac == NULL ||
	    redisAsyncCommandArgv(c->a->ac, fn, c, argc, argv, NULL) !=
	        REDIS_OK)
		return KZ_EUNAVAIL;
	c->refs++;
	return 0;
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

	if (a->ac == NULL)
		return KZ_EUNAVAIL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return KZ_ENOMEM;
	c->a = a;
	c->cb = cb;
	c->arg = arg;
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
	struct acall *c;
	int e;

	if (argc < nkeys || argc > EVAL_MAX_ARGS)
		return KZ_EINVAL;
	if ((e = acall_new(a, cb, arg, argc, argv, &c)) != 0)
		return e;
	c->sc = sc;
	c->nkeys = nkeys;
	c->refs++;
	return settle(c, send_eval(c, false));
}
