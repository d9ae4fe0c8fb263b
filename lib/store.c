#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_store.h"
#include "store_int.h"
#include "banned.h"

struct kz_store {
	redisContext *rc;
	redisContext *ask; /* to ask_to, the node an ASK named last */
	struct kz_store_addr ask_to;
	int timeout_ms;
	char prefix[KZ_STORE_DEP_MAX + 8];
};

bool
kz_store_dep_ok(const char *dep)
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
	struct kz_store_addr a;
	struct kz_store *s;
	int e;

	if (sock == NULL || *sock == '\0') {
		kz_why(why, wlen, "no store socket configured");
		return KZ_EUNAVAIL;
	}
	if (!kz_store_dep_ok(dep)) {
		kz_why(why, wlen, "bad deployment name");
		return KZ_EINVAL;
	}
	if ((e = kz_store_addr_parse(sock, &a, why, wlen)) != 0)
		return e;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return KZ_ENOMEM;
	snprintf(s->prefix, sizeof(s->prefix), "kz:{%s}:", dep);
	s->timeout_ms = timeout_ms;
	if ((e = kz_store_connect(&a, timeout_ms, &s->rc, why, wlen)) != 0) {
		kz_store_free(s);
		return e == KZ_EDENIED ? e : KZ_EUNAVAIL;
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
	if (s->ask != NULL)
		redisFree(s->ask);
	free(s);
}

const char *
kz_store_prefix(const struct kz_store *s)
{
	return s->prefix;
}

int
kz_store_prefixed(const char *prefix, const char *suffix, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s%s", prefix, suffix);

	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : 0;
}

int
kz_store_key(const struct kz_store *s, const char *suffix, char *buf,
    size_t len)
{
	return kz_store_prefixed(s->prefix, suffix, buf, len);
}

/* Goes to the slot's new owner (a cluster's MOVED); 0 or an error. */
static int
follow(struct kz_store *s, const struct kz_store_addr *to, char *why,
    size_t wlen)
{
	redisContext *rc;
	int e;

	if ((e = kz_store_connect(to, s->timeout_ms, &rc, why, wlen)) != 0)
		return e;
	redisFree(s->rc);
	s->rc = rc;
	return 0;
}

/*
 * How many keys of slot the connected node still holds (a migrating
 * node's count only goes down), or -1.
 */
static long long
keys_in_slot(struct kz_store *s, int slot)
{
	redisReply *r = redisCommand(s->rc, "CLUSTER COUNTKEYSINSLOT %d", slot);
	long long n = -1;

	if (r != NULL && r->type == REDIS_REPLY_INTEGER)
		n = r->integer;
	if (r != NULL)
		freeReplyObject(r);
	return n;
}

/* One command to the node an ASK named, after ASKING; NULL when that
 * node does not answer.  The connection is kept for the next ASK. */
static redisReply *
ask_once(struct kz_store *s, const struct kz_store_addr *to, int argc,
    const char **argv)
{
	redisReply *r = NULL;
	void *ok = NULL;

	if (s->ask != NULL &&
	    (s->ask->err || strcmp(s->ask_to.hp[0].host, to->hp[0].host) != 0 ||
	        s->ask_to.hp[0].port != to->hp[0].port)) {
		redisFree(s->ask);
		s->ask = NULL;
	}
	if (s->ask == NULL &&
	    kz_store_connect(to, s->timeout_ms, &s->ask, NULL, 0) != 0)
		return NULL;
	s->ask_to = *to;
	if (redisAppendCommand(s->ask, "ASKING") != REDIS_OK ||
	    redisAppendCommandArgv(s->ask, argc, argv, NULL) != REDIS_OK ||
	    redisGetReply(s->ask, &ok) != REDIS_OK ||
	    redisGetReply(s->ask, (void **)&r) != REDIS_OK)
		r = NULL;
	if (ok != NULL)
		freeReplyObject(ok);
	return r;
}

/*
 * The slot is half-moved: sleeps the next backoff step and says to try
 * again, or says (false) the bounded time is spent.
 */
