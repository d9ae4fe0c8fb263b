/*
 * Connections counted by key, across worker threads.
 * SANDBOX_EGRESS_MAX_CONNECTIONS bounds the whole process; without a share
 * per run, one tenant could hold every one of them (tunnels kept busy
 * until their grant expires) and every other run would be closed at
 * accept.  A connection counts against the run of the grant that admitted
 * its latest request, from that admission until it closes or a request
 * under another run's grant is admitted on it.  The same tally, keyed by
 * peer, bounds the connections that have not yet shown a grant (peers.c).
 * Each tally is the process's: a table of keys under one mutex, touched
 * once per admission and once per close.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "banned.h"

struct eg_tally_key {
	struct eg_tally_key *next;
	size_t n;
	char key[EG_TALLY_KEY_MAX];
};

static struct eg_tally runs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct eg_tally_key **
slot(struct eg_tally *t, const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	struct eg_tally_key **pp;

	for (const char *s = key; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	for (pp = &t->b[h % EG_TALLY_BUCKETS]; *pp != NULL; pp = &(*pp)->next)
		if (strcmp((*pp)->key, key) == 0)
			break;
	return pp;
}

enum eg_tally_res
eg_tally_hold(struct eg_tally *t, const char *key, size_t per_key, size_t all)
{
	struct eg_tally_key **pp, *k;
	enum eg_tally_res res = EG_TALLY_ALL;

	pthread_mutex_lock(&t->mu);
	pp = slot(t, key);
	if (t->total >= all)
		goto out;
	res = EG_TALLY_NOMEM;
	if ((k = *pp) == NULL && (k = calloc(1, sizeof(*k))) != NULL) {
		snprintf(k->key, sizeof(k->key), "%s", key);
		*pp = k;
	}
	if (k == NULL)
		goto out;
	if (k->n < per_key) {
		k->n++;
		t->total++;
		res = EG_TALLY_OK;
	} else {
		res = EG_TALLY_KEY;
		if (k->n == 0) {
			*pp = k->next;
			free(k);
		}
	}
out:
	pthread_mutex_unlock(&t->mu);
	return res;
}

void
eg_tally_release(struct eg_tally *t, const char *key)
{
	struct eg_tally_key **pp, *k;

	pthread_mutex_lock(&t->mu);
	pp = slot(t, key);
	if ((k = *pp) != NULL) {
		t->total--;
		if (--k->n == 0) {
			*pp = k->next;
			free(k);
		}
	}
	pthread_mutex_unlock(&t->mu);
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
	return eg_tally_hold(&runs, run, share, SIZE_MAX) == EG_TALLY_OK;
}

void
eg_run_release(const char *run)
{
	eg_tally_release(&runs, run);
}
