/*
 * kz-run internals: the dispatch client.  It holds no pool, lease table or
 * fallback of its own: every worker comes from kz-lease, every step is
 * audited to kz-audit, and a refusal is terminal for the attempt.
 */
#ifndef RUN_H
#define RUN_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_exit.h"
#include "kz_snap.h"

#define RUN_FILES_MAX 64
#define RUN_IDS_MAX 64 /* --select and --retrieved, as kz-project */
#define RUN_ID_MAX 128
#define RUN_DIGEST_MAX 80 /* "sha256:" and 64 hex */
#define RUN_OUTPUTS_MAX 16 /* --output */

struct run_conf {
	char run_dir[PATH_MAX];
	char lease_sock[108];
	char project_sock[108];
	char audit_sock[108];
	char key_file[PATH_MAX];
	char egress_bin[PATH_MAX];
	char pkgbroker_bin[PATH_MAX]; /* mints the run's broker token */
	/* RUN_COMPRESS_CMD: the model projection's compressor; empty: off. */
	char compress_cmd[PATH_MAX];
	int64_t timeout_ms, lease_wait_ms, io_timeout_ms;
	uint64_t file_max, total_max;
	bool snapshot;
};

struct run_opts {
	const char *config, *actor, *conv, *cap, *socket;
	const char *files[RUN_FILES_MAX];
	size_t nfiles;
	/* The turn kz-project admits: the room is the conversation and the
	 * member the actor; ids are selectors, never authority. */
	const char *room, *member, *turn;
	/* --call: the caller's call id; only kz-project's run-bound room
	 * reference of it ever comes back (placeholders). */
	const char *call;
	const char *select[RUN_IDS_MAX], *retrieved[RUN_IDS_MAX];
	size_t nselect, nretrieved;
	bool contract;
	/* Declared shared-turn outputs: workspace-relative paths. */
	const char *outputs[RUN_OUTPUTS_MAX];
	size_t noutputs;
	bool egress, quiet, json;
	int argc;
	char **argv;
};

/* conf.c: file (NULL: none) and environment over the defaults. */
KZ_WUR int run_conf_load(struct run_conf *c, const char *path, const char *self,
    char *why, size_t wlen);

/* classify.c: the --file files, an inline script and the command line:
 * 0 ok, 1 host administration (why says which), or a negative kz_err when
 * a file cannot be classified whole. */
KZ_WUR int run_classify(const struct run_conf *c, const struct run_opts *o,
    char *why, size_t wlen);
/* Whether argv is an inline shell or interpreter script ("sh -c TEXT",
 * "bash -ec TEXT", "perl -e TEXT"); *text is that script.  Exposed for
 * the unit tests. */
bool run_inline_script(int argc, char **argv, const char **text);

/* project.c: copies the files read-only into dir (which must be empty)
 * and computes the manifest digest over names, sizes and contents. */
KZ_WUR int run_project(const struct run_conf *c, const char *dir,
    const char *const *files, size_t n, char digest[RUN_DIGEST_MAX],
    uint64_t *bytes, char *why, size_t wlen);
/* The manifest digest of an empty projection. */
void run_manifest_empty(char digest[RUN_DIGEST_MAX]);

/* cap.c: 0 when the capability exists and allows what the options ask
 * for (egress, outputs), else 1 with why (one line naming the
 * capability and what it does not allow). */
int run_cap_check(const struct run_opts *o, char *why, size_t wlen);

/* opts.c: defaults and the rules between options (--room and --file are
 * exclusive; the room is the conversation, the member the actor).  0 or
 * -1 with why. */
int run_opts_check(struct run_opts *o, char *why, size_t wlen);

/* admit.c: the kz-project client.  The admission snapshot, owned by the
 * caller, and what its records carry. */
struct run_adm {
	cJSON *snap;
	int64_t audience; /* -1: none */
	int64_t files, bytes;
	char manifest[RUN_DIGEST_MAX];
};
/* The admit request of this turn (rid is the default turn id). */
cJSON *run_admit_req(const struct run_opts *o, const char *rid);
/* Takes the snapshot out of an admit reply and checks the fields the run
 * records; KZ_EPROTO when one is missing or malformed. */
KZ_WUR int run_adm_take(cJSON *rep, struct run_adm *a);
void run_adm_release(struct run_adm *a);
/* One kz-project call: 0 with *rep (ok or not), or a kz_err when the
 * service could not be reached. */
KZ_WUR int run_project_call(const struct run_conf *c, cJSON *req, cJSON **rep);

/* Why a step was refused: the wire code and kz-project's one line, for
 * the member (stderr) and the audit record. */
