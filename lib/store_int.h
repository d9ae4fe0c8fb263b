/*
 * What the store's three files (store.c, the blocking client; astore.c,
 * the asynchronous one; store_conn.c, addresses, credentials and the
 * handshake) share and no other module needs.
 */
#ifndef KZ_STORE_INT_H
#define KZ_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <hiredis.h>

#define EVAL_MAX_ARGS 64

/* A deployment name fit for the hash tag. */
bool kz_store_dep_ok(const char *dep);
/* prefix + suffix into buf; KZ_ETOOBIG when it does not fit. */
int kz_store_prefixed(const char *prefix, const char *suffix, char *buf,
    size_t len);
/* The AUTH command into argv (3), or 0 when no credentials are set. */
int kz_store_auth_argv(const char *argv[3]);
/* KZ_EUNAVAIL (with why) when the configured password file was not ours
 * to read: no connection can authenticate. */
int kz_store_auth_usable(char *why, size_t wlen);
/* The ACL user name of the credentials ("" when none). */
const char *kz_store_auth_user(void);
/* Whether sc is one of the pool's scripts, which take the host's scope
 * as their last ARGV (lib/pool.c, lib/lua/pool.lua). */
struct kz_script;
bool kz_pool_is_script(const struct kz_script *sc);
/* A MOVED error's new owner, as a TCP address (store_conn.c). */
struct kz_store_addr;
bool kz_store_moved(const char *err, struct kz_store_addr *to);
/* An ASK error's slot and the node it names (store_conn.c). */
bool kz_store_ask(const char *err, int *slot, struct kz_store_addr *to);
/* TRYAGAIN: the slot is half-moved; ask again after a backoff. */
bool kz_store_err_tryagain(const char *err);
/*
 * The backoff while a slot is half-moved: the delay before the next try
 * after waits tries (10, 20, 40, 80, then 160 ms), for at most
 * KZ_STORE_MIGRATE_SHARE percent of the call's timeout in all.
 */
#define KZ_STORE_MIGRATE_STEP_MS 10
#define KZ_STORE_MIGRATE_SHARE 75
int kz_store_migrate_delay(int waits);
/* Whether a ROLE reply says master. */
bool kz_store_role_master(const redisReply *r);

#endif
