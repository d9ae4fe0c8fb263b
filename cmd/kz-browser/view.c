/*
 * Viewers' own connections.  A viewer connects to the view socket (beside
 * the daemon's, the same peer policy), names the session and its role in
 * one frame, and from then on only receives: the page as PNG frames, one a
 * tick while the page is live.  Private text closes every connection but
 * the member's, in this process (the viewer's client is not asked to hide
 * anything), and refuses new ones until it ends.  Everything here runs on
 * the loop without blocking it: a viewer that does not say hello in time
 * is dropped, one that reads slowly misses frames rather than holding the
 * daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_sock.h"
#include "kz_wire.h"
#include "kzb.h"
#include "banned.h"

#define HELLO_MS 2000
#define HELLO_MAX 4096
#define VIEW_FRAME_MAX (64u << 20)
#define BEHIND_MAX (16u << 20) /* bytes queued for one viewer */

struct kzb_view {
	int lfd;
	struct event *ev;
	struct event_base *base;
	const struct kzb_conf *c;
	kzb_find_fn find;
	void *arg;
	char path[112];
};

/* One connection: saying hello (s NULL), then joined to s at slot. */
struct kzb_viewer {
	struct kzb_view *v;
	struct bufferevent *bev;
	struct kzb_session *s;
	int slot;
	bool member;
};

static void
viewer_free(struct kzb_viewer *w)
{
	if (w->s != NULL)
		w->s->view[w->slot] = NULL;
	/* Closed, not told: the connection ends here. */
	(void)shutdown(bufferevent_getfd(w->bev), SHUT_RDWR);
	bufferevent_free(w->bev);
	free(w);
}

static void
queue_frame(struct bufferevent *bev, const cJSON *o)
{
	char *buf = NULL;
	size_t len;

	if (kz_frame_encode(o, VIEW_FRAME_MAX, &buf, &len) == 0)
		(void)bufferevent_write(bev, buf, len);
	free(buf);
}

static void on_event(struct bufferevent *bev, short what, void *arg);

static void
on_flushed(struct bufferevent *bev, void *arg)
{
	(void)bev;
	viewer_free(arg);
}

/* The refusal is written, then the connection closed. */
static void
deny(struct kzb_viewer *w, const char *why)
{
	cJSON *o = kz_reply_err(NULL, KZ_WE_REFUSED, why);

	queue_frame(w->bev, o);
	cJSON_Delete(o);
	bufferevent_disable(w->bev, EV_READ);
	bufferevent_setcb(w->bev, NULL, on_flushed, on_event, w);
}

/* The hello names a live session and a role; the viewer joins it. */
static void
join(struct kzb_viewer *w, const cJSON *h)
{
	const char *id = NULL, *role = NULL;
	struct kzb_session *s;
	int slot = -1;

	if (kz_json_str(h, "session", KZB_SID_HEX, &id, NULL, 0) != 0 ||
	    kz_json_str(h, "role", 8, &role, NULL, 0) != 0 ||
	    (strcmp(role, "member") != 0 && strcmp(role, "viewer") != 0)) {
		deny(w, "a viewer names its session and its role");
		return;
	}
	w->member = strcmp(role, "member") == 0;
	if ((s = w->v->find(w->v->arg, id)) == NULL) {
		deny(w, "no such browser session");
		return;
	}
	if (atomic_load(&s->private_text) && !w->member) {
		deny(w, "the member is entering private text");
		return;
	}
	for (int i = 0; i < KZB_VIEWERS_MAX && slot < 0; i++)
		if (s->view[i] == NULL)
			slot = i;
	if (slot < 0) {
		deny(w, "this session has as many viewers as it may");
		return;
	}
	w->s = s;
	w->slot = slot;
	s->view[slot] = w;
	/* From here the viewer only receives. */
	bufferevent_set_timeouts(w->bev, NULL, NULL);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct kzb_viewer *w = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned char hdr[KZ_FRAME_HDR];
	uint32_t len;
	cJSON *h = NULL;
	char *p;

	if (w->s != NULL) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	if (evbuffer_copyout(in, hdr, sizeof(hdr)) < (ev_ssize_t)sizeof(hdr))
		return;
	if (kz_frame_hdr(hdr, HELLO_MAX, &len) != 0) {
		deny(w, "a viewer names its session and its role");
		return;
	}
	if (evbuffer_get_length(in) < sizeof(hdr) + len)
		return;
	p = (char *)evbuffer_pullup(in, (ev_ssize_t)(sizeof(hdr) + len));
	if (p == NULL ||
	    kz_frame_decode(p + sizeof(hdr), len, &h, NULL, 0) != 0) {
		deny(w, "a viewer names its session and its role");
		return;
	}
	evbuffer_drain(in, sizeof(hdr) + len);
	join(w, h);
	cJSON_Delete(h);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	viewer_free(arg);
}

