/*
 * The daemon's ops.  Each validates its request, hashes identifiers, runs
 * one store script and answers from its result.  No op keeps state here.
 * Who may call which is the op table's: lease needs admission open
 * (admission.c), drain and reconcile an operator (KZ_OPERATOR_UIDS).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kz_snap.h"
#include "daemon.h"
#include "banned.h"

#define ID_MAX 256

static const char *const retire_name[LR_N] = {
    [LR_EVIDENCE] = "reset_evidence",
    [LR_RESET_START] = "reset_start",
    [LR_STALE_TOKEN] = "stale_token",
    [LR_EXPIRED] = "expired",
    [LR_RECONCILE] = "reconcile",
};

/* The request's op_id, or a fresh one: a client that retries a request
 * whose reply it lost sends the same op_id and gets the same answer. */
static int
opid_of(struct kz_req *req, char out[KZ_OPID_HEX + 1])
{
	const char *o = NULL;

	if (kz_json_str_opt(kz_req_json(req), "op_id", KZ_OPID_HEX, NULL, &o,
	        NULL, 0) != 0)
		return KZ_EINVAL;
	if (o == NULL) {
		kz_store_opid(out);
		return 0;
	}
	if (strlen(o) < 16 || strspn(o, "0123456789abcdef") != strlen(o))
		return KZ_EINVAL;
	snprintf(out, KZ_OPID_HEX + 1, "%s", o);
	return 0;
}

/* Maps a script's refusal to the wire. */
static void
answer(struct kz_req *req, int err, cJSON *res, const char *why)
{
	const cJSON *r = kz_json_get(res, "reason");
	const char *code, *reason = cJSON_IsString(r) ? r->valuestring : why;

	if (err == KZ_EUNAVAIL) {
		kz_req_err(req, KZ_WE_ADMISSION_CLOSED, "store unavailable");
		return;
	}
	if (err != 0) {
		kz_req_err(req, KZ_WE_INTERNAL, "store script failed");
		return;
	}
	code = kz_pool_errcode(res);
	if (strcmp(code, "stale_token") == 0)
		kz_req_err(req, KZ_WE_STALE_TOKEN, reason);
	else if (strcmp(code, "not_owner") == 0)
		kz_req_err(req, KZ_WE_NOT_OWNER, reason);
	else if (strcmp(code, "no_worker") == 0)
		kz_req_err(req, KZ_WE_BUSY, reason);
	else if (strcmp(code, "member_limit") == 0)
		kz_req_err(req, KZ_WE_REFUSED, reason);
	else if (strcmp(code, "store_unavailable") == 0)
		kz_req_err(req, KZ_WE_ADMISSION_CLOSED, reason);
	else if (strcmp(code, "bad_request") == 0)
		kz_req_err(req, KZ_WE_BAD_REQUEST, reason);
	else
		kz_req_err(req, KZ_WE_INTERNAL, reason);
}

