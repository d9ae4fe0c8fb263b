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

#define RUN_VERSION "0.1.0"
#define RUN_FILES_MAX 64
#define RUN_DIGEST_MAX 80	/* "sha256:" and 64 hex */

/* Exit codes besides the code's own status (kz conventions). */
#define RUN_EXIT_REFUSED 1
#define RUN_EXIT_USAGE 2
#define RUN_EXIT_UNAVAIL 3
#define RUN_EXIT_INTERNAL 4

struct run_conf {
	char run_dir[PATH_MAX];
	char lease_sock[108];
	char audit_sock[108];
	char key_file[PATH_MAX];
	char sandbox_bin[PATH_MAX];
	char egress_bin[PATH_MAX];
	int64_t timeout_ms, lease_wait_ms, io_timeout_ms;
	uint64_t file_max, total_max;
	bool snapshot;
};

struct run_opts {
	const char *config, *actor, *conv, *cap, *socket;
	const char *files[RUN_FILES_MAX];
	size_t nfiles;
	bool egress, quiet;
	int argc;
	char **argv;
};

/* conf.c: file (NULL: none) and environment over the defaults. */
KZ_WUR int run_conf_load(struct run_conf *c, const char *path,
    const char *self, char *why, size_t wlen);

/* classify.c: 0 ok, 1 host administration (why names the file), or a
 * negative kz_err when the classifier could not run. */
KZ_WUR int run_classify(const struct run_conf *c, const struct run_opts *o,
    char *why, size_t wlen);
/* Whether argv is an inline shell or interpreter script ("sh -c TEXT");
 * *text is that script.  Exposed for the unit tests. */
bool run_inline_script(int argc, char **argv, const char **text);

/* project.c: copies the files read-only into dir (which must be empty)
 * and computes the manifest digest over names, sizes and contents. */
KZ_WUR int run_project(const struct run_conf *c, const char *dir,
    const char *const *files, size_t n, char digest[RUN_DIGEST_MAX],
    uint64_t *bytes, char *why, size_t wlen);
/* The manifest digest of an empty projection. */
void run_manifest_empty(char digest[RUN_DIGEST_MAX]);

/* audit.c: one record; the common correlation fields are added here. */
struct run_ctx {
	const struct run_conf *c;
	const struct run_opts *o;
	char rid[33];
	char manifest[RUN_DIGEST_MAX];
};
/* Consumes ev.  A failure is logged; only the dispatch record is
 * required (no record, no run). */
int run_audit(const struct run_ctx *x, const char *kind, cJSON *ev);
/* Token "EPOCH:N" -> N, for the audit schema's integer token. */
int64_t run_token_n(const char *token);

/* dispatch.c: the whole job; returns the exit code. */
int run_dispatch(const struct run_conf *c, const struct run_opts *o);

#endif
