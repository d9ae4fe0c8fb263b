/*
 * Blocking upkeep, off the event loop: deleting workers through the
 * controller, and the sweep of expired workspace snapshots (it reads the
 * whole snapshot directory under its lock).  ctl_delete waits for the
 * agent to stop (up to about 4 s for one that is running code: SIGTERM,
 * 2 s, SIGKILL, 2 s), so it runs here, on threads of their own, and the
 * loop only runs the store script that confirms the deletion.
 *
 *	queued (loop) -> ctl_delete [+ audit] (thread) -> DELETED (loop)
 *
 * A worker is queued at most once at a time, however many callers (an
 * expiry, a release under a stale token, every reconcile) ask.  A
 * deletion that fails leaves the worker retiring in the store; the next
 * reconcile finds it in the inventory and queues it again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>

#include "kz_audit.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_snap.h"
#include "daemon.h"
#include "banned.h"

#define CHORE_THREADS 2
#define CHORE_STOP_WAIT_MS 5000
#define CHORE_WHY_MAX 32

enum ckind { C_DELETE, C_SNAP_SWEEP };

struct chore {
	TAILQ_ENTRY(chore) link;	/* todo or done, under mu */
	LIST_ENTRY(chore) all;		/* loop thread only */
	enum ckind kind;
	int removed;			/* C_SNAP_SWEEP */
	char worker[KZ_POOL_ID_MAX + 1];
	char token[KZ_POOL_TOKEN_MAX + 1];	/* "": not in the store */
	char why[CHORE_WHY_MAX];		/* "": no audit record */
	char rid[KZ_RUN_ID_MAX + 1];
	int err;
	char msg[128];
};
TAILQ_HEAD(choreq, chore);

struct chores {
	struct lease_daemon *d;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct choreq todo, done;	/* under mu */
	bool stop;			/* under mu */
	int live;			/* under mu */
	pthread_t thr[CHORE_THREADS];
	int nthr;
	int efd;
	struct event *ev;
	/* Loop thread only: the chores not finished yet (a worker is
	 * queued once at a time), and how many. */
	LIST_HEAD(, chore) all;
	int inflight;
	bool sweeping;
	/* Copies for the threads (the configuration never changes). */
	const struct lease_conf *c;
	char audit_sock[108];
};

static bool
queued(struct chores *k, const char *w)
{
	struct chore *j;

	LIST_FOREACH(j, &k->all, all)
		if (j->kind == C_DELETE && strcmp(j->worker, w) == 0)
			return true;
	return false;
}

/* ---- the threads ---- */

static void
audit_retire(const struct chores *k, const struct chore *j, int64_t ms)
{
	char why[128] = "";
	cJSON *a = cJSON_CreateObject();
	int e;

	if (a == NULL)
		return;
	cJSON_AddStringToObject(a, "worker_id", j->worker);
	cJSON_AddNumberToObject(a, "token", (double)kz_pool_token_n(
	    j->token));
	if (j->rid[0] != '\0')
		cJSON_AddStringToObject(a, "rid", j->rid);
	cJSON_AddStringToObject(a, "outcome", j->why);
	cJSON_AddStringToObject(a, "result", j->err == 0 ? "deleted" :
	    "delete_failed");
	cJSON_AddNumberToObject(a, "duration_ms", (double)ms);
	if ((e = kz_audit_send(k->audit_sock, "retire", a,
	    KZ_AUDIT_TIMEOUT_MS, why, sizeof(why))) != 0)
		kz_log(KZ_LOG_WARN, "audit.fail", e, why, "kind", "retire",
		    "worker", j->worker, NULL);
	cJSON_Delete(a);
}

static void
run_chore(const struct chores *k, struct chore *j)
{
	int64_t t0 = kz_now_ms();

	if (j->kind == C_SNAP_SWEEP) {
		j->err = kz_snap_sweep(k->c->snap_dir, k->c->snap_ttl_ms,
		    &j->removed);
		return;
	}
	j->err = ctl_delete(k->c, j->worker, j->msg, sizeof(j->msg));
	if (j->why[0] != '\0' && k->audit_sock[0] != '\0')
		audit_retire(k, j, kz_now_ms() - t0);
}

