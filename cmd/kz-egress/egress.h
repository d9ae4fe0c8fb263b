/*
 * kz-egress internals: the strict address parser and classifier (addr.c),
 * the administrator's policy (policy.c, policy_check.c), signed grants
 * (grant.c), asynchronous pinned resolution (dns.c), HTTP/1.1 framing
 * (http.c) and the proxy itself (proxy.c: request heads and their
 * judgement; serve.c: listeners, workers and the run loop).
 */
#ifndef EGRESS_H
#define EGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <cJSON.h>
#include <event2/event.h>

#include "kz_conf.h"
#include "kz_err.h"
#include "kz_exit.h"
#include "kz_sock.h"

#define EG_HOST_MAX 253
#define EG_LIST_MAX 64
/* The proxy's own addresses: its listen addresses and every address of
 * the host's interfaces (policy.c). */
#define EG_OWN_MAX 256
#define EG_REASON_MAX 48

/* ---- reason.c: why a request is refused ---- */

/*
 * Every reason a request is refused or answered as malformed, as one
 * table: the name, the string that reaches logs, audit records and the
 * status counters (never changed: monitors match on it), and the HTTP
 * status the client is answered with.  The address classes' reasons are
 * also their names (eg_class_name).
 */
#define EG_REASONS(X)                                                          \
	X(PRIVATE_USE, "private_use", 403)                                     \
	X(SHARED_ADDRESS, "shared_address", 403)                               \
	X(UNIQUE_LOCAL, "unique_local", 403)                                   \
	X(LOOPBACK, "loopback", 403)                                           \
	X(UNSPECIFIED, "unspecified", 403)                                     \
	X(LINK_LOCAL, "link_local", 403)                                       \
	X(METADATA, "metadata", 403)                                           \
	X(MULTICAST, "multicast", 403)                                         \
	X(BROADCAST, "broadcast", 403)                                         \
	X(DOCUMENTATION, "documentation", 403)                                 \
	X(BENCHMARKING, "benchmarking", 403)                                   \
	X(PROTOCOL_ASSIGNMENT, "protocol_assignment", 403)                     \
	X(RESERVED, "reserved", 403)                                           \
	X(DISCARD_ONLY, "discard_only", 403)                                   \
	X(SITE_LOCAL, "site_local", 403)                                       \
	X(LOCAL_NAT64, "local_nat64", 403)                                     \
	X(ISOLATED, "isolated", 403)                                           \
	X(PORT_NOT_ALLOWED, "port_not_allowed", 403)                           \
	X(HOST_NOT_ALLOWLISTED, "host_not_allowlisted", 403)                   \
	X(CONTROL_PLANE, "control_plane", 403)                                 \
	X(OWN_ADDRESS, "own_address", 403)                                     \
	X(BAD_HOST, "bad_host", 403)                                           \
	X(TOO_MANY_ANSWERS, "too_many_answers", 403)                           \
	X(RESOLVE_FAILED, "resolve_failed", 403)                               \
	X(UNRESOLVABLE, "unresolvable", 403)                                   \
	X(GRANT_MALFORMED, "grant_malformed", 403)                             \
	X(GRANT_SIGNATURE, "grant_signature", 403)                             \
	X(GRANT_NOT_YET_VALID, "grant_not_yet_valid", 403)                     \
	X(GRANT_EXPIRED, "grant_expired", 403)                                 \
	X(GRANT_LIFETIME, "grant_lifetime", 403)                               \
	X(RUN_CONNECTIONS, "run_connections", 403)                             \
	X(UNGRANTED_CONNECTIONS, "ungranted_connections", 503)                 \
	X(PEER_REFUSED, "peer_refused", 0)                                     \
	X(BAD_REQUEST_LINE, "bad_request_line", 400)                           \
	X(BAD_VERSION, "bad_version", 400)                                     \
	X(BAD_STATUS_LINE, "bad_status_line", 502)                             \
	X(BAD_HEADER, "bad_header", 400)                                       \
	X(AMBIGUOUS_LENGTH, "ambiguous_length", 400)                           \
	X(BAD_TRANSFER_ENCODING, "bad_transfer_encoding", 400)                 \
	X(BAD_EXPECT, "bad_expect", 400)                                       \
	X(BAD_CONNECTION, "bad_connection", 400)                               \
	X(BAD_HEAD, "bad_head", 400)                                           \
	X(TOO_MANY_HEADERS, "too_many_headers", 400)                           \
	X(BAD_TARGET, "bad_target", 400)                                       \
	X(NOT_HTTP, "not_http", 400)                                           \
	X(INTERNAL, "internal", 400)                                           \
	X(BAD_CHUNK, "bad_chunk", 502)

