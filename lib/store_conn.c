/*
 * Where the store is and how to prove who we are to it: the address
 * syntax of every client (kz-store(7), ADDRESSES), the ACL credentials
 * from a private file, the store keys of a config, and the blocking
 * connect (Unix socket, TCP, or the primary a Sentinel names) that every
 * one-shot client uses.  The asynchronous client (lib/astore.c) shares
 * the address, the credentials and the handshake's rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_store.h"
#include "store_int.h"
#include "banned.h"

/* ---- addresses ---- */

static int
parse_port(const char *s, size_t n, int *port)
{
	char b[8];
	long v;
	char *end;

	if (n == 0 || n >= sizeof(b) || strspn(s, "0123456789") < n)
		return -1;
	memcpy(b, s, n);
	b[n] = '\0';
	v = strtol(b, &end, 10);
	if (*end != '\0' || v < 1 || v > 65535)
		return -1;
	*port = (int)v;
	return 0;
}

/* "HOST:PORT" or "[V6]:PORT", n bytes of s; HOST a literal address. */
static int
parse_hostport(const char *s, size_t n, struct kz_store_hostport *hp)
{
	const char *colon, *h = s;
	size_t hn;

	if (n > 0 && s[0] == '[') {
		colon = memchr(s, ']', n);
		if (colon == NULL || (size_t)(colon - s) + 1 >= n ||
		    colon[1] != ':')
			return -1;
		h = s + 1;
		hn = (size_t)(colon - h);
		colon++;
	} else {
		colon = memchr(s, ':', n);
		if (colon == NULL)
			return -1;
		hn = (size_t)(colon - s);
	}
	if (hn == 0 || hn >= KZ_STORE_HOST_MAX ||
	    strspn(h, "0123456789abcdefABCDEF.:") < hn)
		return -1;
	memcpy(hp->host, h, hn);
	hp->host[hn] = '\0';
	return parse_port(colon + 1, n - (size_t)(colon + 1 - s), &hp->port);
}

