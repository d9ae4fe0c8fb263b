/* lib/pool.c's transition scripts against a real redis-server/valkey-
 * server (teststore.h): each checks state and fencing token before it
 * writes; a worker is leased only from warm and by one owner; a stale
 * token is refused, and a release under one, or after expiry, retires the
 * worker, as the expiry sweep does; a retried op id is answered from its stored
 * result, only for the same request and, for a lease or renew, only while
 * that lease holds; an epoch change fences every older token; admission is
 * counted. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kz_json.h"
#include "kz_pool.h"
#include "teststore.h"
#include "kz_check.h"
#include "banned.h"

#define CAP "4"
#define TTL "60000"

static struct kz_store *s;
static char epoch[KZ_POOL_EPOCH_HEX + 1];

/* Runs a script with the NULL-terminated args; the parsed reply. */
static cJSON *
run(enum kz_pool_script which, ...)
{
	const char *av[16];
	char why[200] = "";
	cJSON *res = NULL;
	va_list ap;
	int n = 0;

	va_start(ap, which);
	while (n < 16 && (av[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	ck_assert_msg(kz_pool_call(s, which, n, av, &res, why, sizeof(why)) ==
	        0,
	    "%s: %s", kz_pool_script_name(which), why);
	return res;
}

static const char *
sget(const cJSON *o, const char *k)
{
	const char *v = cJSON_GetStringValue(kz_json_get(o, k));

	return v != NULL ? v : "";
}

/* The error code of a script, the reply freed. */
static char errbuf[64];
static const char *
err_of(cJSON *res)
{
	const char *e = kz_pool_errcode(res);

	snprintf(errbuf, sizeof(errbuf), "%s", e != NULL ? e : "");
	cJSON_Delete(res);
	return errbuf;
}

static long long
status(const char *field)
{
	cJSON *st = run(KZ_POOL_STATUS, CAP, NULL);
	long long v = (long long)cJSON_GetNumberValue(kz_json_get(st, field));

	cJSON_Delete(st);
	return v;
}

static char *
raw(const char *suffix, const char *field)
{
	static char out[128];
	char key[KZ_STORE_KEY_MAX];
	const char *av[3] = {field ? "HGET" : "GET", key, field};
	redisReply *r;

	ck_assert(kz_store_key(s, suffix, key, sizeof(key)) == 0);
	ck_assert(kz_store_cmd(s, field ? 3 : 2, av, &r, NULL, 0) == 0);
	snprintf(out, sizeof(out), "%s",
	    r->type == REDIS_REPLY_STRING ? r->str : "");
	freeReplyObject(r);
	return out;
}

static char *
wstate(const char *id)
{
	char k[80];

	snprintf(k, sizeof(k), "w:%s", id);
	return raw(k, "state");
}

static char opbuf[KZ_OPID_HEX + 1];
static const char *
op(void)
{
	kz_store_opid(opbuf);
	return opbuf;
}

/* A warm worker id (create-begin then create-commit). */
static void
warm(const char *id)
{
	cJSON *b = run(KZ_POOL_CREATE_BEGIN, op(), id, CAP, NULL), *c;
	char tok[KZ_POOL_TOKEN_MAX + 1];

	ck_assert_ptr_null(kz_pool_errcode(b));
	snprintf(tok, sizeof(tok), "%s", sget(b, "token"));
	cJSON_Delete(b);
	c = run(KZ_POOL_CREATE_COMMIT, op(), id, tok, "/tmp/x.sock", "g1",
	    NULL);
	ck_assert_str_eq(sget(c, "state"), "warm");
	cJSON_Delete(c);
}

struct lease {
	char worker[65], lid[40], token[KZ_POOL_TOKEN_MAX + 1];
};

static int
lease(const char *member, const char *limit, const char *opid, struct lease *l,
    const char **code)
{
	cJSON *r;
	char lid[40];

	/* A given op id names its lease, as kz-lease derives one from it. */
	snprintf(lid, sizeof(lid), "lid-%s", opid ? opid : op());
	r = run(KZ_POOL_LEASE, opid ? opid : op(), member, "wskey", TTL, limit,
	    lid, "code.run", NULL);
	if (kz_pool_errcode(r) != NULL) {
		if (code != NULL)
			*code = err_of(r);
		else
			cJSON_Delete(r);
		return -1;
	}
	snprintf(l->worker, sizeof(l->worker), "%s", sget(r, "worker"));
	snprintf(l->lid, sizeof(l->lid), "%s", sget(r, "lease_id"));
	snprintf(l->token, sizeof(l->token), "%s", sget(r, "token"));
	cJSON_Delete(r);
	return 0;
}

static void
setup(void)
{
	const char *fl[] = {"FLUSHALL"};
	redisReply *r;
	char why[200] = "";
	bool changed = false;

	ck_assert_msg(kz_store_open(ts_sock, "t", 2000, &s, why, sizeof(why)) ==
	        0,
	    "%s", why);
	ck_assert(kz_store_cmd(s, 1, fl, &r, NULL, 0) == 0);
	freeReplyObject(r);
	ck_assert(kz_pool_init(s, epoch, sizeof(epoch), &changed, why,
	              sizeof(why)) == 0);
	ck_assert(changed);
}

static void
teardown(void)
{
	kz_store_free(s);
	s = NULL;
}

START_TEST(test_init_epoch)
{
	char again[KZ_POOL_EPOCH_HEX + 1];
	bool changed = true;
	const char *del[] = {"DEL", "kz:{t}:epoch"};
	redisReply *r;

	ck_assert_uint_eq(strspn(epoch, "0123456789abcdef"), KZ_POOL_EPOCH_HEX);
	ck_assert(
	    kz_pool_init(s, again, sizeof(again), &changed, NULL, 0) == 0);
	ck_assert(!changed);
	ck_assert_str_eq(again, epoch);
	/* The store came back without its data: a fresh epoch. */
	ck_assert(kz_store_cmd(s, 2, del, &r, NULL, 0) == 0);
	freeReplyObject(r);
	ck_assert(
	    kz_pool_init(s, again, sizeof(again), &changed, NULL, 0) == 0);
	ck_assert(changed);
	ck_assert_str_ne(again, epoch);
}
END_TEST

START_TEST(test_create_capacity_and_exists)
{
	cJSON *r;

	warm("w1");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_CREATE_BEGIN, op(), "w1", CAP, NULL)),
	    "exists");
	warm("w2");
	r = run(KZ_POOL_CREATE_BEGIN, op(), "w3", "3", NULL);
	ck_assert_ptr_null(kz_pool_errcode(r));
	cJSON_Delete(r);
	/* A create in flight counts against capacity. */
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_CREATE_BEGIN, op(), "w4", "3", NULL)),
	    "capacity");
	ck_assert_int_eq(status("creating"), 1);
	ck_assert_int_eq(status("warm"), 2);
	ck_assert_int_eq(status("total"), 3);
}
END_TEST

