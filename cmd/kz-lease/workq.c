/*
 * The workq: a mutex-guarded todo queue the threads take items from, and a
 * done queue they put them back on, with one eventfd write each; the loop
 * reads the eventfd and hands every done item to the caller's done().
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "workq.h"
#include "banned.h"

TAILQ_HEAD(workq_list, workq_item);

struct workq {
	struct workq_conf c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct workq_list todo, done; /* under mu */
	bool stop; /* under mu */
	int live; /* threads still running, under mu */
	pthread_t thr[WORKQ_THREADS_MAX];
	int nthr;
	int efd;
	struct event *ev;
};

static void *
thread_main(void *arg)
{
	struct workq *q = arg;
	struct workq_item *it;
	uint64_t one = 1;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (TAILQ_EMPTY(&q->todo) && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->stop)
			break;
		it = TAILQ_FIRST(&q->todo);
		TAILQ_REMOVE(&q->todo, it, link);
		pthread_mutex_unlock(&q->mu);
		q->c.run(q->c.ctx, it);
		pthread_mutex_lock(&q->mu);
		TAILQ_INSERT_TAIL(&q->done, it, link);
		/* The loop reads the eventfd; a full counter cannot happen
		 * (it holds 2^64-2). */
		(void)!write(q->efd, &one, sizeof(one));
	}
	q->live--;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct workq *q = arg;
	struct workq_list l;
	struct workq_item *it;
	uint64_t n;

	(void)what;
	(void)!read(fd, &n, sizeof(n));
	TAILQ_INIT(&l);
	pthread_mutex_lock(&q->mu);
	TAILQ_CONCAT(&l, &q->done, link);
	pthread_mutex_unlock(&q->mu);
	while ((it = TAILQ_FIRST(&l)) != NULL) {
		TAILQ_REMOVE(&l, it, link);
		q->c.done(q->c.ctx, it);
	}
}

int
workq_new(struct event_base *base, const struct workq_conf *c,
    struct workq **out)
{
	struct workq *q;
	int i;

	if (c->nthreads < 1 || c->nthreads > WORKQ_THREADS_MAX)
		return KZ_EINVAL;
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return KZ_ENOMEM;
	q->c = *c;
	q->efd = -1;
	TAILQ_INIT(&q->todo);
	TAILQ_INIT(&q->done);
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	if ((q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (q->ev = event_new(base, q->efd, EV_READ | EV_PERSIST, done_cb,
	         q)) == NULL ||
	    event_add(q->ev, NULL) != 0)
		goto fail;
	for (i = 0; i < c->nthreads; i++) {
		if (pthread_create(&q->thr[i], NULL, thread_main, q) != 0)
			goto fail;
		q->nthr++;
		q->live++;
	}
	*out = q;
	return 0;
fail:
	/* The threads made so far are idle: they stop at once. */
	(void)workq_free(q, 1000);
	return KZ_ESYS;
}

void
workq_push(struct workq *q, struct workq_item *it)
{
	pthread_mutex_lock(&q->mu);
	TAILQ_INSERT_TAIL(&q->todo, it, link);
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static void
drop_all(struct workq *q, struct workq_list *l)
{
	struct workq_item *it;

	while ((it = TAILQ_FIRST(l)) != NULL) {
		TAILQ_REMOVE(l, it, link);
		q->c.drop(it);
	}
}

bool
workq_free(struct workq *q, int wait_ms)
{
	struct timespec ts;
	int i, e = 0;

	if (q == NULL)
		return true;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += wait_ms / 1000;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	while (q->live > 0 && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&q->cv, &q->mu, &ts);
	pthread_mutex_unlock(&q->mu);
	if (q->ev != NULL)
		event_free(q->ev);
	q->ev = NULL;
	if (q->live > 0)
		return false;
	for (i = 0; i < q->nthr; i++)
		pthread_join(q->thr[i], NULL);
	drop_all(q, &q->todo);
	drop_all(q, &q->done);
	if (q->efd >= 0)
		close(q->efd);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	free(q);
	return true;
}