static void
pass(struct lease_daemon *d, int err, cJSON *res, const char *why, void *arg)
{
	struct kz_req *req = arg;

	(void)d;
	if (err != 0 || kz_pool_errcode(res) != NULL) {
		answer(req, err, res, why);
		return;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(res, "replay");
	kz_req_ok(req, cJSON_Duplicate(res, 1));
}

/*
 * The snapshot of the workspace key, DIR/ACTOR/WSKEY.tar, and the bounds
 * the dispatch client saves it under.  Offering it marks it used (an
 * expired one is removed instead: it is never restored).  A replay offers
 * it again, which only marks it used again.
 */
static void
add_snapshot(struct lease_daemon *d, cJSON *res, const char *member,
    const char *wskey)
{
	char p[PATH_MAX + 96];
	int e;

	/* A directory that cannot be used (serve.snapshots said so at
	 * start) still names the path: the save fails and says so. */
	if ((e = kz_snap_offer(d->c->snap_dir, member, wskey, d->c->snap_ttl_ms,
	         p, sizeof(p))) != 0 &&
	    e != KZ_ESYS)
		return;
	cJSON_AddStringToObject(res, "snapshot", p);
	cJSON_AddNumberToObject(res, "snapshot_actor_max",
	    (double)d->c->snap_actor_max);
	cJSON_AddNumberToObject(res, "snapshot_total_max",
	    (double)d->c->snap_total_max);
	cJSON_AddNumberToObject(res, "snapshot_ttl_ms",
	    (double)d->c->snap_ttl_ms);
}

/*
 * A granted lease also names, for the trusted dispatch client, the
 * worker's projection directory, whether it has an egress path, and the
 * snapshot file of its workspace key.  All are derived here from the
 * configuration, never stored.
 */
static void
lease_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	struct kz_req *req = arg;
	const cJSON *j = kz_req_json(req);
	char wskey[KZ_IDHASH_HEX + 1], member[KZ_IDHASH_HEX + 1];
	char p[PATH_MAX + 96];
	const char *w, *actor, *conv;

	if (err == 0 && kz_pool_errcode(res) == NULL &&
	    kz_json_str(res, "worker", KZ_POOL_ID_MAX, &w, NULL, 0) == 0 &&
	    kz_json_str(j, "actor", ID_MAX, &actor, NULL, 0) == 0 &&
	    kz_json_str(j, "conversation", ID_MAX, &conv, NULL, 0) == 0 &&
	    kz_key_idhash(&d->idkey, "actor", actor, member) == 0 &&
	    kz_key_idhash2(&d->idkey, "workspace", actor, conv, wskey) == 0) {
		if (kz_pool_wpath(d->c->workers_dir, w, "projection", p,
		        sizeof(p)) == 0)
			cJSON_AddStringToObject(res, "projection", p);
		/* Whether the pool's workers were given an egress socket: a
		 * run that asks for egress on one without is refused. */
		cJSON_AddBoolToObject(res, "egress",
		    d->c->egress_sock[0] != '\0');
		/* And a package broker: kz-run mints the run's token. */
		cJSON_AddBoolToObject(res, "broker",
		    d->c->broker_sock[0] != '\0');
		add_snapshot(d, res, member, wskey);
		if (!cJSON_IsTrue(kz_json_get(res, "replay")))
			d->n.granted++;
	} else
		d->n.refused++;
	pass(d, err, res, why, arg);
}

/*
 * The lease id of an op id: a retry names the same lease, on any replica
 * (all hold the deployment's field key), while a lease id, which audit
 * records and command lines carry, is a keyed hash that tells nothing of
 * the op id a replay would need.
 */
static int
lease_id_of(const struct lease_daemon *d, const char *op,
    char lid[KZ_OPID_HEX + 1])
{
	char h[KZ_IDHASH_HEX + 1];
	int e;

	_Static_assert(KZ_IDHASH_HEX >= KZ_OPID_HEX, "lease id is too long");
	if ((e = kz_key_idhash(&d->idkey, "lease-id", op, h)) == 0)
		snprintf(lid, KZ_OPID_HEX + 1, "%s", h);
	return e;
}

