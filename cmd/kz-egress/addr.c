/*
 * The proxy's own IP-literal parser and the special-purpose classifier.
 *
 * A resolver must never see a host that is really an address: glibc reads
 * "127.1", "2130706433" and "0x7f.1" as 127.0.0.1.  So every host is first
 * put through the WHATWG URL host rules (the strictest common ground of
 * browsers, curl and libc): a host whose last label is numeric is an IPv4
 * address or is refused, never a name.  Classes follow the IANA IPv4 and
 * IPv6 special-purpose address registries.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "egress.h"
#include "banned.h"

/* The refusal each class gives; its string is the class's name too. */
static const enum eg_reason class_reasons[EG_C_COUNT_] = {
    [EG_C_PUBLIC] = EG_R_NONE,
    [EG_C_PRIVATE_USE] = EG_R_PRIVATE_USE,
    [EG_C_SHARED] = EG_R_SHARED_ADDRESS,
    [EG_C_UNIQUE_LOCAL] = EG_R_UNIQUE_LOCAL,
    [EG_C_LOOPBACK] = EG_R_LOOPBACK,
    [EG_C_UNSPECIFIED] = EG_R_UNSPECIFIED,
    [EG_C_LINK_LOCAL] = EG_R_LINK_LOCAL,
    [EG_C_METADATA] = EG_R_METADATA,
    [EG_C_MULTICAST] = EG_R_MULTICAST,
    [EG_C_BROADCAST] = EG_R_BROADCAST,
    [EG_C_DOCUMENTATION] = EG_R_DOCUMENTATION,
    [EG_C_BENCHMARKING] = EG_R_BENCHMARKING,
    [EG_C_PROTOCOL] = EG_R_PROTOCOL_ASSIGNMENT,
    [EG_C_RESERVED] = EG_R_RESERVED,
    [EG_C_DISCARD] = EG_R_DISCARD_ONLY,
    [EG_C_SITE_LOCAL] = EG_R_SITE_LOCAL,
    [EG_C_LOCAL_NAT64] = EG_R_LOCAL_NAT64,
};

enum eg_reason
eg_class_reason(enum eg_class c)
{
	return c < EG_C_COUNT_ ? class_reasons[c] : EG_R_RESERVED;
}

const char *
eg_class_name(enum eg_class c)
{
	return c == EG_C_PUBLIC ? "public" : eg_reason_str(eg_class_reason(c));
}

bool
eg_class_protected(enum eg_class c)
{
	/* Private ranges are reachable in private_networks mode only, and
	 * only where the administrator listed them. */
	return c != EG_C_PUBLIC && c != EG_C_PRIVATE_USE && c != EG_C_SHARED &&
	    c != EG_C_UNIQUE_LOCAL;
}

/* ---- parsing ---- */

/* One IPv4 part: decimal, octal (leading 0) or hex (0x). -1 if invalid. */
static int
v4_part(const char *s, size_t n, uint64_t *out)
{
	unsigned base = 10;
	uint64_t v = 0;

	if (n == 0)
		return -1;
	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		/* A bare "0x" is zero to WHATWG but no number to libc, which
		 * would resolve "0x" as a name: refused, read neither way. */
		if (n == 2)
			return -1;
		base = 16;
		s += 2;
		n -= 2;
	} else if (n >= 2 && s[0] == '0') {
		base = 8;
		s++;
		n--;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned d;
		char ch = s[i];

		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			d = (unsigned)(ch - 'A' + 10);
		else
			return -1;
		if (d >= base)
			return -1;
		v = v * base + d;
		if (v > 0xffffffffull)
			return -1;
	}
	*out = v;
	return 0;
}

/*
 * Whether the last label is a number (WHATWG "ends in a number"): decimal
 * or octal digits, or 0x and hex digits, of any length and any value.  The
 * value is not checked here: "0x1a9fea9fe" or "1.0x100000000" is an address
 * that does not fit, refused by parse_v4, and never a name for DNS.
 */
static bool
ends_in_number(const char *s, size_t n)
{
	const char *last;
	size_t ln;

	if (n > 0 && s[n - 1] == '.')
		n--;
	last = memrchr(s, '.', n);
	last = last ? last + 1 : s;
	ln = (size_t)(s + n - last);
	if (ln == 0)
		return false;
	if (strspn(last, "0123456789") >= ln)
		return true;
	return ln >= 2 && last[0] == '0' &&
	    (last[1] == 'x' || last[1] == 'X') &&
	    strspn(last + 2, "0123456789abcdefABCDEF") >= ln - 2;
}

