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

#include <stdbool.h>
#include <stddef.h>
#include <cJSON.h>
#include <hiredis.h>

#include "kz_err.h"

#define KZ_STORE_TIMEOUT_MS 2000
#define KZ_STORE_KEY_MAX 256
#define KZ_STORE_DEP_MAX 64

struct kz_store;

/*
 * A Lua script; sha is filled in by the first SCRIPT LOAD.  Every kz
 * script is a .lua file embedded at build time, and every one refuses the
 * same way (lib/lua/kz.lua): before its first write, with the JSON string
 * {"err":CODE,"reason":REASON}.
 */
struct kz_script {
	const char *name;
	const char *src;
	char sha[41];
};

/*
 * This process's host in a pool shared by several (LEASE_HOST, kz-lease(8)),
 * which every pool script (lib/pool.c) gets as its last ARGV:
 * letters, digits, '.', '-', '_', at most 64; "" (the default) is the
 * single-host layout.  One per process, like the credentials.
 */
#define KZ_STORE_SCOPE_MAX 64
KZ_WUR int kz_store_scope_set(const char *scope);
const char *kz_store_scope(void);

/*
 * The one reader of that convention: the CODE of a script's parsed reply
 * when it is a refusal (and *reason, when reason is not NULL, its REASON
 * or ""), NULL when it is a result.  Both point into res.
 */
const char *kz_store_refusal(const cJSON *res, const char **reason);

/*
 * Store addresses (kz-store(7), ADDRESSES), the one syntax of every
 * client's KZ_STORE_SOCKET: a path or "unix:PATH" (a Unix socket),
 * "tcp:HOST:PORT" (IPv6 as "[ADDR]"), or
 * "sentinel:HOST:PORT[,HOST:PORT...]/NAME" (ask those sentinels where the
 * primary NAME is).  HOST is a literal address: a name would need a
 * blocking resolver on the daemons' event loop.
 */
#define KZ_STORE_ADDR_MAX 108
#define KZ_STORE_HOST_MAX 48
#define KZ_STORE_SENTINELS_MAX 8
#define KZ_STORE_USER_MAX 64
#define KZ_STORE_PASS_MAX 256

enum kz_store_kind { KZ_STORE_UNIX, KZ_STORE_TCP, KZ_STORE_SENTINEL };

struct kz_store_hostport {
	char host[KZ_STORE_HOST_MAX];
	int port;
};

struct kz_store_addr {
	enum kz_store_kind kind;
	char path[KZ_STORE_ADDR_MAX]; /* unix */
	int n; /* tcp: 1; sentinel: how many sentinels */
	struct kz_store_hostport hp[KZ_STORE_SENTINELS_MAX];
	char name[KZ_STORE_HOST_MAX]; /* sentinel: the primary's name */
};

KZ_WUR int kz_store_addr_parse(const char *spec, struct kz_store_addr *a,
    char *why, size_t wlen);
/* Whether every host of a is on this machine (127/8, ::1). */
bool kz_store_addr_local(const struct kz_store_addr *a);

/*
 * The store's ACL user and password, one set per process (a process
 * speaks to one store; every connection of it, sentinels included,
 * authenticates with them).  The password comes from a file that must be
 * a regular file not readable by group or others; it is kept in locked
 * memory, wiped on clear, and never copied into a why.
 */
KZ_WUR int kz_store_auth_load(const char *user, const char *pass_file,
    char *why, size_t wlen);
void kz_store_auth_clear(void);
bool kz_store_auth_set(void);

/*
 * The store keys of a client's config: KZ_STORE_SOCKET (default
 * RUN/store.sock), KZ_STORE_USER and KZ_STORE_PASSWORD_FILE.  Writes the
 * address into addr and loads the credentials.  KZ_ECONF (exit 2) for a
 * bad address, a password file that is missing or readable by others, one
 * of user and password without the other, and a TCP or Sentinel store off
 * this machine without authentication (there is no TLS in this
 * distribution's hiredis: the hop must be encrypted outside, kz-store(7)).
 */
#define KZ_STORE_CONF_KEYS                                                     \
	"KZ_STORE_SOCKET", "KZ_STORE_USER", "KZ_STORE_PASSWORD_FILE"
