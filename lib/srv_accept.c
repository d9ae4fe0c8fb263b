#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_srv.h"
#include "srv_int.h"
#include "banned.h"

/*
 * The server's accepting side (kz_srv.h): a new connection's peer is
 * checked, each peer uid held to its share of the connection limit, and
 * at the limit an idle connection gives way; and the server's life (new,
 * free, stats).  Each connection's reading and dispatch are srv.c's.
 */

/*
 * At the connection limit, the longest-held idle connection (no request
 * in it, nothing to write) makes room for a new one: a peer holding idle
 * connections open cannot lock every other client out.  With uid, only
 * one of that uid's.  False when every such connection is in use.
 */
static bool
evict_idle(struct kz_srv *s, const uid_t *uid)
{
	struct conn *cn, *old = NULL;

	LIST_FOREACH(cn, &s->conns, link)
	if (cn->state == C_READING && cn->pending == NULL &&
	    evbuffer_get_length(cn->in) == 0 &&
	    evbuffer_get_length(cn->out) == 0 &&
	    (uid == NULL || cn->peer.uid == *uid))
		old = cn; /* the list is newest first */
	if (old == NULL)
		return false;
	s->st.evicted++;
	kz_srv_conn_free(old);
	return true;
}

/*
 * Whether a new connection of uid would take it past its share of the
 * connection limit (all but a quarter of it), after one of its own idle
 * connections made room if it had one: a peer that keeps its connections
 * busy (a request in each, or a frame it drips) can hold at most that
 * share, and every other peer, an operator among them, still gets in.
 */
static bool
over_share(struct kz_srv *s, uid_t uid)
{
	size_t share = s->c.max_conns - s->c.max_conns / 4, held = 0;
	struct conn *cn;

	if (s->st.open_conns < share)
		return false;
	LIST_FOREACH(cn, &s->conns, link)
	held += cn->peer.uid == uid;
	return held >= share && !evict_idle(s, &uid);
}

static void
log_share(struct kz_srv *s, uid_t uid)
{
	int64_t now = kz_now_ms();
	char u[24];

	s->st.share_refused++;
	if (now - s->share_logged_ms < 10000)
		return;
	s->share_logged_ms = now;
	snprintf(u, sizeof(u), "%lu", (unsigned long)uid);
	kz_log(KZ_LOG_WARN, "srv.share", KZ_EUNAVAIL,
	    "a peer uid holds its share of the connections: its next ones "
	    "are refused busy",
	    "uid", u, NULL);
}

/*
 * A new connection: refused at once (with one reply, then closed) when
 * its peer is not allowed or holds its share of the connections; closed
 * unanswered when the server is at its limit.  The peer is read first,
 * so that a peer past its share never makes another's idle connection
 * give way.
 */
static void
accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct kz_srv *s = arg;
	struct kz_peer peer = {0};
	const char *code = NULL, *reason = NULL;
	struct conn *cn;

	s->st.conns++;
	if (kz_peer_check(fd, &s->c.peers, &peer) != 0) {
		s->st.peer_refused++;
		code = KZ_WE_UNAUTHORIZED_PEER;
		reason = "peer credentials are not allowed";
	} else if (over_share(s, peer.uid)) {
		log_share(s, peer.uid);
		code = KZ_WE_BUSY;
		reason = "this peer holds its share of the server's "
		         "connections";
	}
	if ((s->st.open_conns >= s->c.max_conns &&
	        (code != NULL || !evict_idle(s, NULL))) ||
	    (cn = calloc(1, sizeof(*cn))) == NULL) {
		close(fd);
		return;
	}
	cn->srv = s;
	cn->fd = fd;
	cn->peer = peer;
	LIST_INSERT_HEAD(&s->conns, cn, link);
	s->st.open_conns++;
	cn->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, kz_srv_read_cb,
	    cn);
	cn->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, kz_srv_write_cb,
	    cn);
	cn->kick = event_new(s->base, -1, 0, kz_srv_kick_cb, cn);
	cn->in = evbuffer_new();
	cn->out = evbuffer_new();
	if (!cn->rev || !cn->wev || !cn->kick || !cn->in || !cn->out) {
		kz_srv_conn_free(cn);
		return;
	}
	if (code != NULL) {
		kz_srv_conn_send(cn, kz_reply_err(NULL, code, reason));
		cn->state = C_CLOSING;
		event_active(cn->kick, EV_TIMEOUT, 0);
		return;
	}
	kz_srv_arm_read(cn);
}
int
kz_srv_new(struct event_base *base, const struct kz_srv_conf *c,
    struct kz_srv **out, char *why, size_t wlen)
{
	struct kz_srv *s;
	int fd, r;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return KZ_ENOMEM;
	s->base = base;
	s->c = *c;
	if (s->c.frame_max == 0)
		s->c.frame_max = KZ_FRAME_MAX_DEFAULT;
	if (s->c.reply_max == 0)
		s->c.reply_max = s->c.frame_max;
	if (s->c.io_timeout_ms <= 0)
		s->c.io_timeout_ms = 5000;
	if (s->c.idle_timeout_ms <= 0)
		s->c.idle_timeout_ms = 60000;
	if (s->c.max_conns == 0)
		s->c.max_conns = 1024;
	LIST_INIT(&s->conns);
	if ((s->path = strdup(c->sock_path)) == NULL) {
		free(s);
		return KZ_ENOMEM;
	}
	if ((r = kz_sock_listen(c->sock_path, 512, &fd, why, wlen)) != 0) {
		free(s->path);
		free(s);
		return r;
	}
	s->lev = evconnlistener_new(base, accept_cb, s,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (s->lev == NULL) {
		close(fd);
		unlink(s->path);
		free(s->path);
		free(s);
		return KZ_ENOMEM;
	}
	*out = s;
	return 0;
}

void
kz_srv_free(struct kz_srv *s)
{
	if (s == NULL)
		return;
	while (!LIST_EMPTY(&s->conns))
		kz_srv_conn_free(LIST_FIRST(&s->conns));
	evconnlistener_free(s->lev);
	unlink(s->path);
	free(s->path);
	free(s);
}

void
kz_srv_stats(const struct kz_srv *s, struct kz_srv_stats *out)
{
	*out = s->st;
}