static bool
migrate_wait(struct kz_store *s, int64_t t0, int *waits)
{
	int d = kz_store_migrate_delay((*waits)++);
	struct timespec ts = {.tv_sec = d / 1000,
	    .tv_nsec = (long)(d % 1000) * 1000000};

	if (kz_now_ms() - t0 + d >
	    (int64_t)s->timeout_ms * KZ_STORE_MIGRATE_SHARE / 100)
		return false;
	nanosleep(&ts, NULL);
	return true;
}

/*
 * Sends the command, follows an ASK once the migrating node is empty
 * (store_conn.c explains why only then), and classifies what comes back:
 * 0 with *out, 1 to try again after a backoff (*slot set), or an error.
 */
static int
cmd_once(struct kz_store *s, int argc, const char **argv, int *hops, int *slot,
    redisReply **out, char *why, size_t wlen)
{
	struct kz_store_addr to;
	redisReply *r = redisCommandArgv(s->rc, argc, argv, NULL);
	long long left;

	if (r != NULL && r->type == REDIS_REPLY_ERROR && *hops < 8 &&
	    kz_store_ask(r->str, slot, &to)) {
		freeReplyObject(r);
		if ((left = keys_in_slot(s, *slot)) != 0) {
			kz_why(why, wlen,
			    "store slot %d is being migrated (%lld keys "
			    "still on the source)",
			    *slot, left);
			return left > 0 ? 1 : KZ_EUNAVAIL;
		}
		/* Only a redirect followed is a hop: the backoff while the
		 * slot is half-moved has its own bound, in time. */
		(*hops)++;
		r = ask_once(s, &to, argc, argv);
	}
	if (r == NULL) {
		/* Timeout or lost connection: the outcome is unknown. */
		kz_why(why, wlen, "store did not answer");
		return KZ_EUNAVAIL;
	}
	if (r->type == REDIS_REPLY_ERROR && kz_store_err_tryagain(r->str)) {
		kz_why(why, wlen, "store slot is being migrated (TRYAGAIN)");
		freeReplyObject(r);
		return 1;
	}
	*out = r;
	return 0;
}

int
kz_store_cmd(struct kz_store *s, int argc, const char **argv, redisReply **out,
    char *why, size_t wlen)
{
	struct kz_store_addr to;
	int64_t t0 = kz_now_ms();
	redisReply *r;
	int hops = 0, waits = 0, slot = -1, e;

	if (s->rc->err) {
		kz_why(why, wlen, "store connection lost");
		return KZ_EUNAVAIL;
	}
again:
	while ((e = cmd_once(s, argc, argv, &hops, &slot, &r, why, wlen)) == 1)
		if (!migrate_wait(s, t0, &waits))
			return KZ_EUNAVAIL;
	if (e != 0)
		return e;
	if (r->type == REDIS_REPLY_ERROR &&
	    kz_store_err_moved_primary(r->str)) {
		/* A failover demoted this server: find the primary again. */
		kz_why(why, wlen, "store is no longer the primary");
		freeReplyObject(r);
		return KZ_EUNAVAIL;
	}
	if (r->type == REDIS_REPLY_ERROR && hops < 8 &&
	    kz_store_moved(r->str, &to)) {
		freeReplyObject(r);
		hops++;
		if (follow(s, &to, why, wlen) != 0)
			return KZ_EUNAVAIL;
		goto again;
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
	const char *av[EVAL_MAX_ARGS + 4];
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
	if (kz_pool_is_script(sc))
		av[3 + argc++] = kz_store_scope();
	e = kz_store_cmd(s, argc + 3, av, out, why, wlen);
	if (e == KZ_EPROTO && why != NULL && strncmp(why, "NOSCRIPT", 8) == 0) {
		/*
		 * The server that ran it lacks the script (a restart, a
		 * failover, or the node an ASK named): the source goes with
		 * the call, and that server keeps it.
		 */
		av[0] = "EVAL";
		av[1] = sc->src;
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
