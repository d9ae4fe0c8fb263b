/*
 * The pool's transition scripts (see kz_pool.h and kz-lease(8)).  Each
 * runs atomically in the store; each checks state and token before its
 * first write, because a Lua error does not undo earlier writes.  KEYS[1]
 * is the deployment prefix "kz:{dep}:"; every key the scripts touch starts
 * with it, so all of them share one hash tag (one cluster slot).
 */
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_json.h"
#include "kz_pool.h"
#include "banned.h"

/* Helpers every script starts with. */
#define PROLOGUE \
	"local P = KEYS[1]\n" \
	"local function now()\n" \
	"  local t = redis.call('TIME')\n" \
	"  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
	"end\n" \
	"local function fail(code, reason)\n" \
	"  return cjson.encode({err = code, reason = reason})\n" \
	"end\n" \
	"local function W(id) return P .. 'w:' .. id end\n" \
	"local function S(st) return P .. 's:' .. st end\n" \
	"local STATES = {'creating', 'warm', 'leased', 'resetting', 'retiring',\n" \
	"  'deleting'}\n" \
	"local function ep_of(tok) return string.match(tok or '', '^([^:]*):') end\n" \
	"local function newtok(ep) return ep .. ':' .. redis.call('INCR', P .. 'tok') end\n" \
	"local function move(id, from, to, t)\n" \
	"  redis.call('SREM', S(from), id)\n" \
	"  redis.call('SADD', S(to), id)\n" \
	"  redis.call('HSET', W(id), 'state', to, 'since', t)\n" \
	"end\n" \
	"local function done(opid, res)\n" \
	"  local s = cjson.encode(res)\n" \
	"  if opid ~= '' then\n" \
	"    redis.call('SET', P .. 'op:' .. opid, s, 'PX', 600000)\n" \
	"  end\n" \
	"  return s\n" \
	"end\n" \
	"local function unlease(id)\n" \
	"  local h = redis.call('HMGET', W(id), 'lease', 'owner')\n" \
	"  if h[1] then redis.call('DEL', P .. 'l:' .. h[1]) end\n" \
	"  if h[2] then\n" \
	"    if redis.call('HINCRBY', P .. 'members', h[2], -1) <= 0 then\n" \
	"      redis.call('HDEL', P .. 'members', h[2])\n" \
	"    end\n" \
	"  end\n" \
	"  redis.call('ZREM', P .. 'exp', id)\n" \
	"  redis.call('HDEL', W(id), 'lease', 'owner', 'expires', 'rid')\n" \
	"end\n" \
	"local function forget(id, st)\n" \
	"  if st == 'leased' then unlease(id) end\n" \
	"  redis.call('SREM', S(st), id)\n" \
	"  redis.call('DEL', W(id))\n" \
	"end\n"

/* Mutating scripts: answer a retried op id from its stored result, and
 * refuse to run on a store that has lost its epoch. */
#define OPCHECK \
	"local opid = ARGV[1]\n" \
	"if opid ~= '' then\n" \
	"  local prev = redis.call('GET', P .. 'op:' .. opid)\n" \
	"  if prev then\n" \
	"    local r = cjson.decode(prev)\n" \
	"    r.replay = true\n" \
	"    return cjson.encode(r)\n" \
	"  end\n" \
	"end\n" \
	"local EP = redis.call('GET', P .. 'epoch')\n" \
	"if not EP then\n" \
	"  return fail('store_unavailable', 'store has no epoch (lost its data)')\n" \
	"end\n"

#define S_INIT \
	"local ep = redis.call('GET', P .. 'epoch')\n" \
	"local rid = redis.call('GET', P .. 'runid')\n" \
	"if ep and rid == ARGV[1] then\n" \
	"  return cjson.encode({epoch = ep, changed = false})\n" \
	"end\n" \
	"redis.call('SET', P .. 'epoch', ARGV[2])\n" \
	"redis.call('SET', P .. 'runid', ARGV[1])\n" \
	"return cjson.encode({epoch = ARGV[2], changed = true})\n"

