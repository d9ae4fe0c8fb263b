/*
 * kz-pkgrun internals: the configuration (conf.c), the content-addressed
 * tree walk, hash and copy (tree.c), the cache (cache.c), the manifest and
 * its closed class set (manifest.c), one invocation (invoke.c,
 * invoke_run.c, exec.c), the daemon's warm single-use workers (warm.c,
 * warm_proc.c, warm_take.c, wrun.c), the claims on the runner's ids
 * (uidclaim.c), the audit records (audit.c), the daemon (serve.c)
 * and its thin client (client.c).  Module functions return 0 or a negative
 * kz_err and fill (why, wlen) with one line; they never print or exit.
 */
#ifndef PKGRUN_H
#define PKGRUN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_exit.h"
#include "kz_sock.h"

#define PR_HASH_BYTES 32 /* SHA-256 */
#define PR_HASH_HEX (PR_HASH_BYTES * 2)
#define PR_MANIFEST_MAX (64 * 1024)
#define PR_MANIFEST_NAME "manifest.json"
#define PR_PKG_DIR "pkg"
#define PR_FILES_DIR "files"
#define PR_TOOLS_MAX 64
#define PR_TOOL_NAME_MAX 64
#define PR_CMD_ARGS_MAX 16 /* a tool's own arguments in the manifest */
#define PR_ARGS_MAX 32 /* arguments of one invocation */
#define PR_ARG_BYTES 4096
#define PR_IDENT_MAX 256 /* actor, conversation, room */
#define PR_MEMBER_FILES_MAX 64
#define PR_SANDBOX_PKG "/projection/" PR_PKG_DIR
#define PR_SANDBOX_FILES "/projection/" PR_FILES_DIR
#define PR_WARM_MAX 16 /* PKGRUN_WARM at most */

struct pr_conf {
	char cache[PATH_MAX]; /* PKGRUN_CACHE */
	char state_dir[PATH_MAX]; /* PKGRUN_STATE_DIR */
	char workspaces[PATH_MAX]; /* PKGRUN_WORKSPACE_ROOT ("": none) */
	char sandbox_bin[PATH_MAX]; /* PKGRUN_SANDBOX_BIN */
	char sandbox_conf[PATH_MAX]; /* PKGRUN_SANDBOX_CONFIG ("": none) */
	char egress_sock[108]; /* PKGRUN_EGRESS_SOCKET ("": no network) */
	char audit_sock[108]; /* "" when KZ_AUDIT=off */
	char sock[108]; /* KZ_SOCKET of serve */
	char run_dir[PATH_MAX];
	struct kz_peer_policy peers, operators;
	int64_t uid, gid, uid_count, pids, cpu_milli, timeout_s;
	int64_t io_timeout_ms;
	uint64_t memory, result_max, files_max, package_max, frame_max;
	int64_t entries_max;
	int64_t warm; /* PKGRUN_WARM: warm workers serve keeps, 0: none */
	uint64_t free_min; /* PKGRUN_STAGING_FREE_MIN */
};

/* space.c: room in the state directory for a copy, taken before it is
 * written (KZ_EUNAVAIL with why when the filesystem would be left with less
 * than free_min bytes, or fewer than PR_SPACE_INODES_MIN inodes; free_min 0:
 * no check) and given back once it is written (or failed). */
#define PR_SPACE_PAGE 4096
#define PR_SPACE_INODES_MIN 1024
struct pr_space {
	uint64_t bytes, inodes;
};
uint64_t pr_space_file(uint64_t size);
KZ_WUR int pr_space_take(int dirfd, uint64_t free_min, uint64_t bytes,
    uint64_t inodes, struct pr_space *sp, char *why, size_t wlen);
void pr_space_give(struct pr_space *sp);

/* conf.c */
KZ_WUR int pr_conf_load(struct pr_conf *c, const char *path, const char *self,
    char *why, size_t wlen);

/* tree.c: the canonical encoding of a package (pkgrun(8), CACHE).
 * Walks the tree beneath srcfd (every entry through kz_path_open, so only
 * directories and regular files of one link are taken: a symlink, fifo,
 * device or socket anywhere refuses the whole tree), hashes manifest and
 * tree with SHA-256 into hash, and when dstfd >= 0 writes an exact copy
 * beneath it, read-only (files 0444 or 0555, directories 0555).  With
 * sealed set, every entry of the source must already be read-only and
 * owned by us (a cache entry). */
