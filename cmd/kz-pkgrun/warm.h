/*
 * What warm.c (the pool's thread), warm_proc.c (one worker's process) and
 * warm_take.c (the invocations' side) share and no other kz-pkgrun module
 * needs.
 */
#ifndef PR_WARM_H
#define PR_WARM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pkgrun.h"

#define POOL_N (2 * PR_WARM_MAX + 32) /* ready, taken and retiring */

enum w_state { W_FREE, W_STARTING, W_READY, W_TAKEN, W_RETIRE, W_STOPPING };

struct pr_worker {
	enum w_state state;
	char name[32]; /* warm-XXXXXXXXXXXX beneath the state directory */
	char id[48]; /* pkgrun-warm-XXXXXXXXXXXX: sandbox id and cgroup */
	char proj[PATH_MAX + 48];
	char sock[108];
	char pidf[PATH_MAX + 48];
	int slot, pidfd;
	pid_t pid;
	int64_t ready_ms, deadline_ms;
	bool killed;
};

struct pr_pool {
	const struct pr_conf *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thr;
	bool running, stopping;
	struct pr_worker w[POOL_N];
	bool *used; /* ids of the range in use */
	int *claim; /* their claims (uidclaim.c), -1 when not held */
	int last_slot;
	int64_t backoff_ms, next_try_ms;
	unsigned long served, one_shot, fallbacks, started, start_failed;
};

/* Whether the process behind pidfd has ended, waiting up to ms. */
bool pr_warm_ended(int pidfd, int ms);
/* How many of the pool's workers are in state a or b; under the lock. */
int pr_warm_count(const struct pr_pool *p, enum w_state a, enum w_state b);
/* warm_proc.c, for the pool's thread: starts kz-sandbox serve for w (a
 * fresh directory of its own, the uid and gid of w->slot); it is ready
 * once its pid file exists.  0, or an error with why, w then reaped. */
KZ_WUR int pr_warm_spawn(struct pr_pool *p, struct pr_worker *w, char *why,
    size_t wlen);
/* Reaps a worker that has ended and removes what it left. */
void pr_warm_reap(struct pr_pool *p, struct pr_worker *w);

#endif