#define S_CREATE_BEGIN \
	"local id, cap = ARGV[2], tonumber(ARGV[3])\n" \
	"if redis.call('EXISTS', W(id)) == 1 then\n" \
	"  return fail('exists', 'worker id already recorded')\n" \
	"end\n" \
	"local n = 0\n" \
	"for _, st in ipairs(STATES) do n = n + redis.call('SCARD', S(st)) end\n" \
	"if n >= cap then return fail('capacity', 'pool is at capacity') end\n" \
	"local t = now()\n" \
	"local tok = newtok(EP)\n" \
	"redis.call('HSET', W(id), 'state', 'creating', 'token', tok, 'since', t,\n" \
	"  'created', t)\n" \
	"redis.call('SADD', S('creating'), id)\n" \
	"return done(opid, {id = id, token = tok})\n"

#define S_CREATE_COMMIT \
	"local id, tok = ARGV[2], ARGV[3]\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token')\n" \
	"if h[1] ~= 'creating' or h[2] ~= tok then\n" \
	"  return fail('stale_token', 'worker is not being created under this token')\n" \
	"end\n" \
	"move(id, 'creating', 'warm', now())\n" \
	"redis.call('HSET', W(id), 'endpoint', ARGV[4], 'gen', ARGV[5])\n" \
	"return done(opid, {id = id, state = 'warm'})\n"

#define S_CREATE_ABORT \
	"local id, tok = ARGV[2], ARGV[3]\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token')\n" \
	"if h[1] ~= 'creating' or h[2] ~= tok then\n" \
	"  return fail('stale_token', 'worker is not being created under this token')\n" \
	"end\n" \
	"forget(id, 'creating')\n" \
	"return done(opid, {id = id, state = 'absent'})\n"

#define S_LEASE \
	"local member, wskey, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])\n" \
	"local limit, lid, rid = tonumber(ARGV[5]), ARGV[6], ARGV[7]\n" \
	"local cur = tonumber(redis.call('HGET', P .. 'members', member) or '0')\n" \
	"if cur >= limit then\n" \
	"  return fail('member_limit', 'member is at its concurrency limit')\n" \
	"end\n" \
	"if redis.call('EXISTS', P .. 'l:' .. lid) == 1 then\n" \
	"  return fail('bad_request', 'lease id already in use')\n" \
	"end\n" \
	"local id = redis.call('SRANDMEMBER', S('warm'))\n" \
	"if not id then return fail('no_worker', 'no warm worker available') end\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token', 'endpoint', 'gen',\n" \
	"  'clean')\n" \
	"if h[1] ~= 'warm' or ep_of(h[2]) ~= EP then\n" \
	"  return fail('internal', 'warm set disagrees with a worker record')\n" \
	"end\n" \
	"local t = now()\n" \
	"local tok = newtok(EP)\n" \
	"local exp = t + ttl\n" \
	"move(id, 'warm', 'leased', t)\n" \
	"redis.call('HSET', W(id), 'token', tok, 'owner', member, 'wskey', wskey,\n" \
	"  'lease', lid, 'expires', exp)\n" \
	"if rid and rid ~= '' then redis.call('HSET', W(id), 'rid', rid) end\n" \
	"redis.call('ZADD', P .. 'exp', exp, id)\n" \
	"redis.call('HINCRBY', P .. 'members', member, 1)\n" \
	"redis.call('SET', P .. 'l:' .. lid, id)\n" \
	"return done(opid, {worker = id, endpoint = h[3], gen = h[4], lease_id = lid,\n" \
	"  token = tok, expires_ms = exp, ttl_ms = ttl,\n" \
	"  clean_token = h[5] or nil})\n"

/*
 * Only the owner's current token, before expiry, sends the worker to
 * reset.  A release under a stale token, or of a lease that expired but
 * was not swept yet, retires the worker instead (workers do not check
 * tokens, so a holder of the old endpoint must find nothing there): the
 * result names it with "retired" and carries the refusal for the caller.
 */
