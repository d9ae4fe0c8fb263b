/*
 * Connections per run.  SANDBOX_EGRESS_MAX_CONNECTIONS bounds the whole
 * process; without a share per run, one tenant could hold every one of
 * them (tunnels kept busy until their grant expires) and every other run
 * would be closed at accept.  A connection counts against the run of the
 * grant that admitted its latest request, from that admission until it
 * closes or a request under another run's grant is admitted on it.  The
 * count is the process's, across worker threads: a table of runs under
 * one mutex, touched once per admission and once per close.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "banned.h"

#define RUN_BUCKETS 256

struct run_count {
	struct run_count *next;
	size_t n;
	char run[65];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct run_count *buckets[RUN_BUCKETS];

static struct run_count **
slot(const char *run)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	struct run_count **pp;

	for (const char *s = run; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	for (pp = &buckets[h % RUN_BUCKETS]; *pp != NULL; pp = &(*pp)->next)
		if (strcmp((*pp)->run, run) == 0)
			break;
	return pp;
}

size_t
eg_run_share(size_t max_conns)
{
	size_t floor = max_conns < EG_RUN_SHARE_MIN ? max_conns :
	                                              EG_RUN_SHARE_MIN;

	return max_conns / 4 > floor ? max_conns / 4 : floor;
}

bool
eg_run_hold(const char *run, size_t share)
{
	struct run_count **pp, *r;
	bool ok = false;

	pthread_mutex_lock(&mu);
	pp = slot(run);
	if ((r = *pp) == NULL && (r = calloc(1, sizeof(*r))) != NULL) {
		snprintf(r->run, sizeof(r->run), "%s", run);
		*pp = r;
	}
	if (r != NULL && r->n < share) {
		r->n++;
		ok = true;
	} else if (r != NULL && r->n == 0) {
		*pp = r->next;
		free(r);
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

void
eg_run_release(const char *run)
{
	struct run_count **pp, *r;

	pthread_mutex_lock(&mu);
	pp = slot(run);
	if ((r = *pp) != NULL && --r->n == 0) {
		*pp = r->next;
		free(r);
	}
	pthread_mutex_unlock(&mu);
}
