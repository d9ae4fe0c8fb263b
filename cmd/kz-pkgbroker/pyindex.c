/*
 * The Python path's pages.  An upstream PEP 503 page is read for its
 * anchors (href, data-requires-python, data-yanked) and nothing else;
 * each href is resolved against the page, kept only when it stays on the
 * upstream's origin (same scheme, host and port) and names a distribution
 * file, and re-pointed at the broker's /files/.  The page the client
 * gets is written here, as PEP 503 HTML or, when its Accept header asks,
 * PEP 691 JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cJSON.h>

#include "pkgbroker.h"
#include "kz_json.h"
#include "banned.h"

#define PY_FILES_MAX 4096

void
pb_pylist_release(struct pb_pylist *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* The five entities a PEP 503 attribute value carries. */
static int
unescape(const char *s, size_t n, char *out, size_t len)
{
	static const struct {
		const char *e;
		char c;
	} ents[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'},
	    {"&quot;", '"'}, {"&#39;", '\''}, {"&#x27;", '\''}};
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '&') {
			size_t k, j;

			for (k = 0; k < sizeof(ents) / sizeof(ents[0]); k++) {
				j = strlen(ents[k].e);
				if (i + j <= n &&
				    memcmp(s + i, ents[k].e, j) == 0)
					break;
			}
			if (k == sizeof(ents) / sizeof(ents[0]))
				return KZ_EPROTO;
			c = ents[k].c;
			i += j - 1;
		}
		if ((unsigned char)c < ' ' || c == 0x7f || o + 1 >= len)
			return KZ_EPROTO;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent escapes decoded; only bytes a file path may hold survive. */
static int
pct_decode(char *s)
{
	char *o = s;

	for (char *p = s; *p != '\0'; p++) {
		char c = *p;

		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);

			if (lo < 0)
				return KZ_EPROTO;
			c = (char)(hi * 16 + lo);
			p += 2;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || strchr("-._~+/", c) != NULL))
			return KZ_EPROTO;
		*o++ = c;
	}
	*o = '\0';
	return 0;
}

/* Removes dot segments of an absolute path in place (RFC 3986 5.2.4);
 * a ".." above the root is refused. */
static int
dot_segments(char *path)
{
	char out[PB_PATH_MAX];
	size_t o = 0;

	for (char *p = path + 1, *seg = p;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		size_t n = (size_t)(p - seg);
		bool last = *p == '\0';

		if (n == 2 && seg[0] == '.' && seg[1] == '.') {
			if (o == 0)
				return KZ_EDENIED;
			while (o > 0 && out[o - 1] != '/')
				o--;
			o = o > 0 ? o - 1 : 0;
		} else if (!(n == 1 && seg[0] == '.') && !(n == 0 && !last)) {
			if (o + n + 2 >= sizeof(out))
				return KZ_ETOOBIG;
			out[o++] = '/';
			memcpy(out + o, seg, n);
			o += n;
		}
		if (last)
			break;
		seg = p + 1;
	}
	out[o] = '\0';
	snprintf(path, PB_PATH_MAX, "%s", o == 0 ? "/" : out);
	return 0;
}

/* href resolved against page_path into a path on up's origin, or, with
 * *alt set, on the files upstream's. */
static int
resolve(const char *href, const char *page_path, const struct pb_upstream *up,
    const struct pb_upstream *files, bool *alt, char *out, size_t len)
{
	size_t on;
	int k;

	*alt = false;
	if (strncasecmp(href, "http://", 7) == 0 ||
	    strncasecmp(href, "https://", 8) == 0) {
		/* Only the upstream's own origin, scheme included, or the
		 * files upstream's (files.pythonhosted.org for pypi.org):
		 * a file on any other host, or over the other scheme, is
		 * not offered. */
		on = pb_upstream_origin(up, href);
		if (on == 0 && files != NULL && files->url[0] != '\0' &&
		    (on = pb_upstream_origin(files, href)) != 0)
			*alt = true;
		if (on == 0 || href[on] != '/')
			return KZ_EDENIED;
		k = snprintf(out, len, "%s", href + on);
	} else if (strncmp(href, "//", 2) == 0 || strchr(href, ':') != NULL) {
		return KZ_EDENIED;
	} else if (href[0] == '/') {
		k = snprintf(out, len, "%s", href);
	} else {
		const char *slash = strrchr(page_path, '/');

		k = snprintf(out, len, "%.*s/%s",
		    (int)(slash == NULL ? 0 : slash - page_path), page_path,
		    href);
	}
	if (k < 0 || (size_t)k >= len)
		return KZ_ETOOBIG;
	if (pct_decode(out) != 0 || dot_segments(out) != 0)
		return KZ_EDENIED;
	/* A link outside the upstream's own path is not offered: the
	 * broker would not fetch it (route). */
	return pb_upstream_under(*alt ? files : up, out) ? 0 : KZ_EDENIED;
}

