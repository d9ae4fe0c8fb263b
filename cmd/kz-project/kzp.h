/*
 * kz-project internals: the context every op runs in, the refusal codes and
 * the modules (model: the store; admit: the policy; verify: the snapshot
 * against live state; blob: content-addressed bytes; materialize: the
 * read-only projection; outputs: shared-turn files).
 *
 * The rules the comments and tests name:
 *   bounds              a projection is exact and bounded (files, bytes)
 *   place               no two files of a room share a path or nest;
 *                       first linked, first placed; what still does not
 *                       fit at admission is left out, never the room
 *   selector            request ids are selectors, re-resolved under the
 *                       member; a later turn keeps the resolved scope
 *   private retrieval   retrieved ids are projected in a private turn only
 *   library             a private-library file is a selection, never a
 *                       room link
 *   sole audience       the selection joins only while the member is the
 *                       room's whole audience
 *   withheld selection  what a run gets when the selection is withheld
 *   freshness           live state is re-read before code starts and
 *                       before bytes load
 *   manifest change     the admitted manifest must still hold at dispatch
 *   retained output     a current member gets a retained output later
 *   shared output       a shared turn's output is validated and linked to
 *                       exactly its room; placeholders name no resource
 *   project grant       projects add access paths, not authority
 *   declared source     a declared object-store source grants nothing;
 *                       reading goes through a platform-managed connection
 *   capability          a run names one of lib/kz_cap.h's closed set;
 *                       outputs are linked only when it allows them
 *   signed url          object-store credentials never enter a declaration
 *   fail closed         what cannot be proven gets nothing
 *   audit               every admission, verification and refusal is
 *                       audited, with no file names, bytes or keys
 */
#ifndef KZP_H
#define KZP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_key.h"
#include "kz_store.h"

#define KZP_ID_MAX 64 /* raw ids and resource ids */
#define KZP_PATH_MAX 255 /* a projected file's relative path */
#define KZP_SEG_MAX 128
#define KZP_SHA_HEX 64
#define KZP_LIST_MAX 64 /* selectors, retrieved ids per turn */
#define KZP_WHY 200

/* Bounds on one projection (the bounds rule: exact and bounded). */
struct kzp_bounds {
	int64_t max_files;
	int64_t max_file_bytes;
	int64_t max_total_bytes;
};

struct kzp {
	struct kz_store *st; /* NULL until connected */
	const char *store_sock;
	const char *dep;
	struct kz_key idkey; /* KZ_SUBKEY_IDHASH of the field key */
	const char *blobdir;
	const char *audit_sock; /* NULL: no audit */
	struct kzp_bounds b;
	int64_t out_max_bytes;
	const char *out_types; /* comma-separated extensions */
	int64_t snap_ttl;
	int64_t blob_grace; /* seconds an unreferenced blob is kept */
	bool pointer_shared; /* default pointer for new links */
	bool oneshot; /* one op per process: EVAL, no SCRIPT LOAD */
	/* The peer of the op being served (kzp_callers); a one-shot op runs
	 * with its caller's own rights and has none. */
	bool served;
	uid_t caller;
};

/*
 * The commit script's refusal when the room moved since the view was read:
 * admit reads again, and it never reaches the wire.
 */
#define KZP_CONFLICT "conflict"

/* A refusal or failure: wire code and one-line reason. */
struct kzp_res {
	const char *code; /* NULL: ok */
	char why[KZP_WHY];
};

