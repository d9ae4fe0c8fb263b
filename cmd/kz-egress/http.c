/*
 * HTTP/1.1 message heads and chunked framing, strictly.  Anything two
 * parsers could read two ways (Content-Length with Transfer-Encoding, two
 * Content-Lengths, codings other than chunked, folded lines, bare LF, bad
 * chunk sizes) is refused: the proxy never guesses where a message ends.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sodium.h>

#include "egress.h"
#include "banned.h"

/* RFC 9110 tchar.  A switch, not strchr: it runs for every byte of
 * every header name and method. */
static bool
is_tchar(unsigned char ch)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9'))
		return true;
	switch (ch) {
	case '!':
	case '#':
	case '$':
	case '%':
	case '&':
	case '\'':
	case '*':
	case '+':
	case '-':
	case '.':
	case '^':
	case '_':
	case '`':
	case '|':
	case '~':
		return true;
	default:
		return false;
	}
}

bool
eg_http_can_start(unsigned char ch)
{
	return is_tchar(ch) || ch == '\r' || ch == '\n';
}

bool
eg_http_resp_prefix_ok(const char *buf, size_t len)
{
	static const char proto[] = "HTTP/";
	size_t i;

	if (memcmp(buf, proto, len < 5 ? len : 5) != 0)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch == '\n' && (i == 0 || buf[i - 1] != '\r'))
			return false;
		if (ch == '\r' && i + 1 < len && buf[i + 1] != '\n')
			return false;
		if ((ch < 0x20 && ch != '\r' && ch != '\n' && ch != '\t') ||
		    ch == 0x7f)
			return false;
	}
	return true;
}

static bool
ieq(const char *a, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(a, lit, n) == 0;
}

bool
eg_hdr_is(const struct eg_hdr *h, const char *name)
{
	return ieq(h->name, h->nlen, name);
}

/* Finds the end of the line at p (CRLF); bare CR or LF is an error. */
static const char *
line_end(const char *p, const char *end)
{
	for (const char *q = p; q < end; q++) {
		if (*q == '\n')
			return NULL;
		if (*q == '\r')
			return q + 1 < end && q[1] == '\n' ? q : NULL;
	}
	return NULL;
}