START_TEST(test_create_commit_token)
{
	cJSON *b = run(KZ_POOL_CREATE_BEGIN, op(), "w1", CAP, NULL);
	char tok[KZ_POOL_TOKEN_MAX + 1];
	struct lease l;
	const char *code = NULL;

	snprintf(tok, sizeof(tok), "%s", sget(b, "token"));
	cJSON_Delete(b);
	ck_assert(strncmp(tok, epoch, KZ_POOL_EPOCH_HEX) == 0 &&
	    tok[KZ_POOL_EPOCH_HEX] == ':');
	/* A creating worker is never leased. */
	ck_assert_int_eq(lease("m", "8", NULL, &l, &code), -1);
	ck_assert_str_eq(code, "no_worker");
	ck_assert_str_eq(err_of(run(KZ_POOL_CREATE_COMMIT, op(), "w1",
	                     "bogus:1", "/e", "g", NULL)),
	    "stale_token");
	ck_assert_str_eq(wstate("w1"), "creating");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_CREATE_ABORT, op(), "w1", tok, NULL)),
	    "");
	ck_assert_str_eq(wstate("w1"), "");
	ck_assert_int_eq(status("total"), 0);
}
END_TEST

START_TEST(test_lease_one_owner)
{
	struct lease a, b;
	const char *code = NULL;

	warm("w1");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	ck_assert_str_eq(a.worker, "w1");
	ck_assert_str_eq(wstate("w1"), "leased");
	/* The only worker is leased: nobody else gets it. */
	ck_assert_int_eq(lease("bob", "8", NULL, &b, &code), -1);
	ck_assert_str_eq(code, "no_worker");
	ck_assert_int_eq(lease("alice", "8", NULL, &b, &code), -1);
	ck_assert_str_eq(code, "no_worker");
	ck_assert_int_eq(status("leased"), 1);
	ck_assert_int_eq(status("warm"), 0);
}
END_TEST

START_TEST(test_lease_id_reuse_writes_nothing)
{
	struct lease a;
	cJSON *r;
	char tok0[32];

	warm("w1");
	warm("w2");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	snprintf(tok0, sizeof(tok0), "%s", raw("tok", NULL));
	r = run(KZ_POOL_LEASE, op(), "bob", "k", TTL, "8", a.lid, "c", NULL);
	ck_assert_str_eq(err_of(r), "bad_request");
	/* Checked before the first write: no token, no move, no count. */
	ck_assert_str_eq(raw("tok", NULL), tok0);
	ck_assert_int_eq(status("warm"), 1);
	ck_assert_str_eq(raw("members", "bob"), "");
}
END_TEST

