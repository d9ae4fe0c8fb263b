/*
 * Positive evidence that a released worker is clean, shared by kz-lease
 * (which resets released and expired workers in-process) and kz-reset (the
 * operator's one-shot).  The worker's agent wipes on request and reports;
 * the host checks independently what it can see.  Evidence is a flat JSON
 * object of name -> bool: a check that could not run is recorded false,
 * never skipped, so the absence of an error is never taken as proof.
 *
 * Blocking (each agent call is bounded by io_timeout_ms); safe to run in
 * several threads at once.
 */
#ifndef KZ_EVIDENCE_H
#define KZ_EVIDENCE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_pool.h"

#define KZ_EVIDENCE_GEN_MAX 32
#define KZ_EVIDENCE_MISSING_MAX 256

/*
 * Wipes worker id (agent at endpoint, layout under workers_dir as in
 * kz_pool_wpath) and adds one member per check to ev.  gen gets the
 * generation the agent reported after its wipe ("" when none).
 */
void kz_evidence_collect(const char *workers_dir, const char *id,
    const char *endpoint, int io_timeout_ms, cJSON *ev, char *gen, size_t glen);
/* The names of the checks that failed, as a JSON array (NULL: no memory);
 * buf gets them comma-separated. */
cJSON *kz_evidence_missing(const cJSON *ev, char *buf, size_t len);
/* Whether the agent pid of worker id sits alone in its own cgroups and its
 * run cgroup holds no process (v1 or v2, by where it sits). */
bool kz_evidence_cgroup(pid_t pid, const char *id);
/* Whether a cgroup.procs text holds exactly pid. */
bool kz_evidence_procs_only(const char *text, pid_t pid);
/* Empties a host directory without following symlinks; true when it then
 * lists empty. */
bool kz_evidence_projection(const char *path);
/* Whether path is a directory (not a symlink to one) that lists nothing;
 * it changes nothing. */
bool kz_evidence_dir_empty(const char *path);

/*
 * The audit record ("reset" or "retire") of one outcome: out's evidence,
 * missing and result, the worker id, the integer part of the fencing token
 * and, when the worker was released by a run, that run's id as "rid" (the
 * audit schema's correlation field, so the reset joins the run's own
 * records).  NULL when out of memory.
 */
cJSON *kz_evidence_record(const cJSON *out, const char *id, const char *token,
    const char *rid, int64_t duration_ms);

/*
 * The reset's decision, once for kz-lease (in-process, every release)
 * and kz-reset (the operator's): the evidence is collected, every item
 * must hold and the agent must have named its generation, and only then
 * is the worker published warm under its reset token; anything missing
 * retires it.  The pool script then has the last word on the token.
 */
struct kz_reset {
	cJSON *out; /* worker, evidence, missing, then result; NULL: no
	             * memory */
	char gen[KZ_EVIDENCE_GEN_MAX];
	char miss[KZ_EVIDENCE_MISSING_MAX];
	const char *kind; /* the audit kind, once decided */
	bool clean;
};
/* Blocking (bounded by io_timeout_ms per agent call). */
void kz_reset_prove(struct kz_reset *r, const char *workers_dir, const char *id,
    const char *endpoint, int io_timeout_ms);
/* The script the decision runs (ARGV: opid, id, reset token, *arg). */
enum kz_pool_script kz_reset_script(const struct kz_reset *r, const char **arg);
/* From that script's parsed reply: "warm", "retired" or "stale_token"
 * (the token was no longer current: nothing was written), also recorded
 * as out's "result"; kind becomes the audit kind: "reset" for "warm",
 * else "retire". */
const char *kz_reset_outcome(struct kz_reset *r, const cJSON *res);
void kz_reset_release(struct kz_reset *r);

#endif
