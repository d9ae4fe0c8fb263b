#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

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
	    strspn(dep, "abcdefghijklmnopqrstuvwxyz"
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
	if (s->rc == NULL || s->rc->err || redisSetTimeout(s->rc, tv) !=
	    REDIS_OK) {
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

int
kz_store_key(const struct kz_store *s, const char *suffix, char *buf,
    size_t len)
{
	int n = snprintf(buf, len, "%s%s", s->prefix, suffix);

	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : 0;
}

int
kz_store_cmd(struct kz_store *s, int argc, const char **argv,
    redisReply **out, char *why, size_t wlen)
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
