/*
 * What invoke.c (one invocation's sequence: checks, policy, audit,
 * staging) and invoke_run.c (its run step) share and no other kz-pkgrun
 * module needs.
 */
#ifndef PR_INVOKE_INT_H
#define PR_INVOKE_INT_H

#include "pkgrun.h"

void pr_set_result(struct pr_result *res, enum kz_exit code, const char *wire,
    const char *why);
/* Runs the tool on the taken warm worker w, or on a one-shot under id
 * slot of the range (claimed by the caller), which starts the tool only once
 * gate(gate_arg) returns 0. */
void pr_run_tool(const struct pr_conf *c, const struct pr_inv *iv,
    const struct pr_tool *t, const char *staging, const char *id, int slot,
    struct pr_worker *w, int (*gate)(void *), void *gate_arg,
    struct pr_result *res);

#endif