static int
parse_sentinels(const char *s, struct kz_store_addr *a)
{
	const char *slash = strrchr(s, '/'), *p = s, *comma;
	size_t nn;

	if (slash == NULL || (nn = strlen(slash + 1)) == 0 ||
	    nn >= sizeof(a->name) ||
	    strspn(slash + 1,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != nn)
		return -1;
	memcpy(a->name, slash + 1, nn + 1);
	for (a->n = 0; p < slash; a->n++) {
		if (a->n == KZ_STORE_SENTINELS_MAX)
			return -1;
		comma = memchr(p, ',', (size_t)(slash - p));
		if (comma == NULL)
			comma = slash;
		if (parse_hostport(p, (size_t)(comma - p), &a->hp[a->n]) != 0 ||
		    (comma != slash && comma + 1 == slash))
			return -1;
		p = comma + 1;
	}
	return a->n > 0 ? 0 : -1;
}

int
kz_store_addr_parse(const char *spec, struct kz_store_addr *a, char *why,
    size_t wlen)
{
	const char *path = spec;
	int bad = 0;

	memset(a, 0, sizeof(*a));
	if (strncmp(spec, "tcp:", 4) == 0) {
		a->kind = KZ_STORE_TCP;
		a->n = 1;
		bad = parse_hostport(spec + 4, strlen(spec + 4), &a->hp[0]);
	} else if (strncmp(spec, "sentinel:", 9) == 0) {
		a->kind = KZ_STORE_SENTINEL;
		bad = parse_sentinels(spec + 9, a);
	} else {
		if (strncmp(spec, "unix:", 5) == 0)
			path = spec + 5;
		a->kind = KZ_STORE_UNIX;
		bad = path[0] != '/' || strlen(path) >= sizeof(a->path);
		if (!bad)
			snprintf(a->path, sizeof(a->path), "%s", path);
	}
	if (bad) {
		kz_why(why, wlen,
		    "store address must be unix:/PATH, tcp:HOST:PORT or "
		    "sentinel:HOST:PORT[,HOST:PORT...]/NAME (literal "
		    "addresses)");
		return KZ_EINVAL;
	}
	return 0;
}

static bool
host_local(const char *h)
{
	return strcmp(h, "::1") == 0 || strncmp(h, "127.", 4) == 0;
}

bool
kz_store_addr_local(const struct kz_store_addr *a)
{
	int i;

	if (a->kind == KZ_STORE_UNIX)
		return true;
	for (i = 0; i < a->n; i++)
		if (!host_local(a->hp[i].host))
			return false;
	return true;
}

/* ---- the host's scope ---- */

static char scope[KZ_STORE_SCOPE_MAX + 1];

int
kz_store_scope_set(const char *sc)
{
	size_t n = strlen(sc);

	if (n > KZ_STORE_SCOPE_MAX ||
	    strspn(sc,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != n)
		return KZ_EINVAL;
	memcpy(scope, sc, n + 1);
	return 0;
}

const char *
kz_store_scope(void)
{
	return scope;
}

/* ---- credentials ---- */

static struct {
	char user[KZ_STORE_USER_MAX];
	char *pass; /* sodium_malloc'd, KZ_STORE_PASS_MAX bytes */
	bool denied; /* the file exists but is not this user's to read */
	char why[160]; /* then why: every connect fails with it */
} auth;

void
kz_store_auth_clear(void)
{
	if (auth.pass != NULL)
		sodium_free(auth.pass);
	auth.pass = NULL;
	auth.user[0] = '\0';
}

bool
kz_store_auth_set(void)
{
	return auth.pass != NULL;
}

/* Whether the last read_pass could not open its file for want of
 * permission (kz_store_conf's deferred case). */
static bool open_denied;

/* Reads the password file into buf; the file's checks come first. */
static int
read_pass(const char *file, char *buf, size_t len, char *why, size_t wlen)
{
	struct stat st;
	ssize_t n;
	int fd;

	if ((fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		open_denied = errno == EACCES;
		kz_why(why, wlen, "KZ_STORE_PASSWORD_FILE: cannot open: %s",
		    strerror(errno));
		return KZ_ECONF;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (st.st_mode & 077) != 0 ||
	    (st.st_uid != geteuid() && st.st_uid != 0)) {
		close(fd);
		kz_why(why, wlen,
		    "KZ_STORE_PASSWORD_FILE must be a regular file of this "
		    "user or root, not readable by group or others (0600)");
		return KZ_ECONF;
	}
	n = read(fd, buf, len);
	close(fd);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n <= 0 || (size_t)n >= len || memchr(buf, '\0', (size_t)n) ||
	    memchr(buf, '\n', (size_t)n) || memchr(buf, '\r', (size_t)n)) {
		kz_why(why, wlen,
		    "KZ_STORE_PASSWORD_FILE must hold one line of 1 to %d "
		    "bytes",
		    (int)len - 1);
		return KZ_ECONF;
	}
	buf[n] = '\0';
	return 0;
}

int
kz_store_auth_load(const char *user, const char *pass_file, char *why,
    size_t wlen)
{
	size_t un = strlen(user);
	char *p;
	int e;

	if (un == 0 || un >= sizeof(auth.user) ||
	    strspn(user,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@") != un) {
		kz_why(why, wlen,
		    "KZ_STORE_USER must be a plain ACL user name");
		return KZ_ECONF;
	}
	/* Locked memory needs the library set up; this is idempotent. */
	if (sodium_init() < 0 || (p = sodium_malloc(KZ_STORE_PASS_MAX)) == NULL)
		return KZ_ENOMEM;
	if ((e = read_pass(pass_file, p, KZ_STORE_PASS_MAX, why, wlen)) != 0) {
		sodium_free(p);
		return e;
	}
	kz_store_auth_clear();
	auth.pass = p;
	snprintf(auth.user, sizeof(auth.user), "%s", user);
	return 0;
}

int
kz_store_auth_usable(char *why, size_t wlen)
{
	if (!auth.denied)
		return 0;
	kz_why(why, wlen, "%s", auth.why);
	return KZ_EUNAVAIL;
}

const char *
kz_store_auth_user(void)
{
	return auth.user;
}

int
kz_store_auth_argv(const char *argv[3])
{
	if (auth.pass == NULL)
		return 0;
	argv[0] = "AUTH";
	argv[1] = auth.user;
	argv[2] = auth.pass;
	return 3;
}

int
kz_store_conf(const struct kz_conf *k, const char *run_dir, char *addr,
    size_t len, char *why, size_t wlen)
{
	const char *user = kz_conf_str(k, "KZ_STORE_USER", NULL);
	const char *pf = kz_conf_str(k, "KZ_STORE_PASSWORD_FILE", NULL);
	struct kz_store_addr a;
	char w[200];
	int e;

	if ((e = kz_conf_sock(k, "KZ_STORE_SOCKET", run_dir, "store", addr, len,
	         why, wlen)) != 0)
		return e;
	if (kz_store_addr_parse(addr, &a, w, sizeof(w)) != 0) {
		kz_why(why, wlen, "KZ_STORE_SOCKET: %s", w);
		return KZ_ECONF;
	}
	if ((user == NULL) != (pf == NULL)) {
		kz_why(why, wlen,
		    "KZ_STORE_USER and KZ_STORE_PASSWORD_FILE go together");
		return KZ_ECONF;
	}
	auth.denied = open_denied = false;
	if (user != NULL &&
	    (e = kz_store_auth_load(user, pf, auth.why, sizeof(auth.why))) !=
	        0) {
		/*
		 * A file this user may not open is another user's (the
		 * daemon's, or a systemd credential): an operator's command
		 * that never reaches the store still runs, and every connect
		 * fails with the reason.  Anything else is a config error.
		 */
		if (e != KZ_ENOMEM && open_denied) {
			auth.denied = true;
			return 0;
		}
		kz_why(why, wlen, "%s", auth.why);
		return e == KZ_ENOMEM ? e : KZ_ECONF;
	}
	if (user == NULL && !kz_store_addr_local(&a)) {
		kz_why(why, wlen,
		    "KZ_STORE_SOCKET: a store off this host needs "
		    "KZ_STORE_USER and KZ_STORE_PASSWORD_FILE (and an "
		    "encrypted link, kz-store(7))");
		return KZ_ECONF;
	}
	return 0;
}

/* ---- the blocking connect ---- */

bool
kz_store_err_moved_primary(const char *err)
{
	static const char *const pfx[] = {"READONLY", "MASTERDOWN", "LOADING",
	    "NOREPLICAS", "UNBLOCKED", "CLUSTERDOWN", NULL};
	int i;

	for (i = 0; pfx[i] != NULL; i++)
		if (strncmp(err, pfx[i], strlen(pfx[i])) == 0)
			return true;
	return false;
}

/*
 * Cluster redirects.  MOVED names the slot's new owner: the client goes
 * there for good and asks again.  ASK names the node the slot is being
 * migrated to: one command goes there after ASKING, and the slot map is
 * not changed.  The pool's scripts touch keys they cannot all declare (a
 * random warm worker's record), and on the importing node a key that has
 * not moved yet reads as missing, so a script may follow ASK only once the
 * migrating node holds none of the slot's keys (CLUSTER COUNTKEYSINSLOT is
 * 0; a migrating node creates no new key of the slot, so that stays 0).
 * While the slot is half-moved, and on TRYAGAIN, the client asks again
 * after a short backoff, for a bounded time, then answers unavailable.
 */
static bool
redirect(const char *err, const char *pfx, int *slot, struct kz_store_addr *to)
{
	char spec[KZ_STORE_HOST_MAX + 24], host[KZ_STORE_HOST_MAX];
	const char *p, *colon;
	size_t n = strlen(pfx);
	char *end;
	long v;

	if (strncmp(err, pfx, n) != 0 || err[n] < '0' || err[n] > '9')
		return false;
	v = strtol(err + n, &end, 10);
	if (end == err + n || *end != ' ' || v < 0 || v > 16383)
		return false;
	p = end + 1;
	if ((colon = strrchr(p, ':')) == NULL ||
	    (n = (size_t)(colon - p)) == 0 || n >= sizeof(host))
		return false;
	memcpy(host, p, n);
	host[n] = '\0';
	snprintf(spec, sizeof(spec),
	    strchr(host, ':') != NULL ? "tcp:[%s]:%s" : "tcp:%s:%s", host,
	    colon + 1);
	if (slot != NULL)
		*slot = (int)v;
	return kz_store_addr_parse(spec, to, NULL, 0) == 0;
}

bool
kz_store_moved(const char *err, struct kz_store_addr *to)
{
	return redirect(err, "MOVED ", NULL, to);
}

bool
kz_store_ask(const char *err, int *slot, struct kz_store_addr *to)
{
	return redirect(err, "ASK ", slot, to);
}

bool
kz_store_err_tryagain(const char *err)
{
	return strncmp(err, "TRYAGAIN", 8) == 0;
}

int
kz_store_migrate_delay(int waits)
{
	return KZ_STORE_MIGRATE_STEP_MS << (waits < 4 ? waits : 4);
}

static redisContext *
dial(const struct kz_store_addr *a, const struct kz_store_hostport *hp,
    struct timeval tv)
{
	redisContext *rc = hp != NULL ?
	    redisConnectWithTimeout(hp->host, hp->port, tv) :
	    redisConnectUnixWithTimeout(a->path, tv);

	if (rc != NULL && (rc->err || redisSetTimeout(rc, tv) != REDIS_OK)) {
		redisFree(rc);
		rc = NULL;
	}
	return rc;
}

/*
 * AUTH (when set); the server's refusal names no credential.  Returns 0,
 * or KZ_EDENIED for a refused login, KZ_EUNAVAIL for no answer.
 */
static int
login(redisContext *rc, char *why, size_t wlen)
{
	const char *av[3];
	int n = kz_store_auth_argv(av);
	redisReply *r;
	int e = 0;

	if (n == 0)
		return 0;
	if ((r = redisCommandArgv(rc, n, av, NULL)) == NULL) {
		kz_why(why, wlen, "store did not answer AUTH");
		return KZ_EUNAVAIL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		kz_why(why, wlen, "store refused authentication for user %s",
		    auth.user);
		e = KZ_EDENIED;
	}
	freeReplyObject(r);
	return e;
}

bool
kz_store_role_master(const redisReply *r)
{
	return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "master") == 0;
}

static int
check_master(redisContext *rc, char *why, size_t wlen)
{
	redisReply *r = redisCommand(rc, "ROLE");
	bool ok = kz_store_role_master(r);

	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "NOAUTH", 6) == 0)
		kz_why(why, wlen,
		    "store requires authentication "
		    "(KZ_STORE_USER, KZ_STORE_PASSWORD_FILE)");
	else if (!ok)
		kz_why(why, wlen, "store is not a primary (ROLE)");
	if (r != NULL)
		freeReplyObject(r);
	return ok ? 0 : KZ_EUNAVAIL;
}

