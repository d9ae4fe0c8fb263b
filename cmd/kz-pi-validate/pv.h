/*
 * kz-pi-validate's modules: the package (profile, tree, canonical digest,
 * materialization), the disposable child and its channel, the receipt.
 */
#ifndef PV_H
#define PV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_exit.h"

#define PV_MAX_FILES 4096
#define PV_MAX_FILE_BYTES (16u << 20)
#define PV_MAX_TOTAL_BYTES (64u << 20)
#define PV_MAX_PROFILE 65536
#define PV_MAX_RES 64 /* entries in one resource list */
#define PV_DIAG_MAX 16 /* diagnostics kept */
#define PV_DIAG_LEN 240 /* bytes per diagnostic */
#define PV_NONCE_BYTES 32
#define PV_DIGEST_HEX 64
/* The host's lock of the unshare mode: one validation at a time. */
#define PV_UNSHARE_LOCK "/run/kz-pi-validate.unshare.lock"

enum pv_kind { PV_SKILL, PV_EXTENSION };

struct pv_profile {
	enum pv_kind kind;
	int64_t deadline_ms;
	cJSON *root; /* owns the strings below */
	const char *skills[PV_MAX_RES], *prompts[PV_MAX_RES];
	const char *themes[PV_MAX_RES], *exts[PV_MAX_RES];
	const char *tests[PV_MAX_RES];
	size_t nskills, nprompts, nthemes, nexts, ntests;
	const char *lock; /* NULL: no dependencies to install */
	char sha256[PV_DIGEST_HEX + 1]; /* of the profile file's bytes */
};

/* The authored artifact: sorted relative paths of its regular files. */
struct pv_tree {
	char **paths;
	size_t n;
	uint64_t total;
	char digest[PV_DIGEST_HEX + 1];
};

/* pkg.c */
KZ_WUR int pv_profile_load(const char *file, int64_t deadline_max,
    struct pv_profile *p, char *why, size_t wlen);
/* SHA-256 of len bytes, as lowercase hex. */
void pv_sha256_hex(const char *buf, size_t len, char hex[PV_DIGEST_HEX + 1]);
/* SHA-256 (hex) of a profile file's bytes, as pv_profile_load records it. */
KZ_WUR int pv_profile_digest(const char *file, char hex[PV_DIGEST_HEX + 1],
    char *why, size_t wlen);
void pv_profile_release(struct pv_profile *p);
KZ_WUR int pv_workspace_check(char *cwd, size_t len, char *why, size_t wlen);
/* skip_modules: leave out a top-level node_modules (reinstalled deps). */
KZ_WUR int pv_tree_scan(int rootfd, bool skip_modules, struct pv_tree *t,
    char *why, size_t wlen);
void pv_tree_release(struct pv_tree *t);
KZ_WUR int pv_resources_check(int rootfd, const struct pv_profile *p, char *why,
    size_t wlen);
KZ_WUR int pv_materialize(int srcfd, const struct pv_tree *t, int dirfd,
    const char *name, uid_t owner, char *why, size_t wlen);
/* Walks by descriptor and never follows a symlink the child left (the
 * tree is removed with kz_tree_remove()). */
KZ_WUR int pv_chown_tree(const char *path, uid_t owner);
/* Static resources the parent reads itself, as receipt entries. */
KZ_WUR int pv_static_read(int rootfd, const struct pv_profile *p, cJSON *out,
    char *why, size_t wlen);

/* child.c */
enum pv_iso { PV_ISO_SANDBOX, PV_ISO_UNSHARE };
/* Where the child sees its tree under kz-sandbox (its --projection). */
#define PV_SANDBOX_ROOT "/projection"
/* The writable copy of the projection inside the sandbox's workspace. */
#define PV_SANDBOX_PKG "/workspace/pkg"
/* The in-sandbox step's exit when the copy or the strict reinstall fails. */
#define PV_PREP_EXIT 86
/* Its exit when node or the loader script is not in the sandbox's view:
 * the validator's environment failed, not the package. */
