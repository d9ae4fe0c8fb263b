/*
 * The invocations' side of the warm workers (warm.c): an invocation takes
 * a ready worker that answers its health op with nothing run yet, gives
 * it back when done (to be stopped, never reused), and the pool's
 * counters answer status.  The pool's thread, which starts and stops the
 * workers, is warm.c's.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "kz_call.h"
#include "kz_json.h"
#include "pkgrun.h"
#include "warm.h"
#include "banned.h"

#define HEALTH_MS 1000

/* The worker's health op: ready, and nothing run on it yet. */
static int
health(const struct pr_worker *w, char *why, size_t wlen)
{
	cJSON *req = cJSON_CreateObject(), *rep = NULL;
	const cJSON *g;
	const char *state;
	int r;

	if (req == NULL || !cJSON_AddNumberToObject(req, "v", 1) ||
	    !cJSON_AddStringToObject(req, "op", "health") ||
	    !cJSON_AddStringToObject(req, "id", "pkgrun-health")) {
		cJSON_Delete(req);
		return KZ_ENOMEM;
	}
	r = kz_frame_call(w->sock, req, HEALTH_MS, &rep, NULL, 0);
	cJSON_Delete(req);
	if (r == 0) {
		state = cJSON_GetStringValue(kz_json_get(rep, "state"));
		g = kz_json_get(rep, "generation");
		if (!cJSON_IsTrue(kz_json_get(rep, "ok")) || state == NULL ||
		    strcmp(state, "ready") != 0 || !cJSON_IsNumber(g) ||
		    g->valuedouble != 0)
			r = KZ_ESTATE;
	}
	cJSON_Delete(rep);
	if (r != 0)
		kz_why(why, wlen, "%s",
		    r == KZ_ESTATE ?
		        "a warm worker was not ready and unused" :
		        "a warm worker did not answer its health op");
	return r;
}

struct pr_worker *
pr_pool_take(struct pr_pool *p, bool grant, char *why, size_t wlen)
{
	struct pr_worker *w = NULL;

	if (p->c->warm == 0)
		return NULL;
	/* A worker without an egress socket refuses a grant: the one-shot
	 * is the path that keeps the boundary (no network either). */
	if (grant && p->c->egress_sock[0] == '\0') {
		kz_why(why, wlen,
		    "a grant, and no egress socket for warm workers");
		return NULL;
	}
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < POOL_N && !p->stopping; i++)
		if (p->w[i].state == W_READY &&
		    (w == NULL || p->w[i].ready_ms < w->ready_ms))
			w = &p->w[i];
	/* One that has just become ready, before the pool's thread saw it
	 * (it looks every few milliseconds). */
	for (int i = 0; i < POOL_N && !p->stopping && w == NULL; i++)
		if (p->w[i].state == W_STARTING &&
		    access(p->w[i].pidf, F_OK) == 0) {
			w = &p->w[i];
			p->started++, p->backoff_ms = 0;
		}
	if (w != NULL)
		w->state = W_TAKEN;
	pthread_mutex_unlock(&p->mu);
	if (w == NULL) {
		kz_why(why, wlen, "no warm worker ready");
		return NULL;
	}
	if (pr_warm_ended(w->pidfd, 0)) {
		kz_why(why, wlen, "a warm worker had died");
	} else if (health(w, why, wlen) == 0)
		return w;
	pthread_mutex_lock(&p->mu);
	w->state = W_RETIRE;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

const char *
pr_worker_projection(const struct pr_worker *w)
{
	return w->proj;
}

void
pr_pool_release(struct pr_pool *p, struct pr_worker *w)
{
	pthread_mutex_lock(&p->mu);
	/* Unless the daemon's stop has taken it over already. */
	if (w->state == W_TAKEN)
		w->state = W_RETIRE;
	p->served++;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void
pr_pool_note_oneshot(struct pr_pool *p, bool fallback)
{
	pthread_mutex_lock(&p->mu);
	p->one_shot++;
	p->fallbacks += fallback;
	pthread_mutex_unlock(&p->mu);
}

int
pr_pool_status(struct pr_pool *p, cJSON *o)
{
	cJSON *w;
	int r = 0;

	pthread_mutex_lock(&p->mu);
	if ((w = cJSON_AddObjectToObject(o, "warm")) == NULL ||
	    !cJSON_AddNumberToObject(w, "target", (double)p->c->warm) ||
	    !cJSON_AddNumberToObject(w, "ready",
	        pr_warm_count(p, W_READY, W_READY)) ||
	    !cJSON_AddNumberToObject(w, "starting",
	        pr_warm_count(p, W_STARTING, W_STARTING)) ||
	    !cJSON_AddNumberToObject(w, "in_use",
	        pr_warm_count(p, W_TAKEN, W_TAKEN)) ||
	    !cJSON_AddNumberToObject(w, "stopping",
	        pr_warm_count(p, W_RETIRE, W_STOPPING)) ||
	    !cJSON_AddNumberToObject(w, "served", (double)p->served) ||
	    !cJSON_AddNumberToObject(w, "started", (double)p->started) ||
	    !cJSON_AddNumberToObject(w, "start_failed",
	        (double)p->start_failed) ||
	    !cJSON_AddNumberToObject(o, "one_shot", (double)p->one_shot) ||
	    !cJSON_AddNumberToObject(o, "fallbacks", (double)p->fallbacks))
		r = KZ_ENOMEM;
	pthread_mutex_unlock(&p->mu);
	return r;
}

const char *
pr_worker_sock(const struct pr_worker *w)
{
	return w->sock;
}