/* A sentinel's answer for the primary's address, into hp. */
static int
ask_sentinel(const struct kz_store_hostport *s, const char *name,
    struct timeval tv, struct kz_store_hostport *hp)
{
	redisContext *rc = dial(NULL, s, tv);
	redisReply *r = NULL;
	int e = -1;

	if (rc == NULL || login(rc, NULL, 0) != 0)
		goto out;
	r = redisCommand(rc, "SENTINEL get-master-addr-by-name %s", name);
	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING &&
	    strlen(r->element[0]->str) < sizeof(hp->host) &&
	    parse_port(r->element[1]->str, strlen(r->element[1]->str),
	        &hp->port) == 0) {
		snprintf(hp->host, sizeof(hp->host), "%s", r->element[0]->str);
		e = 0;
	}
out:
	if (r != NULL)
		freeReplyObject(r);
	if (rc != NULL)
		redisFree(rc);
	return e;
}

int
kz_store_connect(const struct kz_store_addr *a, int timeout_ms,
    redisContext **out, char *why, size_t wlen)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000,
	    .tv_usec = (timeout_ms % 1000) * 1000};
	struct kz_store_hostport hp;
	const struct kz_store_hostport *to = NULL;
	redisContext *rc;
	int e, i;

	if ((e = kz_store_auth_usable(why, wlen)) != 0)
		return e;
	if (a->kind == KZ_STORE_TCP)
		to = &a->hp[0];
	if (a->kind == KZ_STORE_SENTINEL) {
		for (i = 0; i < a->n; i++)
			if (ask_sentinel(&a->hp[i], a->name, tv, &hp) == 0)
				break;
		if (i == a->n) {
			kz_why(why, wlen, "no sentinel named a primary");
			return KZ_EUNAVAIL;
		}
		to = &hp;
	}
	if ((rc = dial(a, to, tv)) == NULL) {
		kz_why(why, wlen, "store unreachable");
		return KZ_EUNAVAIL;
	}
	if ((e = login(rc, why, wlen)) != 0 ||
	    (e = check_master(rc, why, wlen)) != 0) {
		redisFree(rc);
		return e;
	}
	*out = rc;
	return 0;
}
