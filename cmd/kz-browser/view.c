/*
 * Viewers' own connections.  A viewer connects to the view socket (beside
 * the daemon's, the same peer policy), names the session and its role in
 * one frame, and from then on only receives: the page as PNG frames, one a
 * tick while the page is live.  Private text closes every connection but
 * the member's, in this process (the viewer's client is not asked to hide
 * anything), and refuses new ones until it ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
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

struct kzb_view {
	int lfd;
	struct event *ev;
	const struct kzb_conf *c;
	kzb_find_fn find;
	void *arg;
	char path[112];
};

static void
deny(int fd, const char *why, int64_t io)
{
	cJSON *o = kz_reply_err(NULL, KZ_WE_REFUSED, why);

	(void)!kz_frame_write(fd, o, KZ_FRAME_MAX_DEFAULT, (int)io);
	cJSON_Delete(o);
	close(fd);
}

/* One viewer's hello: its session and role, then it joins the session. */
static void
hello(struct kzb_view *v, int fd)
{
	const char *id = NULL, *role = NULL;
	struct kzb_session *s;
	cJSON *h = NULL;
	bool member;
	int slot = -1;

	if (kz_frame_read(fd, 4096, HELLO_MS, &h, NULL, 0) != 0 ||
	    kz_json_str(h, "session", KZB_SID_HEX, &id, NULL, 0) != 0 ||
	    kz_json_str(h, "role", 8, &role, NULL, 0) != 0 ||
	    (strcmp(role, "member") != 0 && strcmp(role, "viewer") != 0)) {
		cJSON_Delete(h);
		deny(fd, "a viewer names its session and its role",
		    v->c->io_timeout_ms);
		return;
	}
	member = strcmp(role, "member") == 0;
	if ((s = v->find(v->arg, id)) == NULL) {
		cJSON_Delete(h);
		deny(fd, "no such browser session", v->c->io_timeout_ms);
		return;
	}
	cJSON_Delete(h);
	if (s->private_text && !member) {
		deny(fd, "the member is entering private text",
		    v->c->io_timeout_ms);
		return;
	}
	for (int i = 0; i < KZB_VIEWERS_MAX && slot < 0; i++)
		if (s->view_fd[i] < 0)
			slot = i;
	if (slot < 0) {
		deny(fd, "this session has as many viewers as it may",
		    v->c->io_timeout_ms);
		return;
	}
	s->view_fd[slot] = fd;
	s->view_member[slot] = member;
}

static void
on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct kzb_view *v = arg;
	struct kz_peer peer;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	(void)!kz_fd_nonblock(fd, false);
	if (kz_peer_check(fd, &v->c->peers, &peer) != 0) {
		close(fd);
		return;
	}
	hello(v, fd);
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

void
kzb_view_close(struct kzb_session *s, bool keep_member)
{
	for (int i = 0; i < KZB_VIEWERS_MAX; i++)
		if (s->view_fd[i] >= 0 && !(keep_member && s->view_member[i])) {
			/* Closed, not told: the connection ends here. */
			(void)shutdown(s->view_fd[i], SHUT_RDWR);
			close(s->view_fd[i]);
			s->view_fd[i] = -1;
		}
}

void
kzb_view_frame(const struct kzb_conf *c, struct kzb_session *s)
{
	struct kzb_out o = {0};
	char *png = NULL;
	cJSON *f;
	int n = 0;

	for (int i = 0; i < KZB_VIEWERS_MAX; i++)
		n += s->view_fd[i] >= 0;
	int64_t used = s->last_used;

	if (n == 0)
		return;
	/* Being watched is not being used: the reaper's clock stays. */
	n = kzb_session_screenshot(c, s, &png, &o);
	s->last_used = used;
	if (n != 0)
		return;
	f = cJSON_CreateObject();
	cJSON_AddNumberToObject(f, "seq", (double)++s->view_seq);
	cJSON_AddStringToObject(f, "png_b64", png);
	free(png);
	for (int i = 0; i < KZB_VIEWERS_MAX; i++)
		if (s->view_fd[i] >= 0 &&
		    kz_frame_write(s->view_fd[i], f, 64u << 20,
		        (int)c->io_timeout_ms) != 0) {
			close(s->view_fd[i]);
			s->view_fd[i] = -1;
		}
	cJSON_Delete(f);
}