static int
parse_v4(const char *s, size_t n, struct eg_addr *out)
{
	uint64_t parts[4], v;
	size_t np = 0, i = 0;

	if (n > 0 && s[n - 1] == '.')
		n--;
	while (i <= n) {
		const char *dot = memchr(s + i, '.', n - i);
		size_t e = dot ? (size_t)(dot - s) : n;

		if (np == 4 || v4_part(s + i, e - i, &parts[np]) != 0)
			return KZ_EINVAL;
		np++;
		i = e + 1;
	}
	v = parts[np - 1];
	for (size_t k = 0; k + 1 < np; k++) {
		if (parts[k] > 255)
			return KZ_EINVAL;
	}
	if (v >= (1ull << (8 * (5 - np))))
		return KZ_EINVAL;
	for (size_t k = 0; k + 1 < np; k++)
		v += parts[k] << (8 * (3 - k));
	memset(out, 0, sizeof(*out));
	out->fam = 4;
	out->b[0] = (uint8_t)(v >> 24);
	out->b[1] = (uint8_t)(v >> 16);
	out->b[2] = (uint8_t)(v >> 8);
	out->b[3] = (uint8_t)v;
	return 1;
}

/* IPv6, bracketed or not, with an optional zone id ("%eth0", "%25eth0"). */
static int
parse_v6(const char *s, size_t n, struct eg_addr *out)
{
	char buf[64];
	const char *pct;

	if (n > 0 && s[0] == '[') {
		if (n < 2 || s[n - 1] != ']')
			return KZ_EINVAL;
		s++;
		n -= 2;
	}
	if ((pct = memchr(s, '%', n)) != NULL) {
		size_t z = (size_t)(s + n - pct) - 1;
		const char *zone = pct + 1;

		if (z >= 2 && zone[0] == '2' && zone[1] == '5') {
			zone += 2;
			z -= 2;
		}
		if (z == 0 || z > 32 ||
		    strspn(zone,
		        "abcdefghijklmnopqrstuvwxyz"
		        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") < z)
			return KZ_EINVAL;
		n = (size_t)(pct - s);
	}
	if (n == 0 || n >= sizeof(buf))
		return KZ_EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	memset(out, 0, sizeof(*out));
	out->fam = 6;
	if (inet_pton(AF_INET6, buf, out->b) != 1)
		return KZ_EINVAL;
	return 1;
}

int
eg_addr_parse_literal(const char *host, struct eg_addr *out)
{
	size_t n = strlen(host);

	if (n == 0 || n > EG_HOST_MAX + 2)
		return KZ_EINVAL;
	if (host[0] == '[' || memchr(host, ':', n) != NULL)
		return parse_v6(host, n, out);
	if (ends_in_number(host, n))
		return parse_v4(host, n, out);
	return 0;
}

int
eg_name_normalize(const char *host, char *out, size_t len)
{
	size_t n = strlen(host), lab = 0;

	if (n > 0 && host[n - 1] == '.')
		n--;
	if (n == 0 || n > EG_HOST_MAX || n >= len)
		return KZ_EINVAL;
	for (size_t i = 0; i < n; i++) {
		char ch = host[i];

		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		if (ch == '.') {
			if (lab == 0)
				return KZ_EINVAL;
			lab = 0;
		} else if ((ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_') {
			if (++lab > 63)
				return KZ_EINVAL;
		} else {
			return KZ_EINVAL;
		}
		out[i] = ch;
	}
	if (lab == 0)
		return KZ_EINVAL;
	out[n] = '\0';
	return 0;
}

/* ---- classification ---- */

struct range {
	uint8_t fam;
	uint8_t b[16];
	int plen;
	enum eg_class c;
};

#define V4(a, b_, c_, d, p, cls)                                               \
	{                                                                      \
		4, {a, b_, c_, d}, p, cls                                      \
	}

/* Most specific first: the first match wins. */
static const struct range v4_ranges[] = {
    V4(169, 254, 169, 254, 32, EG_C_METADATA),
    V4(169, 254, 170, 2, 32, EG_C_METADATA), /* AWS ECS */
    V4(169, 254, 170, 23, 32, EG_C_METADATA), /* AWS EKS */
    V4(100, 100, 100, 200, 32, EG_C_METADATA), /* Alibaba */
    V4(168, 63, 129, 16, 32, EG_C_METADATA), /* Azure */
    V4(192, 0, 0, 9, 32, EG_C_PUBLIC), /* PCP anycast */
    V4(192, 0, 0, 10, 32, EG_C_PUBLIC), /* TURN anycast */
    V4(255, 255, 255, 255, 32, EG_C_BROADCAST),
    V4(0, 0, 0, 0, 8, EG_C_UNSPECIFIED),
    V4(10, 0, 0, 0, 8, EG_C_PRIVATE_USE),
    V4(100, 64, 0, 0, 10, EG_C_SHARED),
    V4(127, 0, 0, 0, 8, EG_C_LOOPBACK),
    V4(169, 254, 0, 0, 16, EG_C_LINK_LOCAL),
    V4(172, 16, 0, 0, 12, EG_C_PRIVATE_USE),
    V4(192, 0, 0, 0, 24, EG_C_PROTOCOL),
    V4(192, 0, 2, 0, 24, EG_C_DOCUMENTATION),
    V4(192, 88, 99, 0, 24, EG_C_RESERVED), /* 6to4 relay */
    V4(192, 168, 0, 0, 16, EG_C_PRIVATE_USE),
    V4(198, 18, 0, 0, 15, EG_C_BENCHMARKING),
    V4(198, 51, 100, 0, 24, EG_C_DOCUMENTATION),
    V4(203, 0, 113, 0, 24, EG_C_DOCUMENTATION),
    V4(224, 0, 0, 0, 4, EG_C_MULTICAST),
    V4(240, 0, 0, 0, 4, EG_C_RESERVED),
};

#define V6(p, cls, ...)                                                        \
	{                                                                      \
		6, {__VA_ARGS__}, p, cls                                       \
	}

static const struct range v6_ranges[] = {
    V6(128, EG_C_METADATA, 0xfd, 0x00, 0x0e, 0xc2, [14] = 2, [15] = 0x54),
    V6(128, EG_C_METADATA, 0xfd, 0x00, 0x0e, 0xc2, [15] = 0x23),
    V6(128, EG_C_UNSPECIFIED, 0), V6(128, EG_C_LOOPBACK, [15] = 1),
    V6(64, EG_C_DISCARD, 0x01, 0x00),
    V6(64, EG_C_RESERVED, 0x01, 0x00, 0, 0, 0, 0, 0, 1), /* dummy */
    V6(48, EG_C_LOCAL_NAT64, 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01),
    V6(128, EG_C_PUBLIC, 0x20, 0x01, 0x00, 0x01, [15] = 1),
    V6(128, EG_C_PUBLIC, 0x20, 0x01, 0x00, 0x01, [15] = 2),
    V6(128, EG_C_PUBLIC, 0x20, 0x01, 0x00, 0x01, [15] = 3),
    V6(32, EG_C_PUBLIC, 0x20, 0x01, 0x00, 0x03), /* AMT */
    V6(48, EG_C_PUBLIC, 0x20, 0x01, 0x00, 0x04, 0x01, 0x12),
    V6(28, EG_C_PUBLIC, 0x20, 0x01, 0x00, 0x20), /* ORCHIDv2 */
    V6(28, EG_C_PUBLIC, 0x20, 0x01, 0x00, 0x30), /* DRIP */
    V6(48, EG_C_BENCHMARKING, 0x20, 0x01, 0x00, 0x02, 0x00, 0x00),
    V6(23, EG_C_PROTOCOL, 0x20, 0x01),
    V6(32, EG_C_DOCUMENTATION, 0x20, 0x01, 0x0d, 0xb8),
    V6(20, EG_C_DOCUMENTATION, 0x3f, 0xff),
    V6(16, EG_C_RESERVED, 0x5f, 0x00), /* SRv6 SIDs */
    V6(7, EG_C_UNIQUE_LOCAL, 0xfc), V6(10, EG_C_LINK_LOCAL, 0xfe, 0x80),
    V6(10, EG_C_SITE_LOCAL, 0xfe, 0xc0), V6(8, EG_C_MULTICAST, 0xff),
    V6(3, EG_C_PUBLIC, 0x20), /* global unicast */
    V6(0, EG_C_RESERVED, 0), /* the rest is not allocated */
};

static bool
prefix_match(const uint8_t *a, const uint8_t *b, int plen)
{
	int full = plen / 8, rest = plen % 8;

	if (memcmp(a, b, (size_t)full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[full] ^ b[full]) & (0xff << (8 - rest)) & 0xff) == 0;
}

bool
eg_cidr_match(const struct eg_cidr *c, const struct eg_addr *a)
{
	return c->a.fam == a->fam && prefix_match(c->a.b, a->b, c->plen);
}

static enum eg_class
table_class(const struct eg_addr *a)
{
	const struct range *t = a->fam == 4 ? v4_ranges : v6_ranges;
	size_t n = a->fam == 4 ? sizeof(v4_ranges) / sizeof(v4_ranges[0]) :
	                         sizeof(v6_ranges) / sizeof(v6_ranges[0]);

	for (size_t i = 0; i < n; i++)
		if (prefix_match(t[i].b, a->b, t[i].plen))
			return t[i].c;
	return EG_C_PUBLIC;
}

static void
v4_at(const uint8_t *p, bool invert, struct eg_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->fam = 4;
	for (int i = 0; i < 4; i++)
		out->b[i] = invert ? (uint8_t)~p[i] : p[i];
}

/* The worse of two classes: any denial beats public. */
static enum eg_class
worse(enum eg_class a, enum eg_class b)
{
	return a != EG_C_PUBLIC ? a : b;
}

enum eg_class
eg_addr_classify(const struct eg_addr *a, struct eg_addr *eff)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	static const uint8_t zero[12];
	const uint8_t *b = a->b;
	struct eg_addr srv;

	*eff = *a;
	if (a->fam == 4)
		return table_class(a);
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0 ||
	    (memcmp(b, zero, 12) == 0 && (b[12] | b[13] | b[14]) != 0)) {
		/* mapped, NAT64 well-known prefix, IPv4-compatible */
		v4_at(b + 12, false, eff);
		return table_class(eff);
	}
	if (b[0] == 0x20 && b[1] == 0x02) { /* 6to4 */
		v4_at(b + 2, false, eff);
		return table_class(eff);
	}
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
		/* Teredo: server at bits 32-63, client obfuscated at 96-127;
		 * the client is where the packets finally go. */
		v4_at(b + 4, false, &srv);
		v4_at(b + 12, true, eff);
		return worse(table_class(eff), table_class(&srv));
	}
	return table_class(a);
}

