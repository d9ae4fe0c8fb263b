/*
 * The pool's transition scripts (see kz_pool.h and kz-lease(8)), each a
 * file of lib/lua/ embedded at build time ($(B)/lua/kz_lua.h, made by the
 * Makefile).  Each runs atomically in the store; each checks state and
 * token before its first write, because a Lua error does not undo earlier
 * writes.  KEYS[1] is the deployment prefix "kz:{dep}:"; every key the
 * scripts touch starts with it, so all of them share one hash tag (one
 * cluster slot).
 */
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_json.h"
#include "kz_pool.h"
#include "kz_store.h"
#include "kz_lua.h"
#include "store_int.h"
#include "banned.h"

/*
 * Every script is kz.lua (the refusal convention), pool.lua (the pool's
 * helpers), for a mutating one its name as OPNAME and pool_opcheck.lua (a
 * retried op id is answered from its stored result, which is bound to the
 * script and its arguments; a store without its epoch refuses), then its
 * own file.  MUTATING names the script once, for the table and for Lua.
 */
#define POOL KZ_LUA_KZ KZ_LUA_POOL
#define OPNAME(name) "local OPNAME = '" name "'\n"
#define MUTATING(name, file)                                                   \
	{                                                                      \
		name, POOL OPNAME(name) KZ_LUA_POOL_OPCHECK file, ""           \
	}

struct kz_script kz_pool_scripts[KZ_POOL_NSCRIPTS] = {
    [KZ_POOL_INIT] = {"init", POOL KZ_LUA_POOL_INIT, ""},
    [KZ_POOL_CREATE_BEGIN] = MUTATING("create_begin", KZ_LUA_POOL_CREATE_BEGIN),
    [KZ_POOL_CREATE_COMMIT] = MUTATING("create_commit",
        KZ_LUA_POOL_CREATE_COMMIT),
    [KZ_POOL_CREATE_ABORT] = MUTATING("create_abort", KZ_LUA_POOL_CREATE_ABORT),
    [KZ_POOL_LEASE] = MUTATING("lease", KZ_LUA_POOL_LEASE),
    [KZ_POOL_RELEASE] = MUTATING("release", KZ_LUA_POOL_RELEASE),
    [KZ_POOL_RENEW] = MUTATING("renew", KZ_LUA_POOL_RENEW),
    [KZ_POOL_SWEEP] = MUTATING("sweep", KZ_LUA_POOL_SWEEP),
    [KZ_POOL_PUBLISH] = MUTATING("publish", KZ_LUA_POOL_PUBLISH),
    [KZ_POOL_RETIRE] = MUTATING("retire", KZ_LUA_POOL_RETIRE),
    [KZ_POOL_DELETED] = MUTATING("deleted", KZ_LUA_POOL_DELETED),
    [KZ_POOL_RECONCILE] = MUTATING("reconcile", KZ_LUA_POOL_RECONCILE),
    [KZ_POOL_STATUS] = {"status", POOL KZ_LUA_POOL_STATUS, ""},
    [KZ_POOL_GET] = {"get", POOL KZ_LUA_POOL_GET, ""},
};

bool
kz_pool_is_script(const struct kz_script *sc)
{
	return sc >= kz_pool_scripts && sc < kz_pool_scripts + KZ_POOL_NSCRIPTS;
}

const char *
kz_pool_script_name(enum kz_pool_script which)
{
	return which < KZ_POOL_NSCRIPTS ? kz_pool_scripts[which].name : "?";
}

bool
kz_pool_id_ok(const char *id)
{
	size_t n = strlen(id);

	return n > 0 && n <= KZ_POOL_ID_MAX &&
	    strspn(id,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == n;
}

int
kz_pool_parse(const redisReply *r, cJSON **out, char *why, size_t wlen)
{
	if (r == NULL ||
	    (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) {
		kz_why(why, wlen, "script gave no JSON reply");
		return KZ_EPROTO;
	}
	return kz_json_parse_object(r->str, r->len, out, why, wlen);
}

const char *
kz_pool_errcode(const cJSON *res)
{
	return kz_store_refusal(res, NULL);
}

int
kz_pool_call(struct kz_store *s, enum kz_pool_script which, int argc,
    const char **argv, cJSON **out, char *why, size_t wlen)
{
	const char *av[32];
	redisReply *r;
	int e;

	if (argc < 0 || argc > 31 || which >= KZ_POOL_NSCRIPTS)
		return KZ_EINVAL;
	av[0] = kz_store_prefix(s);
	memcpy(av + 1, argv, (size_t)argc * sizeof(*argv));
	e = kz_store_eval(s, &kz_pool_scripts[which], 1, argc + 1, av, &r, why,
	    wlen);
	if (e != 0)
		return e;
	e = kz_pool_parse(r, out, why, wlen);
	freeReplyObject(r);
	return e;
}

int64_t
kz_pool_token_n(const char *token)
{
	const char *p = token != NULL ? strchr(token, ':') : NULL;
	int64_t v;

	return p != NULL && kz_parse_int(p + 1, 0, INT64_MAX / 2, &v) == 0 ? v :
	                                                                     0;
}

void
kz_pool_new_epoch(char out[KZ_POOL_EPOCH_HEX + 1])
{
	unsigned char b[KZ_POOL_EPOCH_HEX / 2];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, KZ_POOL_EPOCH_HEX + 1, b, sizeof(b));
}

int
kz_pool_init(struct kz_store *s, char *epoch, size_t len, bool *changed,
    char *why, size_t wlen)
{
	char runid[64], fresh[KZ_POOL_EPOCH_HEX + 1];
	const char *av[2] = {runid, fresh};
	const char *ep;
	cJSON *res = NULL;
	int e;

	if ((e = kz_store_runid(s, runid, sizeof(runid), why, wlen)) != 0)
		return e;
	kz_pool_new_epoch(fresh);
	if ((e = kz_pool_call(s, KZ_POOL_INIT, 2, av, &res, why, wlen)) != 0)
		return e;
	e = kz_json_str(res, "epoch", KZ_POOL_EPOCH_HEX, &ep, why, wlen);
	if (e == 0 && (size_t)snprintf(epoch, len, "%s", ep) >= len)
		e = KZ_ETOOBIG;
	if (e == 0 && changed != NULL)
		*changed = cJSON_IsTrue(kz_json_get(res, "changed"));
	cJSON_Delete(res);
	return e;
}

int
kz_pool_wpath(const char *workers_dir, const char *id, const char *leaf,
    char *buf, size_t len)
{
	int n;

	if (!kz_pool_id_ok(id))
		return KZ_EINVAL;
	n = snprintf(buf, len, "%s/%s%s%s", workers_dir, id, *leaf ? "/" : "",
	    leaf);
	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : 0;
}