START_TEST(test_release_and_stale_tokens)
{
	struct lease a;
	cJSON *r;
	char rt[KZ_POOL_TOKEN_MAX + 1];

	warm("w1");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RELEASE, op(), "nope", a.token, NULL)),
	    "not_owner");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RENEW, op(), a.lid, "x:1", TTL, NULL)),
	    "stale_token");
	ck_assert_str_eq(wstate("w1"), "leased");
	ck_assert_str_eq(err_of(run(KZ_POOL_RENEW, op(), a.lid, a.token, TTL,
	                     NULL)),
	    "");
	r = run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL);
	ck_assert_ptr_null(kz_pool_errcode(r));
	snprintf(rt, sizeof(rt), "%s", sget(r, "reset_token"));
	cJSON_Delete(r);
	ck_assert_str_eq(wstate("w1"), "resetting");
	ck_assert_str_ne(rt, a.token);
	/* The old owner's token is dead: no second release, no renew. */
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL)),
	    "not_owner");
	ck_assert_str_eq(err_of(run(KZ_POOL_RENEW, op(), a.lid, a.token, TTL,
	                     NULL)),
	    "not_owner");
	/* Released, not yet reset: not leasable. */
	ck_assert_int_eq(status("warm"), 0);
	/* Publish only with the reset token. */
	ck_assert_str_eq(err_of(run(KZ_POOL_PUBLISH, op(), "w1", a.token, "g2",
	                     NULL)),
	    "stale_token");
	ck_assert_str_eq(wstate("w1"), "resetting");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_PUBLISH, op(), "w1", rt, "g2", NULL)),
	    "");
	ck_assert_str_eq(wstate("w1"), "warm");
	/* The same reset token cannot publish twice. */
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_PUBLISH, op(), "w1", rt, "g3", NULL)),
	    "stale_token");
	ck_assert_str_eq(raw("w:w1", "gen"), "g2");
}
END_TEST

/* A retried op id (the first reply was lost) is answered from the stored
 * result and applied once. */
START_TEST(test_opid_replay)
{
	struct lease a, b;
	char id[KZ_OPID_HEX + 1], tok0[32];
	cJSON *r;

	warm("w1");
	warm("w2");
	snprintf(id, sizeof(id), "%s", op());
	ck_assert_int_eq(lease("alice", "8", id, &a, NULL), 0);
	snprintf(tok0, sizeof(tok0), "%s", raw("tok", NULL));
	r = run(KZ_POOL_LEASE, id, "alice", "wskey", TTL, "8", a.lid,
	    "code.run", NULL);
	ck_assert(cJSON_IsTrue(kz_json_get(r, "replay")));
	ck_assert_str_eq(sget(r, "worker"), a.worker);
	ck_assert_str_eq(sget(r, "token"), a.token);
	ck_assert_str_eq(sget(r, "lease_id"), a.lid);
	cJSON_Delete(r);
	ck_assert_str_eq(raw("tok", NULL), tok0);
	ck_assert_int_eq(status("leased"), 1);
	ck_assert_str_eq(raw("members", "alice"), "1");
	/* A replayed release does not release twice either. */
	snprintf(id, sizeof(id), "%s", op());
	cJSON_Delete(run(KZ_POOL_RELEASE, id, a.lid, a.token, NULL));
	ck_assert_int_eq(lease("bob", "8", NULL, &b, NULL), 0);
	r = run(KZ_POOL_RELEASE, id, a.lid, a.token, NULL);
	ck_assert(cJSON_IsTrue(kz_json_get(r, "replay")));
	ck_assert_ptr_null(kz_pool_errcode(r));
	cJSON_Delete(r);
	ck_assert_str_eq(wstate(b.worker), "leased");
	/* A failure is not stored: the same id may try again. */
	snprintf(id, sizeof(id), "%s", op());
	ck_assert_str_eq(err_of(run(KZ_POOL_RELEASE, id, "nope", "x:1", NULL)),
	    "not_owner");
	ck_assert_str_eq(raw("op:", NULL), "");
}
END_TEST

/* The same op id with another script or other arguments is refused, and
 * the stored result is not given away: it answers only its own request. */
