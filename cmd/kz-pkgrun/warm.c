/*
 * The warm workers of serve.  Each is a `kz-sandbox serve` started ahead
 * of time with exactly the settings of a one-shot (exec.c: a uid and gid
 * of the runner's range, its own sandbox id and cgroup, the limits, its
 * own projection directory) and serves ONE invocation: the invocation
 * takes it, stages into its projection, sends one run op, and gives it
 * back to be stopped and removed, never reused.  Nothing of one
 * invocation can therefore meet another's, and no reset is needed.
 *
 * One thread of the pool starts, stops and reaps every worker, without
 * waiting on any one of them (starts and stops overlap): a worker gets
 * SIGTERM as its parent-death signal, which the kernel sends when the
 * thread that forked it ends, so that thread must be the pool's (an
 * invocation's thread ends with its invocation).  Only that thread
 * touches a worker while it is starting or stopping; the invocations
 * only take a ready one and give it back, under the lock.  Anything that goes
 * wrong with a warm worker before its run op is sent sends that
 * invocation down the one-shot path, the same boundary; after the run op
 * is sent nothing is ever run again.
 *
 * This file keeps the pool's thread (when to start, stop and reap
 * workers) and the id range; warm_proc.c holds one worker's process and
 * what it leaves (its start, its reaping, the removal of its traces) and
 * the sweep at serve's start; warm_take.c holds what an invocation calls:
 * take (with the health op), release and status.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_call.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "pkgrun.h"
#include "warm.h"
#include "banned.h"

#define STOP_MS 5000 /* SIGTERM, then SIGKILL, each this long */
#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 30000

/* Whether the process behind pidfd has ended, waiting up to ms. */
bool
pr_warm_ended(int pidfd, int ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int64_t end = kz_now_ms() + ms;
	int r;

	do
		r = poll(&p, 1,
		    (int)(end - kz_now_ms() > 0 ? end - kz_now_ms() : 0));
	while (r < 0 && errno == EINTR);
	return r != 0;
}

int
pr_slot_next(const bool *used, int n, int last)
{
	for (int i = 1; i <= n; i++) {
		int s = (last + i) % n;

		if (!used[s])
			return s;
	}
	return -1;
}

/* Round robin for warm workers: an id comes back only once the range
 * has gone round, so invocations one after the other never share one.
 * An id is taken only with its claim (uidclaim.c): one that another
 * kz-pkgrun process holds, or that a host process runs under, is passed
 * over. */
static int
slot_take_locked(struct pr_pool *p, bool rotate)
{
	int n = (int)p->c->uid_count, s = rotate ? p->last_slot : n - 1;

	for (int i = 0; i < n; i++) {
		if ((s = pr_slot_next(p->used, n, s)) < 0)
			return -1;
		if (pr_uid_claim(p->c, s, &p->claim[s]) != 0)
			continue;
		p->used[s] = true;
		if (rotate)
			p->last_slot = s;
		return s;
	}
	return -1;
}

static void
slot_put_locked(struct pr_pool *p, int slot)
{
	p->used[slot] = false;
	pr_uid_release(&p->claim[slot]);
}

int
pr_pool_slot_take(struct pr_pool *p)
{
	int s;

	pthread_mutex_lock(&p->mu);
	s = slot_take_locked(p, false);
	pthread_mutex_unlock(&p->mu);
	return s;
}

void
pr_pool_slot_put(struct pr_pool *p, int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&p->mu);
	slot_put_locked(p, slot);
	pthread_mutex_unlock(&p->mu);
}

int
pr_warm_count(const struct pr_pool *p, enum w_state a, enum w_state b)
{
	int n = 0;

	for (int i = 0; i < POOL_N; i++)
		n += p->w[i].state == a || p->w[i].state == b;
	return n;
}

static struct pr_worker *
find(struct pr_pool *p, enum w_state s)
{
	for (int i = 0; i < POOL_N; i++)
		if (p->w[i].state == s)
			return &p->w[i];
	return NULL;
}