#define S_RELEASE \
	"local lid, tok = ARGV[2], ARGV[3]\n" \
	"local id = redis.call('GET', P .. 'l:' .. lid)\n" \
	"if not id then return fail('not_owner', 'no such lease') end\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token', 'wskey', 'endpoint',\n" \
	"  'gen', 'rid', 'expires')\n" \
	"if h[1] ~= 'leased' then\n" \
	"  return fail('stale_token', 'lease token does not match')\n" \
	"end\n" \
	"local t = now()\n" \
	"local why, reason = nil, nil\n" \
	"if h[2] ~= tok then\n" \
	"  why, reason = 'stale_release', 'lease token does not match'\n" \
	"elseif tonumber(h[7] or '0') <= t then\n" \
	"  why, reason = 'expired', 'lease expired'\n" \
	"end\n" \
	"local rt = newtok(EP)\n" \
	"unlease(id)\n" \
	"if why then\n" \
	"  move(id, 'leased', 'retiring', t)\n" \
	"  redis.call('HSET', W(id), 'token', rt, 'why', why)\n" \
	"  return done(opid, {worker = id, retired = why, token = rt,\n" \
	"    refused = 'stale_token', reason = reason, run_id = h[6] or nil})\n" \
	"end\n" \
	"move(id, 'leased', 'resetting', t)\n" \
	"redis.call('HSET', W(id), 'token', rt)\n" \
	"return done(opid, {worker = id, reset_token = rt, wskey = h[3],\n" \
	"  endpoint = h[4], gen = h[5], run_id = h[6] or nil})\n"

#define S_RENEW \
	"local lid, tok, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])\n" \
	"local id = redis.call('GET', P .. 'l:' .. lid)\n" \
	"if not id then return fail('not_owner', 'no such lease') end\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token', 'expires')\n" \
	"if h[1] ~= 'leased' or h[2] ~= tok then\n" \
	"  return fail('stale_token', 'lease token does not match')\n" \
	"end\n" \
	"local t = now()\n" \
	"if tonumber(h[3]) <= t then return fail('stale_token', 'lease expired') end\n" \
	"redis.call('HSET', W(id), 'expires', t + ttl)\n" \
	"redis.call('ZADD', P .. 'exp', t + ttl, id)\n" \
	"return done(opid, {worker = id, expires_ms = t + ttl, ttl_ms = ttl})\n"

/* An expired lease retires its worker, never resets it for a new owner:
 * kz-lease deletes it and a replacement is created. */
#define S_SWEEP \
	"local t = now()\n" \
	"local ids = redis.call('ZRANGEBYSCORE', P .. 'exp', '-inf', t, 'LIMIT', 0,\n" \
	"  tonumber(ARGV[2]))\n" \
	"local out = {}\n" \
	"for _, id in ipairs(ids) do\n" \
	"  local h = redis.call('HMGET', W(id), 'state', 'rid')\n" \
	"  if h[1] == 'leased' then\n" \
	"    local rt = newtok(EP)\n" \
	"    unlease(id)\n" \
	"    move(id, 'leased', 'retiring', t)\n" \
	"    redis.call('HSET', W(id), 'token', rt, 'why', 'expired')\n" \
	"    out[#out + 1] = {worker = id, token = rt, run_id = h[2] or nil}\n" \
	"  else\n" \
	"    redis.call('ZREM', P .. 'exp', id)\n" \
	"  end\n" \
	"end\n" \
	"return done(opid, {expired = out, n = #out})\n"

#define S_PUBLISH \
	"local id, tok = ARGV[2], ARGV[3]\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token')\n" \
	"if h[1] ~= 'resetting' or h[2] ~= tok or ep_of(tok) ~= EP then\n" \
	"  return fail('stale_token', 'reset token does not match')\n" \
	"end\n" \
	"move(id, 'resetting', 'warm', now())\n" \
	"redis.call('HSET', W(id), 'gen', ARGV[4], 'clean', tok)\n" \
	"redis.call('HDEL', W(id), 'wskey')\n" \
	"return done(opid, {worker = id, state = 'warm'})\n"