struct pr_tree_opts {
	int64_t entries_max;
	uint64_t bytes_max;
	bool sealed;
	uint64_t free_min; /* a copy takes its room first (pr_space_take) */
};
KZ_WUR int pr_tree_hash(int srcfd, const char *manifest, size_t mlen, int dstfd,
    const struct pr_tree_opts *o, unsigned char hash[PR_HASH_BYTES], char *why,
    size_t wlen);
/* Makes a fresh directory "prefix-XXXXXXXXXXXX" beneath parentfd, mode. */
KZ_WUR int pr_mkdir_fresh(int parentfd, const char *prefix, mode_t mode,
    char *name, size_t len);

/* manifest.c: the closed collaboration classes.  X(NAME, "wire", shared,
 * member files): whether a shared room may call the tool, and whether the
 * tool may be given member workspace files. */
#define PR_CLASSES(X)                                                          \
	X(PRIVATE_ONLY, "private_only", false, true)                           \
	X(ACTOR_READ, "actor_read", true, true)                                \
	X(SHARED_SAFE, "shared_safe", true, false)
enum pr_class {
	PR_CLASS_NONE = -1, /* missing or unknown: the tool is absent */
#define PR_CLASS_ENUM_(n, w, s, f) PR_CLASS_##n,
	PR_CLASSES(PR_CLASS_ENUM_)
#undef PR_CLASS_ENUM_
	    PR_CLASS_COUNT_
};
enum pr_class pr_class_parse(const char *s);
const char *pr_class_name(enum pr_class c);
bool pr_class_shared(enum pr_class c);
bool pr_class_files(enum pr_class c);

struct pr_tool {
	char name[PR_TOOL_NAME_MAX + 1];
	enum pr_class cls;
	bool runs_code;
	const char *argv[PR_CMD_ARGS_MAX + 1]; /* into the owner's JSON */
	int argc;
};
struct pr_manifest {
	cJSON *json;
	struct pr_tool tools[PR_TOOLS_MAX];
	int ntools; /* every well-formed tool, absent ones included */
};
/* Parses and checks a manifest (the reviewed JSON); the package's tree is
 * checked by the caller (pr_manifest_check_tree). */
KZ_WUR int pr_manifest_parse(const char *buf, size_t len, struct pr_manifest *m,
    char *why, size_t wlen);
void pr_manifest_release(struct pr_manifest *m);
/* Every present tool's command is an executable regular file beneath
 * pkgfd. */
KZ_WUR int pr_manifest_check_tree(const struct pr_manifest *m, int pkgfd,
    char *why, size_t wlen);
/* The tool a caller may use: NULL when absent (no such name, or no known
 * class).  shared: the invocation is in a shared room. */
const struct pr_tool *pr_manifest_tool(const struct pr_manifest *m,
    const char *name);
/* Whether t may run in this invocation: 0, or KZ_EDENIED with why. */
KZ_WUR int pr_tool_allowed(const struct pr_tool *t, bool shared, int nfiles,
    char *why, size_t wlen);

/* cache.c */
KZ_WUR bool pr_hash_hex_ok(const char *s);
/* Admits the package at srcdir with the manifest file mpath: prints
 * nothing, fills hex.  Idempotent: an existing entry is re-verified. */
KZ_WUR int pr_cache_admit(const struct pr_conf *c, const char *srcdir,
    const char *mpath, char hex[PR_HASH_HEX + 1], struct pr_manifest *m,
    char *why, size_t wlen);
/* Opens entry hex of the cache and reads its manifest (not yet verified
 * against the hash: pr_cache_stage does that with the tree). */
KZ_WUR int pr_cache_open(const struct pr_conf *c, const char *hex, int *entryfd,
    char **manifest, size_t *mlen, char *why, size_t wlen);
/* Copies the entry's tree into dstfd while hashing it; KZ_ECRYPTO when
 * what was copied is not the package hex names. */
KZ_WUR int pr_cache_stage(const struct pr_conf *c, int entryfd, const char *hex,
    const char *manifest, size_t mlen, int dstfd, char *why, size_t wlen);