/* EG_R_NONE (0): allowed, nothing wrong; a zeroed verdict is allowed. */
enum eg_reason {
	EG_R_NONE,
#define EG_R_ENUM(name, str, status) EG_R_##name,
	EG_REASONS(EG_R_ENUM)
#undef EG_R_ENUM
	    EG_R_COUNT_
};

/* The reason's string; NULL for EG_R_NONE. */
const char *eg_reason_str(enum eg_reason r);
/* The HTTP status a client is answered with for r (400, 403, 502, or
 * 503 for a connection refused at accept, peers.c); 0 for none: a Unix
 * peer that is not allowed is closed unanswered (peers.c). */
int eg_reason_status(enum eg_reason r);

/* ---- addr.c ---- */

struct eg_addr {
	uint8_t fam; /* 4 or 6 */
	uint8_t b[16]; /* IPv4 in b[0..3] */
};

struct eg_cidr {
	struct eg_addr a;
	int plen;
};

/* Special-purpose classes (IANA registries plus cloud metadata). */
enum eg_class {
	EG_C_PUBLIC,
	EG_C_PRIVATE_USE, /* RFC 1918 */
	EG_C_SHARED, /* 100.64.0.0/10 */
	EG_C_UNIQUE_LOCAL, /* fc00::/7 */
	EG_C_LOOPBACK,
	EG_C_UNSPECIFIED, /* 0.0.0.0/8, :: */
	EG_C_LINK_LOCAL,
	EG_C_METADATA,
	EG_C_MULTICAST,
	EG_C_BROADCAST,
	EG_C_DOCUMENTATION,
	EG_C_BENCHMARKING,
	EG_C_PROTOCOL, /* IETF protocol assignments */
	EG_C_RESERVED, /* reserved, deprecated, unallocated */
	EG_C_DISCARD,
	EG_C_SITE_LOCAL,
	EG_C_LOCAL_NAT64,
	EG_C_COUNT_
};

const char *eg_class_name(enum eg_class c);
/* The refusal for an address of class c (EG_R_NONE for public). */
enum eg_reason eg_class_reason(enum eg_class c);
/* Every class denied in every mode, for status. */
bool eg_class_protected(enum eg_class c);

/*
 * Recognizes an IP literal in every spelling a resolver or URL parser
 * would accept (dotted, one to four parts in decimal, octal or hex, IPv6
 * with or without brackets, zone ids).  Returns 1 and fills out for a
 * literal, 0 for something that is not a literal (a name), or KZ_EINVAL
 * for a host that looks numeric but is malformed (refused, never
 * resolved).
 */
int eg_addr_parse_literal(const char *host, struct eg_addr *out);
/* Checks and lower-cases a host name into out (trailing dot folded). */
KZ_WUR int eg_name_normalize(const char *host, char *out, size_t len);
/*
 * Classifies a; for IPv6 forms that embed an IPv4 address (mapped,
 * compatible, NAT64, 6to4, Teredo) the class is that of the embedded
 * address, which is stored in eff (else eff = *a).
 */
enum eg_class eg_addr_classify(const struct eg_addr *a, struct eg_addr *eff);
bool eg_cidr_match(const struct eg_cidr *c, const struct eg_addr *a);
KZ_WUR int eg_cidr_parse(const char *s, struct eg_cidr *out);
void eg_addr_str(const struct eg_addr *a, char *out, size_t len);
bool eg_addr_eq(const struct eg_addr *a, const struct eg_addr *b);
/* sockaddr for a pinned connect; IPv4-mapped becomes plain IPv4. */
socklen_t eg_addr_sockaddr(const struct eg_addr *a, uint16_t port,
    struct sockaddr_storage *ss);

/* ---- policy.c (loading), policy_check.c (decisions, status) ---- */

enum eg_mode {
	EG_MODE_ISOLATED,
	EG_MODE_PUBLIC,
	EG_MODE_PRIVATE,
	EG_MODE_ALLOWLIST,
};

struct eg_listen {
	bool is_unix;
	char path[108];
	struct eg_addr a;
	uint16_t port;
};

/*
 * One loaded configuration, immutable once loaded and shared by reference:
 * the proxy's workers hold the one in force, each connection holds the one
 * its request was admitted under (SIGHUP swaps in a new one; proxy.c).
 */