struct run_refusal {
	const char *stage;
	char code[48];
	char reason[200];
};
struct run_ctx;
/* Admission of the turn before the lease, and the classification of
 * what it admitted (stage "classify": kz-project's classify op): 0 with a
 * filled, or an exit code with f filled. */
int run_admit(const struct run_ctx *x, struct run_adm *a,
    struct run_refusal *f);
/* Right before the code starts: verify, then materialize into a new
 * directory RUN_PROJECTION_SUBDIR under the worker's (empty) projection
 * directory.  0, or an exit code with f filled. */
int run_materialize(const struct run_ctx *x, const struct run_adm *a,
    const char *proj, struct run_refusal *f);
#define RUN_PROJECTION_SUBDIR "files"

/* One declared output after the run: linked (err 0, resource set) or
 * refused (code and reason: one line that names no path). */
struct run_output {
	const char *path;
	int err;
	char code[48];
	char reason[160];
	char resource[64];
	int64_t size, link_seq;
};

/* The model projection's bound: the last bytes of stdout and of stderr. */
#define RUN_TAIL_MAX 4096

/* What the run produced, for the status line and the JSON output. */
struct run_result {
	struct run_output out[RUN_OUTPUTS_MAX];
	size_t nout, linked;
	bool ran; /* the code ran and the worker answered */
	int exit_status, signal;
	char limit[32]; /* the limit that stopped it, or "" */
	char *tail[2]; /* malloc'd tails of stdout and stderr, or NULL */
	size_t tail_len[2];
	bool compressed[2];
	/* A refusal before or around the run: its one line. */
	char refusal[200];
	/* "complete": the sink acknowledged every record of the run;
	 * "incomplete": it did not (or could not be reached); "off". */
	const char *audit;
};
void run_result_release(struct run_result *r);

/* audit.c: records; the common correlation fields are added here. */
struct run_aq;
struct run_ctx {
	const struct run_conf *c;
	const struct run_opts *o;
	struct run_result *res;
	char rid[33];
	char manifest[RUN_DIGEST_MAX];
	int64_t audience; /* audience_version; -1: no admission */
	struct run_aq *aq; /* records in flight; NULL: send in line */
};
#define RUN_AUDIT_DONE INT_MAX /* a ticket already acknowledged */
#define RUN_AUDIT_ALL INT_MIN /* run_audit_wait: every record */
struct run_aq *run_aq_new(void);
/* Waits for what is still in flight, then frees. */
void run_aq_free(struct run_aq *q);
/* Consumes ev and sends it at once (held, after run_audit_hold),
 * without waiting for the sink: a ticket for run_audit_wait, or a
 * negative kz_err when it could not be sent (logged, and counted as
 * lost). */
int run_audit(const struct run_ctx *x, const char *kind, cJSON *ev);
/* Records made between the two go out as one append, at the flush (or
 * when one of them is waited for): one fsync in the sink for all. */
void run_audit_hold(const struct run_ctx *x);
void run_audit_flush(const struct run_ctx *x);
/* 0 once the sink acknowledged the ticket's record (fsync'd), else the
 * error; with RUN_AUDIT_ALL, 0 only when every record of the run so far
 * was acknowledged.  The dispatch record is waited for before the code
 * starts (no record, no run). */
int run_audit_wait(const struct run_ctx *x, int ticket);

/* lease.c: the lease and every call to its worker. */
struct run_lease {
	cJSON *rep;
	cJSON *result; /* the closing dispatch record, sent with release's */
	const char *worker, *lid, *token, *endpoint, *proj, *snap;
	int64_t t0;
	int64_t ttl_ms;
	int64_t valid_until; /* monotonic ms: the lease holds until then */
	int64_t next_renew; /* monotonic ms */
	bool lost; /* gone: nothing more goes to the worker */
	bool egress; /* kz-lease gave its pool an egress path */
	bool broker; /* and a package broker */
	bool restored; /* the worker restored snap in this lease */
	bool pending; /* the worker wrote the save to tmp: not committed */
	char lost_why[96];
	struct kz_snap_bounds snapb; /* with snap, from kz-lease */
	struct kz_snap_id base; /* what snap was before the restore */
	char tmp[PATH_MAX + 64]; /* the save, written beside snap */
};
cJSON *run_request(const char *op, const char *rid);
const char *run_str(const cJSON *o, const char *k);
/* Leases a worker, waiting up to RUN_LEASE_WAIT_MS for a warm one: 0,
 * or an exit code (printed and audited). */
int run_lease_get(const struct run_ctx *x, struct run_lease *l);
/* 0 while the lease holds, renewing it when a third of its TTL has
 * passed (now: at once); KZ_ESTATE once it is lost (l->lost, lost_why:
 * refused, or not confirmed before it would expire). */