#define S_RETIRE \
	"local id, tok = ARGV[2], ARGV[3]\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token')\n" \
	"if not h[1] then return fail('not_found', 'no such worker') end\n" \
	"if h[2] ~= tok or h[1] == 'retiring' or h[1] == 'deleting' then\n" \
	"  return fail('stale_token', 'token does not match')\n" \
	"end\n" \
	"local rt = newtok(EP)\n" \
	"if h[1] == 'leased' then unlease(id) end\n" \
	"move(id, h[1], 'retiring', now())\n" \
	"redis.call('HSET', W(id), 'token', rt, 'why', ARGV[4])\n" \
	"return done(opid, {worker = id, state = 'retiring', token = rt})\n"

#define S_DELETED \
	"local id, tok = ARGV[2], ARGV[3]\n" \
	"local h = redis.call('HMGET', W(id), 'state', 'token')\n" \
	"if (h[1] ~= 'retiring' and h[1] ~= 'deleting') or h[2] ~= tok then\n" \
	"  return fail('stale_token', 'worker is not being deleted under this token')\n" \
	"end\n" \
	"forget(id, h[1])\n" \
	"return done(opid, {worker = id, state = 'absent'})\n"

#define S_RECONCILE \
	"local inv = {}\n" \
	"for _, id in ipairs(cjson.decode(ARGV[2])) do inv[id] = true end\n" \
	"local cgrace, rgrace = tonumber(ARGV[3]), tonumber(ARGV[4])\n" \
	"local t = now()\n" \
	"local seen, retire, delete, removed = {}, {}, {}, 0\n" \
	"local plan = {}\n" \
	"for _, st in ipairs(STATES) do\n" \
	"  for _, id in ipairs(redis.call('SMEMBERS', S(st))) do\n" \
	"    seen[id] = true\n" \
	"    local h = redis.call('HMGET', W(id), 'token', 'since')\n" \
	"    local age = t - tonumber(h[2] or '0')\n" \
	"    if st == 'retiring' or st == 'deleting' then\n" \
	"      if inv[id] then plan[#plan + 1] = {id, st, 'delete'}\n" \
	"      else plan[#plan + 1] = {id, st, 'forget'} end\n" \
	"    elseif st == 'creating' then\n" \
	"      if ep_of(h[1]) ~= EP or age > cgrace then\n" \
	"        if inv[id] then plan[#plan + 1] = {id, st, 'deleting'}\n" \
	"        else plan[#plan + 1] = {id, st, 'forget'} end\n" \
	"      end\n" \
	"    elseif not inv[id] then\n" \
	"      plan[#plan + 1] = {id, st, 'forget'}\n" \
	"    elseif ep_of(h[1]) ~= EP then\n" \
	"      plan[#plan + 1] = {id, st, 'retire'}\n" \
	"    elseif st == 'resetting' and age > rgrace then\n" \
	"      plan[#plan + 1] = {id, st, 'retire'}\n" \
	"    end\n" \
	"  end\n" \
	"end\n" \
	"local orphans = {}\n" \
	"for id, _ in pairs(inv) do\n" \
	"  if not seen[id] then orphans[#orphans + 1] = id end\n" \
	"end\n" \
	"for _, p in ipairs(plan) do\n" \
	"  local id, st, act = p[1], p[2], p[3]\n" \
	"  if act == 'forget' then\n" \
	"    forget(id, st)\n" \
	"    removed = removed + 1\n" \
	"  elseif act == 'delete' then\n" \
	"    delete[#delete + 1] = {worker = id,\n" \
	"      token = redis.call('HGET', W(id), 'token')}\n" \
	"  elseif act == 'deleting' then\n" \
	"    local tok = newtok(EP)\n" \
	"    move(id, st, 'deleting', t)\n" \
	"    redis.call('HSET', W(id), 'token', tok)\n" \
	"    delete[#delete + 1] = {worker = id, token = tok}\n" \
	"  else\n" \
	"    local tok = newtok(EP)\n" \
	"    if st == 'leased' then unlease(id) end\n" \
	"    move(id, st, 'retiring', t)\n" \
	"    redis.call('HSET', W(id), 'token', tok, 'why', 'reconcile')\n" \
	"    retire[#retire + 1] = {worker = id, token = tok}\n" \
	"  end\n" \
	"end\n" \
	"return done(opid, {retire = retire, delete = delete, orphans = orphans,\n" \
	"  removed = removed})\n"