struct eg_policy {
	atomic_uint refs;
	uint64_t gen; /* 0 at start, one more per reload */
	enum eg_mode mode; /* in force */
	enum eg_mode configured;
	char isolated_why[160]; /* why the mode in force is isolated */
	char *allow[EG_LIST_MAX];
	size_t nallow;
	struct eg_cidr priv[EG_LIST_MAX];
	size_t npriv;
	struct eg_cidr cp[EG_LIST_MAX];
	size_t ncp;
	uint16_t ports[EG_LIST_MAX];
	size_t nports;
	struct eg_listen listen[8];
	size_t nlisten;
	struct eg_addr own[EG_OWN_MAX]; /* the proxy's own addresses */
	size_t nown;
	char turn_host[EG_HOST_MAX + 1];
	uint16_t turn_port;
	int64_t ttl;
	bool ttl_clamped;
	unsigned char pk[32];
	bool have_pk;
	char resolver[80];
	char audit_sock[108];
	char status_sock[108]; /* "" when none */
	/* Who may connect to the proxy's Unix sockets and ask the status
	 * socket (KZ_PEER_UIDS/GIDS), fixed at start (reload.c); when they
	 * cannot be parsed, peers_err and peers_why say so and serve, not
	 * the policy, refuses to start (serve.c, stats.c). */
	struct kz_peer_policy peers;
	int peers_err;
	char peers_why[200];
	int64_t max_conns;
	int64_t threads;
	int64_t header_timeout, connect_timeout, idle_timeout;
};

#define EG_TTL_DEFAULT 600
#define EG_TTL_MAX 14400
#define EG_THREADS_MAX 16

/* Keys kz-egress accepts in its config file. */
extern const char *const eg_conf_keys[];

/*
 * Builds the policy from a loaded config (c may be NULL when the file could
 * not be read: conf_why then says why, and the mode is isolated).  Never
 * fails open: any unusable value leaves the mode isolated with a reason.
 * sock_path is --socket (or NULL).
 */
KZ_WUR int eg_policy_load(const struct kz_conf *c, const char *conf_why,
    const char *sock_path, struct eg_policy **out);
/* One more reference to p (returns p); eg_policy_free drops one and frees
 * p with the last. */
struct eg_policy *eg_policy_ref(struct eg_policy *p);
void eg_policy_free(struct eg_policy *p);

/* What a destination request asks for. */
struct eg_dest {
	char host[EG_HOST_MAX + 1]; /* normalized name or literal text */
	bool literal;
	struct eg_addr lit;
	uint16_t port;
	bool connect; /* a CONNECT tunnel */
	unsigned caps; /* grant capabilities */
};

#define EG_CAP_TURN 0x1u

/*
 * Parses host (as written in a request) and port into d.  Returns
 * EG_R_NONE, or EG_R_BAD_HOST when the host is no valid name or literal.
 */
enum eg_reason eg_dest_init(struct eg_dest *d, const char *host, uint16_t port,
    bool connect, unsigned caps);
/* The checks before resolution: EG_R_NONE when allowed, else the reason. */
enum eg_reason eg_policy_check_dest(const struct eg_policy *p,
    const struct eg_dest *d);
/*
 * Whether the kernel would deliver a connection to a on this host: the
 * route it takes now is of type local (an address of one of the host's
 * interfaces, the ones it gained since the start included).  1 when local,
 * 0 when not, KZ_ESYS when the kernel cannot be asked (netlink).
 */
int eg_addr_is_local(const struct eg_addr *a);
/* Whether a is one of the proxy's own addresses (p->own). */
bool eg_policy_is_own(const struct eg_policy *p, const struct eg_addr *a);
/* The check of one (resolved or literal) address: EG_R_NONE or the
 * reason. */
enum eg_reason eg_policy_check_addr(const struct eg_policy *p,
    const struct eg_dest *d, const struct eg_addr *a);
const char *eg_mode_name(enum eg_mode m);
/*
 * status: o (eg_policy_status_json's, or a running daemon's reply) as text
 * under the line source, or as JSON, on stdout.  Returns the exit status:
 * KZ_EXIT_REFUSED when the mode in force is isolated, else KZ_EXIT_OK.
 */
enum kz_exit eg_policy_status(const cJSON *o, const char *source, bool json);
/* The policy in force as status reports it (caller deletes). */
cJSON *eg_policy_status_json(const struct eg_policy *p);

/* ---- grant.c ---- */

#define EG_GRANT_MAX 1024

struct eg_claims {
	char run[65];
	int64_t iat, nbf, exp;
	unsigned caps;
};

/* Derives the grant key pair from a field key file. */
KZ_WUR int eg_grant_keypair(const char *field_key_file, unsigned char pk[32],
    unsigned char sk[64], char *why, size_t wlen);