int
eg_cidr_parse(const char *s, struct eg_cidr *out)
{
	char buf[64];
	const char *sl = strchr(s, '/');
	size_t n = sl ? (size_t)(sl - s) : strlen(s);
	int64_t plen;
	struct eg_addr a;
	int max;

	if (n == 0 || n >= sizeof(buf))
		return KZ_EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	memset(&a, 0, sizeof(a));
	/* CIDRs are written canonically: no octal or shortened forms. */
	if (inet_pton(AF_INET, buf, a.b) == 1)
		a.fam = 4;
	else if (inet_pton(AF_INET6, buf, a.b) == 1)
		a.fam = 6;
	else
		return KZ_EINVAL;
	max = a.fam == 4 ? 32 : 128;
	if (sl == NULL)
		plen = max;
	else if (kz_parse_int(sl + 1, 0, max, &plen) != 0)
		return KZ_EINVAL;
	out->a = a;
	out->plen = (int)plen;
	return 0;
}

void
eg_addr_str(const struct eg_addr *a, char *out, size_t len)
{
	if (inet_ntop(a->fam == 4 ? AF_INET : AF_INET6, a->b, out,
	        (socklen_t)len) == NULL &&
	    len > 0)
		out[0] = '\0';
}

bool
eg_addr_eq(const struct eg_addr *a, const struct eg_addr *b)
{
	return a->fam == b->fam &&
	    memcmp(a->b, b->b, a->fam == 4 ? 4 : 16) == 0;
}

socklen_t
eg_addr_sockaddr(const struct eg_addr *a, uint16_t port,
    struct sockaddr_storage *ss)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};

	memset(ss, 0, sizeof(*ss));
	if (a->fam == 4 || memcmp(a->b, mapped, 12) == 0) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, a->fam == 4 ? a->b : a->b + 12, 4);
		return sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, a->b, 16);
		return sizeof(*s6);
	}
}