struct anchor {
	char href[PB_PATH_MAX];
	char rp[128];
	bool yanked;
};

/* The value of one attribute starting at *pp (just after its name);
 * quoted or bare.  Moves *pp past it. */
static int
attr_value(const char **pp, const char *end, char *out, size_t len)
{
	const char *p = *pp, *v;
	char q = 0;

	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n'))
		p++;
	if (p >= end || *p != '=') {
		*out = '\0';
		*pp = p;
		return 0; /* a bare attribute (data-yanked) */
	}
	for (p++; p < end && (*p == ' ' || *p == '\t' || *p == '\n'); p++)
		;
	if (p < end && (*p == '"' || *p == '\''))
		q = *p++;
	for (v = p; p < end && (q ? *p != q : (*p != ' ' && *p != '>')); p++)
		;
	if (p >= end)
		return KZ_EPROTO;
	if (unescape(v, (size_t)(p - v), out, len) != 0)
		return KZ_EPROTO;
	*pp = q ? p + 1 : p;
	return 0;
}

/* One <a ...> tag's attributes, p just after "<a". */
static int
anchor(const char **pp, const char *end, struct anchor *a)
{
	const char *p = *pp;
	char val[PB_PATH_MAX];

	memset(a, 0, sizeof(*a));
	while (p < end && *p != '>') {
		const char *name;
		size_t n;

		if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
			p++;
			continue;
		}
		for (name = p; p < end && memchr(" \t\r\n=>", *p, 6) == NULL;
		     p++)
			;
		n = (size_t)(p - name);
		if (attr_value(&p, end, val, sizeof(val)) != 0)
			return KZ_EPROTO;
		/* Every turn of the loop moves on, or the page is refused. */
		if (p == name)
			return KZ_EPROTO;
		if (n == 4 && strncasecmp(name, "href", 4) == 0)
			snprintf(a->href, sizeof(a->href), "%s", val);
		else if (n == 20 &&
		    strncasecmp(name, "data-requires-python", 20) == 0) {
			/* Cut short, a constraint would say something else. */
			if (strlen(val) >= sizeof(a->rp))
				return KZ_EPROTO;
			memcpy(a->rp, val, strlen(val) + 1);
		} else if (n == 11 && strncasecmp(name, "data-yanked", 11) == 0)
			a->yanked = true;
	}
	*pp = p;
	return p < end ? 0 : KZ_EPROTO;
}

static int
push(struct pb_pylist *l, const struct pb_pyfile *f)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct pb_pyfile *v;

		if (cap > PY_FILES_MAX ||
		    (v = realloc(l->v, cap * sizeof(*v))) == NULL)
			return l->cap >= PY_FILES_MAX ? KZ_ETOOBIG : KZ_ENOMEM;
		l->v = v, l->cap = cap;
	}
	l->v[l->n++] = *f;
	return 0;
}

/* The fragment "#sha256=<64 hex>" kept; any other fragment dropped. */
static void
take_hash(char *href, char sha[65])
{
	char *h = strchr(href, '#');

	sha[0] = '\0';
	if (h == NULL)
		return;
	*h = '\0';
	if (strncmp(h + 1, "sha256=", 7) == 0 && strlen(h + 8) == 64 &&
	    strspn(h + 8, "0123456789abcdef") == 64)
		memcpy(sha, h + 8, 65);
}