KZ_WUR int run_lease_keep(const struct run_ctx *x, struct run_lease *l,
    bool now);
/* One call to the worker, only while the lease holds and renewing it
 * while the reply is awaited (up to timeout_ms): KZ_ESTATE, with the
 * connection closed, once the lease is lost.  *sent (may be NULL) tells
 * whether the request reached the worker's socket. */
KZ_WUR int run_worker_call(const struct run_ctx *x, struct run_lease *l,
    const cJSON *req, int64_t timeout_ms, bool *sent, cJSON **rep, char *why,
    size_t wlen);
/* worker_id, lease_id and token, for the lease's records. */
cJSON *run_lease_ev(const struct run_lease *l);
/* Releases the lease (never a lost one) and sends the closing dispatch
 * and the release records: true once kz-lease took the release, which
 * proves the lease held to it. */
bool run_lease_release(const struct run_ctx *x, struct run_lease *l);
/* The release request alone, no record: true once kz-lease took it. */
bool run_lease_drop(const struct run_ctx *x, const struct run_lease *l);

/* save.c: the workspace snapshot, restored before the run and saved
 * after it (lib/snap.c), only while the lease holds. */
/* A worker op on a host path; 0 when it answered ok, else a kz_err
 * (KZ_EDENIED with *code "refused" or "error").  skip asks a snapshot
 * to write nothing when the workspace archives to exactly the bytes the
 * worker restored in this lease; *unchanged (may be NULL) says so. */
KZ_WUR int run_worker_op(const struct run_ctx *x, struct run_lease *l,
    const char *op, const char *path, bool skip, bool *unchanged,
    const char **code);
void run_restore(const struct run_ctx *x, struct run_lease *l);
/* After a run was sent: the worker writes the save beside the snapshot
 * (l->pending), or the workspace is as it was restored (nothing to
 * save); 0, else why (one line) is filled and no older snapshot is left
 * to come back. */
int run_save(const struct run_ctx *x, struct run_lease *l, char *why,
    size_t wlen);
/* Once the release was answered: the pending save is put in place only
 * when kz-lease took the release (released), so the lease is proven to
 * have held past the end of the save; else it is removed with the older
 * snapshot.  0 (or nothing pending), else why is filled. */
int run_save_commit(struct run_lease *l, bool released, char *why, size_t wlen);
/* The older snapshot must not come back (a run was sent, nothing saved):
 * removed, with any pending save, while it is the one restored. */
void run_unsave(const struct run_ctx *x, struct run_lease *l);

/* untar.c: writes the members named by paths from the tar archive at fd
 * beneath dirfd, each only when it is a regular file; res[i] is 0, or
 * KZ_ENOENT (not in the archive), KZ_EPATH_NOTREG, KZ_ETOOBIG (over max),
 * KZ_ESYS.  0, or KZ_EPROTO when the archive cannot be read whole. */
KZ_WUR int run_untar(int fd, const char *const *paths, size_t n, int dirfd,
    uint64_t max, int *res);

/* outputs.c: after the run, while the lease holds: each declared output
 * is read from the workspace, linked by kz-project to exactly the turn's
 * room, reported and audited (kind output). */
void run_outputs(const struct run_ctx *x, struct run_lease *l,
    const cJSON *snap);

/* An admission, projection or isolation_denial record of a refusal. */
void run_denied(const struct run_ctx *x, const char *kind, const char *stage,
    const char *error, const char *reason);

/* diag.c: the one JSON object of --json on stdout: the model and the
 * members projections, the outputs and their placeholders. */
void run_json(const struct run_ctx *x, int rc);

/* dispatch.c: the whole job; returns the exit code. */
int run_dispatch(const struct run_conf *c, const struct run_opts *o);

/* What the run step did, for the closing line and what follows it. */
struct exec {
	const char *grant;
	const char *broker_token; /* the run's own, for the worker */
	int rc;
	int64_t ms;
	bool sent; /* the command reached the worker */
	bool ran; /* and it answered: rc and ms are the code's */
	bool recorded; /* the dispatch record went out at the grant */
	bool report; /* the steps on the worker ended: a closing line */
	int ticket; /* its run_audit ticket */
};
/* exec.c: the run step.  Dispatch record, the run, its outputs and the
 * result record; returns the exit code. */
int run_exec(const struct run_ctx *x, struct run_lease *l, struct exec *ex);
/* The dispatch record, sent: its run_audit ticket. */
int run_dispatch_started(const struct run_ctx *x, const struct run_lease *l,
    const struct exec *ex);

#endif
