/*
 * The warm pool's state machine in the store, shared by kz-lease (every
 * transition) and kz-reset (publish, retire).  Each transition is one Lua
 * script that checks the expected state and fencing token before its first
 * write, and answers a JSON string: the result, or {"err":CODE,"reason":..}
 * with nothing written (the refusal convention of every store script,
 * lib/lua/kz.lua).  One refusal writes: a release under a stale token or
 * after expiry retires the worker and answers {"retired":WHY,"token":..,
 * "refused":CODE,"reason":..}, a result that carries a refusal.  Key
 * layout and states: kz-lease(8).
 *
 * Fencing tokens are "EPOCH:N": N from one INCR counter, EPOCH a random id
 * replaced whenever the store comes back from a restart (its run id
 * changed) or without its data, so a counter that went back cannot reissue
 * an old token.  Every worker recorded under an older epoch is retired.
 *
 * Mutating scripts take an operation id (ARGV[1]); a retry with the same id
 * and the same script and arguments gets the stored result of the first
 * success and writes nothing.  The same id with another script or other
 * arguments is refused (bad_request), and so is a retried lease or renew
 * once that lease has ended (stale_token): its stored answer would name a
 * worker that may have another owner.
 */
#ifndef KZ_POOL_H
#define KZ_POOL_H

#include <stdbool.h>
#include <stdint.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_store.h"

#define KZ_POOL_EPOCH_HEX 16
#define KZ_POOL_TOKEN_MAX 64
#define KZ_POOL_ID_MAX 64
#define KZ_POOL_OP_TTL_MS 600000

enum kz_pool_script {
	KZ_POOL_INIT, /* runid, fresh epoch */
	KZ_POOL_CREATE_BEGIN, /* opid, id, capacity */
	KZ_POOL_CREATE_COMMIT, /* opid, id, token, endpoint, gen */
	KZ_POOL_CREATE_ABORT, /* opid, id, token */
	KZ_POOL_LEASE, /* opid, member, wskey, ttl_ms, limit, lid, run id */
	KZ_POOL_RELEASE, /* opid, lid, token */
	KZ_POOL_RENEW, /* opid, lid, token, ttl_ms */
	KZ_POOL_SWEEP, /* opid, max */
	KZ_POOL_PUBLISH, /* opid, id, token, gen */
	KZ_POOL_RETIRE, /* opid, id, token, why */
	KZ_POOL_DELETED, /* opid, id, token */
	KZ_POOL_RECONCILE, /* opid, inventory json, create grace, reset grace */
	KZ_POOL_STATUS, /* capacity */
	KZ_POOL_GET, /* id */
	KZ_POOL_NSCRIPTS
};

/* The scripts (sha filled in on first use, per process). */
extern struct kz_script kz_pool_scripts[KZ_POOL_NSCRIPTS];
const char *kz_pool_script_name(enum kz_pool_script which);

/* Whether id is a plain worker id (letters, digits, '-', '_'). */
bool kz_pool_id_ok(const char *id);

/* Parses a script's reply (a JSON string) into an object. */
KZ_WUR int kz_pool_parse(const redisReply *r, cJSON **out, char *why,
    size_t wlen);
/* The "err" code of a parsed reply, NULL on success: kz_store_refusal(). */
const char *kz_pool_errcode(const cJSON *res);

/*
 * Blocking: runs which with KEYS[1] = the deployment prefix and argv as
 * ARGV.  *out is the parsed reply, which may carry "err".
 */
KZ_WUR int kz_pool_call(struct kz_store *s, enum kz_pool_script which, int argc,
    const char **argv, cJSON **out, char *why, size_t wlen);

/*
 * Blocking: makes sure the store has an epoch for this run of the server
 * and returns it; *changed when this call replaced it.
 */
KZ_WUR int kz_pool_init(struct kz_store *s, char *epoch, size_t len,
    bool *changed, char *why, size_t wlen);

/*
 * The local controller's layout, which kz-ctl-local (create, list, delete)
 * and kz-reset (evidence) must agree on: WORKERS/ID/ holds "sock" (the agent's
 * socket), "pid" (the agent's pid file) and "state/" (its state dir).
 */
KZ_WUR int kz_pool_wpath(const char *workers_dir, const char *id,
    const char *leaf, char *buf, size_t len);

/* The counter of a token "EPOCH:N" (what audit records carry), 0 when
 * malformed. */
int64_t kz_pool_token_n(const char *token);

/* A fresh random epoch, KZ_POOL_EPOCH_HEX chars. */
void kz_pool_new_epoch(char out[KZ_POOL_EPOCH_HEX + 1]);

#endif
