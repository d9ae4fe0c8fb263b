/*
 * kz-pkgbroker's settings (kaizen.conf(5), kz-pkgbroker(8)).  A value
 * that cannot be read is an error: the broker does not start on a guess.
 * An upstream is https:// (fetched over TLS, verified: tls.c) or plain
 * http:// (the operator's own mirror or proxy on a private network or
 * loopback); nothing else, no credentials, no query.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pkgbroker.h"
#include "kz_conf.h"
#include "kz_key.h"
#include "kz_srv.h"
#include "banned.h"

static const char *const known[] = {
    "KZ_RUN_DIR",
    "KZ_AUDIT",
    "KZ_AUDIT_SOCKET",
    KZ_SRV_PEER_KEYS,
    "PKGBROKER_SOCKET",
    "PKGBROKER_LISTEN",
    "PKGBROKER_NPM_UPSTREAM",
    "PKGBROKER_PYPI_UPSTREAM",
    "PKGBROKER_PYPI_FILES_UPSTREAM",
    "PKGBROKER_PUBLIC_KEY_FILE",
    "PKGBROKER_HOSTS",
    "PKGBROKER_FILE_MAX",
    "PKGBROKER_DOC_MAX",
    "PKGBROKER_TOKEN_TTL_MAX",
    "PKGBROKER_UPSTREAM_TIMEOUT",
    "PKGBROKER_UPSTREAM_CA",
    "PKGBROKER_FETCHES_MAX",
    NULL,
};

static bool
host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.';
}

int
pb_upstream_parse(const char *url, struct pb_upstream *u, char *why,
    size_t wlen)
{
	const char *h, *e, *p;
	int64_t port;
	char num[8];

	memset(u, 0, sizeof(*u));
	if (url == NULL || *url == '\0')
		return 0;
	if (strlen(url) >= sizeof(u->url))
		goto bad;
	if (strncmp(url, "https://", 8) == 0)
		u->tls = true, h = url + 8, port = 443;
	else if (strncmp(url, "http://", 7) == 0)
		h = url + 7, port = 80;
	else
		goto bad;
	for (e = h; host_char(*e); e++)
		;
	if (e == h || (size_t)(e - h) > PB_HOST_MAX)
		goto bad;
	p = e;
	if (*p == ':') {
		size_t n = strspn(p + 1, "0123456789");

		if (n == 0 || n > 5)
			goto bad;
		snprintf(num, sizeof(num), "%.*s", (int)n, p + 1);
		if (kz_parse_int(num, 1, 65535, &port) != 0)
			goto bad;
		p += n + 1;
	}
	if (*p != '\0' && *p != '/')
		goto bad;
	snprintf(u->host, sizeof(u->host), "%.*s", (int)(e - h), h);
	u->port = (int)port;
	snprintf(u->prefix, sizeof(u->prefix), "%s", p);
	while (u->prefix[0] != '\0' && u->prefix[strlen(u->prefix) - 1] == '/')
		u->prefix[strlen(u->prefix) - 1] = '\0';
	if (strspn(u->prefix,
	        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
	        "WXYZ0123456789-._~/") != strlen(u->prefix) ||
	    strstr(u->prefix, "/.") != NULL)
		goto bad;
	snprintf(u->url, sizeof(u->url), "%s://%s:%d%s",
	    u->tls ? "https" : "http", u->host, u->port, u->prefix);
	return 0;
bad:
	kz_why(why, wlen,
	    "an upstream must be https://HOST[:PORT][/PATH] or "
	    "http://HOST[:PORT][/PATH] (no credentials, no query)");
	return KZ_ECONF;
}

size_t
pb_upstream_origin(const struct pb_upstream *u, const char *abs)
{
	const char *scheme = u->tls ? "https://" : "http://";
	size_t sn = strlen(scheme), hn = strlen(u->host), dn;
	const char *p = abs + sn + hn;
	char port[8];

	if (u->url[0] == '\0' || strncasecmp(abs, scheme, sn) != 0 ||
	    strncasecmp(abs + sn, u->host, hn) != 0)
		return 0;
	if (*p != ':')
		/* No port: the scheme's own, which must be the upstream's. */
		return (*p == '/' || *p == '\0') &&
		        u->port == (u->tls ? 443 : 80) ?
		    (size_t)(p - abs) :
		    0;
	snprintf(port, sizeof(port), "%d", u->port);
	dn = strspn(p + 1, "0123456789");
	if (dn != strlen(port) || strncmp(p + 1, port, dn) != 0 ||
	    (p[1 + dn] != '/' && p[1 + dn] != '\0'))
		return 0;
	return (size_t)(p + 1 + dn - abs);
}

bool
pb_upstream_under(const struct pb_upstream *u, const char *path)
{
	size_t k = strlen(u->prefix);

	return k == 0 || (strncmp(path, u->prefix, k) == 0 && path[k] == '/');
}