void kzp_fail(struct kzp_res *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Whether a file a caller named by path is the caller's to hand over.
 * The daemon reads with its own rights, which reach its copy of the
 * field key: a path is read only when the caller owns what it names
 * (root may name anything), or any file kz-project can read could be
 * stored as a blob and projected back.  Fills r when not.
 */
KZ_WUR int kzp_callers(const struct kzp *p, int fd, struct kzp_res *r);

/* ids.c-like helpers (model.c) */
bool kzp_id_ok(const char *s);
KZ_WUR int kzp_hash(const struct kzp *p, const char *kind, const char *id,
    char out[KZ_IDHASH_HEX + 1]);

/* model.c: mutations and reads against the store. */
KZ_WUR int kzp_connect(struct kzp *p, struct kzp_res *r);
/*
 * The projection's bounds as the three arguments of a script that places
 * a file in a room (lua/place_fn.lua), in av[0..2]; ba holds their text.
 */
struct kzp_bargs {
	char s[3][24];
};
void kzp_bounds_args(const struct kzp *p, struct kzp_bargs *ba,
    const char **av);
/* Runs a named mutation script with args (after the prefix). */
KZ_WUR int kzp_mutate(struct kzp *p, const char *name, int argc,
    const char **argv, long long *val, struct kzp_res *r);
/* Loads the room view for member mh and the extra resource ids. */
KZ_WUR int kzp_view(struct kzp *p, const char *rh, const char *mh,
    const cJSON *rids, cJSON **out, struct kzp_res *r);
/*
 * One page of the versions' blobs (lua/refs.lua, SCAN from cursor cur, "0"
 * to start): add(arg, sha) for each digest named, the next cursor in cur
 * ("0" when done).  Fills r on a failure.
 */
KZ_WUR int kzp_refs_page(struct kzp *p, char cur[32],
    int (*add)(void *, const char *), void *arg, struct kzp_res *r);
/* Facts about one resource as seen by mh. */
KZ_WUR int kzp_facts(struct kzp *p, const char *rid, const char *mh,
    cJSON **out, struct kzp_res *r);
/* Commits an admission: checks aver/seq, stores the snapshot, the scope. */
KZ_WUR int kzp_commit(struct kzp *p, const cJSON *view, const cJSON *snap,
    const char *mh, const cJSON *scope_add, struct kzp_res *r);
/*
 * One atomic read for verification: the view for mh with rids, and the
 * stored copy of snapshot sid (*stored NULL, 0 returned, if unknown).
 */
KZ_WUR int kzp_live(struct kzp *p, const char *rh, const char *mh,
    const cJSON *rids, const char *sid, cJSON **view, cJSON **stored,
    struct kzp_res *r);

/* admit.c, verify.c, view.c: the policy, pure over a view (unit-tested). */
struct kzp_turn {
	const char *mh; /* initiating member's hash */
	const char *rh; /* room hash */
	const char *turn;
	const char *capability;
	const cJSON *select; /* array of resource ids or NULL */
	const cJSON *retrieved; /* array of resource ids or NULL */
	bool contract;
};
bool kzp_can_read(const cJSON *facts, const char *mh);
KZ_WUR int kzp_admit_decide(const cJSON *view, const struct kzp_turn *t,
    const struct kzp_bounds *b, cJSON **snap, cJSON **scope_add,
    struct kzp_res *r);
/* *withheld: the selection is withheld and the rest goes (kz-project(8)). */
KZ_WUR int kzp_verify_decide(const cJSON *snap, const cJSON *view,
    const struct kzp_bounds *b, bool *withheld, struct kzp_res *r);
/* The snapshot without its withheld selection, in *out (cJSON_Delete). */
KZ_WUR int kzp_snap_withhold(const cJSON *snap, cJSON **out);
/* Digests over a manifest's items and over a roster. */
void kzp_manifest_digest(const cJSON *items, char out[KZP_SHA_HEX + 1]);
void kzp_roster_digest(const cJSON *roster, char out[KZP_SHA_HEX + 1]);
/* Checks a snapshot's shape and its manifest digest. */
KZ_WUR int kzp_snap_check(const cJSON *snap, struct kzp_res *r);

/*
 * turn.c: one audit record of kind (stage, if not NULL) for the decision
 * in res, correlated by snap's capability, audience version and manifest
 * digest; 0 when sent or audit is off.
 */
KZ_WUR int kzp_audit(struct kzp *p, const char *kind, const char *stage,
    const cJSON *snap, const char *mh, const char *rh,
    const struct kzp_res *res, int64_t files, int64_t bytes);

/* blob.c */
/*
 * A check of a blob's content before it takes its name: given the copy
 * (read-only, the caller's no longer), it refuses in r, and nothing is
 * stored.
 */
typedef int kzp_blob_check(int fd, const void *arg, struct kzp_res *r);
KZ_WUR int kzp_blob_put(const char *blobdir, int srcfd, int64_t max,
    kzp_blob_check *check, const void *arg, char sha[KZP_SHA_HEX + 1],
    int64_t *size, struct kzp_res *r);
KZ_WUR int kzp_blob_open(const char *blobdir, const char *sha, int *fd);
/* flock(2) of the store's directory (LOCK_SH, LOCK_EX), retried on EINTR. */
KZ_WUR int kzp_blob_lock(int dfd, int how);
/*
 * A blob a version is about to name: present, its size in *size, and its
 * time set to now under the store's shared lock, so blob-collect keeps it
 * for the grace (KZ_ENOENT, KZ_EINVAL or KZ_ESYS when it cannot).
 */
KZ_WUR int kzp_blob_renew(const char *blobdir, const char *sha, int64_t *size);
/* The blob directory once (O_PATH), then each blob beneath it. */
KZ_WUR int kzp_blob_dir(const char *blobdir, int *dfd);
KZ_WUR int kzp_blob_open_at(int dfd, const char *sha, int *fd);
/*
 * The blob of one admitted manifest item (its "sha256"), which must still
 * be the item's "size"; KZ_ECRYPTO when it is absent or another size.
 * Its bytes are the caller's to check against the digest as it reads.
 */
KZ_WUR int kzp_blob_open_item(int dfd, const cJSON *item, int64_t *size,
    int *fd);
/* The refusal for bytes that are not the admitted ones. */
#define KZP_DIGEST_MISMATCH "a file's bytes do not match the admitted digest"
bool kzp_sha_ok(const char *s);

/*
 * place.c: the place rule.  A path set over candidate paths (each a valid
 * relative path, kept by the caller while the set lives): a path clashes
 * with a taken one when they are equal or one is a directory of the other.
 */
struct kzp_paths;
KZ_WUR int kzp_paths_new(const char *const *paths, size_t n,
    struct kzp_paths **out);
/* Whether candidate i clashes with a candidate taken so far. */
bool kzp_paths_clash(const struct kzp_paths *ps, size_t i);
void kzp_paths_take(struct kzp_paths *ps, size_t i);
void kzp_paths_free(struct kzp_paths *ps);
/* Whether no two of the paths clash (false when out of memory). */
bool kzp_paths_disjoint(const char *const *paths, size_t n);
/*
 * Takes the n files of v (objects with "path" and "size") in that order,
 * each only while its path clashes with none taken before it and the
 * files taken stay within b: why[i] is then NULL, else "path_clash" or
 * "over_bounds".
 */
KZ_WUR int kzp_place_in_line(const cJSON *const *v, size_t n,
    const struct kzp_bounds *b, const char **why);

/* materialize.c */
KZ_WUR int kzp_relpath_ok(const char *path);
/*
 * Called once the written tree is proven and before it is delivered; a
 * failure leaves nothing delivered and the tree removed (an allowed
 * projection that cannot be audited is not allowed).
 */
typedef int kzp_gate_fn(void *arg, int64_t files, int64_t bytes,
    struct kzp_res *r);
KZ_WUR int kzp_materialize(const struct kzp *p, const cJSON *snap,
    const char *dest, kzp_gate_fn *gate, void *arg, int64_t *files,
    int64_t *bytes, struct kzp_res *r);
/* Opens rel beneath dirfd without following symlinks: a regular file. */
KZ_WUR int kzp_open_beneath(int dirfd, const char *rel, int *fd);

/* classify.c: *admin when an admitted file is host administration. */
KZ_WUR int kzp_classify(const struct kzp *p, const cJSON *snap, bool *admin,
    struct kzp_res *r);

/* outputs.c */
KZ_WUR int kzp_output_check(const char *name, const char *types,
    const unsigned char *head, size_t headlen, struct kzp_res *r);

/*
 * ops.c: the op table, for serve and the one-shot commands.  A handler
 * gets its op's mode (which op of a family it serves, NULL for most) and
 * adds its reply fields to out.
 */
typedef int kzp_op_fn(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode);
struct kzp_opdef {
	const char *op;
	const char *const *fields;
	kzp_op_fn *fn;
	const char *mode;
	unsigned flags; /* KZ_OP_* (kz_srv.h), checked by the server */
};
extern const struct kzp_opdef kzp_ops[];
const struct kzp_opdef *kzp_op_find(const char *op);
/* Runs one op: reply fields in *out on success. */
KZ_WUR int kzp_run(struct kzp *p, const char *op, const cJSON *req, cJSON **out,
    struct kzp_res *r);

/* ops.c: the request readers every op uses; each fills r on failure. */
int kzp_bad(struct kzp_res *r, const char *why); /* bad_request */
KZ_WUR int kzp_req_id(const cJSON *req, const char *key, const char **out,
    struct kzp_res *r);
KZ_WUR int kzp_req_hash(const struct kzp *p, const cJSON *req, const char *key,
    const char *kind, char out[KZ_IDHASH_HEX + 1], struct kzp_res *r);
/* Runs mutation script and answers its integer as out's field key. */
KZ_WUR int kzp_mutate_as(struct kzp *p, const char *script, int argc,
    const char **av, const char *key, cJSON *out, struct kzp_res *r);
/* The same with av[i] set to v printed: a script's one JSON argument. */
KZ_WUR int kzp_mutate_json(struct kzp *p, const char *script, int argc,
    const char **av, int i, const cJSON *v, const char *key, cJSON *out,
    struct kzp_res *r);

/* The ops, by concern. */
kzp_op_fn kzp_op_member_create, kzp_op_room_member, kzp_op_project_member,
    kzp_op_room_project; /* members.c */
kzp_op_fn kzp_op_blob_put, kzp_op_resource_create, kzp_op_version_new,
    kzp_op_resource_revoke; /* resources.c */
kzp_op_fn kzp_op_link, kzp_op_withdraw, kzp_op_selection; /* links.c */
kzp_op_fn kzp_op_connection_create, kzp_op_declare_source, kzp_op_can_read,
    kzp_op_resolve; /* sources.c */
kzp_op_fn kzp_op_admit, kzp_op_verify, kzp_op_classify,
    kzp_op_materialize; /* turn.c */
kzp_op_fn kzp_op_link_output, kzp_op_placeholder; /* outputs.c */
kzp_op_fn kzp_op_blob_collect; /* collect.c */

#endif
