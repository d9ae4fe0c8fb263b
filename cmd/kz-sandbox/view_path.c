/*
 * The root view's path grammar and what the config alone can get wrong
 * (view.c builds the view): the lists of SANDBOX_EXTRA_RO and SANDBOX_MASK,
 * the links the view recreates, the hostname, and the text of the
 * synthesized /etc files.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "kz_path.h"
#include "sbx.h"
#include "sbx_view.h"
#include "banned.h"

/* The allowlist: usr is required, the others are taken where they exist. */
const char *const sbx_view_sysdirs[] = {"usr", "bin", "sbin", "lib", "lib32",
    "lib64", "libx32", NULL};
/* The view's own places, never taken from an image, masked or bound over. */
const char *const sbx_view_places[] = {"proc", "sys", "dev", "run", "tmp",
    SBX_WS + 1, SBX_PROJ + 1, NULL};

bool
sbx_view_in_list(const char *s, size_t n, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strlen(*list) == n && memcmp(s, *list, n) == 0)
			return true;
	return false;
}

bool
sbx_view_path_ok(const char *p)
{
	size_t n = strlen(p);

	return n > 1 && n < PATH_MAX && p[0] == '/' &&
	    kz_path_check(p + 1, n - 1, NULL, 0) == 0;
}

/* Whether p is dir or lies beneath it (both absolute, lexical). */
bool
sbx_view_under(const char *p, const char *dir)
{
	size_t pl = strlen(p), dl = strlen(dir);

	return (pl == dl && memcmp(p, dir, pl) == 0) ||
	    kz_path_is_under(dir, dl, p, pl);
}

/*
 * Whether a top-level link of the host may be recreated in the view: its
 * target must name a path below an allowlisted entry, without "." or ".."
 * (usrmerge's "usr/bin"; an absolute "/usr/bin" resolves the same inside).
 */
bool
sbx_view_link_ok(const char *target)
{
	const char *t = target + (target[0] == '/');

	return t[0] != '\0' && kz_path_check(t, strlen(t), NULL, 0) == 0 &&
	    sbx_view_in_list(t, strcspn(t, "/"), sbx_view_sysdirs);
}

/* Copies the next comma-separated item of *p, trimmed, into buf. */
bool
sbx_view_next(const char **p, char *buf, size_t len)
{
	const char *s = *p;
	size_t n;

	while (*s == ',' || *s == ' ' || *s == '\t')
		s++;
	if (*s == '\0')
		return false;
	n = strcspn(s, ",");
	*p = s + n;
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	snprintf(buf, len, "%.*s", (int)n, s);
	return true;
}

/* The first of the view's own places that p is or lies beneath, or NULL. */
static const char *
reserved(const char *p, bool etc)
{
	char d[32];

	if (etc && sbx_view_under(p, "/etc"))
		return "/etc";
	for (int i = 0; sbx_view_places[i] != NULL; i++) {
		snprintf(d, sizeof(d), "/%s", sbx_view_places[i]);
		if (sbx_view_under(p, d))
			return sbx_view_places[i];
	}
	return NULL;
}

/* The checks a list can fail on its own, before any path is looked up. */
static int
check_list(const char *key, const char *list, bool bind, char *why, size_t wlen)
{
	char a[PATH_MAX], b[PATH_MAX];
	const char *p = list, *q, *r;
	int n = 0;

	while (sbx_view_next(&p, a, sizeof(a))) {
		if (++n > SBX_MASK_MAX) {
			kz_why(why, wlen, "%s has more than %d paths", key,
			    SBX_MASK_MAX);
			return KZ_ECONF;
		}
		if (!sbx_view_path_ok(a)) {
			kz_why(why, wlen,
			    "%s: %s is not an absolute path "
			    "below / without '.', '..' or empty segments",
			    key, a);
			return KZ_ECONF;
		}
		if ((r = reserved(a, bind)) != NULL) {
			kz_why(why, wlen, "%s: %s is the sandbox's own /%s",
			    key, a, r + (r[0] == '/'));
			return KZ_ECONF;
		}
		for (q = p; bind && sbx_view_next(&q, b, sizeof(b));)
			if (sbx_view_under(a, b) || sbx_view_under(b, a)) {
				kz_why(why, wlen, "%s: %s and %s overlap", key,
				    a, b);
				return KZ_ECONF;
			}
	}
	return 0;
}

int
sbx_view_check(const struct sbx_conf *c, char *why, size_t wlen)
{
	size_t n = strlen(c->hostname);
	int r;

	if (n == 0 || n > 63 ||
	    strspn(c->hostname,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != n) {
		kz_why(why, wlen,
		    "SANDBOX_HOSTNAME must be 1-63 characters of "
		    "[A-Za-z0-9.-]");
		return KZ_ECONF;
	}
	if ((r = check_list("SANDBOX_MASK", c->masks, false, why, wlen)) != 0)
		return r;
	return check_list("SANDBOX_EXTRA_RO", c->extra_ro, true, why, wlen);
}

int
sbx_view_etc_text(const struct sbx_conf *c, const char *name, char *buf,
    size_t len)
{
	long long uid = (long long)c->uid, gid = (long long)c->gid;
	int n;

	if (strcmp(name, "passwd") == 0)
		n = snprintf(buf, len,
		    "sandbox:x:%lld:%lld:sandbox:%s:/bin/sh\n", uid, gid,
		    SBX_WS);
	else if (strcmp(name, "group") == 0)
		n = snprintf(buf, len, "sandbox:x:%lld:\n", gid);
	else if (strcmp(name, "hosts") == 0)
		n = snprintf(buf, len,
		    "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n"
		    "::1\tlocalhost ip6-localhost ip6-loopback\n",
		    c->hostname);
	else if (strcmp(name, "hostname") == 0)
		n = snprintf(buf, len, "%s\n", c->hostname);
	else if (strcmp(name, "nsswitch.conf") == 0)
		n = snprintf(buf, len,
		    "passwd: files\ngroup: files\n"
		    "shadow: files\nhosts: files\nnetworks: files\n"
		    "protocols: files\nservices: files\n");
	else
		return KZ_ENOENT;
	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : n;
}
