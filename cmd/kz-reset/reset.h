/*
 * kz-reset internals.  The evidence itself is libkz's (kz_evidence.h),
 * shared with kz-lease, which runs the same reset in-process for every
 * released or expired worker; this command is the operator's.
 */
#ifndef RESET_H
#define RESET_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <cJSON.h>

#include "kz_err.h"

struct reset_conf {
	char store_sock[108];
	char audit_sock[108];
	char dep[65];
	char workers_dir[PATH_MAX];
	char rid[65]; /* the run that released it; "" when none */
	int64_t io_timeout_ms, store_timeout_ms;
};

struct worker_rec {
	char id[65];
	char endpoint[108];
	char state[16];
	char token[65];
	char gen[32];
};

#endif