static int
load_pk(struct pb_conf *c, const char *path, char *why, size_t wlen)
{
	char buf[130];
	size_t n;
	FILE *f;

	if (path == NULL || *path == '\0')
		return 0;
	if ((f = fopen(path, "re")) == NULL) {
		kz_why(why, wlen, "PKGBROKER_PUBLIC_KEY_FILE cannot be read");
		return KZ_ECONF;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (n != 64 || kz_unhex(buf, c->pk, sizeof(c->pk)) != 0) {
		kz_why(why, wlen,
		    "PKGBROKER_PUBLIC_KEY_FILE is not 64 hex characters");
		return KZ_ECONF;
	}
	c->have_pk = true;
	return 0;
}

/* The files' origin: an origin only (a file's path is the index's href
 * as it is), and only beside an index. */
static int
files_upstream(struct pb_conf *c, const char *v, char *why, size_t wlen)
{
	int r;

	if ((r = pb_upstream_parse(v, &c->pyfiles, why, wlen)) != 0)
		return r;
	if (c->pyfiles.url[0] == '\0')
		return 0;
	if (c->pyfiles.prefix[0] != '\0' || c->pypi.url[0] == '\0') {
		kz_why(why, wlen,
		    "PKGBROKER_PYPI_FILES_UPSTREAM must be an origin, "
		    "http[s]://HOST[:PORT], beside PKGBROKER_PYPI_UPSTREAM");
		return KZ_ECONF;
	}
	return 0;
}

/* "ADDR:PORT" with ADDR an IPv4 literal: the TCP listener. */
static int
parse_listen(struct pb_conf *c, const char *v, char *why, size_t wlen)
{
	const char *colon;
	struct in_addr a;
	int64_t port;

	if (v == NULL || *v == '\0')
		return 0;
	colon = strrchr(v, ':');
	if (colon == NULL || (size_t)(colon - v) >= sizeof(c->listen_addr) ||
	    kz_parse_int(colon + 1, 0, 65535, &port) != 0)
		goto bad;
	snprintf(c->listen_addr, sizeof(c->listen_addr), "%.*s",
	    (int)(colon - v), v);
	if (inet_pton(AF_INET, c->listen_addr, &a) != 1)
		goto bad;
	c->listen_port = (int)port;
	return 0;
bad:
	kz_why(why, wlen, "PKGBROKER_LISTEN must be IPV4:PORT");
	return KZ_ECONF;
}

static int
load_values(struct pb_conf *c, const struct kz_conf *kc, char *why, size_t wlen)
{
	char run[4096];
	int r;

	if ((r = kz_run_dir(kc, run, sizeof(run), why, wlen)) != 0 ||
	    (r = kz_conf_sock(kc, "PKGBROKER_SOCKET", run, "kz-pkgbroker",
	         c->sock, sizeof(c->sock), why, wlen)) != 0 ||
	    (r = kz_conf_audit(kc, run, c->audit_sock, sizeof(c->audit_sock),
	         why, wlen)) != 0 ||
	    (r = kz_srv_peers_load(kc, &c->peers, NULL, why, wlen)) != 0 ||
	    (r = parse_listen(c, kz_conf_str(kc, "PKGBROKER_LISTEN", ""), why,
	         wlen)) != 0 ||
	    (r = pb_upstream_parse(kz_conf_str(kc, "PKGBROKER_NPM_UPSTREAM",
	                               ""),
	         &c->npm, why, wlen)) != 0 ||
	    (r = pb_upstream_parse(kz_conf_str(kc, "PKGBROKER_PYPI_UPSTREAM",
	                               ""),
	         &c->pypi, why, wlen)) != 0 ||
	    (r = files_upstream(c,
	         kz_conf_str(kc, "PKGBROKER_PYPI_FILES_UPSTREAM", ""), why,
	         wlen)) != 0 ||
	    (r = load_pk(c, kz_conf_str(kc, "PKGBROKER_PUBLIC_KEY_FILE", NULL),
	         why, wlen)) != 0 ||
	    (r = kz_conf_copy(kc, "PKGBROKER_HOSTS", NULL,
	         "127.0.0.1,localhost", c->hosts, sizeof(c->hosts), why,
	         wlen)) != 0 ||
	    (r = kz_conf_size(kc, "PKGBROKER_FILE_MAX", 64 << 20,
	         UINT64_C(1) << 34, &c->file_max, why, wlen)) != 0 ||
	    (r = kz_conf_size(kc, "PKGBROKER_DOC_MAX", 16 << 20, 256 << 20,
	         &c->doc_max, why, wlen)) != 0 ||
	    (r = kz_conf_int(kc, "PKGBROKER_TOKEN_TTL_MAX", 900, 10, 14400,
	         &c->token_ttl_max, why, wlen)) != 0 ||
	    (r = kz_conf_int(kc, "PKGBROKER_UPSTREAM_TIMEOUT", 30, 1, 600,
	         &c->upstream_timeout_s, why, wlen)) != 0 ||
	    (r = kz_conf_int(kc, "PKGBROKER_FETCHES_MAX", 128, 1, 65536,
	         &c->fetches_max, why, wlen)) != 0 ||
	    (r = kz_conf_copy(kc, "PKGBROKER_UPSTREAM_CA", NULL, "", c->ca_file,
	         sizeof(c->ca_file), why, wlen)) != 0)
		return r;
	/* The trust anchors are loaded once here, so a file that cannot
	 * be used stops the broker at start (and check), not each fetch. */
	return pb_tls_check(c->ca_file, why, wlen);
}

int
pb_conf_load(const char *path, struct pb_conf *c, char *why, size_t wlen)
{
	struct kz_conf *kc = NULL;
	int r;

	memset(c, 0, sizeof(*c));
	if ((r = kz_conf_load(path, known, &kc, why, wlen)) != 0)
		return r;
	r = load_values(c, kc, why, wlen);
	kz_conf_free(kc);
	if (r == 0 && c->file_max == 0) {
		kz_why(why, wlen, "PKGBROKER_FILE_MAX must be over 0");
		r = KZ_ECONF;
	}
	return r == 0 ? 0 : KZ_ECONF;
}
