/*
 * One thread per session, so that a page that takes seconds to load holds
 * its own session and nothing else: the loop (ops.c, serve.c) pushes a
 * session's jobs on its queue, the session's thread runs them in order
 * (which is also what serialises its navigations) and hands each back to
 * the loop through the daemon's eventfd, where it is answered.  While it
 * has nothing to do, the thread watches the bridge, so a browser that
 * stops is noticed at once.  A session being ended is told through its
 * stop descriptor, which every wait on the bridge polls too (cdp.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <unistd.h>
#include <event2/event.h>
#include <sodium.h>

#include "kz_log.h"
#include "kzb.h"
#include "banned.h"

#define IDLE_POLL_MS 1000

TAILQ_HEAD(jobq, kzb_job);

struct kzb_thread {
	pthread_t tid;
	pthread_mutex_t mu;
	struct jobq q;
	int q_fd; /* eventfd: a job was queued */
	bool started;
};

struct kzb_async {
	pthread_mutex_t mu;
	struct jobq done;
	int fd; /* eventfd: a job is done */
	struct event *ev;
	void *ctx; /* handed to every job's run and done */
	kzb_job_fn dead; /* the done of a browser that went while idle */
};

static void
wake(int fd)
{
	uint64_t one = 1;

	while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static void
drain_fd(int fd)
{
	uint64_t v;

	while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
}

/* On the loop: every job the threads finished, answered in order. */
static void
on_done(evutil_socket_t fd, short what, void *arg)
{
	struct kzb_async *a = arg;
	struct jobq q = TAILQ_HEAD_INITIALIZER(q);
	struct kzb_job *j;

	(void)what;
	drain_fd(fd);
	pthread_mutex_lock(&a->mu);
	TAILQ_CONCAT(&q, &a->done, link);
	pthread_mutex_unlock(&a->mu);
	while ((j = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, j, link);
		j->done(a->ctx, j);
	}
}

int
kzb_async_new(struct event_base *base, void *ctx, kzb_job_fn dead,
    struct kzb_async **out)
{
	struct kzb_async *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (a == NULL)
		return KZ_ENOMEM;
	TAILQ_INIT(&a->done);
	a->ctx = ctx;
	a->dead = dead;
	pthread_mutex_init(&a->mu, NULL);
	if ((a->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (a->ev = event_new(base, a->fd, EV_READ | EV_PERSIST, on_done,
	         a)) == NULL ||
	    event_add(a->ev, NULL) != 0) {
		kzb_async_free(a);
		return KZ_ESYS;
	}
	*out = a;
	return 0;
}

void
kzb_async_free(struct kzb_async *a)
{
	if (a == NULL)
		return;
	if (a->ev != NULL)
		event_free(a->ev);
	if (a->fd >= 0)
		close(a->fd);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

static void
post(struct kzb_async *a, struct kzb_job *j)
{
	pthread_mutex_lock(&a->mu);
	TAILQ_INSERT_TAIL(&a->done, j, link);
	pthread_mutex_unlock(&a->mu);
	wake(a->fd);
}

/* The next job, or NULL after an idle wait (the bridge may have spoken). */
static struct kzb_job *
take(struct kzb_session *s)
{
	struct kzb_thread *t = s->th;
	struct kzb_job *j;
	struct pollfd p[2] = {{.fd = t->q_fd, .events = POLLIN},
	    {.fd = s->cdp.dead ? -1 : s->cdp.fd, .events = POLLIN}};

	pthread_mutex_lock(&t->mu);
	if ((j = TAILQ_FIRST(&t->q)) != NULL)
		TAILQ_REMOVE(&t->q, j, link);
	pthread_mutex_unlock(&t->mu);
	if (j != NULL)
		return j;
	if (poll(p, 2, IDLE_POLL_MS) > 0 && (p[0].revents & POLLIN))
		drain_fd(t->q_fd);
	return NULL;
}

/* The thread's own job for the loop: the browser went while idle. */
static void
report_dead(struct kzb_session *s, struct kzb_async *a)
{
	struct kzb_job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return;
	j->s = s;
	j->dead = true;
	snprintf(j->o.why, sizeof(j->o.why), "%s",
	    s->cdp.crashed && !s->cdp.dead ?
	        "the page crashed; the session is closed" :
	        "the browser stopped; the session is closed");
	j->done = a->dead;
	post(a, j);
}

struct start {
	struct kzb_session *s;
	struct kzb_async *a;
};

static void *
session_main(void *arg)
{
	struct start st = *(struct start *)arg;
	struct kzb_session *s = st.s;
	struct kzb_job *j;
	bool told = false, last = false;

	free(arg);
	while (!last) {
		if ((j = take(s)) == NULL) {
			if (s->cdp.fd >= 0 && !told &&
			    (kzb_cdp_drain(&s->cdp) != 0 || s->cdp.crashed)) {
				told = true;
				report_dead(s, st.a);
			}
			continue;
		}
		last = j->last;
		/* A session being ended runs nothing but its end. */
		if (atomic_load(&s->stopping) && !last)
			j->rc = KZ_EUNAVAIL;
		else
			j->run(st.a->ctx, j);
		j->dead = s->cdp.dead || s->cdp.crashed;
		told = told || j->dead;
		post(st.a, j);
	}
	return NULL;
}

int
kzb_thread_start(struct kzb_async *a, struct kzb_session *s)
{
	struct kzb_thread *t = calloc(1, sizeof(*t));
	struct start *st = malloc(sizeof(*st));

	s->th = t;
	s->cdp.stop_fd = -1;
	if (t == NULL || st == NULL) {
		free(st);
		return KZ_ENOMEM;
	}
	t->q_fd = -1;
	TAILQ_INIT(&t->q);
	pthread_mutex_init(&t->mu, NULL);
	t->q_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->cdp.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->q_fd < 0 || s->cdp.stop_fd < 0) {
		free(st);
		return KZ_ESYS;
	}
	st->s = s;
	st->a = a;
	if (pthread_create(&t->tid, NULL, session_main, st) != 0) {
		free(st);
		return KZ_ESYS;
	}
	t->started = true;
	return 0;
}

void
kzb_thread_push(struct kzb_session *s, struct kzb_job *j)
{
	struct kzb_thread *t = s->th;

	j->s = s;
	pthread_mutex_lock(&t->mu);
	TAILQ_INSERT_TAIL(&t->q, j, link);
	pthread_mutex_unlock(&t->mu);
	wake(t->q_fd);
}

void
kzb_thread_stop(struct kzb_session *s)
{
	atomic_store(&s->stopping, true);
	if (s->cdp.stop_fd >= 0)
		wake(s->cdp.stop_fd);
}

bool
kzb_thread_running(const struct kzb_session *s)
{
	return s->th != NULL && s->th->started;
}

void
kzb_thread_free(struct kzb_session *s)
{
	struct kzb_thread *t = s->th;

	if (t == NULL)
		return;
	/* The thread posted its last job and returns at once. */
	if (t->started)
		pthread_join(t->tid, NULL);
	if (t->q_fd >= 0)
		close(t->q_fd);
	if (s->cdp.stop_fd >= 0)
		close(s->cdp.stop_fd);
	s->cdp.stop_fd = -1;
	if (s->cdp.inject != NULL) {
		/* It holds the session's TURN password. */
		sodium_memzero(s->cdp.inject, strlen(s->cdp.inject));
		free(s->cdp.inject);
		s->cdp.inject = NULL;
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
	s->th = NULL;
}