static void *
thread_main(void *arg)
{
	struct chores *k = arg;
	uint64_t one = 1;
	struct chore *j;

	pthread_mutex_lock(&k->mu);
	for (;;) {
		while (TAILQ_EMPTY(&k->todo) && !k->stop)
			pthread_cond_wait(&k->cv, &k->mu);
		if (k->stop)
			break;
		j = TAILQ_FIRST(&k->todo);
		TAILQ_REMOVE(&k->todo, j, link);
		pthread_mutex_unlock(&k->mu);
		run_chore(k, j);
		pthread_mutex_lock(&k->mu);
		TAILQ_INSERT_TAIL(&k->done, j, link);
		(void)!write(k->efd, &one, sizeof(one));
	}
	k->live--;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

/* ---- the loop ---- */

static void
deleted(struct lease_daemon *d, const struct chore *j)
{
	char op[KZ_OPID_HEX + 1];
	const char *av[3] = {op, j->worker, j->token};

	if (j->err != 0) {
		kz_log(KZ_LOG_WARN, "worker.delete", j->err, j->msg, "worker",
		    j->worker, NULL);
		return;
	}
	kz_log(KZ_LOG_INFO, "worker.deleted", 0, "deletion confirmed",
	    "worker", j->worker, NULL);
	if (j->token[0] == '\0')
		return;
	kz_store_opid(op);
	(void)pool_async(d, KZ_POOL_DELETED, 3, av, pool_nothing,
	    "delete_confirmed");
}

static void
swept(struct chores *k, const struct chore *j)
{
	char n[24];

	k->sweeping = false;
	snprintf(n, sizeof(n), "%d", j->removed);
	if (j->err != 0)
		kz_log(KZ_LOG_WARN, "snapshot.sweep", j->err,
		    "snapshot directory unreadable", NULL);
	else if (j->removed > 0)
		kz_log(KZ_LOG_INFO, "snapshot.expire", 0, "unused snapshots "
		    "removed", "removed", n, NULL);
}

static void
finish(struct chores *k, struct chore *j)
{
	if (j->kind == C_SNAP_SWEEP)
		swept(k, j);
	else
		deleted(k->d, j);
	LIST_REMOVE(j, all);
	k->inflight--;
	free(j);
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct chores *k = arg;
	struct choreq q;
	struct chore *j;
	uint64_t n;

	(void)what;
	(void)!read(fd, &n, sizeof(n));
	TAILQ_INIT(&q);
	pthread_mutex_lock(&k->mu);
	TAILQ_CONCAT(&q, &k->done, link);
	pthread_mutex_unlock(&k->mu);
	while ((j = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, j, link);
		finish(k, j);
	}
}

static void
enqueue(struct chores *k, struct chore *j)
{
	LIST_INSERT_HEAD(&k->all, j, all);
	k->inflight++;
	pthread_mutex_lock(&k->mu);
	TAILQ_INSERT_TAIL(&k->todo, j, link);
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

void
chore_delete(struct lease_daemon *d, const char *worker, const char *token,
    const char *why, const char *rid)
{
	struct chores *k = d->chores;
	struct chore *j;

	if (k == NULL || !kz_pool_id_ok(worker) || queued(k, worker))
		return;
	/* Out of memory: reconcile finds the worker again. */
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return;
	snprintf(j->worker, sizeof(j->worker), "%s", worker);
	snprintf(j->token, sizeof(j->token), "%s", token ? token : "");
	snprintf(j->why, sizeof(j->why), "%s", why ? why : "");
	snprintf(j->rid, sizeof(j->rid), "%s", rid ? rid : "");
	enqueue(k, j);
}

void
chore_snap_sweep(struct lease_daemon *d)
{
	struct chores *k = d->chores;
	struct chore *j;

	if (k == NULL || k->sweeping || (j = calloc(1, sizeof(*j))) == NULL)
		return;
	j->kind = C_SNAP_SWEEP;
	k->sweeping = true;
	enqueue(k, j);
}

int
chores_running(const struct lease_daemon *d)
{
	const struct chores *k = d->chores;

	/* Deletions only: the sweep is not one. */
	return k != NULL ? k->inflight - (k->sweeping ? 1 : 0) : 0;
}

int
chores_new(struct lease_daemon *d)
{
	struct chores *k;
	int i;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return KZ_ENOMEM;
	k->d = d;
	k->c = d->c;
	k->efd = -1;
	TAILQ_INIT(&k->todo);
	TAILQ_INIT(&k->done);
	LIST_INIT(&k->all);
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	snprintf(k->audit_sock, sizeof(k->audit_sock), "%s",
	    d->c->audit_sock);
	d->chores = k;
	if ((k->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (k->ev = event_new(d->base, k->efd, EV_READ | EV_PERSIST, done_cb,
	    k)) == NULL || event_add(k->ev, NULL) != 0)
		return KZ_ESYS;
	for (i = 0; i < CHORE_THREADS; i++) {
		if (pthread_create(&k->thr[i], NULL, thread_main, k) != 0)
			return KZ_ESYS;
		k->nthr++;
		k->live++;
	}
	return 0;
}

static void
drain(struct choreq *q)
{
	struct chore *j;

	while ((j = TAILQ_FIRST(q)) != NULL) {
		TAILQ_REMOVE(q, j, link);
		free(j);
	}
}

/*
 * Waits for the chores running now (a deletion is bounded, see above);
 * queued ones are dropped: their workers stay retiring and the next
 * daemon's reconcile deletes them.  A thread still blocked after the wait
 * keeps the state allocated (the process is about to exit).
 */
void
chores_free(struct lease_daemon *d)
{
	struct chores *k = d->chores;
	struct timespec ts;
	int i, e = 0;

	if (k == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += CHORE_STOP_WAIT_MS / 1000;
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_broadcast(&k->cv);
	while (k->live > 0 && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&k->cv, &k->mu, &ts);
	pthread_mutex_unlock(&k->mu);
	if (k->ev != NULL)
		event_free(k->ev);
	k->ev = NULL;
	d->chores = NULL;
	if (k->live > 0) {
		kz_log(KZ_LOG_WARN, "chore.abandon", 0,
		    "deletions still running at exit", NULL);
		return;
	}
	for (i = 0; i < k->nthr; i++)
		pthread_join(k->thr[i], NULL);
	drain(&k->todo);
	drain(&k->done);
	if (k->efd >= 0)
		close(k->efd);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
}