static void
op_lease(struct kz_req *req, void *arg)
{
	struct lease_daemon *d = arg;
	const cJSON *j = kz_req_json(req);
	const char *actor, *conv, *cap;
	char member[KZ_IDHASH_HEX + 1], wskey[KZ_IDHASH_HEX + 1];
	char op[KZ_OPID_HEX + 1], lid[KZ_OPID_HEX + 1], ttl[24], lim[24];
	const char *rid, *av[7] = {op, member, wskey, ttl, lim, lid, ""};
	int64_t t;

	/* run_id, when given, is kept with the lease so that the reset of
	 * a lease that expires (never released) still names its run. */
	if (kz_json_str(j, "actor", ID_MAX, &actor, NULL, 0) != 0 ||
	    kz_json_str(j, "conversation", ID_MAX, &conv, NULL, 0) != 0 ||
	    kz_json_str_opt(j, "capability", 64, "code", &cap, NULL, 0) ||
	    kz_json_int_opt(j, "ttl_ms", 100, d->c->ttl_ms, d->c->ttl_ms, &t,
	        NULL, 0) != 0 ||
	    *actor == '\0' || *conv == '\0' ||
	    kz_json_str_opt(j, "run_id", KZ_RUN_ID_MAX, "", &rid, NULL, 0) !=
	        0 ||
	    strspn(rid, "0123456789abcdef") != strlen(rid) ||
	    opid_of(req, op) != 0) {
		kz_req_err(req, KZ_WE_BAD_REQUEST,
		    "lease needs actor and "
		    "conversation (run_id, if given, is lowercase hex)");
		return;
	}
	av[6] = rid;
	if (kz_key_idhash(&d->idkey, "actor", actor, member) != 0 ||
	    kz_key_idhash2(&d->idkey, "workspace", actor, conv, wskey) != 0 ||
	    lease_id_of(d, op, lid) != 0) {
		kz_req_err(req, KZ_WE_INTERNAL, "hashing failed");
		return;
	}
	snprintf(ttl, sizeof(ttl), "%lld", (long long)t);
	snprintf(lim, sizeof(lim), "%lld", (long long)d->c->member_limit);
	if (pool_async(d, KZ_POOL_LEASE, 7, av, lease_done, req) != 0)
		kz_req_err(req, KZ_WE_ADMISSION_CLOSED, "store unavailable");
}

/* The run a release names; else the one its lease was taken for. */
static const char *
release_rid(struct kz_req *req, const cJSON *res)
{
	const char *v = NULL;

	if (kz_json_str_opt(kz_req_json(req), "run_id", KZ_RUN_ID_MAX, NULL, &v,
	        NULL, 0) == 0 &&
	    v != NULL)
		return v;
	if (kz_json_str(res, "run_id", KZ_RUN_ID_MAX, &v, NULL, 0) == 0 &&
	    *v != '\0')
		return v;
	return NULL;
}

/*
 * The release script retired the worker (a stale token, or a lease that
 * had expired): it is deleted now and the caller told stale_token.  A
 * replayed answer deletes nothing: the first one did.
 */
static void
release_retired(struct lease_daemon *d, struct kz_req *req, const cJSON *res)
{
	const cJSON *r = kz_json_get(res, "reason");
	const char *w, *t, *why;

	if (!cJSON_IsTrue(kz_json_get(res, "replay")) &&
	    kz_json_str(res, "worker", KZ_POOL_ID_MAX, &w, NULL, 0) == 0 &&
	    kz_json_str(res, "token", KZ_POOL_TOKEN_MAX, &t, NULL, 0) == 0 &&
	    kz_json_str(res, "retired", 32, &why, NULL, 0) == 0) {
		kz_log(KZ_LOG_WARN, "worker.retire", 0,
		    strcmp(why, "expired") == 0 ?
		        "released after its lease expired" :
		        "released under a stale token",
		    "worker", w, NULL);
		lease_count_retire(d,
		    strcmp(why, "expired") == 0 ? LR_EXPIRED : LR_STALE_TOKEN,
		    1);
		chore_delete(d, w, t, why, release_rid(req, res));
	}
	kz_req_err(req, KZ_WE_STALE_TOKEN,
	    cJSON_IsString(r) ? r->valuestring : "lease token does not match");
}

/*
 * The released worker goes to reset (reset.c) under the token the release
 * script issued, at the endpoint the store recorded; the reset's audit
 * record names the run that released it.  The client is answered first:
 * the reset is kz-lease's, not the client's, and takes no fork.
 */