static void
free_locked(struct pr_pool *p, struct pr_worker *w)
{
	/* The worker is reaped: its id's claim goes with it. */
	if (w->slot >= 0)
		slot_put_locked(p, w->slot);
	memset(w, 0, sizeof(*w));
	w->state = W_FREE, w->slot = -1, w->pid = -1, w->pidfd = -1;
}

/* A start that failed: the next one waits, twice as long each time. */
static void
backoff_locked(struct pr_pool *p, int err, const char *why)
{
	p->start_failed++;
	p->backoff_ms = p->backoff_ms == 0     ? BACKOFF_MIN_MS :
	    p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
	                                         p->backoff_ms * 2;
	p->next_try_ms = kz_now_ms() + p->backoff_ms;
	kz_log(KZ_LOG_WARN, "pkgrun.warm", err, why, NULL);
}

/*
 * SIGTERM (kz-sandbox's clean stop) now; SIGKILL at the deadline.  The
 * worker never runs a tool again, so its teardown runs at the lowest
 * priority: it yields to the invocations running meanwhile.
 */
static void
stop_begin(struct pr_worker *w)
{
	if (w->pid > 0) {
		(void)setpriority(PRIO_PROCESS, (id_t)w->pid, 19);
		(void)kill(w->pid, SIGTERM);
	}
	w->deadline_ms = kz_now_ms() + STOP_MS;
}

/* A starting worker that will not be: stopped, and the next start
 * waits.  Called and returns with the lock held. */
static void
start_failed_locked(struct pr_pool *p, struct pr_worker *w, int err,
    const char *why)
{
	w->state = W_STOPPING, w->killed = true;
	w->deadline_ms = kz_now_ms() + STOP_MS;
	(void)kill(w->pid, SIGKILL);
	backoff_locked(p, err, why);
}

/*
 * A starting worker's next step.  An invocation may take it as soon as
 * its pid file is there (pr_pool_take), so every change is made only if
 * it is still starting, under the lock.
 */
static bool
step_start(struct pr_pool *p, struct pr_worker *w)
{
	bool ready = access(w->pidf, F_OK) == 0,
	     dead = pr_warm_ended(w->pidfd, 0);
	int64_t now = kz_now_ms();

	pthread_mutex_lock(&p->mu);
	if (w->state != W_STARTING) {
		pthread_mutex_unlock(&p->mu);
		return false;
	}
	if (ready && !dead) {
		w->state = W_READY, w->ready_ms = now;
		p->started++, p->backoff_ms = 0;
	} else if (dead)
		start_failed_locked(p, w, KZ_EUNAVAIL,
		    "a warm worker exited at start (kz-sandbox says why)");
	else if (now >= w->deadline_ms)
		start_failed_locked(p, w, KZ_ETIMEDOUT,
		    "a warm worker was not ready in time");
	pthread_mutex_unlock(&p->mu);
	return !ready || dead;
}

/* One worker's next step, for the pool's thread; true while it waits on
 * a process (starting or stopping). */
static bool
step_one(struct pr_pool *p, struct pr_worker *w)
{
	int64_t now = kz_now_ms();
	enum w_state s;

	pthread_mutex_lock(&p->mu);
	s = w->state;
	/* At the daemon's stop a taken worker is stopped too: its run ends
	 * and its invocation answers unavailable. */
	if (s == W_RETIRE || ((s == W_READY || s == W_TAKEN) && p->stopping))
		w->state = s = W_STOPPING, w->deadline_ms = 0;
	pthread_mutex_unlock(&p->mu);
	if (s == W_STARTING)
		return step_start(p, w);
	if (s != W_STOPPING)
		return false;
	if (w->deadline_ms == 0)
		stop_begin(w);
	if (!pr_warm_ended(w->pidfd, 0)) {
		if (now < w->deadline_ms)
			return true;
		if (!w->killed) {
			(void)kill(w->pid, SIGKILL);
			w->killed = true, w->deadline_ms = now + STOP_MS;
			return true;
		}
		/* SIGKILL cannot be refused: wait for it. */
		kz_log(KZ_LOG_WARN, "pkgrun.warm", KZ_ETIMEDOUT,
		    "a warm worker outlives SIGKILL; waiting", NULL);
	}
	pr_warm_reap(p, w);
	pthread_mutex_lock(&p->mu);
	free_locked(p, w);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return false;
}

