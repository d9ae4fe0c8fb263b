/*
 * One client connection of the proxy: its life in conn.c (made, timed,
 * closed, freed), its heads and judgement in proxy.c, its upstream and
 * bodies in pump.c, its CONNECT tunnel in tunnel.c.  The calls go one way:
 * proxy.c calls pump.c, pump.c calls tunnel.c, and each of them calls
 * conn.c, which calls none of them back (on_head and tun_free below).
 */
#ifndef EGRESS_CONN_H
#define EGRESS_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/time.h>
#include <time.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "egress.h"

/* ---- sio.c: a socket with buffers, for the plain-HTTP path ---- */

/* Input waiting beyond this stops reading; output beyond it stops the
 * other side's reading.  The bound on memory per direction. */
#define SIO_HIGH (1024 * 1024)

/* Interim (1xx) responses passed on per exchange; one more is a 502 and
 * ends the exchange: an origin cannot keep one open with them forever. */
#define EG_INTERIM_MAX 8

/* A key of a tally of connections (runs.c): a run's identifier hash, or a
 * peer (peers.c). */
#define EG_TALLY_KEY_MAX 65

enum { SIO_EOF = 1, SIO_ERROR = 2, SIO_TIMEOUT = 4, SIO_CONNECTED = 8 };

struct sio;
typedef void (*sio_data_fn)(struct sio *s, void *arg);
typedef void (*sio_event_fn)(struct sio *s, short what, void *arg);

struct sio {
	struct event_base *base;
	int fd;
	struct evbuffer *in, *out;
	struct event *rev, *wev;
	bool reading; /* the owner wants input */
	bool connecting;
	bool eof; /* the peer shut its side: nothing more to read, ever */
	bool has_rto;
	struct timeval rto; /* read (and connect) timeout */
	sio_data_fn readcb, writecb; /* input arrived; output drained */
	sio_event_fn eventcb;
	void *arg;
};

struct sio *sio_new(struct event_base *base, int fd, sio_data_fn readcb,
    sio_data_fn writecb, sio_event_fn eventcb, void *arg);
int sio_setfd(struct sio *s, int fd);
void sio_free(struct sio *s);
/* Frees s but leaves its descriptor open and returns it. */
int sio_take_fd(struct sio *s);
int sio_connect(struct sio *s, const struct sockaddr *sa, socklen_t sl,
    const struct timeval *timeout);
void sio_read(struct sio *s, bool on);
void sio_set_read_timeout(struct sio *s, const struct timeval *tv);
void sio_flush(struct sio *s);
size_t sio_pending(const struct sio *s);

struct conn;
struct tunnel;

struct proxy {
	struct event_base *base;
	/* The policy in force on this thread (one reference); a reload puts
	 * the next one in next and activates reload_ev (reload.c). */
	struct eg_policy *p;
	struct event *reload_ev;
	pthread_mutex_t mu;
	struct eg_policy *next;
	struct eg_dns *dns;
	struct evconnlistener *ls[8];
	size_t nls;
	/* accept(2) failing (descriptors exhausted): the listeners pause
	 * until accept_resume fires; accept_logged is when that was last
	 * logged (serve.c). */
	struct event *accept_resume;
	time_t accept_logged;
	/* Looks for a request head in a connection's input (proxy.c's, set
	 * by the worker): how conn.c and pump.c hand the next request back
	 * without calling into proxy.c. */
	void (*on_head)(struct conn *c);
	/* connections open on all threads: the bound is the process's */
	atomic_size_t *nconns;
	size_t max_conns;
};

enum conn_state {
	ST_HEAD,
	ST_LOOKUP,
	ST_CONNECTING,
	ST_EXCHANGE,
	ST_TUNNEL,
	ST_CLOSING
};
enum body_mode { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_UNTIL_CLOSE };

struct conn {
	struct proxy *px;
	/* The policy this connection's request was admitted under (one
	 * reference): a reload changes it only at the next request head. */
	struct eg_policy *p;
	struct sio *cli, *up;
	struct event *timer;
	/* Fires when the grant that admitted the request in flight expires:
	 * the tunnel or exchange it admitted ends then (conn.c). */
	struct event *expiry;
	struct eg_lookup *lk;
	struct evbuffer *head_out; /* request head for the upstream */
	enum conn_state st;
	struct eg_dest dest;
	/* The last verified grant (hash), for kept-alive clients; g_exp is
	 * also the expiry of the request in flight, which it admitted. */
	unsigned char gh[16];
	bool g_ok;
	int64_t g_exp;
	unsigned g_caps;
	char run[65];
	/* The run this connection counts against (runs.c); "" for none. */
	char held[65];
	/* The peer it counts against until a grant admits a request on it
	 * (peers.c); "" once one has, or when it never counted. */
	char peer[EG_TALLY_KEY_MAX];
	/* the exchange in flight */
	bool is_connect, is_head, cli_close, up_close, expect100;
	/* The client shut its writing side (pump.c): its request is all
	 * there is, answered and then the connection closed. */
	bool cli_eof;
	bool req_done, resp_done, resp_head_done;
	unsigned interim; /* 1xx heads passed on in this exchange */
	enum body_mode req_mode, resp_mode;
	uint64_t req_left, resp_left;
	struct eg_chunk req_ck, resp_ck;
	/* what the upstream connection is pinned to */
	char up_host[EG_HOST_MAX + 1];
	struct eg_addr up_addr;
	uint16_t up_port;
	time_t last; /* tunnel activity */
	struct tunnel *tun; /* after a CONNECT's 200 */
	/* Frees tun: tunnel.c's, set with tun, so that conn.c, which
	 * tunnel.c calls, does not call into tunnel.c. */
	void (*tun_free)(struct tunnel *t);
};