START_TEST(test_opid_bound_to_request)
{
	struct lease a;
	char id[KZ_OPID_HEX + 1], tok0[32], lid[KZ_POOL_TOKEN_MAX + 2], w[8];
	cJSON *r;

	warm("w1");
	warm("w2");
	snprintf(id, sizeof(id), "%s", op());
	ck_assert_int_eq(lease("alice", "8", id, &a, NULL), 0);
	snprintf(tok0, sizeof(tok0), "%s", raw("tok", NULL));
	snprintf(lid, sizeof(lid), "lid-%s", id);
	/* Another member, or any other argument, under the same op id. */
	r = run(KZ_POOL_LEASE, id, "mallory", "wskey", TTL, "8", lid,
	    "code.run", NULL);
	ck_assert_ptr_null(kz_json_get(r, "token"));
	ck_assert_ptr_null(kz_json_get(r, "worker"));
	ck_assert_str_eq(err_of(r), "bad_request");
	ck_assert_str_eq(err_of(run(KZ_POOL_LEASE, id, "alice", "wskey", "1",
	                     "8", lid, "code.run", NULL)),
	    "bad_request");
	ck_assert_str_eq(err_of(run(KZ_POOL_LEASE, id, "alice", "wskey", TTL,
	                     "8", "other-lid", "code.run", NULL)),
	    "bad_request");
	/* Another script. */
	r = run(KZ_POOL_RENEW, id, "x", "bogus", TTL, NULL);
	ck_assert_ptr_null(kz_json_get(r, "worker"));
	ck_assert_str_eq(err_of(r), "bad_request");
	ck_assert_str_eq(err_of(run(KZ_POOL_RELEASE, id, a.lid, a.token, NULL)),
	    "bad_request");
	ck_assert_str_eq(err_of(run(KZ_POOL_SWEEP, id, "10", NULL)),
	    "bad_request");
	/* Nothing was written, and the lease is alice's alone. */
	ck_assert_str_eq(raw("tok", NULL), tok0);
	ck_assert_int_eq(status("leased"), 1);
	ck_assert_str_eq(raw("members", "mallory"), "");
	ck_assert_str_eq(wstate(a.worker), "leased");
	/* Two scripts with the same arguments differ by name. */
	snprintf(id, sizeof(id), "%s", op());
	r = run(KZ_POOL_RETIRE, id, a.worker, a.token, "g", NULL);
	ck_assert_ptr_null(kz_pool_errcode(r));
	cJSON_Delete(r);
	ck_assert_str_eq(err_of(run(KZ_POOL_PUBLISH, id, a.worker, a.token, "g",
	                     NULL)),
	    "bad_request");
	/* Arguments are joined length-prefixed: "w2","T" is not "w","2T". */
	snprintf(w, sizeof(w), "w:%s", strcmp(a.worker, "w1") ? "w1" : "w2");
	snprintf(id, sizeof(id), "%s", op());
	snprintf(lid, sizeof(lid), "%c%s", w[3], raw(w, "token"));
	r = run(KZ_POOL_RETIRE, id, w + 2, lid + 1, "x", NULL);
	ck_assert_ptr_null(kz_pool_errcode(r));
	cJSON_Delete(r);
	ck_assert_str_eq(err_of(run(KZ_POOL_RETIRE, id, "w", lid, "x", NULL)),
	    "bad_request");
	r = run(KZ_POOL_RETIRE, id, w + 2, lid + 1, "x", NULL);
	ck_assert(cJSON_IsTrue(kz_json_get(r, "replay")));
	cJSON_Delete(r);
}
END_TEST

/* A replayed lease or renew is answered only while that lease holds: its
 * stored answer names a worker that may since have another owner. */
