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

#define PV_MAX_FILES 4096
#define PV_MAX_FILE_BYTES (16u << 20)
#define PV_MAX_TOTAL_BYTES (64u << 20)
#define PV_MAX_PROFILE 65536
#define PV_MAX_RES 64	     /* entries in one resource list */
#define PV_DIAG_MAX 16	     /* diagnostics kept */
#define PV_DIAG_LEN 240	     /* bytes per diagnostic */
#define PV_NONCE_BYTES 32
#define PV_DIGEST_HEX 64

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
void pv_profile_release(struct pv_profile *p);
KZ_WUR int pv_workspace_check(char *cwd, size_t len, char *why,
    size_t wlen);
/* skip_modules: leave out a top-level node_modules (reinstalled deps). */
KZ_WUR int pv_tree_scan(int rootfd, bool skip_modules, struct pv_tree *t,
    char *why, size_t wlen);
void pv_tree_release(struct pv_tree *t);
KZ_WUR int pv_resources_check(int rootfd, const struct pv_profile *p,
    char *why, size_t wlen);
KZ_WUR int pv_materialize(int srcfd, const struct pv_tree *t, int dirfd,
    const char *name, uid_t owner, char *why, size_t wlen);
/* Both walk by descriptor and never follow a symlink the child left. */
KZ_WUR int pv_remove_tree(const char *path);
KZ_WUR int pv_chown_tree(const char *path, uid_t owner);
/* Static resources the parent reads itself, as receipt entries. */
KZ_WUR int pv_static_read(int rootfd, const struct pv_profile *p,
    cJSON *out, char *why, size_t wlen);

/* child.c */
enum pv_iso { PV_ISO_SANDBOX, PV_ISO_UNSHARE };
/* Where the child sees its tree under kz-sandbox (its --projection). */
#define PV_SANDBOX_ROOT "/projection"
struct pv_run {
	enum pv_iso iso;
	const char *sandbox_bin;
	uid_t uid; /* the unprivileged uid of the unshare mode */
	const char *cwd;     /* the tree (host path) */
	char *const *argv;   /* the command (node ...) */
	const char *home;    /* HOME of the child */
	bool channel;	     /* set up the nonce/result channel */
	size_t result_max;
	int64_t deadline_ms; /* absolute, CLOCK_MONOTONIC ms */
};
struct pv_outcome {
	int status;	     /* wait status */
	bool timed_out;
	bool over_bound;
	bool sandbox_failed; /* kz-sandbox exited 3: isolation not set up */
	char *result;	     /* result channel bytes, NUL-terminated */
	size_t rlen;
	char nonce[PV_NONCE_BYTES * 2 + 1];
	char out_tail[1024], err_tail[1024];
	size_t out_bytes, err_bytes;
};
int64_t pv_now_ms(void);
KZ_WUR int pv_child_run(const struct pv_run *r, struct pv_outcome *o,
    char *why, size_t wlen);
void pv_outcome_release(struct pv_outcome *o);
/* Checks the observation: one JSON object carrying the nonce. */
KZ_WUR int pv_observation(const struct pv_outcome *o, cJSON **obs,
    char *why, size_t wlen);

/* validate.c */
struct pv_conf {
	const char *keyfile, *sandbox_bin, *node, *child_js, *modules;
	const char *pi_version;
	enum pv_iso iso;
	uid_t uid;
	size_t result_max;
	int64_t deadline_max;
};
bool pv_hex64(const char *s);
int pv_validate(const struct pv_conf *c, const char *profile,
    const char *files, const char *contract, const char *out);
int pv_verify(const struct pv_conf *c, const char *receipt,
    const char *files, const char *contract);

/* receipt.c */
KZ_WUR int pv_receipt_sign(cJSON *body, const char *keyfile, char **out,
    char *why, size_t wlen);
/* 0 current pass; KZ_EDENIED stale or not a pass (why says which). */
KZ_WUR int pv_receipt_verify(const char *text, size_t len,
    const char *keyfile, const char *artifact, const char *contract,
    char *why, size_t wlen);
bool pv_event_supported(const char *name);

#endif