struct kz_conf;
KZ_WUR int kz_store_conf(const struct kz_conf *k, const char *run_dir,
    char *addr, size_t len, char *why, size_t wlen);

/*
 * Blocking: connects to the primary of a (asking the sentinels first for
 * a Sentinel address), authenticates, and checks ROLE says master.
 * KZ_EUNAVAIL with a one-line why (never the password) otherwise.
 */
KZ_WUR int kz_store_connect(const struct kz_store_addr *a, int timeout_ms,
    redisContext **out, char *why, size_t wlen);

/*
 * Whether an error reply means "this server is not the primary to write
 * to now" (READONLY, MASTERDOWN, LOADING, ...): the caller drops the
 * connection and finds the primary again.
 */
bool kz_store_err_moved_primary(const char *err);

/* Connects to sock (a store address); dep names the deployment (the hash
 * tag). */
KZ_WUR int kz_store_open(const char *sock, const char *dep, int timeout_ms,
    struct kz_store **out, char *why, size_t wlen);
void kz_store_free(struct kz_store *s);

/* Writes "kz:{dep}:" followed by suffix into buf. */
KZ_WUR int kz_store_key(const struct kz_store *s, const char *suffix, char *buf,
    size_t len);
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
KZ_WUR int kz_store_eval(struct kz_store *s, struct kz_script *sc, int nkeys,
    int argc, const char **argv, redisReply **out, char *why, size_t wlen);

/* The server's run id (INFO server); changes on every restart. */
KZ_WUR int kz_store_runid(struct kz_store *s, char *buf, size_t len, char *why,
    size_t wlen);

/*
 * Operation ids.  Every mutating script takes one; a retry with the same id
 * is answered from the stored result and never applied twice, because a
 * call whose reply timed out has an unknown outcome (a frozen server may
 * still apply it when it resumes).
 */
#define KZ_OPID_HEX 32
void kz_store_opid(char out[KZ_OPID_HEX + 1]);

/*
 * The asynchronous client, on hiredis's libevent adapter, for daemons.
 * Debian's hiredis 0.14 has no async timeouts, so every call carries its
 * own libevent timer: when it fires the caller is answered KZ_EUNAVAIL and
 * the connection is dropped (a late reply can no longer be matched to a
 * caller that has moved on).  A dropped connection is re-opened by a timer;
 * on_up runs after each (re)connect, on_down after each loss.
 */
struct kz_astore;
typedef void (
    *kz_astore_cb)(int err, redisReply *r, const char *why, void *arg);
typedef void (*kz_astore_state_fn)(struct kz_astore *a, void *arg);

struct kz_astore_conf {
	const char *sock;
	const char *dep;
	int timeout_ms; /* per call */
	int reconnect_ms; /* delay between reconnect attempts */
	kz_astore_state_fn on_up, on_down;
	void *arg;
};

struct event_base;
KZ_WUR int kz_astore_new(struct event_base *base,
    const struct kz_astore_conf *c, struct kz_astore **out, char *why,
    size_t wlen);
/* Every pending caller is answered KZ_EUNAVAIL before this returns. */
void kz_astore_free(struct kz_astore *a);
/* Whether a connection is established (not whether the store is sane). */
bool kz_astore_connected(const struct kz_astore *a);
const char *kz_astore_prefix(const struct kz_astore *a);
KZ_WUR int kz_astore_key(const struct kz_astore *a, const char *suffix,
    char *buf, size_t len);
/* Why the last connection attempt failed ("" once connected): a line
 * for the operator's log, never a credential. */
const char *kz_astore_why(const struct kz_astore *a);
/* Drops the connection now (and reconnects later); used after a timeout. */
void kz_astore_drop(struct kz_astore *a);

/*
 * Queues a command or a script.  On 0, cb is called exactly once, later,
 * from the event loop: with the reply (valid only during cb; an error
 * reply is KZ_EPROTO with its text in why) or with KZ_EUNAVAIL.  A nonzero
 * return means cb will not be called.
 */
KZ_WUR int kz_astore_cmd(struct kz_astore *a, int argc, const char **argv,
    kz_astore_cb cb, void *arg);
KZ_WUR int kz_astore_eval(struct kz_astore *a, struct kz_script *sc, int nkeys,
    int argc, const char **argv, kz_astore_cb cb, void *arg);

#endif