START_TEST(test_replay_after_lease_ended)
{
	struct lease a, b;
	char id[KZ_OPID_HEX + 1], rid[KZ_OPID_HEX + 1], lid[40];
	cJSON *r;

	warm("w1");
	snprintf(id, sizeof(id), "%s", op());
	ck_assert_int_eq(lease("alice", "8", id, &a, NULL), 0);
	snprintf(lid, sizeof(lid), "lid-%s", id);
	snprintf(rid, sizeof(rid), "%s", op());
	ck_assert_str_eq(err_of(run(KZ_POOL_RENEW, rid, a.lid, a.token, TTL,
	                     NULL)),
	    "");
	r = run(KZ_POOL_RENEW, rid, a.lid, a.token, TTL, NULL);
	ck_assert(cJSON_IsTrue(kz_json_get(r, "replay")));
	ck_assert_str_eq(sget(r, "worker"), a.worker);
	cJSON_Delete(r);
	/* Released, reset, and leased to bob: the same worker. */
	r = run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL);
	ck_assert_str_eq(err_of(run(KZ_POOL_PUBLISH, op(), a.worker,
	                     sget(r, "reset_token"), "g2", NULL)),
	    "");
	cJSON_Delete(r);
	ck_assert_int_eq(lease("bob", "8", NULL, &b, NULL), 0);
	ck_assert_str_eq(b.worker, a.worker);
	r = run(KZ_POOL_LEASE, id, "alice", "wskey", TTL, "8", lid, "code.run",
	    NULL);
	ck_assert_ptr_null(kz_json_get(r, "token"));
	ck_assert_ptr_null(kz_json_get(r, "endpoint"));
	ck_assert_str_eq(err_of(r), "stale_token");
	ck_assert_str_eq(err_of(run(KZ_POOL_RENEW, rid, a.lid, a.token, TTL,
	                     NULL)),
	    "stale_token");
	ck_assert_str_eq(wstate(b.worker), "leased");
	ck_assert_str_eq(raw("members", "alice"), "");
	/* An expired lease, not yet swept, is not answered either. */
	warm("w2");
	snprintf(id, sizeof(id), "%s", op());
	r = run(KZ_POOL_LEASE, id, "carol", "k", "1", "8", "lidz", "c", NULL);
	ck_assert_ptr_null(kz_pool_errcode(r));
	cJSON_Delete(r);
	ts_nap(20);
	ck_assert_str_eq(err_of(run(KZ_POOL_LEASE, id, "carol", "k", "1", "8",
	                     "lidz", "c", NULL)),
	    "stale_token");
	ck_assert_str_eq(wstate("w2"), "leased");
}
END_TEST

/* A result stored by an older version (no fingerprint) cannot tell which
 * request it answers: it is refused, never replayed. */
START_TEST(test_unbound_stored_result_refused)
{
	struct lease a;
	char key[KZ_STORE_KEY_MAX], id[KZ_OPID_HEX + 1], lid[40], old[256];
	const char *set[] = {"SET", key, old};
	redisReply *x;
	cJSON *r;

	warm("w1");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	snprintf(id, sizeof(id), "%s", op());
	snprintf(lid, sizeof(lid), "lid-%s", id);
	snprintf(key, sizeof(key), "kz:{t}:op:%s", id);
	snprintf(old, sizeof(old),
	    "{\"worker\":\"%s\",\"lease_id\":\"%s\",\"token\":\"%s\"}",
	    a.worker, a.lid, a.token);
	ck_assert(kz_store_cmd(s, 3, set, &x, NULL, 0) == 0);
	freeReplyObject(x);
	r = run(KZ_POOL_LEASE, id, "alice", "wskey", TTL, "8", lid, "code.run",
	    NULL);
	ck_assert_ptr_null(kz_json_get(r, "token"));
	ck_assert_str_eq(err_of(r), "bad_request");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RENEW, id, a.lid, a.token, TTL, NULL)),
	    "bad_request");
	ck_assert_int_eq(status("leased"), 1);
}
END_TEST

START_TEST(test_member_limit)
{
	struct lease a, b, c;
	const char *code = NULL;

	warm("w1");
	warm("w2");
	warm("w3");
	ck_assert_int_eq(lease("alice", "1", NULL, &a, NULL), 0);
	ck_assert_int_eq(lease("alice", "1", NULL, &b, &code), -1);
	ck_assert_str_eq(code, "member_limit");
	ck_assert_int_eq(status("warm"), 2);
	ck_assert_int_eq(lease("bob", "1", NULL, &b, NULL), 0);
	ck_assert_int_eq(status("members"), 2);
	cJSON_Delete(run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL));
	ck_assert_str_eq(raw("members", "alice"), "");
	ck_assert_int_eq(status("members"), 1);
	ck_assert_int_eq(lease("alice", "1", NULL, &c, NULL), 0);
	ck_assert_str_eq(raw("members", "alice"), "1");
}
END_TEST

/* An expired lease retires its worker, never resets it for a new owner,
 * and its member count is returned. */
