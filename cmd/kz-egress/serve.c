/*
 * The proxy's daemon: the listeners on a Unix socket and/or loopback TCP
 * and their accept path (a peer checked and counted before a struct conn
 * is made), the worker threads, each with its own event loop, resolver and
 * listeners, and eg_proxy_run, which opens the sockets, starts the
 * workers, the status socket and the reload, and stops them on SIGINT or
 * SIGTERM.  The request heads and their judgement are in proxy.c.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <pthread.h>

#include "egress.h"
#include "kz_audit.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_sock.h"
#include "kz_srv.h"
#include "conn.h"
#include "banned.h"

/* ---- listeners ---- */

static void
on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int slen, void *arg)
{
	struct proxy *px = arg;
	struct conn *c;
	enum eg_tally_res held;
	char peer[EG_TALLY_KEY_MAX];
	int one = 1;

	/* On a Unix socket the mode is not the boundary: credentials are
	 * checked before anything is allocated or read (peers.c).  The
	 * peer policy is the one the process started with (reload.c). */
	if (!eg_peer_admit(fd, sa, &px->p->peers)) {
		close(fd);
		return;
	}
	if ((c = conn_new(px)) == NULL) {
		close(fd);
		return;
	}
	/* Until a grant admits a request on it, the connection counts
	 * against its peer's share of the ungranted ones (peers.c). */
	eg_peer_key(fd, sa, peer, sizeof(peer));
	if ((held = eg_ungranted_hold(peer, px->max_conns)) != EG_TALLY_OK) {
		eg_ungranted_refuse(fd, peer, held);
		close(fd);
		conn_free(c);
		return;
	}
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (sa->sa_family != AF_UNIX)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
	if ((c->cli = conn_client_new(c, fd)) == NULL) {
		close(fd);
		conn_free(c);
		return;
	}
	sio_read(c->cli, true);
	conn_await_head(c);
}

/*
 * accept(2) failed, descriptors exhausted say: the connection stays in the
 * backlog, and a level-triggered listener would be woken for it again at
 * once, a CPU spun and a line logged each turn for as long as the shortage
 * lasts.  The worker's listeners pause for EG_ACCEPT_PAUSE_MS instead (the
 * connections it serves go on), and the shortage is logged at most once in
 * EG_ACCEPT_LOG_SECONDS.
 */
#define EG_ACCEPT_PAUSE_MS 100
#define EG_ACCEPT_LOG_SECONDS 10

static void
on_accept_error(struct evconnlistener *l, void *arg)
{
	struct proxy *px = arg;
	int err = EVUTIL_SOCKET_ERROR();
	struct timeval tv = {0, EG_ACCEPT_PAUSE_MS * 1000};
	time_t now = time(NULL);

	for (size_t i = 0; i < px->nls; i++)
		evconnlistener_disable(px->ls[i]);
	evtimer_add(px->accept_resume, &tv);
	if (px->accept_logged != 0 &&
	    now - px->accept_logged < EG_ACCEPT_LOG_SECONDS)
		return;
	px->accept_logged = now;
	kz_log(KZ_LOG_WARN, "egress.accept", KZ_ESYS,
	    "cannot accept a connection; accepting paused", "cause",
	    err == EMFILE     ? "process descriptor limit" :
	        err == ENFILE ? "system descriptor limit" :
	                        "accept failed",
	    NULL);
}

static void
on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;

	for (size_t i = 0; i < px->nls; i++)
		evconnlistener_enable(px->ls[i]);
}

/*
 * Each worker thread runs its own event loop, resolver and listeners: TCP
 * listeners share a port through SO_REUSEPORT, Unix listeners share one
 * socket.  A connection lives and dies on the thread that accepted it;
 * a policy is read-only once loaded (a reload swaps in another, reload.c)
 * and refusal records go through a locked queue.
 */
static int
listen_one(struct proxy *px, const struct eg_listen *l, int ufd)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd;

	if (l->is_unix) {
		if ((fd = dup(ufd)) < 0)
			return KZ_ESYS;
		px->ls[px->nls] = evconnlistener_new(px->base, on_accept, px,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
		if (px->ls[px->nls] == NULL)
			close(fd);
	} else {
		sl = eg_addr_sockaddr(&l->a, l->port, &ss);
		px->ls[px->nls] = evconnlistener_new_bind(px->base, on_accept,
		    px,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
		        LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT,
		    4096, (struct sockaddr *)&ss, (int)sl);
	}
	if (px->ls[px->nls] == NULL) {
		kz_log(KZ_LOG_ERROR, "egress.listen", KZ_ESYS,
		    "cannot listen on a configured address", NULL);
		return KZ_ESYS;
	}
	evconnlistener_set_error_cb(px->ls[px->nls], on_accept_error);
	px->nls++;
	return 0;
}

static int
worker_init(struct proxy *px, struct eg_policy *p, const int *ufd,
    atomic_size_t *nconns)
{
	char why[160];
	int r;

	px->p = eg_policy_ref(p);
	px->on_head = eg_process_input;
	px->nconns = nconns;
	px->max_conns = (size_t)p->max_conns;
	if ((px->base = event_base_new()) == NULL ||
	    eg_reload_worker_init(px) != 0 ||
	    (px->accept_resume = evtimer_new(px->base, on_accept_resume, px)) ==
	        NULL)
		return KZ_ENOMEM;
	if ((r = eg_dns_new(px->base, p->resolver, &px->dns, why,
	         sizeof(why))) != 0) {
		kz_log(KZ_LOG_ERROR, "egress.resolver", r, why, NULL);
		return r;
	}
	for (size_t i = 0; i < p->nlisten; i++)
		if ((r = listen_one(px, &p->listen[i], ufd[i])) != 0)
			return r;
	return 0;
}

