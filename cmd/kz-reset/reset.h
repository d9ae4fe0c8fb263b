/*
 * kz-reset internals.  Evidence is collected into a flat JSON object of
 * name -> bool (or integer); a check that could not run is recorded as
 * false, never skipped, so absence of an error is never taken as proof.
 */
#ifndef RESET_H
#define RESET_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <cJSON.h>

#include "kz_err.h"

#define RESET_VERSION "0.1.0"

struct reset_conf {
	char store_sock[108];
	char audit_sock[108];
	char dep[65];
	char workers_dir[PATH_MAX];
	int64_t io_timeout_ms, store_timeout_ms;
};

struct worker_rec {
	char id[65];
	char endpoint[108];
	char state[16];
	char token[65];
	char gen[32];
};

/* evidence.c: every check; ev gets one member per check. */
void evidence_collect(const struct reset_conf *c,
    const struct worker_rec *w, cJSON *ev, char *gen, size_t glen);
/* The names of the checks that failed, as a JSON array. */
cJSON *evidence_missing(const cJSON *ev);
/* Whether a cgroup.procs text holds exactly pid (tests use it). */
bool evidence_procs_only(const char *text, pid_t pid);
/* Empties a host directory without following symlinks; true when it then
 * lists empty. */
bool evidence_projection(const char *path);

#endif
