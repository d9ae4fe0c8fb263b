/*
 * kz-pkgbroker's internal header: the package-install broker.  One module
 * per role: conf.c (settings), token.c (per-run tokens), route.c (the
 * closed set of paths served), rewrite.c (npm package documents cut down
 * to what npm reads, pointing back at the broker), pyindex.c and render.c
 * (PEP 503 pages read for their anchors, written afresh as HTML or PEP
 * 691 JSON), serve.c (the HTTP server, its checks and refusals), conn.c
 * (the run each connection on the socket is bound to), fetch.c
 * (upstream fetches, streaming under the ceiling), tls.c (the upstreams'
 * TLS: trust anchors, name checks, the reasons of a failed handshake).
 */
#ifndef PKGBROKER_H
#define PKGBROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_sock.h"

#define PB_TOKEN_MAX 512
#define PB_RUN_MAX 64
#define PB_NAME_MAX 214 /* npm's longest package name */
#define PB_PATH_MAX 1024
#define PB_URL_MAX 2048
#define PB_HOST_MAX 253
/* The most of an upstream's status line and headers read (a registry's
 * are a few hundred bytes): an answer with more is refused. */
#define PB_UPSTREAM_HEAD_MAX 65536
/* The fetches one run may have in flight at once (npm opens up to 15
 * connections to a registry, pnpm 16; room for two clients at once):
 * each may hold a document up to PKGBROKER_DOC_MAX and its parse, so
 * more are refused busy.  PB_RUN_FETCHES_TEXT is the same number. */
#define PB_RUN_FETCHES 32
#define PB_RUN_FETCHES_TEXT "32"
/* A broker forward's first request on each connection (serve.c); never
 * a registry path (route.c refuses it: no package name holds a "/"). */
#define PB_BIND_PATH "/-/kz/bind"
/* The Host a bind may carry besides PKGBROKER_HOSTS: the broker's own
 * name, which the forward sends (kz-sandbox's forward.c). */
#define PB_BIND_HOST "kz-pkgbroker"

/* ---- conf.c ---- */
struct pb_upstream {
	char url[PB_URL_MAX]; /* "" : this registry path is off */
	bool tls; /* https:// */
	char host[PB_HOST_MAX + 1];
	int port;
	char prefix[PB_PATH_MAX]; /* path below the origin, no trailing / */
};

struct pb_conf {
	char sock[108]; /* Unix socket served (the sandboxes' forward) */
	char listen_addr[64]; /* optional TCP address literal, "" none */
	int listen_port;
	struct pb_upstream npm, pypi;
	/* Where the index's files live when that is another origin
	 * (files.pythonhosted.org for pypi.org); url "" : none. */
	struct pb_upstream pyfiles;
	unsigned char pk[32];
	bool have_pk;
	char hosts[1024]; /* host names the clients may ask for */
	uint64_t file_max, doc_max;
	int64_t token_ttl_max, upstream_timeout_s;
	int64_t fetches_max; /* in flight across all runs */
	char audit_sock[108]; /* "" : audit off (debugging only) */
	char ca_file[4096]; /* PEM trust anchors, "" : the system's */
	struct kz_peer_policy peers;
};

/* Loads path (NULL: environment only) into c; KZ_ECONF with why. */
KZ_WUR int pb_conf_load(const char *path, struct pb_conf *c, char *why,
    size_t wlen);
/* Parses "http[s]://host[:port][/prefix]" into u (default port 80 or
 * 443); url is then "scheme://host:port/prefix" whichever was written. */
KZ_WUR int pb_upstream_parse(const char *url, struct pb_upstream *u, char *why,
    size_t wlen);
/* When the absolute URL abs starts with u's origin (scheme and host in
 * any case, the port written or, when it is the scheme's default, left
 * out) followed by "/" or its end, the length of that origin; else 0. */
size_t pb_upstream_origin(const struct pb_upstream *u, const char *abs);
/* Whether path (on u's origin) lies beneath u's prefix: the only part
 * of an origin the broker fetches from (an index on a repository manager
 * shares its origin with every other repository there). */
bool pb_upstream_under(const struct pb_upstream *u, const char *path);
/* The Ed25519 key pair of the PKGTOKEN subkey of a field key file. */
KZ_WUR int pb_token_keypair(const char *field_key_file, unsigned char pk[32],
    unsigned char sk[64], char *why, size_t wlen);

/* ---- token.c ---- */
#define PB_TOKEN_REASONS(X)                                                    \
	X(OK, "ok", "the token is current")                                    \
	X(MISSING, "token_missing",                                            \
	    "no token: present the run's broker token as the registry "        \
	    "credential")                                                      \
	X(MALFORMED, "token_malformed", "the token is malformed")              \
	X(FORGED, "token_forged", "the token's signature does not verify")     \
	X(NOT_YET, "token_not_yet_valid", "the token is not valid yet")        \
	X(EXPIRED, "token_expired", "the token has expired")                   \
	X(LIFETIME, "token_lifetime",                                          \
	    "the token's lifetime is over the limit")                          \
	X(WRONG_PEER, "token_wrong_peer",                                      \
	    "the token is another worker's: it is good only through the "      \
	    "broker forward of the run it was minted for")                     \
	X(UNBOUND, "token_unbound",                                            \
	    "the token names no worker: the socket takes only a run's own "    \
	    "token")                                                           \
	X(OTHER_RUN, "token_other_run",                                        \
	    "the token is another run's: it is good only through the broker "  \
	    "forward of the run it was minted for")