/* Mints a grant into out (NUL-terminated). */
KZ_WUR int eg_grant_mint(const unsigned char sk[64], const char *run_hash,
    int64_t now, int64_t ttl, unsigned caps, char *out, size_t len);
/*
 * Verifies a grant; on failure returns the refusal reason
 * (EG_R_GRANT_MALFORMED, _SIGNATURE, _NOT_YET_VALID, _EXPIRED, _LIFETIME),
 * else EG_R_NONE with the claims in cl.
 */
enum eg_reason eg_grant_verify(const unsigned char pk[32], const char *grant,
    size_t len, int64_t now, int64_t max_ttl, struct eg_claims *cl);
/* HMAC-SHA1 (nettle's), for the TURN REST credential. */
#define EG_SHA1_BYTES 20
void eg_hmac_sha1(const unsigned char *key, size_t klen,
    const unsigned char *msg, size_t mlen, unsigned char out[EG_SHA1_BYTES]);
/* TURN REST credential (coturn's scheme). */
KZ_WUR int eg_turn_credential(const unsigned char *secret, size_t slen,
    const char *user, int64_t expiry, char *uname, size_t ulen, char *pass,
    size_t plen);

/* ---- dns.c ---- */

struct event_base;
struct eg_dns;

/*
 * Bounds on one resolution: at most EG_ANS_MAX addresses (A and AAAA
 * together; one more refuses the name), an answer of at most
 * EG_DNS_ANSWER_MAX bytes (over UDP or TCP), EDNS0 advertising
 * EG_DNS_EDNS_SIZE, each try waiting EG_DNS_TRY_MS, and the whole lookup,
 * TCP retries included, over within EG_DNS_DEADLINE_MS.
 */
#define EG_ANS_MAX 64
#define EG_DNS_ANSWER_MAX 16384
#define EG_DNS_EDNS_SIZE 1232
#define EG_DNS_TRY_MS 2000
#define EG_DNS_TRIES 2
#define EG_DNS_DEADLINE_MS 4000

/* Result of a resolution: the pinned address, or the refusal reason. */
struct eg_verdict {
	enum eg_reason reason; /* EG_R_NONE: allowed */
	struct eg_addr pinned;
	struct eg_addr answers[EG_ANS_MAX];
	size_t nanswers;
};

typedef void (*eg_verdict_fn)(const struct eg_verdict *v, void *arg);

KZ_WUR int eg_dns_new(struct event_base *base, const char *resolver,
    struct eg_dns **out, char *why, size_t wlen);
void eg_dns_free(struct eg_dns *d);
struct eg_lookup;
/*
 * Applies the policy to d: literals are judged at once; names are resolved
 * (A and AAAA) and every answer judged.  fn is called exactly once (maybe
 * before this returns) unless eg_lookup_cancel is called first.  p is
 * borrowed until then: once fn has run or the lookup is cancelled, the
 * lookup touches neither p nor arg again, so either may be freed.
 */
struct eg_lookup *eg_dns_check(struct eg_dns *dns, const struct eg_policy *p,
    const struct eg_dest *d, eg_verdict_fn fn, void *arg);
void eg_lookup_cancel(struct eg_lookup *l);
/*
 * Judges one raw DNS answer to an A (fam 4) or AAAA (fam 6) question into
 * v: every address is added and checked (beyond EG_ANS_MAX the name is
 * refused as too_many_answers).  Returns false when the answer cannot be
 * used (malformed, or over EG_DNS_ANSWER_MAX bytes); an answer with no
 * address of that family adds nothing and is usable.
 */
bool eg_dns_judge(struct eg_verdict *v, const struct eg_policy *p,
    const struct eg_dest *d, int fam, const unsigned char *abuf, size_t alen);
/* Settles v once every family is in: a reason for failed or empty, else
 * the pinned address (the first IPv4 answer, else the first). */
void eg_dns_settle(struct eg_verdict *v, bool failed);

/* ---- http.c ---- */

#define EG_HDR_MAX_BYTES 16384
#define EG_HDR_MAX_COUNT 100

struct eg_hdr {
	const char *name, *value;
	size_t nlen, vlen;
};

struct eg_head {
	/* request: method, target; response: status */
	const char *method;
	size_t mlen;
	const char *target;
	size_t tlen;
	int minor; /* HTTP/1.minor */
	int status;
	struct eg_hdr h[EG_HDR_MAX_COUNT];
	size_t nh;
	/* framing, from the headers */
	bool chunked;
	bool has_length;
	uint64_t length;
	bool close; /* Connection: close, or 1.0 without keep-alive */
	bool has_connection; /* a Connection header names hop-by-hop ones */
	bool expect_continue;
	const struct eg_hdr *proxy_auth;
};