/* ---- conn.c ---- */

extern const char eg_resp_502[];

/* A connection accepted on px (counted against px->max_conns, its timer
 * made, no client socket yet): NULL at the bound or out of memory. */
struct conn *conn_new(struct proxy *px);
void conn_free(struct conn *c);
void conn_close_up(struct conn *c);
void conn_close_after_flush(struct conn *c);
/* ST_HEAD, the header timer armed, and any head already in the client's
 * input handed to px->on_head. */
void conn_await_head(struct conn *c);
/* Arms the expiry timer for the grant that admitted the request now in
 * flight (c->g_exp): at that second whatever it admitted is closed. */
void conn_arm_expiry(struct conn *c);
/* Adds hd's header fields but the hop-by-hop ones to o, "name: value"
 * lines: what the request head (proxy.c) and the response head (pump.c)
 * forward. */
void conn_add_fields(struct evbuffer *o, const struct eg_head *hd);

/* ---- runs.c: connections counted by key, across worker threads ---- */

#define EG_TALLY_BUCKETS 256

struct eg_tally_key;
/* Connections held per key and in all, under one mutex: a tally is
 * made with its mutex initialized and the rest zero (nothing held). */
struct eg_tally {
	pthread_mutex_t mu;
	size_t total;
	struct eg_tally_key *b[EG_TALLY_BUCKETS];
};
enum eg_tally_res {
	EG_TALLY_OK, /* counted */
	EG_TALLY_KEY, /* the key already holds per_key */
	EG_TALLY_ALL, /* the tally already holds all */
	EG_TALLY_NOMEM,
};

/* Counts one more connection against key, unless key already holds
 * per_key or the whole tally all (nothing counted then). */
enum eg_tally_res eg_tally_hold(struct eg_tally *t, const char *key,
    size_t per_key, size_t all);
void eg_tally_release(struct eg_tally *t, const char *key);

/* A run's share is at least this many connections (all of them when the
 * bound is lower), else a quarter of the bound. */
#define EG_RUN_SHARE_MIN 16

/* The connections one run may hold under a process bound of max_conns. */
size_t eg_run_share(size_t max_conns);
/* Counts one more connection against run; false (nothing counted) when
 * it already holds share. */
bool eg_run_hold(const char *run, size_t share);
void eg_run_release(const char *run);

/* ---- peers.c: connections that have not yet shown a grant ---- */

/* A peer's share of the ungranted connections is at least this many (all
 * of them when the bound is lower), else an eighth of the bound; the Unix
 * socket's peers together hold at most half of it, the TCP peers together
 * at most a quarter (each pool at least one peer's share). */
#define EG_UNGRANTED_PEER_MIN 16
/* The refusals past either share are logged at most once in this many
 * seconds, with how many there were; so are peers refused at accept. */
#define EG_UNGRANTED_LOG_SECONDS 10
#define EG_PEER_LOG_SECONDS 10

size_t eg_ungranted_per_peer(size_t max_conns);
/* The pool of the Unix socket's peers (unix_peer) or of the TCP peers. */
size_t eg_ungranted_pool(size_t max_conns, bool unix_peer);
/*
 * The peer of an accepted connection, as a tally key: "uid:N" for a Unix
 * socket (SO_PEERCRED on fd), the source address for TCP, all of
 * 127.0.0.0/8 one peer and IPv6 by its /64 (an address a client can pick
 * in its own range is no separate peer).  A Unix peer whose credentials
 * cannot be read is "uid:unknown", one peer for all of them.
 */
void eg_peer_key(int fd, const struct sockaddr *sa, char *out, size_t len);
/* Counts an accepted connection against its peer, in its peer's pool
 * (a "uid:" key's is the Unix one), until it shows a grant
 * (eg_ungranted_release); anything but EG_TALLY_OK counts nothing. */
enum eg_tally_res eg_ungranted_hold(const char *peer, size_t max_conns);
void eg_ungranted_release(const char *peer);
/* Answers fd 503 (one line, best effort: nothing waits for it), counts
 * the refusal and logs it, rate-limited. */
void eg_ungranted_refuse(int fd, const char *peer, enum eg_tally_res why);
/*
 * Whether the peer of fd, just accepted on a listener whose address
 * family sa says, may be served: any TCP peer; a Unix peer only when
 * kz_peer_check admits it under pol.  A refused peer is counted
 * (peer_refused) and logged, rate-limited; the caller closes fd.
 */
bool eg_peer_admit(int fd, const struct sockaddr *sa,
    const struct kz_peer_policy *pol);

/* ---- proxy.c ---- */
/* Looks for a complete head in the client's input (state ST_HEAD) and
 * judges it: the worker's on_head (serve.c). */
void eg_process_input(struct conn *c);

/* ---- pump.c ---- */
struct sio *conn_client_new(struct conn *c, int fd);
void conn_connect_up(struct conn *c, const struct eg_addr *a);
void conn_start_exchange(struct conn *c);

/* reload.c: SIGHUP reads the configuration again (eg_proxy_run's load). */
struct eg_reload;
KZ_WUR int eg_reload_new(struct proxy *w, size_t n, struct eg_policy *p,
    eg_load_fn load, void *arg, struct eg_reload **out);
void eg_reload_free(struct eg_reload *r);
/* The worker's side: takes the next policy, if any, on its own thread. */
KZ_WUR int eg_reload_worker_init(struct proxy *px);
void eg_reload_worker_release(struct proxy *px);

/* ---- tunnel.c ---- */
/* Makes c's tunnel (c->tun and c->tun_free, freed with c). */
int tunnel_start(struct conn *c);

#endif
