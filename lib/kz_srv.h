/*
 * A framed request/response server on libevent, shared by every daemon.
 * Each connection is checked with SO_PEERCRED on accept, reads one frame at
 * a time with a size limit checked before allocation, and runs at most one
 * request at a time: the next frame is taken only after the reply is
 * queued (meanwhile at most one maximal frame is read ahead).
 * A bad frame is answered once with an error and the connection is closed.
 * Slow peers are timed out; a slow peer never stalls the others.
 */
#ifndef KZ_SRV_H
#define KZ_SRV_H

#include <stdbool.h>
#include <cJSON.h>
#include <event2/event.h>

#include "kz_conf.h"
#include "kz_err.h"
#include "kz_sock.h"

struct kz_srv;
struct kz_req;

/*
 * An op handler.  It must eventually call kz_req_reply() exactly once,
 * either before returning or later from the event loop (deferred replies).
 */
typedef void (*kz_op_fn)(struct kz_req *req, void *arg);

/*
 * Who may call an op, checked once by the server before the handler runs
 * (the flags column of the op table):
 *   KZ_OP_ADMIT     refused with admission_closed while the server's
 *                   admit hook says admission is closed;
 *   KZ_OP_OPERATOR  refused with operator_only unless the peer is an
 *                   operator: uid 0, the daemon's own uid, or a uid or
 *                   gid in kz_srv_conf.operators.
 */
#define KZ_OP_ADMIT 0x1u
#define KZ_OP_OPERATOR 0x2u

struct kz_op {
	const char *op;
	kz_op_fn fn;
	/* Fields allowed besides v, op and id; NULL-terminated; NULL = any. */
	const char *const *fields;
	unsigned flags; /* KZ_OP_* */
};

/* Whether admission is open; when not, fills why with the reason. */
typedef bool (*kz_admit_fn)(void *arg, char *why, size_t wlen);

struct kz_srv_conf {
	const char *sock_path;
	size_t frame_max; /* 0: KZ_FRAME_MAX_DEFAULT */
	/* Replies may be longer than requests (a picture): 0: frame_max. */
	size_t reply_max;
	int io_timeout_ms; /* a frame must arrive/leave within this */
	int idle_timeout_ms; /* an idle connection is closed after this */
	size_t max_conns; /* 0: 1024 */
	struct kz_peer_policy peers;
	struct kz_peer_policy operators; /* for KZ_OP_OPERATOR ops */
	const struct kz_op *ops; /* terminated by {NULL} */
	kz_admit_fn admit; /* for KZ_OP_ADMIT ops; NULL: always open */
	void *arg; /* passed to every handler and to admit */
};

KZ_WUR int kz_srv_new(struct event_base *base, const struct kz_srv_conf *c,
    struct kz_srv **out, char *why, size_t wlen);
/* Closes the listener and every connection; unlinks the socket. */
void kz_srv_free(struct kz_srv *s);

/*
 * The envelope rules, for a server that does not run on kz_srv: checks v,
 * id and op, the op's fields and its flags against peer.  Returns the op,
 * or NULL with *code (a KZ_WE_* code) and why set.  c needs only ops,
 * operators, admit and arg.
 */
const struct kz_op *kz_op_check(const struct kz_srv_conf *c, const cJSON *req,
    const struct kz_peer *peer, const char **code, char *why, size_t wlen);
/* True when peer is an operator under policy (see KZ_OP_OPERATOR). */
bool kz_peer_is_operator(const struct kz_peer_policy *policy,
    const struct kz_peer *peer);

/*
 * Who may connect and who is an operator, from a daemon's configuration:
 * peers from KZ_PEER_UIDS and KZ_PEER_GIDS, operators (may be NULL) from
 * KZ_OPERATOR_UIDS and KZ_OPERATOR_GIDS.  KZ_SRV_PEER_KEYS names the four
 * for a daemon's list of known keys.
 */
#define KZ_SRV_PEER_KEYS                                                       \
	"KZ_PEER_UIDS", "KZ_PEER_GIDS", "KZ_OPERATOR_UIDS", "KZ_OPERATOR_GIDS"
KZ_WUR int kz_srv_peers_load(const struct kz_conf *kc,
    struct kz_peer_policy *peers, struct kz_peer_policy *operators, char *why,
    size_t wlen);

/* The parsed request (owned by req) and the peer it came from. */
const cJSON *kz_req_json(const struct kz_req *req);
const struct kz_peer *kz_req_peer(const struct kz_req *req);
/* Sends reply (consumed) and frees req.  If the client went away meanwhile
 * the reply is dropped. */
void kz_req_reply(struct kz_req *req, cJSON *reply);
/* Shorthands: reply ok (with extra fields in obj, consumed, may be NULL), or
 * an error with a wire code and a one-line reason. */
void kz_req_ok(struct kz_req *req, cJSON *fields);
void kz_req_err(struct kz_req *req, const char *code, const char *reason);

/* Counters for status ops. */
struct kz_srv_stats {
	unsigned long conns, open_conns, requests, bad_frames, peer_refused;
	unsigned long evicted; /* idle connections closed at the limit */
	/* connections refused busy: their peer uid held its share, all but a
	 * quarter of max_conns, each in use */
	unsigned long share_refused;
};
void kz_srv_stats(const struct kz_srv *s, struct kz_srv_stats *out);

#endif