START_TEST(test_sweep_expired)
{
	cJSON *r;
	const cJSON *x;
	const char *code = NULL;
	struct lease l;
	char t[KZ_POOL_TOKEN_MAX + 1];

	warm("w1");
	r = run(KZ_POOL_LEASE, op(), "alice", "k", "1", "8", "lidx", "feed01",
	    NULL);
	ck_assert_ptr_null(kz_pool_errcode(r));
	cJSON_Delete(r);
	ts_nap(20);
	r = run(KZ_POOL_SWEEP, op(), "10", NULL);
	ck_assert_int_eq((int)cJSON_GetNumberValue(kz_json_get(r, "n")), 1);
	x = cJSON_GetArrayItem(kz_json_get(r, "expired"), 0);
	ck_assert_str_eq(sget(x, "worker"), "w1");
	ck_assert_str_eq(sget(x, "run_id"), "feed01");
	ck_assert_ptr_null(kz_json_get(x, "reset_token"));
	snprintf(t, sizeof(t), "%s", sget(x, "token"));
	cJSON_Delete(r);
	ck_assert_str_eq(wstate("w1"), "retiring");
	ck_assert_str_eq(raw("w:w1", "why"), "expired");
	ck_assert_str_eq(raw("w:w1", "token"), t);
	ck_assert_str_eq(raw("members", "alice"), "");
	ck_assert_int_eq(lease("bob", "8", NULL, &l, &code), -1);
	ck_assert_str_eq(code, "no_worker");
	ck_assert_str_eq(err_of(run(KZ_POOL_RENEW, op(), "lidx", "x:1", TTL,
	                     NULL)),
	    "not_owner");
	/* Only a confirmed deletion, under the retire token, forgets it. */
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_PUBLISH, op(), "w1", t, "g2", NULL)),
	    "stale_token");
	ck_assert_str_eq(err_of(run(KZ_POOL_DELETED, op(), "w1", t, NULL)), "");
	ck_assert_int_eq(status("total"), 0);
}
END_TEST

/* A lease that expired but was not swept yet can be neither renewed nor
 * released into a reset: the release retires the worker. */
START_TEST(test_release_after_expiry_retires)
{
	char tok[KZ_POOL_TOKEN_MAX + 1];
	cJSON *r;

	warm("w1");
	r = run(KZ_POOL_LEASE, op(), "alice", "k", "1", "8", "lidy", "c", NULL);
	snprintf(tok, sizeof(tok), "%s", sget(r, "token"));
	cJSON_Delete(r);
	ts_nap(20);
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RENEW, op(), "lidy", tok, TTL, NULL)),
	    "stale_token");
	ck_assert_str_eq(wstate("w1"), "leased");
	r = run(KZ_POOL_RELEASE, op(), "lidy", tok, NULL);
	ck_assert_ptr_null(kz_pool_errcode(r));
	ck_assert_str_eq(sget(r, "retired"), "expired");
	ck_assert_str_eq(sget(r, "refused"), "stale_token");
	ck_assert_ptr_null(kz_json_get(r, "reset_token"));
	ck_assert_str_eq(raw("w:w1", "token"), sget(r, "token"));
	cJSON_Delete(r);
	ck_assert_str_eq(wstate("w1"), "retiring");
	ck_assert_str_eq(raw("members", "alice"), "");
	/* Nothing is left to sweep, and the lease is gone. */
	r = run(KZ_POOL_SWEEP, op(), "10", NULL);
	ck_assert_int_eq((int)cJSON_GetNumberValue(kz_json_get(r, "n")), 0);
	cJSON_Delete(r);
	ck_assert_str_eq(err_of(run(KZ_POOL_RELEASE, op(), "lidy", tok, NULL)),
	    "not_owner");
}
END_TEST

/* A release naming a live lease with a stale token retires that worker;
 * one naming no lease touches nothing. */
START_TEST(test_stale_release_retires)
{
	struct lease a, b;
	cJSON *r;
	char tok0[32], key[80];

	warm("w1");
	warm("w2");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	ck_assert_int_eq(lease("bob", "8", NULL, &b, NULL), 0);
	snprintf(tok0, sizeof(tok0), "%s", raw("tok", NULL));
	ck_assert_str_eq(err_of(run(KZ_POOL_RELEASE, op(), "nope",
	                     "0000000000000000:1", NULL)),
	    "not_owner");
	ck_assert_str_eq(raw("tok", NULL), tok0);
	r = run(KZ_POOL_RELEASE, op(), a.lid, "0000000000000000:1", NULL);
	ck_assert_str_eq(sget(r, "retired"), "stale_release");
	ck_assert_str_eq(sget(r, "worker"), a.worker);
	cJSON_Delete(r);
	ck_assert_str_eq(wstate(a.worker), "retiring");
	snprintf(key, sizeof(key), "w:%s", a.worker);
	ck_assert_str_eq(raw(key, "why"), "stale_release");
	/* The owner's lease died with it; the other lease is untouched. */
	ck_assert_str_eq(err_of(run(KZ_POOL_RENEW, op(), a.lid, a.token, TTL,
	                     NULL)),
	    "not_owner");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL)),
	    "not_owner");
	ck_assert_str_eq(wstate(b.worker), "leased");
	ck_assert_int_eq(status("leased"), 1);
	ck_assert_int_eq(status("warm"), 0);
}
END_TEST