static void
release_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	struct kz_req *req = arg;
	char w[KZ_POOL_ID_MAX + 1] = "", t[KZ_POOL_TOKEN_MAX + 1] = "";
	char ep[108] = "", rid[KZ_RUN_ID_MAX + 1] = "";
	const char *v;

	if (err == 0 && kz_pool_errcode(res) == NULL &&
	    kz_json_get(res, "retired") != NULL) {
		release_retired(d, req, res);
		return;
	}
	if (err == 0 && kz_pool_errcode(res) == NULL &&
	    !cJSON_IsTrue(kz_json_get(res, "replay")) &&
	    kz_json_str(res, "worker", KZ_POOL_ID_MAX, &v, NULL, 0) == 0 &&
	    snprintf(w, sizeof(w), "%s", v) > 0 &&
	    kz_json_str(res, "reset_token", KZ_POOL_TOKEN_MAX, &v, NULL, 0) ==
	        0) {
		snprintf(t, sizeof(t), "%s", v);
		if (kz_json_str(res, "endpoint", sizeof(ep) - 1, &v, NULL, 0) ==
		    0)
			snprintf(ep, sizeof(ep), "%s", v);
		if ((v = release_rid(req, res)) != NULL)
			snprintf(rid, sizeof(rid), "%s", v);
	}
	if (res != NULL) {
		cJSON_DeleteItemFromObjectCaseSensitive(res, "reset_token");
		cJSON_DeleteItemFromObjectCaseSensitive(res, "wskey");
		cJSON_DeleteItemFromObjectCaseSensitive(res, "run_id");
	}
	pass(d, err, res, why, arg);
	if (t[0] != '\0') {
		d->n.released++;
		reset_start(d, w, t, ep, rid[0] ? rid : NULL);
	}
}

static int
lease_args(struct kz_req *req, const char **lid, const char **tok, char *op)
{
	const cJSON *j = kz_req_json(req);
	const char *rid = NULL;

	if (kz_json_str(j, "lease_id", KZ_OPID_HEX, lid, NULL, 0) != 0 ||
	    kz_json_str(j, "token", KZ_POOL_TOKEN_MAX, tok, NULL, 0) != 0 ||
	    opid_of(req, op) != 0 ||
	    kz_json_str_opt(j, "run_id", KZ_RUN_ID_MAX, NULL, &rid, NULL, 0) !=
	        0 ||
	    (rid != NULL &&
	        (*rid == '\0' ||
	            strspn(rid, "0123456789abcdef") != strlen(rid)))) {
		kz_req_err(req, KZ_WE_BAD_REQUEST,
		    "needs lease_id and token "
		    "(run_id, if given, is lowercase hex)");
		return -1;
	}
	return 0;
}

/* Release and renew do not need admission: a lease that exists must be
 * returnable whenever the store answers. */
static void
op_release(struct kz_req *req, void *arg)
{
	char op[KZ_OPID_HEX + 1];
	const char *av[3] = {op, NULL, NULL};

	if (lease_args(req, &av[1], &av[2], op) != 0)
		return;
	if (pool_async(arg, KZ_POOL_RELEASE, 3, av, release_done, req) != 0)
		kz_req_err(req, KZ_WE_STORE_UNAVAILABLE, "store unavailable");
}

static void
op_renew(struct kz_req *req, void *arg)
{
	struct lease_daemon *d = arg;
	char op[KZ_OPID_HEX + 1], ttl[24];
	const char *av[4] = {op, NULL, NULL, ttl};
	int64_t t;

	if (lease_args(req, &av[1], &av[2], op) != 0)
		return;
	if (kz_json_int_opt(kz_req_json(req), "ttl_ms", 100, d->c->ttl_ms,
	        d->c->ttl_ms, &t, NULL, 0) != 0) {
		kz_req_err(req, KZ_WE_BAD_REQUEST, "bad ttl_ms");
		return;
	}
	snprintf(ttl, sizeof(ttl), "%lld", (long long)t);
	if (pool_async(d, KZ_POOL_RENEW, 4, av, pass, req) != 0)
		kz_req_err(req, KZ_WE_STORE_UNAVAILABLE, "store unavailable");
}

/* This process's counters (kz-protocol(7), kz-metrics(8)).  The reset
 * outcomes are top-level fields, not an object: a member named "warm"
 * would shadow the pool's count for a reader that greps the reply. */