enum pb_tok {
#define X(n, code, text) PB_TOK_##n,
	PB_TOKEN_REASONS(X)
#undef X
};
const char *pb_tok_code(enum pb_tok t);
const char *pb_tok_text(enum pb_tok t);

/* A token's "uid": the host uid its worker's broker forward presents on
 * the socket (SO_PEERCRED); PB_UID_NONE when it names none. */
#define PB_UID_NONE (-1)
#define PB_UID_MAX 2147483646

struct pb_claims {
	char run[PB_RUN_MAX + 1]; /* the run's identifier hash */
	int64_t uid; /* the worker's host uid, or PB_UID_NONE */
	int64_t iat, nbf, exp;
};

/* Mints a token for run_hash valid [now, now + ttl) into out, bound to
 * the worker whose forward presents uid (PB_UID_NONE: to none, a token
 * for the TCP listener alone). */
KZ_WUR int pb_token_mint(const unsigned char sk[64], const char *run_hash,
    int64_t uid, int64_t now, int64_t ttl, char *out, size_t len);
enum pb_tok pb_token_verify(const unsigned char pk[32], const char *tok,
    size_t len, int64_t now, int64_t max_ttl, struct pb_claims *cl);
/* The token in an Authorization value: "Bearer T", or "Basic" with T as
 * the password.  PB_TOK_MISSING or PB_TOK_MALFORMED when there is none. */
enum pb_tok pb_token_from_auth(const char *v, char *out, size_t len);
/*
 * Whether a current token may be used by who presents it: on the Unix
 * socket (peer_uid the peer's SO_PEERCRED uid) only a token bound to that
 * uid; on the TCP listener (peer_uid < 0: no credentials) only a token
 * bound to none.  PB_TOK_OK, PB_TOK_WRONG_PEER or PB_TOK_UNBOUND.
 */
enum pb_tok pb_token_peer(const struct pb_claims *cl, int64_t peer_uid);
/*
 * Whether a current token may be used on a socket connection bound to
 * conn_run (the run of the token its first request, the bind, carried):
 * only a token of that run.  NULL or "" (no run) admits no token.
 * PB_TOK_OK or PB_TOK_OTHER_RUN.
 */
enum pb_tok pb_token_run(const struct pb_claims *cl, const char *conn_run);

/* ---- route.c ---- */
enum pb_kind {
	PB_NONE = 0,
	PB_NPM_DOC, /* /<name>, /@scope%2f<name> */
	PB_NPM_TARBALL, /* /<name>/-/<file>.tgz, /@scope/<name>/-/<file>.tgz */
	PB_PY_INDEX, /* /simple/ */
	PB_PY_PROJECT, /* /simple/<project>/ */
	PB_PY_FILE, /* /files/<path on the index's origin> */
};

struct pb_route {
	enum pb_kind kind;
	char name[PB_NAME_MAX + 1]; /* package or project (normalized) */
	char upath[PB_PATH_MAX]; /* path below the upstream's prefix */
	bool files_origin; /* a Python file of the files upstream */
};

/* Classifies a request path (no query, no fragment); PB_NONE with why
 * when it is outside the protocols served. */
KZ_WUR int pb_route(const char *path, struct pb_route *r, char *why,
    size_t wlen);
bool pb_npm_name_ok(const char *s, size_t n);
/* PEP 503 normalization: lower case, runs of -_. become one -. */
KZ_WUR int pb_py_normalize(const char *s, size_t n, char *out, size_t len);
/* The file part of a path ends in a distribution suffix. */
bool pb_py_file_ok(const char *path);
/* Host header: its host part is in the comma-separated list. */
bool pb_host_allowed(const char *hosts, const char *hdr);

/* ---- rewrite.c ---- */
/*
 * An npm package document cut down to what npm install reads, every
 * tarball URL pointed at base (the broker as the client sees it); a
 * version whose tarball is not on the upstream is left out.  Returns the
 * new document (the caller deletes it) or NULL with why.
 */
cJSON *pb_npm_rewrite(const cJSON *doc, const char *name,
    const struct pb_upstream *up, const char *base, char *why, size_t wlen);

struct pb_pyfile {
	char filename[256];
	char url[PB_PATH_MAX]; /* broker path: /files/... or /pyfiles/... */
	char sha256[65]; /* "" when the index gave none */
	char requires_python[128];
	bool yanked;
};

struct pb_pylist {
	struct pb_pyfile *v;
	size_t n, cap;
};
void pb_pylist_release(struct pb_pylist *l);

/*
 * The anchors of an upstream PEP 503 page at page_path (on up's origin),
 * for a project page: each href resolved; only files with a distribution
 * suffix on the same origin, or on the origin of files (NULL or url "":
 * none), are kept.  For the index (project NULL) the filenames are the
 * project names.
 */
KZ_WUR int pb_py_parse(const char *html, size_t n, const char *page_path,
    const struct pb_upstream *up, const struct pb_upstream *files, bool index,
    struct pb_pylist *out, char *why, size_t wlen);
/* A PEP 503 page or a PEP 691 JSON document (json) of l; caller frees. */
char *pb_py_render(const struct pb_pylist *l, const char *project, bool index,
    bool json);
/* Which form an Accept header asks for: 1 JSON, 0 HTML, -1 neither. */
int pb_py_accept(const char *accept);

/* ---- tls.c ---- */
/* Builds and drops a client context with ca_file's anchors ("" : the
 * system's): KZ_ECONF with why when they cannot be loaded. */
KZ_WUR int pb_tls_check(const char *ca_file, char *why, size_t wlen);

/* ---- serve.c ---- */
KZ_WUR int pb_serve(const struct pb_conf *c);

#endif