START_TEST(test_retire_and_delete)
{
	struct lease a;
	cJSON *r;
	char t[KZ_POOL_TOKEN_MAX + 1];

	warm("w1");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	ck_assert_str_eq(err_of(run(KZ_POOL_RETIRE, op(), "w1", "x:1", "why",
	                     NULL)),
	    "stale_token");
	ck_assert_str_eq(err_of(run(KZ_POOL_RETIRE, op(), "w9", a.token, "why",
	                     NULL)),
	    "not_found");
	r = run(KZ_POOL_RETIRE, op(), "w1", a.token, "evidence", NULL);
	ck_assert_str_eq(sget(r, "state"), "retiring");
	snprintf(t, sizeof(t), "%s", sget(r, "token"));
	cJSON_Delete(r);
	ck_assert_str_eq(raw("members", "alice"), "");
	/* The owner's lease died with it. */
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL)),
	    "not_owner");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_RETIRE, op(), "w1", t, "again", NULL)),
	    "stale_token");
	ck_assert_str_eq(err_of(
	                     run(KZ_POOL_DELETED, op(), "w1", a.token, NULL)),
	    "stale_token");
	ck_assert_str_eq(err_of(run(KZ_POOL_DELETED, op(), "w1", t, NULL)), "");
	ck_assert_int_eq(status("total"), 0);
}
END_TEST

/* The store came back without its data and a counter could reissue old
 * tokens: every token of the older epoch is fenced off. */
START_TEST(test_epoch_change_fences)
{
	struct lease a;
	cJSON *r;
	char rt[KZ_POOL_TOKEN_MAX + 1], ep2[KZ_POOL_EPOCH_HEX + 1];
	const char *del[] = {"DEL", "kz:{t}:epoch"}, *code = NULL;
	redisReply *x;
	bool changed;

	warm("w1");
	warm("w2");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	r = run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL);
	snprintf(rt, sizeof(rt), "%s", sget(r, "reset_token"));
	cJSON_Delete(r);
	ck_assert(kz_store_cmd(s, 2, del, &x, NULL, 0) == 0);
	freeReplyObject(x);
	/* No epoch: no mutating script writes anything. */
	ck_assert_str_eq(err_of(run(KZ_POOL_PUBLISH, op(), a.worker, rt, "g",
	                     NULL)),
	    "store_unavailable");
	ck_assert_int_eq(lease("bob", "8", NULL, &a, &code), -1);
	ck_assert_str_eq(code, "store_unavailable");
	ck_assert(kz_pool_init(s, ep2, sizeof(ep2), &changed, NULL, 0) == 0);
	ck_assert(changed);
	ck_assert_str_eq(err_of(run(KZ_POOL_PUBLISH, op(), a.worker, rt, "g",
	                     NULL)),
	    "stale_token");
	ck_assert_str_eq(wstate(a.worker), "resetting");
	/* A warm worker of the old epoch is not handed out... */
	ck_assert_int_eq(lease("bob", "8", NULL, &a, &code), -1);
	ck_assert_str_ne(code, "");
	ck_assert_int_eq(status("leased"), 0);
	/* ...and reconcile retires every one of them. */
	r = run(KZ_POOL_RECONCILE, op(), "[\"w1\",\"w2\",\"w7\"]", "60000",
	    "60000", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(kz_json_get(r, "retire")), 2);
	ck_assert_int_eq(cJSON_GetArraySize(kz_json_get(r, "orphans")), 1);
	cJSON_Delete(r);
	ck_assert_str_eq(wstate("w1"), "retiring");
	ck_assert_str_eq(wstate("w2"), "retiring");
	r = run(KZ_POOL_GET, "w1", NULL);
	ck_assert_int_eq(strncmp(sget(r, "token"), ep2, KZ_POOL_EPOCH_HEX), 0);
	cJSON_Delete(r);
}
END_TEST

/* A real restart: the run id changes, so the epoch does. */
START_TEST(test_restart_new_epoch)
{
	char ep2[KZ_POOL_EPOCH_HEX + 1], why[200] = "";
	bool changed = false;

	kz_store_free(s);
	s = NULL;
	ck_assert_int_eq(ts_restart(), 0);
	ck_assert(kz_store_open(ts_sock, "t", 2000, &s, why, sizeof(why)) == 0);
	ck_assert_msg(kz_pool_init(s, ep2, sizeof(ep2), &changed, why,
	                  sizeof(why)) == 0,
	    "%s", why);
	ck_assert(changed);
	ck_assert_str_ne(ep2, epoch);
}
END_TEST