/* Whether a request head can begin with ch (a method's tchar, or the
 * empty line RFC 9112 lets a client send first).  Anything else, a kz
 * frame's NUL say, is answered 400 before the head is complete. */
bool eg_http_can_start(unsigned char ch);
/* Whether the first len bytes of a response head not yet complete can
 * still begin a valid one: "HTTP/", then lines ended by CRLF only, no
 * control byte.  A bare LF, a lone CR or a NUL is answered 502 at once,
 * not after the idle timeout. */
bool eg_http_resp_prefix_ok(const char *buf, size_t len);
/*
 * Parses a request (is_req) or response head of len bytes (ending in the
 * blank line).  Returns EG_R_NONE or the reason it is refused; smuggling
 * ambiguities (Content-Length with Transfer-Encoding, duplicate
 * Content-Length, a coding other than chunked, folded or malformed lines, a
 * Connection header naming Content-Length, Transfer-Encoding, Host,
 * Proxy-Authorization or Expect) are refusals.
 */
enum eg_reason eg_http_parse(char *buf, size_t len, bool is_req,
    struct eg_head *out);
bool eg_hdr_is(const struct eg_hdr *h, const char *name);
/* Whether this header must not be forwarded (hop-by-hop, proxy auth). */
bool eg_hdr_hop(const struct eg_head *hd, const struct eg_hdr *h);
/*
 * Splits an authority "host:port" or "[v6]:port" (CONNECT) or an absolute
 * URI "http://host[:port]/path" into host, port and the origin-form path.
 */
KZ_WUR int eg_http_authority(const char *s, size_t len, uint16_t dflt,
    char *host, size_t hlen, uint16_t *port);
KZ_WUR int eg_http_absolute(const char *s, size_t len, char *host, size_t hlen,
    uint16_t *port, const char **path, size_t *plen);
/* The grant in a Proxy-Authorization value (Bearer, or Basic password). */
KZ_WUR int eg_http_grant(const char *v, size_t vlen, char *out, size_t len);

/* Incremental chunked-body scanner: it validates, the bytes pass through. */
struct eg_chunk {
	int st;
	uint64_t left;
	unsigned ndig;
	size_t linelen;
};
/*
 * Consumes up to n bytes; returns the number of bytes that belong to the
 * body (<= n) once the body ends (done set), n while it continues, or -1 on
 * a malformed or oversized chunk size.
 */
long eg_chunk_feed(struct eg_chunk *c, const char *p, size_t n, bool *done);

/* ---- serve.c ---- */

/* Loads the configuration again, as main did (for SIGHUP); never fails
 * open: a file that cannot be used gives an isolated policy. */
typedef int (*eg_load_fn)(void *arg, struct eg_policy **out);
KZ_WUR int eg_proxy_run(struct eg_policy *p, eg_load_fn load, void *arg);

/* Refusal record: log line and audit event (queued, never blocking). */
void eg_audit_start(const char *sock);
/* Queues one audit event of kind (takes ev; a no-op with audit off). */
void eg_audit_event(const char *kind, cJSON *ev);

/* ---- stats.c: process-lifetime counters and the status socket ---- */

/* A request that passed every check and goes upstream. */
void eg_count_allowed(void);
/* A malformed request (answered 400). */
void eg_count_bad_request(void);
/* A refusal, by its reason (eg_refusal_record calls it). */
void eg_count_refused(enum eg_reason reason);
struct kz_srv;
/* Serves op status on p->status_sock from base (nconns: the open client
 * connections); *out stays NULL when no status socket is configured. */
KZ_WUR int eg_status_start(struct event_base *base, struct eg_policy *p,
    atomic_size_t *nconns, struct kz_srv **out);
void eg_refusal_record(enum eg_reason reason, const char *host, uint16_t port,
    const char *run);
/* A tunnel or exchange closed because the grant that admitted it expired
 * (closed: "tunnel" or "exchange"): logged as egress.expire and audited as
 * an egress_refusal, grant_expired, with the outcome "closed". */
void eg_expiry_record(const char *host, uint16_t port, const char *run,
    const char *closed);
/* The policy status reports from now on (called on the status socket's
 * loop; takes a reference, drops the previous one). */
void eg_status_set_policy(struct eg_policy *p);
/* A reload happened (status counts them). */
void eg_count_reload(void);
/* Asks the daemon on sock for its status; *out is the reply (caller
 * deletes).  KZ_EUNAVAIL when nothing answers there. */
KZ_WUR int eg_status_query(const char *sock, cJSON **out, char *why,
    size_t wlen);

#endif
