/*
 * The closed set of paths the broker serves.  A path is classified here,
 * before anything is fetched: the npm registry's package documents and
 * tarballs, the PEP 503 index, its project pages and the files those
 * pages point at.  Anything else (another path, a dot segment, a byte
 * outside the names' alphabets, a percent escape other than npm's %2f) is
 * refused with a reason that names the rule, never echoing the path.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "pkgbroker.h"
#include "banned.h"

static bool
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

static bool
alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9');
}

/* One npm name part (scope or bare name): npm's own rules, no leading
 * dot or underscore, so "." and ".." can never be a name. */
static bool
part_ok(const char *s, size_t n)
{
	if (n == 0 || n > PB_NAME_MAX || s[0] == '.' || s[0] == '_')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i]))
			return false;
	return true;
}

bool
pb_npm_name_ok(const char *s, size_t n)
{
	const char *slash;

	if (n == 0 || n > PB_NAME_MAX)
		return false;
	if (s[0] != '@')
		return part_ok(s, n);
	slash = memchr(s, '/', n);
	return slash != NULL && part_ok(s + 1, (size_t)(slash - s - 1)) &&
	    part_ok(slash + 1, n - (size_t)(slash + 1 - s));
}

static int
set_name(struct pb_route *r, const char *s, size_t n)
{
	if (n > PB_NAME_MAX)
		return KZ_ETOOBIG;
	memcpy(r->name, s, n);
	r->name[n] = '\0';
	return 0;
}

/* "/@scope%2fname" or "/name": a package document. */
static int
npm_doc(const char *p, struct pb_route *r)
{
	char name[PB_NAME_MAX + 8];
	const char *pct = strchr(p, '%');
	size_t n = strlen(p);

	if (n > PB_NAME_MAX + 2)
		return KZ_EDENIED;
	if (pct != NULL) {
		size_t a = (size_t)(pct - p);

		if (p[0] != '@' || strncasecmp(pct, "%2f", 3) != 0 ||
		    strchr(pct + 3, '%') != NULL)
			return KZ_EDENIED;
		snprintf(name, sizeof(name), "%.*s/%s", (int)a, p, pct + 3);
	} else if (strchr(p, '/') == NULL) {
		snprintf(name, sizeof(name), "%s", p);
	} else {
		return KZ_EDENIED;
	}
	if (!pb_npm_name_ok(name, strlen(name)))
		return KZ_EDENIED;
	r->kind = PB_NPM_DOC;
	snprintf(r->upath, sizeof(r->upath), "/%s", p);
	return set_name(r, name, strlen(name));
}

/* "/name/-/file.tgz" or "/@scope/name/-/file.tgz". */
static int
npm_tarball(const char *p, const char *dash, struct pb_route *r)
{
	const char *file = dash + 3;
	size_t fn = strlen(file), nn = (size_t)(dash - p);

	if (!pb_npm_name_ok(p, nn) || fn < 5 || !part_ok(file, fn) ||
	    strcmp(file + fn - 4, ".tgz") != 0)
		return KZ_EDENIED;
	r->kind = PB_NPM_TARBALL;
	snprintf(r->upath, sizeof(r->upath), "/%s", p);
	return set_name(r, p, nn);
}

int
pb_py_normalize(const char *s, size_t n, char *out, size_t len)
{
	size_t o = 0;

	/* A project name starts and ends with a letter or digit (PEP 508),
	 * so no dot segment normalizes into one. */
	if (n == 0 || n > PB_NAME_MAX || !alnum(s[0]) || !alnum(s[n - 1]))
		return KZ_EDENIED;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!name_char(c) || c == '~')
			return KZ_EDENIED;
		if (c == '-' || c == '_' || c == '.') {
			while (i + 1 < n &&
			    (s[i + 1] == '-' || s[i + 1] == '_' ||
			        s[i + 1] == '.'))
				i++;
			c = '-';
		} else if (c >= 'A' && c <= 'Z') {
			c = (char)(c - 'A' + 'a');
		}
		if (o + 1 >= len)
			return KZ_ETOOBIG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

bool
pb_py_file_ok(const char *path)
{
	static const char *const sfx[] = {".whl", ".tar.gz", ".zip", NULL};
	const char *file = strrchr(path, '/');
	size_t n;

	file = file == NULL ? path : file + 1;
	n = strlen(file);
	for (int i = 0; sfx[i] != NULL; i++) {
		size_t k = strlen(sfx[i]);

		if (n > k && strcmp(file + n - k, sfx[i]) == 0)
			return true;
	}
	return false;
}