START_TEST(test_reconcile_inventory)
{
	cJSON *r, *b;
	const cJSON *d;
	char t[KZ_POOL_TOKEN_MAX + 1];

	warm("w1");
	warm("w2");
	b = run(KZ_POOL_CREATE_BEGIN, op(), "w3", CAP, NULL);
	cJSON_Delete(b);
	/* w2 is gone from the inventory: not forgotten on the list's word,
	 * but deleted first; w3's create is young: counted. */
	r = run(KZ_POOL_RECONCILE, op(), "[\"w1\"]", "60000", "60000", NULL);
	ck_assert_int_eq((int)cJSON_GetNumberValue(kz_json_get(r, "removed")),
	    0);
	d = cJSON_GetArrayItem(kz_json_get(r, "delete"), 0);
	ck_assert_str_eq(sget(d, "worker"), "w2");
	snprintf(t, sizeof(t), "%s", sget(d, "token"));
	cJSON_Delete(r);
	ck_assert_str_eq(wstate("w2"), "deleting");
	ck_assert_str_eq(wstate("w3"), "creating");
	/* Forgotten once the delete confirms it absent. */
	ck_assert_str_eq(err_of(run(KZ_POOL_DELETED, op(), "w2", t, NULL)), "");
	ck_assert_str_eq(wstate("w2"), "");
	/* Past the grace, a create not in the inventory is proven absent. */
	ts_nap(20);
	r = run(KZ_POOL_RECONCILE, op(), "[\"w1\"]", "1", "60000", NULL);
	cJSON_Delete(r);
	ck_assert_str_eq(wstate("w3"), "");
	ck_assert_int_eq(status("total"), 1);
}
END_TEST

/* Every key the scripts wrote carries the one hash tag. */
START_TEST(test_one_hash_tag)
{
	struct lease a;
	const char *keys[] = {"KEYS", "*"};
	redisReply *r;
	size_t i;

	warm("w1");
	ck_assert_int_eq(lease("alice", "8", NULL, &a, NULL), 0);
	cJSON_Delete(run(KZ_POOL_RELEASE, op(), a.lid, a.token, NULL));
	ck_assert(kz_store_cmd(s, 2, keys, &r, NULL, 0) == 0);
	ck_assert_uint_gt(r->elements, 3);
	for (i = 0; i < r->elements; i++)
		ck_assert_msg(strncmp(r->element[i]->str, "kz:{t}:", 7) == 0,
		    "%s", r->element[i]->str);
	freeReplyObject(r);
}
END_TEST

START_TEST(test_ids_and_paths)
{
	char buf[64];

	ck_assert(kz_pool_id_ok("w-1_a"));
	ck_assert(!kz_pool_id_ok(""));
	ck_assert(!kz_pool_id_ok("../x"));
	ck_assert(!kz_pool_id_ok("a b"));
	ck_assert_int_eq(kz_pool_wpath("/r", "w1", "sock", buf, sizeof(buf)),
	    0);
	ck_assert_str_eq(buf, "/r/w1/sock");
	ck_assert_int_eq(kz_pool_wpath("/r", "w1", "", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/r/w1");
	ck_assert_int_eq(kz_pool_wpath("/r", "../w", "x", buf, sizeof(buf)),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_pool_wpath("/r", "w1", "sock", buf, 6), KZ_ETOOBIG);
	ck_assert_str_eq(kz_pool_script_name(KZ_POOL_NSCRIPTS), "?");
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("pool");
	TCase *tc = tcase_create("scripts");

	tcase_add_unchecked_fixture(tc, ts_start, ts_stop);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_init_epoch);
	tcase_add_test(tc, test_create_capacity_and_exists);
	tcase_add_test(tc, test_create_commit_token);
	tcase_add_test(tc, test_lease_one_owner);
	tcase_add_test(tc, test_lease_id_reuse_writes_nothing);
	tcase_add_test(tc, test_release_and_stale_tokens);
	tcase_add_test(tc, test_opid_replay);
	tcase_add_test(tc, test_opid_bound_to_request);
	tcase_add_test(tc, test_replay_after_lease_ended);
	tcase_add_test(tc, test_unbound_stored_result_refused);
	tcase_add_test(tc, test_member_limit);
	tcase_add_test(tc, test_sweep_expired);
	tcase_add_test(tc, test_release_after_expiry_retires);
	tcase_add_test(tc, test_stale_release_retires);
	tcase_add_test(tc, test_retire_and_delete);
	tcase_add_test(tc, test_epoch_change_fences);
	tcase_add_test(tc, test_reconcile_inventory);
	tcase_add_test(tc, test_one_hash_tag);
	tcase_add_test(tc, test_ids_and_paths);
	tcase_add_test(tc, test_restart_new_epoch);
	suite_add_tcase(su, tc);
	return kz_check_run(su);
}