static void
worker_release(struct proxy *px)
{
	for (size_t i = 0; i < px->nls; i++)
		evconnlistener_free(px->ls[i]);
	eg_dns_free(px->dns);
	if (px->accept_resume != NULL)
		event_free(px->accept_resume);
	eg_reload_worker_release(px);
	if (px->base != NULL)
		event_base_free(px->base);
}

static void *
worker_main(void *arg)
{
	struct proxy *px = arg;

	event_base_dispatch(px->base);
	return NULL;
}

struct all {
	struct proxy *w;
	size_t n;
};

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct all *a = arg;

	for (size_t i = 0; i < a->n; i++)
		event_base_loopbreak(a->w[i].base);
}

static void
raise_nofile(void)
{
	struct rlimit rl;

	/* Each tunnel holds two descriptors. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int
open_unix(struct eg_policy *p, int *ufd)
{
	char why[160];

	for (size_t i = 0; i < p->nlisten; i++)
		ufd[i] = -1;
	for (size_t i = 0; i < p->nlisten; i++) {
		/* Peers that cannot be parsed would admit root and the
		 * proxy's own uid only: said, and no socket opened. */
		if (p->listen[i].is_unix && p->peers_err != 0) {
			kz_log(KZ_LOG_ERROR, "egress.config", KZ_ECONF,
			    p->peers_why, NULL);
			return KZ_ECONF;
		}
		if (p->listen[i].is_unix &&
		    kz_sock_listen(p->listen[i].path, 4096, &ufd[i], why,
		        sizeof(why)) != 0) {
			kz_log(KZ_LOG_ERROR, "egress.listen", KZ_ESYS, why,
			    NULL);
			return KZ_ESYS;
		}
	}
	return 0;
}

int
eg_proxy_run(struct eg_policy *p, eg_load_fn load, void *arg)
{
	struct proxy w[EG_THREADS_MAX];
	pthread_t tid[EG_THREADS_MAX];
	struct event *sint = NULL, *sterm = NULL;
	struct kz_srv *status = NULL;
	struct eg_reload *rl = NULL;
	struct all a = {w, 0};
	size_t n = (size_t)p->threads, started = 0;
	int ufd[8], r = 0;
	char awhy[160] = "";
	atomic_size_t nconns = 0;

	memset(w, 0, sizeof(w));
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	if ((r = open_unix(p, ufd)) != 0)
		goto out;
	if (evthread_use_pthreads() != 0) {
		r = KZ_ESYS;
		goto out;
	}
	for (a.n = 0; a.n < n; a.n++)
		if ((r = worker_init(&w[a.n], p, ufd, &nconns)) != 0) {
			a.n++;
			goto out;
		}
	sint = evsignal_new(w[0].base, SIGINT, on_signal, &a);
	sterm = evsignal_new(w[0].base, SIGTERM, on_signal, &a);
	if (sint == NULL || sterm == NULL || evsignal_add(sint, NULL) != 0 ||
	    evsignal_add(sterm, NULL) != 0) {
		r = KZ_ESYS;
		goto out;
	}
	/* The opt-out is said once on stderr and kept in the log.  A sink
	 * not up yet does not keep the proxy from serving (a refusal is a
	 * refusal either way); the operator is told where it was looked for. */
	if (p->audit_sock[0] == '\0') {
		fprintf(stderr,
		    "kz-egress: audit is off (KZ_AUDIT = off): no "
		    "refusal is recorded\n");
		kz_log(KZ_LOG_WARN, "audit.off", 0, "audit is off", NULL);
	} else if (kz_audit_ping(p->audit_sock, 1000, awhy, sizeof(awhy)) != 0)
		kz_log(KZ_LOG_WARN, "audit.unreachable", KZ_EUNAVAIL, awhy,
		    "socket", p->audit_sock, NULL);
	if ((r = eg_status_start(w[0].base, p, &nconns, &status)) != 0 ||
	    (r = eg_reload_new(w, n, p, load, arg, &rl)) != 0)
		goto out;
	/* Every listener is bound; said before any thread starts, since
	 * the first call edits the environment. */
	if (kz_notify_ready("serving") != 0)
		kz_log(KZ_LOG_WARN, "egress.notify", KZ_ESYS,
		    "cannot tell the service manager it is ready", NULL);
	eg_audit_start(p->audit_sock);
	for (started = 1; started < n; started++)
		if (pthread_create(&tid[started], NULL, worker_main,
		        &w[started]) != 0)
			break;
	kz_log(KZ_LOG_INFO, "egress.start", 0, "serving", "mode",
	    eg_mode_name(p->mode), "audit",
	    p->audit_sock[0] ? p->audit_sock : "off", NULL);
	event_base_dispatch(w[0].base);
	(void)kz_notify_stopping();
	on_signal(0, 0, &a);
	for (size_t i = 1; i < started; i++)
		pthread_join(tid[i], NULL);
	kz_log(KZ_LOG_INFO, "egress.stop", 0, "stopping", NULL);
out:
	eg_reload_free(rl);
	kz_srv_free(status);
	eg_status_set_policy(NULL);
	if (sint != NULL)
		event_free(sint);
	if (sterm != NULL)
		event_free(sterm);
	for (size_t i = 0; i < a.n; i++)
		worker_release(&w[i]);
	for (size_t i = 0; i < p->nlisten; i++) {
		if (p->listen[i].is_unix && ufd[i] >= 0) {
			close(ufd[i]);
			(void)unlink(p->listen[i].path);
		}
	}
	return r;
}