/* invoke.c, invoke_run.c */
struct pr_pool;
struct pr_inv {
	const char *package, *tool, *actor, *conversation, *room;
	/* rooted, beneath the actor's own workspace,
	 * PKGRUN_WORKSPACE_ROOT/<conversation>/<actor>; NULL: that one */
	const char *workspace;
	const char *grant; /* egress grant text, or NULL */
	const char *rid;
	const char *args[PR_ARGS_MAX + 1];
	int nargs;
	const char *files[PR_MEMBER_FILES_MAX + 1];
	int nfiles;
};
struct pr_result {
	enum kz_exit code; /* of kz-pkgrun invoke */
	const char *wire; /* KZ_WE_* on refusal or failure, else NULL */
	char why[256];
	int exit_status; /* the tool's, -1 when it did not run or was killed */
	int sig;
	char *out; /* sanitized stdout (malloc), may be NULL */
	size_t outlen;
	char *err; /* stderr, private invocations only (malloc) */
	size_t errlen;
	bool truncated;
	const char *cls;
	int64_t ms;
	/* serve: the warm worker it ran on, for the caller to give back
	 * (pr_pool_release) once it has answered, so that the worker's
	 * stop and its replacement's start do not delay the answer. */
	struct pr_worker *worker;
};
/* Input grammar of an invocation: 0, or KZ_EINVAL with why. */
KZ_WUR int pr_inv_check(const struct pr_inv *iv, char *why, size_t wlen);
/* pool: the daemon's warm workers and id range (serve), or NULL: the
 * in-process one-shot. */
void pr_invoke(const struct pr_conf *c, struct pr_pool *pool,
    const struct pr_inv *iv, struct pr_result *res);
void pr_result_release(struct pr_result *res);
/* Listing: the tools available to a private (shared false) or shared
 * invocation of package hex, as a JSON array the caller owns. */
KZ_WUR int pr_list(const struct pr_conf *c, const char *hex, bool shared,
    cJSON **out, char *why, size_t wlen);
/* Result sanitizing: valid UTF-8 with no control characters but tab and
 * newline; anything else becomes U+FFFD.  Returns a new string. */
char *pr_sanitize(const char *in, size_t len, size_t *outlen);
/* Cuts sanitized text s (valid UTF-8) to at most max bytes, at a
 * character boundary; true when it cut. */
bool pr_result_bound(char *s, size_t *len, size_t max);
/* An identifier that can name a directory: one segment of the rooted path
 * grammar (no slash, no dot segment, no control character). */
bool pr_segment_ok(const char *s);
/* The environment guard: a name that looks like a credential. */
bool pr_env_name_secret(const char *name);

/* exec.c: one kz-sandbox run of argv with the staged directory. */
struct pr_exec {
	const char *staging; /* host path of the projection */
	int64_t uid, gid; /* of the runner's range */
	const char *id; /* the sandbox id (its cgroup) */
	const char *grant_file; /* or NULL */
	const char *const *env; /* NAME=VALUE, NULL-terminated */
	const char *const *argv; /* the tool's command, NULL-terminated */
	/* Or NULL.  The one-shot's start: kz-sandbox makes the sandbox while
	 * gate(gate_arg) runs, and the tool starts only if it returns 0. */
	int (*gate)(void *gate_arg);
	void *gate_arg;
};
struct pr_exec_out {
	bool setup_failed;
	int exit_status, sig;
	char *out, *err;
	size_t outlen, errlen;
	bool truncated;
};
KZ_WUR int pr_exec_run(const struct pr_conf *c, const struct pr_exec *x,
    struct pr_exec_out *o, char *why, size_t wlen);
/* The kz-sandbox argv (for tests and the bench): into a[max]. */
KZ_WUR int pr_exec_argv(const struct pr_conf *c, const struct pr_exec *x,
    const char **a, size_t max);
/* The argv of a warm worker, `kz-sandbox serve` with the same settings as
 * pr_exec_argv (x's staging, ids and sandbox id; its grant, env and argv
 * are not used: they come with the run op) and the egress socket when
 * the runner has one, listening on sock, ready once pidfile exists. */
KZ_WUR int pr_serve_argv(const struct pr_conf *c, const struct pr_exec *x,
    const char *sock, const char *pidfile, const char **a, size_t max);