#define PV_LOADER_EXIT 87
/* What the in-sandbox step does with the package's lock before the command. */
enum pv_deps { PV_DEPS_NONE, PV_DEPS_TRY, PV_DEPS_STRICT };
struct pv_run {
	enum pv_iso iso;
	const char *sandbox_bin;
	const char *sandbox_conf; /* kz-sandbox --config, or NULL */
	uid_t uid; /* the child's unprivileged uid, in either mode */
	uid_t gv_uid; /* kz-sandbox --gvisor-uid and --gvisor-gid, or 0 */
	const char *cwd; /* the tree (host path) */
	char *const *argv; /* the command (node ...) */
	const char *loader; /* kz-sandbox: a script argv[0] loads, or NULL */
	const char *home; /* HOME of the child (unshare mode) */
	const char *run; /* the run directory: unshare mode's writable tree */
	const char *modules; /* the Pi loaders (read; unshare mode's view) */
	bool channel; /* set up the nonce/result channel */
	/* kz-sandbox: the step's reinstall (the copy is always made). */
	enum pv_deps deps;
	const char *npm, *npm_cache; /* npm; its offline cache or NULL */
	size_t result_max;
	int64_t deadline_ms; /* absolute, CLOCK_MONOTONIC ms */
};
struct pv_outcome {
	int status; /* wait status */
	bool timed_out;
	bool over_bound;
	bool sandbox_failed; /* kz-sandbox exited 2 or 3: nothing ran */
	char *result; /* result channel bytes, NUL-terminated */
	size_t rlen;
	char nonce[PV_NONCE_BYTES * 2 + 1];
	char out_tail[1024], err_tail[1024];
	size_t out_bytes, err_bytes;
};
KZ_WUR int pv_child_run(const struct pv_run *r, struct pv_outcome *o, char *why,
    size_t wlen);
/*
 * view.c: the unshare mode's mount namespace, made by the intermediate
 * once it has unshared it (read-only host, fresh /tmp, /var/tmp and
 * /dev/shm, the run directory writable), and the pid namespace's own
 * /proc, mounted by its first process; -1 with errno when a step fails.
 */
int pv_unshare_view(const struct pv_run *r);
int pv_unshare_proc(void);
void pv_outcome_release(struct pv_outcome *o);
/* Checks the observation: one JSON object carrying the nonce. */
KZ_WUR int pv_observation(const struct pv_outcome *o, cJSON **obs, char *why,
    size_t wlen);
/* The last line of the child's stderr, printable, for a one-line why. */
void pv_err_line(const struct pv_outcome *o, char *out, size_t olen);

/* sbx.c: the kz-sandbox command line and the in-sandbox step. */
#define PV_SBX_ARGV_MAX 96
KZ_WUR int pv_sandbox_argv(const struct pv_run *r, char **a, size_t max);
bool pv_sandbox_failed(int status);

/* verdict: reasons and bounded diagnostics, shared by every phase. */
struct pv_verdict {
	cJSON *reasons, *diags;
	bool failed;
};
void pv_reason(struct pv_verdict *v, const char *what, const char *detail);
void pv_diag(struct pv_verdict *v, const char *s);

/* project.c: the untrusted observation, projected into the receipt body. */
void pv_project(struct pv_verdict *v, cJSON *body, enum pv_kind kind,
    const cJSON *obs);

/* runtime.c: what the parent observes itself. */
#define PV_NODE_MIN_MAJOR 20
#define PV_NODE_MIN_MINOR 6
/* 0 when "vMAJ.MIN.PATCH" is at least the minimum; KZ_EINVAL unparsable. */
KZ_WUR int pv_node_version_ok(const char *v, bool *ok);

/* validate.c */
struct pv_conf {
	const char *keyfile, *sandbox_bin, *sandbox_conf, *node, *child_js;
	const char *modules;
	const char *pi_version, *npm, *npm_cache;
	enum pv_iso iso;
	uid_t uid, gv_uid;
	size_t result_max;
	int64_t deadline_max;
};
struct pv_job {
	const struct pv_conf *c;
	struct pv_profile prof;
	struct pv_tree tree;
	int filesfd;
	char cwd[3000], run[3200];
	long node_major, node_minor; /* what node --version said */
	int64_t deadline;
	cJSON *body;
	struct pv_verdict v;
	char why[512];
};
bool pv_hex64(const char *s);
int pv_validate(const struct pv_conf *c, const char *profile, const char *files,
    const char *contract, const char *out);
int pv_verify(const struct pv_conf *c, const char *receipt, const char *files,
    const char *profile, const char *contract);

/* runtime.c */
int pv_runtime(struct pv_job *j);

/* phase.c: each returns 0 (the verdict says pass or fail) or an exit code. */
int pv_phase_tests(struct pv_job *j);
int pv_phase_prepare(struct pv_job *j, const char *dir);
int pv_phase_load(struct pv_job *j, const char *dir);

/* receipt.c */
KZ_WUR int pv_receipt_sign(cJSON *body, const char *keyfile, char **out,
    char *why, size_t wlen);
/* 0 current pass; KZ_EDENIED stale or not a pass (why says which). */
KZ_WUR int pv_receipt_verify(const char *text, size_t len, const char *keyfile,
    const char *artifact, const char *profile, const char *contract, char *why,
    size_t wlen);
bool pv_event_supported(const char *name);

#endif