/* "/files/a/b/x.whl": every segment a plain name (no dot segment, no
 * empty one), the last a distribution file. */
static int
py_file(const char *p, struct pb_route *r)
{
	const char *seg = p, *file;

	if (*p == '\0' || strlen(p) >= sizeof(r->upath) - 1)
		return KZ_EDENIED;
	for (const char *q = p;; q++) {
		if (*q == '/' || *q == '\0') {
			size_t n = (size_t)(q - seg);

			if (n == 0 || (n == 1 && seg[0] == '.') ||
			    (n == 2 && seg[0] == '.' && seg[1] == '.'))
				return KZ_EDENIED;
			if (*q == '\0')
				break;
			seg = q + 1;
		} else if (!name_char(*q) && *q != '+') {
			return KZ_EDENIED;
		}
	}
	if (!pb_py_file_ok(p))
		return KZ_EDENIED;
	file = strrchr(p, '/');
	file = file == NULL ? p : file + 1;
	r->kind = PB_PY_FILE;
	snprintf(r->upath, sizeof(r->upath), "/%s", p);
	/* The project a wheel or sdist belongs to: its name's first part,
	 * for the audit record only. */
	return pb_py_normalize(file, strcspn(file, "-"), r->name,
	           sizeof(r->name)) == 0 ?
	    0 :
	    set_name(r, "unknown", 7);
}

static int
py_route(const char *p, struct pb_route *r)
{
	size_t n = strlen(p);

	if (n == 0) {
		r->kind = PB_PY_INDEX;
		snprintf(r->upath, sizeof(r->upath), "/");
		return 0;
	}
	if (p[n - 1] == '/')
		n--;
	if (memchr(p, '/', n) != NULL ||
	    pb_py_normalize(p, n, r->name, sizeof(r->name)) != 0)
		return KZ_EDENIED;
	r->kind = PB_PY_PROJECT;
	snprintf(r->upath, sizeof(r->upath), "/%s/", r->name);
	return 0;
}

int
pb_route(const char *path, struct pb_route *r, char *why, size_t wlen)
{
	const char *dash;
	int rc;

	memset(r, 0, sizeof(*r));
	if (path == NULL || path[0] != '/' || strlen(path) >= PB_PATH_MAX) {
		kz_why(why, wlen, "not a path of the registry protocols");
		return KZ_EDENIED;
	}
	path++;
	if (strncmp(path, "simple/", 7) == 0)
		rc = py_route(path + 7, r);
	else if (strncmp(path, "files/", 6) == 0)
		rc = py_file(path + 6, r);
	else if (strncmp(path, "pyfiles/", 8) == 0) {
		/* A file on the files upstream's origin (pyindex.c). */
		if ((rc = py_file(path + 8, r)) == 0)
			r->files_origin = true;
	} else if ((dash = strstr(path, "/-/")) != NULL)
		rc = npm_tarball(path, dash, r);
	else
		rc = npm_doc(path, r);
	if (rc != 0) {
		memset(r, 0, sizeof(*r));
		kz_why(why, wlen,
		    "not a path of the registry protocols (npm package "
		    "documents and tarballs, the PEP 503 index and its files)");
		return KZ_EDENIED;
	}
	return 0;
}

bool
pb_host_allowed(const char *hosts, const char *hdr)
{
	const char *end, *p;
	size_t n;

	if (hdr == NULL || *hdr == '\0' || strlen(hdr) > PB_HOST_MAX + 6)
		return false;
	/* The host part: "[v6]:port", "name:port" or a bare name. */
	if (hdr[0] == '[')
		end = strchr(hdr, ']') ? strchr(hdr, ']') + 1 : NULL;
	else
		end = hdr + strcspn(hdr, ":");
	if (end == NULL || end == hdr)
		return false;
	if (*end == ':') {
		for (p = end + 1; *p != '\0'; p++)
			if (*p < '0' || *p > '9')
				return false;
		if (end[1] == '\0' || p - end - 1 > 5)
			return false;
	} else if (*end != '\0') {
		return false;
	}
	n = (size_t)(end - hdr);
	for (p = hosts; *p != '\0';) {
		size_t k = strcspn(p, ",");

		while (k > 0 && p[0] == ' ')
			p++, k--;
		if (k == n && strncasecmp(p, hdr, n) == 0)
			return true;
		p += k;
		if (*p == ',')
			p++;
	}
	return false;
}