static int
add_counters(const struct lease_daemon *d, cJSON *o)
{
	cJSON *x;

	if (!cJSON_AddNumberToObject(o, "leases_granted",
	        (double)d->n.granted) ||
	    !cJSON_AddNumberToObject(o, "leases_refused",
	        (double)d->n.refused) ||
	    !cJSON_AddNumberToObject(o, "releases", (double)d->n.released) ||
	    !cJSON_AddNumberToObject(o, "resets_warm",
	        (double)d->n.reset_warm) ||
	    !cJSON_AddNumberToObject(o, "resets_retired",
	        (double)d->n.reset_retired) ||
	    !cJSON_AddNumberToObject(o, "resets_stale",
	        (double)d->n.reset_stale) ||
	    !cJSON_AddNumberToObject(o, "resets_failed",
	        (double)d->n.reset_failed) ||
	    (x = cJSON_AddObjectToObject(o, "retired_by_reason")) == NULL)
		return KZ_ENOMEM;
	for (int i = 0; i < LR_N; i++)
		if (!cJSON_AddNumberToObject(x, retire_name[i],
		        (double)d->n.retired[i]))
			return KZ_ENOMEM;
	return 0;
}

static void
status_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	struct kz_req *req = arg;
	cJSON *o = err == 0 ? cJSON_Duplicate(res, 1) : cJSON_CreateObject();
	struct kz_srv_stats ss;

	(void)why;
	kz_srv_stats(d->srv, &ss);
	if (o == NULL) {
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	cJSON_AddBoolToObject(o, "store", err == 0);
	cJSON_AddBoolToObject(o, "inventory", d->inv_ok);
	cJSON_AddBoolToObject(o, "admission", d->open);
	cJSON_AddStringToObject(o, "admission_reason",
	    d->open ? "" : d->closed_why);
	cJSON_AddBoolToObject(o, "draining", d->draining);
	cJSON_AddStringToObject(o, "last_worker_failure", d->last_fail);
	cJSON_AddNumberToObject(o, "resets_running", (double)resets_running(d));
	cJSON_AddNumberToObject(o, "creates_running", (double)d->creates);
	cJSON_AddNumberToObject(o, "deletes_running",
	    (double)chores_running(d));
	cJSON_AddNumberToObject(o, "bad_frames", (double)ss.bad_frames);
	cJSON_AddNumberToObject(o, "peer_refused", (double)ss.peer_refused);
	cJSON_AddNumberToObject(o, "open_conns", (double)ss.open_conns);
	if (add_counters(d, o) != 0) {
		cJSON_Delete(o);
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	kz_req_ok(req, o);
}

static void
op_status(struct kz_req *req, void *arg)
{
	struct lease_daemon *d = arg;
	char cap[24];
	const char *av[1] = {cap};

	snprintf(cap, sizeof(cap), "%lld", (long long)d->c->capacity);
	if (pool_async(d, KZ_POOL_STATUS, 1, av, status_done, req) != 0)
		status_done(d, KZ_EUNAVAIL, NULL, "store unavailable", req);
}

static void
op_reconcile(struct kz_req *req, void *arg)
{
	maint_reconcile_now(arg, req);
}

static void
op_drain(struct kz_req *req, void *arg)
{
	struct lease_daemon *d = arg;
	bool on;

	if (kz_json_bool_opt(kz_req_json(req), "on", true, &on, NULL, 0)) {
		kz_req_err(req, KZ_WE_BAD_REQUEST, "bad on");
		return;
	}
	d->draining = on;
	kz_log(KZ_LOG_INFO, "lease.drain", 0, on ? "draining" : "drain lifted",
	    NULL);
	kz_req_ok(req, NULL);
}

static const char *const f_lease[] = {"actor", "conversation", "capability",
    "ttl_ms", "op_id", "run_id", NULL};
static const char *const f_release[] = {"lease_id", "token", "op_id", "run_id",
    NULL};
static const char *const f_renew[] = {"lease_id", "token", "ttl_ms", "op_id",
    NULL};
static const char *const f_none[] = {NULL};
static const char *const f_drain[] = {"on", NULL};

const struct kz_op lease_ops[] = {
    {"lease", op_lease, f_lease, KZ_OP_ADMIT},
    {"release", op_release, f_release, 0},
    {"renew", op_renew, f_renew, 0},
    {"status", op_status, f_none, 0},
    {"reconcile", op_reconcile, f_none, KZ_OP_OPERATOR},
    {"drain", op_drain, f_drain, KZ_OP_OPERATOR},
    {NULL, NULL, NULL, 0},
};
