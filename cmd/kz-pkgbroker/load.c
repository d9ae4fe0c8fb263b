/*
 * The fetches in flight: at most PB_RUN_FETCHES of one run, so that one
 * run's code cannot hold the broker's memory for every other run, and at
 * most PKGBROKER_FETCHES_MAX of all runs, so that many runs at once
 * cannot either (each fetch may hold a document and its parse).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "banned.h"

static struct pb_load *
load_find(struct pb_srv *s, const char *run)
{
	for (size_t i = 0; i < s->nloads; i++)
		if (strcmp(s->loads[i].run, run) == 0)
			return &s->loads[i];
	return NULL;
}

int
pb_load_take(struct pb_srv *s, const char *run)
{
	struct pb_load *l = load_find(s, run);

	if (l != NULL && l->n >= PB_RUN_FETCHES)
		return KZ_ETOOBIG;
	if (s->inflight >= s->c->fetches_max)
		return KZ_EUNAVAIL;
	if (l != NULL) {
		l->n++;
		s->inflight++;
		return 0;
	}
	if (s->nloads == s->caploads) {
		size_t cap = s->caploads ? s->caploads * 2 : 16;

		if ((l = reallocarray(s->loads, cap, sizeof(*l))) == NULL)
			return KZ_ENOMEM;
		s->loads = l, s->caploads = cap;
	}
	l = &s->loads[s->nloads++];
	snprintf(l->run, sizeof(l->run), "%s", run);
	l->n = 1;
	s->inflight++;
	return 0;
}

void
pb_load_give(struct pb_srv *s, const char *run)
{
	struct pb_load *l = load_find(s, run);

	if (l == NULL)
		return;
	s->inflight--;
	if (--l->n == 0)
		*l = s->loads[--s->nloads];
}