#define S_STATUS \
	"local res = {capacity = tonumber(ARGV[1]), epoch =\n" \
	"  redis.call('GET', P .. 'epoch') or '', total = 0}\n" \
	"for _, st in ipairs(STATES) do\n" \
	"  res[st] = redis.call('SCARD', S(st))\n" \
	"  res.total = res.total + res[st]\n" \
	"end\n" \
	"res.members = redis.call('HLEN', P .. 'members')\n" \
	"return cjson.encode(res)\n"

#define S_GET \
	"local h = redis.call('HGETALL', W(ARGV[1]))\n" \
	"if #h == 0 then return fail('not_found', 'no such worker') end\n" \
	"local r = {}\n" \
	"for i = 1, #h, 2 do r[h[i]] = h[i + 1] end\n" \
	"r.owner = nil\n" \
	"r.epoch = redis.call('GET', P .. 'epoch') or ''\n" \
	"return cjson.encode(r)\n"

struct kz_script kz_pool_scripts[KZ_POOL_NSCRIPTS] = {
	[KZ_POOL_INIT] = {"init", PROLOGUE S_INIT, ""},
	[KZ_POOL_CREATE_BEGIN] = {"create_begin", PROLOGUE OPCHECK S_CREATE_BEGIN, ""},
	[KZ_POOL_CREATE_COMMIT] = {"create_commit", PROLOGUE OPCHECK S_CREATE_COMMIT, ""},
	[KZ_POOL_CREATE_ABORT] = {"create_abort", PROLOGUE OPCHECK S_CREATE_ABORT, ""},
	[KZ_POOL_LEASE] = {"lease", PROLOGUE OPCHECK S_LEASE, ""},
	[KZ_POOL_RELEASE] = {"release", PROLOGUE OPCHECK S_RELEASE, ""},
	[KZ_POOL_RENEW] = {"renew", PROLOGUE OPCHECK S_RENEW, ""},
	[KZ_POOL_SWEEP] = {"sweep", PROLOGUE OPCHECK S_SWEEP, ""},
	[KZ_POOL_PUBLISH] = {"publish", PROLOGUE OPCHECK S_PUBLISH, ""},
	[KZ_POOL_RETIRE] = {"retire", PROLOGUE OPCHECK S_RETIRE, ""},
	[KZ_POOL_DELETED] = {"deleted", PROLOGUE OPCHECK S_DELETED, ""},
	[KZ_POOL_RECONCILE] = {"reconcile", PROLOGUE OPCHECK S_RECONCILE, ""},
	[KZ_POOL_STATUS] = {"status", PROLOGUE S_STATUS, ""},
	[KZ_POOL_GET] = {"get", PROLOGUE S_GET, ""},
};

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
	    strspn(id, "abcdefghijklmnopqrstuvwxyz"
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == n;
}

int
kz_pool_parse(const redisReply *r, cJSON **out, char *why, size_t wlen)
{
	if (r == NULL || (r->type != REDIS_REPLY_STRING &&
	    r->type != REDIS_REPLY_STATUS)) {
		kz_why(why, wlen, "script gave no JSON reply");
		return KZ_EPROTO;
	}
	return kz_json_parse_object(r->str, r->len, out, why, wlen);
}

const char *
kz_pool_errcode(const cJSON *res)
{
	const cJSON *e = kz_json_get(res, "err");

	return cJSON_IsString(e) ? e->valuestring : NULL;
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
	e = kz_store_eval(s, &kz_pool_scripts[which], 1, argc + 1, av, &r,
	    why, wlen);
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

	return p != NULL && kz_parse_int(p + 1, 0, INT64_MAX / 2, &v) == 0 ?
	    v : 0;
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
	n = snprintf(buf, len, "%s/%s%s%s", workers_dir, id,
	    *leaf ? "/" : "", leaf);
	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : 0;
}