/* Starts what the target lacks, unless the last start failed lately. */
static bool
refill(struct pr_pool *p)
{
	struct pr_worker *w;
	char why[160];
	bool busy = false;
	int slot, r;

	pthread_mutex_lock(&p->mu);
	while (!p->stopping &&
	    pr_warm_count(p, W_READY, W_STARTING) < p->c->warm &&
	    kz_now_ms() >= p->next_try_ms && (w = find(p, W_FREE)) != NULL &&
	    (slot = slot_take_locked(p, true)) >= 0) {
		w->state = W_STARTING, w->slot = slot;
		pthread_mutex_unlock(&p->mu);
		why[0] = '\0';
		r = pr_warm_spawn(p, w, why, sizeof(why));
		pthread_mutex_lock(&p->mu);
		if (r != 0) {
			free_locked(p, w);
			backoff_locked(p, r, why);
			break;
		}
		busy = true;
	}
	pthread_mutex_unlock(&p->mu);
	return busy;
}

static void
wait_locked(struct pr_pool *p, int64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000)
		ts.tv_sec++, ts.tv_nsec -= 1000000000;
	(void)pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

/*
 * The pool's thread.  While a worker starts or stops it looks every few
 * milliseconds (a start takes about ten); otherwise it sleeps until an
 * invocation gives a worker back or the backoff ends.  At the daemon's
 * stop it stops every worker, ready, taken or starting, and returns once
 * each is reaped and removed.
 */
static void *
pool_main(void *arg)
{
	struct pr_pool *p = arg;
	int64_t now;
	bool busy;

	for (;;) {
		busy = false;
		for (int i = 0; i < POOL_N; i++)
			busy |= step_one(p, &p->w[i]);
		busy |= refill(p);
		pthread_mutex_lock(&p->mu);
		if (p->stopping && pr_warm_count(p, W_FREE, W_FREE) == POOL_N) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		now = kz_now_ms();
		wait_locked(p,
		    busy || p->stopping      ? 3 :
		        p->next_try_ms > now ? p->next_try_ms - now :
		                               1000);
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

int
pr_pool_new(const struct pr_conf *c, struct pr_pool **out)
{
	pthread_condattr_t ca;
	struct pr_pool *p;

	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->used = calloc((size_t)c->uid_count, sizeof(bool))) == NULL ||
	    (p->claim = calloc((size_t)c->uid_count, sizeof(int))) == NULL) {
		if (p != NULL)
			free(p->used);
		free(p);
		return KZ_ENOMEM;
	}
	for (int64_t i = 0; i < c->uid_count; i++)
		p->claim[i] = -1;
	p->c = c;
	p->last_slot = (int)c->uid_count - 1;
	for (int i = 0; i < POOL_N; i++)
		p->w[i].slot = -1, p->w[i].pid = -1, p->w[i].pidfd = -1;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (c->warm > 0) {
		if (pthread_create(&p->thr, NULL, pool_main, p) != 0) {
			pr_pool_free(p);
			return KZ_ESYS;
		}
		p->running = true;
	}
	*out = p;
	return 0;
}

void
pr_pool_stop(struct pr_pool *p)
{
	if (p == NULL || !p->running)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thr, NULL);
	p->running = false;
}

void
pr_pool_free(struct pr_pool *p)
{
	if (p == NULL)
		return;
	pr_pool_stop(p);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	for (int64_t i = 0; i < p->c->uid_count; i++)
		pr_uid_release(&p->claim[i]);
	free(p->claim);
	free(p->used);
	free(p);
}
