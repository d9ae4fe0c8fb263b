/*
 * The life of one client connection: made on accept, armed with the
 * header or idle timer, waiting for its next request head, closed after
 * its last output is written, freed.  proxy.c (heads, judgement), pump.c
 * (bodies) and tunnel.c (CONNECT) all call in here; this file calls none
 * of them: the next head is handed to the worker's on_head and a tunnel is
 * freed through the tun_free its maker left.
 */
#include <stdlib.h>
#include <time.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "conn.h"
#include "banned.h"

const char eg_resp_502[] = "HTTP/1.1 502 Bad Gateway\r\n"
                           "Content-Type: text/plain\r\nContent-Length: 12\r\n"
                           "Connection: close\r\n\r\nbad gateway\n";

static void
arm(struct conn *c, int64_t secs)
{
	struct timeval tv = {(time_t)secs, 0};

	evtimer_add(c->timer, &tv);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct timeval now;
	int64_t idle = c->p->idle_timeout, quiet;

	if (c->st != ST_TUNNEL) {
		conn_free(c);
		return;
	}
	event_base_gettimeofday_cached(c->px->base, &now);
	quiet = (int64_t)now.tv_sec - (int64_t)c->last;
	if (quiet >= idle)
		conn_free(c);
	else
		arm(c, idle - quiet);
}

/* Milliseconds from now (the wall clock grants are judged by) to c's
 * grant expiry; 0 once it has passed. */
static int64_t
until_expiry(const struct conn *c)
{
	struct timespec now;
	int64_t ms;

	clock_gettime(CLOCK_REALTIME, &now);
	ms = c->g_exp * 1000 -
	    ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
	return ms > 0 ? ms : 0;
}

/*
 * A grant is judged when a request is admitted, and what it admitted
 * lasts no longer than it does: a tunnel or an exchange still open when
 * it expires is closed, and the close recorded.  Between requests there
 * is nothing to close; the next head is judged on its own.
 */
static void
on_expiry(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->st == ST_HEAD || c->st == ST_CLOSING)
		return;
	/* The loop's clock is not the wall clock: never a moment early. */
	if (until_expiry(c) > 0) {
		conn_arm_expiry(c);
		return;
	}
	eg_expiry_record(c->dest.host, c->dest.port, c->run,
	    c->is_connect ? "tunnel" : "exchange");
	conn_free(c);
}

void
conn_arm_expiry(struct conn *c)
{
	int64_t ms = until_expiry(c);
	struct timeval tv = {(time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(c->expiry, &tv);
}

struct conn *
conn_new(struct proxy *px)
{
	struct conn *c;

	if (atomic_fetch_add(px->nconns, 1) >= px->max_conns) {
		atomic_fetch_sub(px->nconns, 1);
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		atomic_fetch_sub(px->nconns, 1);
		return NULL;
	}
	c->px = px;
	c->p = eg_policy_ref(px->p);
	if ((c->timer = evtimer_new(px->base, on_timer, c)) == NULL ||
	    (c->expiry = evtimer_new(px->base, on_expiry, c)) == NULL) {
		conn_free(c);
		return NULL;
	}
	return c;
}

void
conn_free(struct conn *c)
{
	if (c->lk != NULL)
		eg_lookup_cancel(c->lk);
	sio_free(c->cli);
	sio_free(c->up);
	if (c->head_out != NULL)
		evbuffer_free(c->head_out);
	if (c->timer != NULL)
		event_free(c->timer);
	if (c->expiry != NULL)
		event_free(c->expiry);
	if (c->tun != NULL)
		c->tun_free(c->tun);
	if (c->held[0] != '\0')
		eg_run_release(c->held);
	if (c->peer[0] != '\0')
		eg_ungranted_release(c->peer);
	eg_policy_free(c->p);
	atomic_fetch_sub(c->px->nconns, 1);
	free(c);
}

void
conn_close_up(struct conn *c)
{
	sio_free(c->up);
	c->up = NULL;
	c->up_host[0] = '\0';
}

/* Stops reading and frees the connection once its output is written. */
void
conn_close_after_flush(struct conn *c)
{
	struct sio *b = c->cli != NULL ? c->cli : c->up;

	c->st = ST_CLOSING;
	if (c->lk != NULL) {
		eg_lookup_cancel(c->lk);
		c->lk = NULL;
	}
	if (b != NULL)
		sio_flush(b);
	if (b == NULL || sio_pending(b) == 0) {
		conn_free(c);
		return;
	}
	sio_read(b, false);
	arm(c, c->p->header_timeout);
}

void
conn_add_fields(struct evbuffer *o, const struct eg_head *hd)
{
	for (size_t i = 0; i < hd->nh; i++) {
		const struct eg_hdr *h = &hd->h[i];

		if (eg_hdr_hop(hd, h))
			continue;
		evbuffer_add(o, h->name, h->nlen);
		evbuffer_add(o, ": ", 2);
		evbuffer_add(o, h->value, h->vlen);
		evbuffer_add(o, "\r\n", 2);
	}
}

void
conn_await_head(struct conn *c)
{
	c->st = ST_HEAD;
	c->req_done = c->resp_done = c->resp_head_done = false;
	arm(c, c->p->header_timeout);
	c->px->on_head(c);
}