static void
on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct kzb_view *v = arg;
	struct timeval hello = {HELLO_MS / 1000, (HELLO_MS % 1000) * 1000};
	struct kzb_viewer *w;
	struct kz_peer peer;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	(void)what;
	if (fd < 0)
		return;
	if (kz_peer_check(fd, &v->c->peers, &peer) != 0 ||
	    (w = calloc(1, sizeof(*w))) == NULL) {
		close(fd);
		return;
	}
	w->v = v;
	if ((w->bev = bufferevent_socket_new(v->base, fd,
	         BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		free(w);
		return;
	}
	bufferevent_setcb(w->bev, on_read, NULL, on_event, w);
	bufferevent_set_timeouts(w->bev, &hello, NULL);
	bufferevent_enable(w->bev, EV_READ | EV_WRITE);
}

int
kzb_view_new(struct event_base *base, const struct kzb_conf *c,
    kzb_find_fn find, void *arg, struct kzb_view **out, char *why, size_t wlen)
{
	struct kzb_view *v = calloc(1, sizeof(*v));
	int e;

	*out = NULL;
	if (v == NULL)
		return KZ_ENOMEM;
	v->base = base;
	v->c = c;
	v->find = find;
	v->arg = arg;
	v->lfd = -1;
	if (snprintf(v->path, sizeof(v->path), "%s", c->view_sock) >=
	        (int)sizeof(v->path) ||
	    (e = kz_sock_listen(v->path, 16, &v->lfd, why, wlen)) != 0 ||
	    (v->ev = event_new(base, v->lfd, EV_READ | EV_PERSIST, on_accept,
	         v)) == NULL ||
	    event_add(v->ev, NULL) != 0) {
		kzb_view_free(v);
		return KZ_ESYS;
	}
	*out = v;
	return 0;
}

void
kzb_view_free(struct kzb_view *v)
{
	if (v == NULL)
		return;
	if (v->ev != NULL)
		event_free(v->ev);
	if (v->lfd >= 0) {
		close(v->lfd);
		(void)unlink(v->path);
	}
	free(v);
}

bool
kzb_view_any(const struct kzb_session *s)
{
	for (int i = 0; i < KZB_VIEWERS_MAX; i++)
		if (s->view[i] != NULL)
			return true;
	return false;
}

void
kzb_view_close(struct kzb_session *s, bool keep_member)
{
	for (int i = 0; i < KZB_VIEWERS_MAX; i++)
		if (s->view[i] != NULL && !(keep_member && s->view[i]->member))
			viewer_free(s->view[i]);
}

void
kzb_view_send(struct kzb_session *s, const char *png)
{
	cJSON *f = cJSON_CreateObject();
	char *buf = NULL;
	size_t len;

	cJSON_AddNumberToObject(f, "seq", (double)++s->view_seq);
	cJSON_AddStringToObject(f, "png_b64", png);
	if (kz_frame_encode(f, VIEW_FRAME_MAX, &buf, &len) == 0)
		for (int i = 0; i < KZB_VIEWERS_MAX; i++) {
			struct bufferevent *b;

			if (s->view[i] == NULL)
				continue;
			b = s->view[i]->bev;
			if (evbuffer_get_length(bufferevent_get_output(b)) <
			    BEHIND_MAX)
				(void)bufferevent_write(b, buf, len);
		}
	free(buf);
	cJSON_Delete(f);
}