static enum eg_reason
parse_request_line(const char *p, const char *e, struct eg_head *hd)
{
	const char *sp1, *sp2;

	for (sp1 = p; sp1 < e && is_tchar((unsigned char)*sp1); sp1++)
		;
	if (sp1 == p || sp1 >= e || *sp1 != ' ')
		return EG_R_BAD_REQUEST_LINE;
	for (sp2 = sp1 + 1;
	     sp2 < e && (unsigned char)*sp2 > ' ' && *sp2 != 0x7f; sp2++)
		;
	if (sp2 == sp1 + 1 || sp2 >= e || *sp2 != ' ')
		return EG_R_BAD_REQUEST_LINE;
	hd->method = p;
	hd->mlen = (size_t)(sp1 - p);
	hd->target = sp1 + 1;
	hd->tlen = (size_t)(sp2 - sp1 - 1);
	if (e - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1'))
		return EG_R_BAD_VERSION;
	hd->minor = sp2[8] - '0';
	return EG_R_NONE;
}

static enum eg_reason
parse_status_line(const char *p, const char *e, struct eg_head *hd)
{
	if (e - p < 12 || memcmp(p, "HTTP/1.", 7) != 0 ||
	    (p[7] != '0' && p[7] != '1') || p[8] != ' ' || p[9] < '1' ||
	    p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' ||
	    p[11] > '9' || (e - p > 12 && p[12] != ' '))
		return EG_R_BAD_STATUS_LINE;
	hd->minor = p[7] - '0';
	hd->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	return EG_R_NONE;
}

static enum eg_reason
parse_header(const char *p, const char *e, struct eg_hdr *h)
{
	const char *c, *v, *ve;

	for (c = p; c < e && is_tchar((unsigned char)*c); c++)
		;
	/* No space before the colon, no folded continuation lines. */
	if (c == p || c >= e || *c != ':')
		return EG_R_BAD_HEADER;
	for (v = c + 1; v < e && (*v == ' ' || *v == '\t'); v++)
		;
	for (ve = e; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
		;
	for (const char *q = v; q < ve; q++) {
		unsigned char ch = (unsigned char)*q;

		if ((ch < ' ' && ch != '\t') || ch == 0x7f)
			return EG_R_BAD_HEADER;
	}
	h->name = p;
	h->nlen = (size_t)(c - p);
	h->value = v;
	h->vlen = (size_t)(ve - v);
	return EG_R_NONE;
}

/* Whether a comma-separated header value lists token (case-insensitive). */
static bool
lists(const struct eg_hdr *h, const char *token)
{
	size_t i = 0;

	while (i < h->vlen) {
		size_t s, e;

		while (i < h->vlen &&
		    (h->value[i] == ' ' || h->value[i] == '\t' ||
		        h->value[i] == ','))
			i++;
		s = i;
		while (i < h->vlen && h->value[i] != ',')
			i++;
		e = i;
		while (e > s &&
		    (h->value[e - 1] == ' ' || h->value[e - 1] == '\t'))
			e--;
		if (e > s && ieq(h->value + s, e - s, token))
			return true;
	}
	return false;
}

/*
 * Whether a Connection header names a header the proxy frames or routes
 * by.  Listed there, it would be dropped as hop-by-hop on the way while
 * the proxy still read the message by it: a body framed by a
 * Content-Length the origin never sees becomes a second request there.
 * Such a message is refused, never forwarded either way.
 */
static bool
names_framing(const struct eg_hdr *h)
{
	static const char *const relied[] = {"content-length",
	    "transfer-encoding", "host", "proxy-authorization", "expect"};

	for (size_t i = 0; i < sizeof(relied) / sizeof(relied[0]); i++)
		if (lists(h, relied[i]))
			return true;
	return false;
}

static enum eg_reason
framing(struct eg_head *hd, const struct eg_hdr *h, bool is_req)
{
	if (eg_hdr_is(h, "content-length")) {
		int64_t v;
		char buf[20];

		if (hd->has_length || h->vlen == 0 || h->vlen > 18 ||
		    strspn(h->value, "0123456789") < h->vlen)
			return EG_R_AMBIGUOUS_LENGTH;
		memcpy(buf, h->value, h->vlen);
		buf[h->vlen] = '\0';
		if (kz_parse_int(buf, 0, INT64_MAX, &v) != 0)
			return EG_R_AMBIGUOUS_LENGTH;
		hd->has_length = true;
		hd->length = (uint64_t)v;
	} else if (eg_hdr_is(h, "transfer-encoding")) {
		if (hd->chunked || !ieq(h->value, h->vlen, "chunked"))
			return EG_R_BAD_TRANSFER_ENCODING;
		hd->chunked = true;
	} else if (eg_hdr_is(h, "connection")) {
		if (names_framing(h))
			return EG_R_BAD_CONNECTION;
		hd->has_connection = true;
		if (lists(h, "close"))
			hd->close = true;
	} else if (is_req && eg_hdr_is(h, "expect")) {
		if (!ieq(h->value, h->vlen, "100-continue"))
			return EG_R_BAD_EXPECT;
		hd->expect_continue = true;
	} else if (is_req && eg_hdr_is(h, "proxy-authorization")) {
		if (hd->proxy_auth != NULL)
			return EG_R_BAD_HEADER;
		hd->proxy_auth = h;
	}
	return EG_R_NONE;
}

static bool
keeps_alive_10(const struct eg_head *hd)
{
	for (size_t i = 0; i < hd->nh; i++)
		if (eg_hdr_is(&hd->h[i], "connection") &&
		    lists(&hd->h[i], "keep-alive"))
			return true;
	return false;
}

enum eg_reason
eg_http_parse(char *buf, size_t len, bool is_req, struct eg_head *hd)
{
	const char *p = buf, *end = buf + len, *e;
	enum eg_reason r;

	/* Everything but the header array, which is read only below nh. */
	memset(hd, 0, offsetof(struct eg_head, h));
	memset(&hd->nh, 0, sizeof(*hd) - offsetof(struct eg_head, nh));
	if (len < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0)
		return EG_R_BAD_HEAD;
	if ((e = line_end(p, end)) == NULL)
		return EG_R_BAD_HEAD;
	r = is_req ? parse_request_line(p, e, hd) : parse_status_line(p, e, hd);
	if (r != EG_R_NONE)
		return r;
	for (p = e + 2; p < end - 2; p = e + 2) {
		if ((e = line_end(p, end)) == NULL)
			return EG_R_BAD_HEADER;
		if (hd->nh == EG_HDR_MAX_COUNT)
			return EG_R_TOO_MANY_HEADERS;
		if ((r = parse_header(p, e, &hd->h[hd->nh])) != EG_R_NONE ||
		    (r = framing(hd, &hd->h[hd->nh], is_req)) != EG_R_NONE)
			return r;
		hd->nh++;
	}
	if (hd->chunked && hd->has_length)
		return EG_R_AMBIGUOUS_LENGTH;
	if (hd->chunked && hd->minor == 0)
		return EG_R_BAD_TRANSFER_ENCODING;
	if (hd->minor == 0 && !keeps_alive_10(hd))
		hd->close = true;
	return EG_R_NONE;
}

bool
eg_hdr_hop(const struct eg_head *hd, const struct eg_hdr *h)
{
	/* clang-format would lay the initializer out as a block. */
	/* clang-format off */
#define HOP(s) {s, sizeof(s) - 1}
	/* clang-format on */
	static const struct {
		const char *s;
		size_t n;
	} hop[] = {HOP("connection"), HOP("keep-alive"),
	    HOP("proxy-connection"), HOP("proxy-authorization"),
	    HOP("proxy-authenticate"), HOP("te"), HOP("upgrade"), HOP("expect"),
	    HOP("host")};
#undef HOP
	char name[64];

	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (hop[i].n == h->nlen &&
		    strncasecmp(h->name, hop[i].s, h->nlen) == 0)
			return true;
	/* Transfer-Encoding stays: chunked bodies pass through unchanged.
	 * Without a Connection header no other name is hop-by-hop. */
	if (!hd->has_connection || h->nlen >= sizeof(name) ||
	    eg_hdr_is(h, "transfer-encoding"))
		return false;
	memcpy(name, h->name, h->nlen);
	name[h->nlen] = '\0';
	for (size_t i = 0; i < hd->nh; i++)
		if (eg_hdr_is(&hd->h[i], "connection") &&
		    lists(&hd->h[i], name))
			return true;
	return false;
}

int
eg_http_authority(const char *s, size_t len, uint16_t dflt, char *host,
    size_t hlen, uint16_t *port)
{
	const char *colon = NULL, *hend;
	int64_t v = dflt;
	char buf[8];

	if (len == 0)
		return KZ_EINVAL;
	if (s[0] == '[') {
		const char *rb = memchr(s, ']', len);

		if (rb == NULL)
			return KZ_EINVAL;
		hend = rb + 1;
		if (hend < s + len) {
			if (*hend != ':')
				return KZ_EINVAL;
			colon = hend;
		}
	} else {
		colon = memrchr(s, ':', len);
		hend = colon ? colon : s + len;
	}
	if (colon != NULL) {
		size_t pl = (size_t)(s + len - colon - 1);

		if (pl == 0 || pl >= sizeof(buf))
			return KZ_EINVAL;
		memcpy(buf, colon + 1, pl);
		buf[pl] = '\0';
		if (strspn(buf, "0123456789") != pl ||
		    kz_parse_int(buf, 1, 65535, &v) != 0)
			return KZ_EINVAL;
	}
	if (hend == s || (size_t)(hend - s) >= hlen)
		return KZ_EINVAL;
	memcpy(host, s, (size_t)(hend - s));
	host[hend - s] = '\0';
	*port = (uint16_t)v;
	return 0;
}

int
eg_http_absolute(const char *s, size_t len, char *host, size_t hlen,
    uint16_t *port, const char **path, size_t *plen)
{
	const char *a, *ae, *at;

	if (len < 8 || strncasecmp(s, "http://", 7) != 0)
		return KZ_EINVAL;
	a = s + 7;
	for (ae = a; ae < s + len && *ae != '/' && *ae != '?'; ae++)
		if (*ae == '#')
			return KZ_EINVAL;
	if (memchr(s, '#', len) != NULL)
		return KZ_EINVAL;
	/* Userinfo is dropped: it is never sent on, logged or recorded. */
	if ((at = memrchr(a, '@', (size_t)(ae - a))) != NULL)
		a = at + 1;
	if (eg_http_authority(a, (size_t)(ae - a), 80, host, hlen, port) != 0)
		return KZ_EINVAL;
	*path = ae;
	*plen = (size_t)(s + len - ae);
	return 0;
}

int
eg_http_grant(const char *v, size_t vlen, char *out, size_t len)
{
	unsigned char dec[EG_GRANT_MAX + 128];
	size_t dlen;
	const char *colon;

	if (vlen > 7 && strncasecmp(v, "Bearer ", 7) == 0) {
		if (vlen - 7 >= len)
			return KZ_ETOOBIG;
		memcpy(out, v + 7, vlen - 7);
		out[vlen - 7] = '\0';
		return 0;
	}
	if (vlen <= 6 || strncasecmp(v, "Basic ", 6) != 0 ||
	    sodium_base642bin(dec, sizeof(dec) - 1, v + 6, vlen - 6, NULL,
	        &dlen, NULL, sodium_base64_VARIANT_ORIGINAL) != 0)
		return KZ_EINVAL;
	/* user:password, the password being the grant. */
	if ((colon = memchr(dec, ':', dlen)) == NULL ||
	    dlen - (size_t)(colon - (char *)dec) - 1 >= len) {
		sodium_memzero(dec, sizeof(dec));
		return KZ_EINVAL;
	}
	dlen -= (size_t)(colon - (char *)dec) + 1;
	memcpy(out, colon + 1, dlen);
	out[dlen] = '\0';
	sodium_memzero(dec, sizeof(dec));
	return 0;
}

/* ---- chunked bodies ---- */

enum {
	CK_SIZE,
	CK_EXT,
	CK_SIZE_LF,
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TRAILER_START,
	CK_TRAILER,
	CK_TRAILER_LF,
	CK_END_LF
};

#define CK_LINE_MAX 4096

static int
hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int
ck_byte(struct eg_chunk *c, char ch)
{
	int h;

	switch (c->st) {
	case CK_SIZE:
		if ((h = hexval(ch)) >= 0 && c->ndig < 15) {
			c->left = c->left * 16 + (uint64_t)h;
			c->ndig++;
		} else if (c->ndig > 0 && ch == ';') {
			c->st = CK_EXT;
		} else if (c->ndig > 0 && ch == '\r') {
			c->st = CK_SIZE_LF;
		} else {
			return -1;
		}
		return 0;
	case CK_EXT:
		if (ch == '\r')
			c->st = CK_SIZE_LF;
		else if (((unsigned char)ch < ' ' && ch != '\t') ||
		    ++c->linelen > CK_LINE_MAX)
			return -1;
		return 0;
	case CK_SIZE_LF:
		if (ch != '\n')
			return -1;
		c->linelen = 0;
		c->st = c->left == 0 ? CK_TRAILER_START : CK_DATA;
		return 0;
	case CK_DATA_CR:
		if (ch != '\r')
			return -1;
		c->st = CK_DATA_LF;
		return 0;
	case CK_DATA_LF:
		if (ch != '\n')
			return -1;
		c->st = CK_SIZE;
		c->ndig = 0;
		return 0;
	case CK_TRAILER_START:
		c->st = ch == '\r' ? CK_END_LF : CK_TRAILER;
		return ch == '\n' ? -1 : 0;
	case CK_TRAILER:
		if (ch == '\r')
			c->st = CK_TRAILER_LF;
		else if (ch == '\n' || ++c->linelen > CK_LINE_MAX)
			return -1;
		return 0;
	case CK_TRAILER_LF:
		if (ch != '\n')
			return -1;
		c->st = CK_TRAILER_START;
		c->linelen = 0;
		return 0;
	case CK_END_LF:
		return ch == '\n' ? 1 : -1;
	}
	return -1;
}

long
eg_chunk_feed(struct eg_chunk *c, const char *p, size_t n, bool *done)
{
	size_t i = 0;

	*done = false;
	while (i < n) {
		int r;

		if (c->st == CK_DATA) {
			size_t k = n - i < c->left ? n - i : (size_t)c->left;

			i += k;
			c->left -= k;
			if (c->left == 0)
				c->st = CK_DATA_CR;
			continue;
		}
		if ((r = ck_byte(c, p[i++])) < 0)
			return -1;
		if (r == 1) {
			*done = true;
			return (long)i;
		}
	}
	return (long)n;
}