/* Starts argv (from pr_exec_argv or pr_serve_argv) with an environment of
 * one PATH entry, /dev/null on 0, out on 1, err on 2 and st, when >= 0,
 * on 3; nothing else.  pdeathsig: what the child gets when the calling
 * thread ends. */
KZ_WUR int pr_exec_spawn(const char *const *argv, int out, int err, int st,
    int pdeathsig, pid_t *pid);

/* warm.c, warm_proc.c, warm_take.c: the warm workers of serve, each
 * single-use, and the runner's id range.  pr_pool_new starts the
 * replacement thread when c->warm > 0. */
KZ_WUR int pr_pool_new(const struct pr_conf *c, struct pr_pool **out);
/* Stops every worker, taken ones too, and waits for them. */
void pr_pool_stop(struct pr_pool *p);
/* Stops and frees, once no invocation can call into p; NULL-safe. */
void pr_pool_free(struct pr_pool *p);
struct pr_worker;
/* A ready worker that answers health with nothing run yet, or NULL (why
 * says which: none ready, dead, not answering, or a grant no warm worker
 * can take); the caller then runs the one-shot. */
struct pr_worker *pr_pool_take(struct pr_pool *p, bool grant, char *why,
    size_t wlen);
/* The taken worker's projection directory, to stage into, and socket. */
const char *pr_worker_projection(const struct pr_worker *w);
const char *pr_worker_sock(const struct pr_worker *w);
/* wrun.c: one run op on the taken worker, mapped to what pr_exec_run
 * returns. */
KZ_WUR int pr_worker_run(const struct pr_conf *c, struct pr_worker *w,
    const struct pr_exec *x, const char *grant, const char *rid,
    struct pr_exec_out *o, char *why, size_t wlen);
/* A run op's reply (ok or not) into o: 0, or KZ_EPROTO when it is not a
 * reply kz-sandbox gives (o then holds nothing to free). */
KZ_WUR int pr_worker_reply(const struct pr_conf *c, const cJSON *rep,
    struct pr_exec_out *o, char *why, size_t wlen);
/* The worker is done with: it is stopped and replaced, never reused. */
void pr_pool_release(struct pr_pool *p, struct pr_worker *w);
/* An id of the range for a one-shot, claimed (uidclaim.c), -1 when none
 * is free; put it back (the claim is dropped). */
int pr_pool_slot_take(struct pr_pool *p);
void pr_pool_slot_put(struct pr_pool *p, int slot);
void pr_pool_note_oneshot(struct pr_pool *p, bool fallback);
/* The pool's counters, into o (status). */
KZ_WUR int pr_pool_status(struct pr_pool *p, cJSON *o);
/* At serve's start: workers and directories a previous daemon left. */
void pr_pool_sweep(const struct pr_conf *c);
/* The next id after last (round robin) not in used[n], or -1. */
int pr_slot_next(const bool *used, int n, int last);

/* uidclaim.c: every invocation holds an exclusive claim on its id of the
 * range for as long as it runs (an flock on STATE/uids/<uid>, which the
 * kernel drops when the process dies).  pr_uid_claim takes id slot: 0 and
 * *fd, or KZ_EUNAVAIL when another process holds it or a host process
 * runs under its uid.  pr_uid_pick tries every id from a random start,
 * again every 100 ms until wait_ms have passed: 0 with *slot and *fd, or
 * KZ_EUNAVAIL when none was free. */
KZ_WUR int pr_uid_claim(const struct pr_conf *c, int slot, int *fd);
KZ_WUR int pr_uid_pick(const struct pr_conf *c, int64_t wait_ms, int *slot,
    int *fd);
void pr_uid_release(int *fd);

/* client.c: invoke through a running serve (--socket). */
int pr_client_invoke(const struct pr_conf *c, const char *sock,
    const struct pr_inv *iv);

/* audit.c: one record of kind "package"; KZ_EUNAVAIL when not written.
 * Nothing of the arguments, the member files or the output is in it. */
int pr_audit(const struct pr_conf *c, const struct pr_inv *iv,
    const struct pr_result *res, const char *outcome, const char *stage);
int pr_audit_admit(const struct pr_conf *c, const char *hex,
    const char *outcome, const char *reason, char *why, size_t wlen);

/* serve.c */
int pr_serve(const struct pr_conf *c);

#endif