static int
one_anchor(struct anchor *a, const char *page_path,
    const struct pb_upstream *up, const struct pb_upstream *files, bool index,
    struct pb_pylist *out)
{
	char path[PB_PATH_MAX];
	struct pb_pyfile f;
	const char *last;
	bool alt;
	size_t n;

	memset(&f, 0, sizeof(f));
	take_hash(a->href, f.sha256);
	if (strchr(a->href, '?') != NULL ||
	    resolve(a->href, page_path, up, files, &alt, path, sizeof(path)) !=
	        0 ||
	    (index && alt))
		return 0; /* not offered */
	n = strlen(path);
	if (index) {
		while (n > 1 && path[n - 1] == '/')
			path[--n] = '\0';
		last = strrchr(path, '/') + 1;
		return pb_py_normalize(last, strlen(last), f.filename,
		           sizeof(f.filename)) == 0 ?
		    push(out, &f) :
		    0;
	}
	last = strrchr(path, '/') + 1;
	if (!pb_py_file_ok(path) || strlen(last) >= sizeof(f.filename) ||
	    snprintf(f.url, sizeof(f.url), "%s%s", alt ? "/pyfiles" : "/files",
	        path) >= (int)sizeof(f.url))
		return 0;
	snprintf(f.filename, sizeof(f.filename), "%s", last);
	snprintf(f.requires_python, sizeof(f.requires_python), "%s", a->rp);
	f.yanked = a->yanked;
	return push(out, &f);
}

int
pb_py_parse(const char *html, size_t n, const char *page_path,
    const struct pb_upstream *up, const struct pb_upstream *files, bool index,
    struct pb_pylist *out, char *why, size_t wlen)
{
	const char *p = html, *end = html + n;
	struct anchor a;
	int r;

	memset(out, 0, sizeof(*out));
	/* No page of an index holds a NUL; the scanners below stop at
	 * none. */
	if (memchr(html, '\0', n) != NULL) {
		kz_why(why, wlen, "the upstream page is malformed");
		return KZ_EPROTO;
	}
	while ((p = memchr(p, '<', (size_t)(end - p))) != NULL && p + 2 < end) {
		p++;
		if ((*p != 'a' && *p != 'A') ||
		    memchr(" \t\r\n", p[1], 4) == NULL)
			continue;
		p += 2;
		if (anchor(&p, end, &a) != 0) {
			kz_why(why, wlen, "the upstream page is malformed");
			pb_pylist_release(out);
			return KZ_EPROTO;
		}
		if (a.href[0] != '\0' &&
		    (r = one_anchor(&a, page_path, up, files, index, out)) !=
		        0) {
			kz_why(why, wlen, "the upstream page lists too much");
			pb_pylist_release(out);
			return r;
		}
	}
	return 0;
}

int
pb_py_accept(const char *accept)
{
	double qj = -1, qh = -1;
	const char *p = accept;

	if (accept == NULL || *accept == '\0')
		return 0;
	while (*p != '\0') {
		size_t n = strcspn(p, ","), t;
		const char *q;
		double qv = 1;
		char typ[96];

		while (n > 0 && *p == ' ')
			p++, n--;
		t = strcspn(p, ";,");
		if (t > n)
			t = n;
		while (t > 0 && p[t - 1] == ' ')
			t--;
		snprintf(typ, sizeof(typ), "%.*s", (int)(t < 95 ? t : 95), p);
		q = memmem(p, n, "q=", 2);
		if (q != NULL)
			qv = strtod(q + 2, NULL);
		if (!strcasecmp(typ, "application/vnd.pypi.simple.v1+json") ||
		    !strcasecmp(typ, "application/vnd.pypi.simple.latest+json"))
			qj = qv > qj ? qv : qj;
		else if (!strcasecmp(typ,
		             "application/vnd.pypi.simple.v1+html") ||
		    !strcasecmp(typ,
		        "application/vnd.pypi.simple.latest+html") ||
		    !strcasecmp(typ, "text/html") || !strcasecmp(typ, "*/*"))
			qh = qv > qh ? qv : qh;
		p += n;
		if (*p == ',')
			p++;
	}
	if (qj > 0 && qj >= qh)
		return 1;
	return qh > 0 ? 0 : -1;
}
