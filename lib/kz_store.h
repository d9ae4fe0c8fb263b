/*
 * The deployment's store (Valkey, or Redis 7 which is wire-compatible),
 * reached over a Unix socket with hiredis.  Every key lives under one hash
 * tag, "kz:{DEPLOYMENT}:", so every script runs unchanged on a cluster.
 * Scripts are sent with EVALSHA and loaded again on NOSCRIPT.
 *
 * This is the blocking client (one-shot tools, tests, kz-project).  A
 * timeout or a lost connection returns KZ_EUNAVAIL: callers fail closed.
 */
#ifndef KZ_STORE_H
#define KZ_STORE_H

#include <stddef.h>
#include <hiredis.h>

#include "kz_err.h"

#define KZ_STORE_TIMEOUT_MS 2000
#define KZ_STORE_KEY_MAX 256
#define KZ_STORE_DEP_MAX 64

struct kz_store;

/* A Lua script; sha is filled in by the first SCRIPT LOAD. */
struct kz_script {
	const char *name;
	const char *src;
	char sha[41];
};

/* Connects to sock; dep names the deployment (the hash tag). */
KZ_WUR int kz_store_open(const char *sock, const char *dep, int timeout_ms,
    struct kz_store **out, char *why, size_t wlen);
void kz_store_free(struct kz_store *s);

/* Writes "kz:{dep}:" followed by suffix into buf. */
KZ_WUR int kz_store_key(const struct kz_store *s, const char *suffix,
    char *buf, size_t len);
/* The hash-tagged prefix, e.g. "kz:{default}:". */
const char *kz_store_prefix(const struct kz_store *s);

/*
 * Runs a command given as argv.  *out is the reply (free with
 * freeReplyObject); a reply of type REDIS_REPLY_ERROR is returned as
 * KZ_EPROTO with the server's text in why (and *out not set).
 */
KZ_WUR int kz_store_cmd(struct kz_store *s, int argc, const char **argv,
    redisReply **out, char *why, size_t wlen);
/* EVALSHA script with nkeys keys then args; loads it again on NOSCRIPT. */
KZ_WUR int kz_store_eval(struct kz_store *s, struct kz_script *sc,
    int nkeys, int argc, const char **argv, redisReply **out, char *why,
    size_t wlen);

#endif
