/* HTTP/1.1 heads and chunked bodies: what is forwarded parses, and every
 * smuggling ambiguity or malformed framing is refused. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "egress.h"
#include "kz_check.h"
#include "banned.h"

static const char *
parse(const char *s, bool req, struct eg_head *hd)
{
	static char buf[EG_HDR_MAX_BYTES];

	snprintf(buf, sizeof(buf), "%s", s);
	return eg_reason_str(eg_http_parse(buf, strlen(buf), req, hd));
}

static const struct {
	const char *head;
	bool ok;
} reqs[] = {
    {"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", true},
    {"CONNECT a.example:443 HTTP/1.1\r\n\r\n", true},
    {"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n", true},
    {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", true},
    {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n", true},
    /* smuggling */
    {"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\n"
     "Transfer-Encoding: chunked\r\n\r\n",
        false},
    {"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\n"
     "Content-Length: 5\r\n\r\n",
        false},
    {"POST http://a/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", false},
    {"POST http://a/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n", false},
    {"POST http://a/ HTTP/1.1\r\nContent-Length: \r\n\r\n", false},
    {"POST http://a/ HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n", false},
    {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        false},
    {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
     "Transfer-Encoding: chunked\r\n\r\n",
        false},
    {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n", false},
    {"POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\nHost: a\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\nHost: a\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\nHo\rst: a\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\nX: a\001b\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\n: a\r\n\r\n", false},
    {"GET http://a/ HTTP/2.0\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1 \r\n\r\n", false},
    {"GET  http://a/ HTTP/1.1\r\n\r\n", false},
    {"G(T http://a/ HTTP/1.1\r\n\r\n", false},
    {"GET http://a/\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\nProxy-Authorization: a\r\n"
     "Proxy-Authorization: b\r\n\r\n",
        false},
    {"GET http://a/ HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", false},
    /* A Connection header naming what the proxy frames or routes by:
     * stripped on the way while the body is still framed by it. */
    {"POST http://a/ HTTP/1.1\r\nConnection: content-length\r\n"
     "Content-Length: 5\r\n\r\n",
        false},
    {"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\n"
     "Connection: keep-alive,Content-Length\r\n\r\n",
        false},
    {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
     "Connection: close, TRANSFER-ENCODING \r\n\r\n",
        false},
    {"GET http://a/ HTTP/1.1\r\nConnection: x, host\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\nConnection: proxy-authorization\r\n\r\n",
        false},
    {"GET http://a/ HTTP/1.1\r\nConnection: keep-alive\r\n"
     "Connection: Expect\r\n\r\n",
        false},
    {"GET http://a/ HTTP/1.1\r\nConnection: content-length-x, x-host\r\n"
     "\r\n",
        true},
    {"GET http://a/ HTTP/1.1\r\nConnection: keep-alive, te, upgrade\r\n"
     "\r\n",
        true},
};

START_TEST(test_requests)
{
	struct eg_head hd;

	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		const char *r = parse(reqs[i].head, true, &hd);

		ck_assert_msg((r == NULL) == reqs[i].ok, "case %zu: %s", i,
		    r ? r : "accepted");
	}
}
END_TEST

START_TEST(test_header_count)
{
	char buf[EG_HDR_MAX_BYTES];
	struct eg_head hd;
	size_t n = 0;

	n += (size_t)snprintf(buf, sizeof(buf), "GET http://a/ HTTP/1.1\r\n");
	for (int i = 0; i <= EG_HDR_MAX_COUNT; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X%d: y\r\n",
		    i);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
	ck_assert_str_eq(eg_reason_str(eg_http_parse(buf, n, true, &hd)),
	    "too_many_headers");
}
END_TEST

START_TEST(test_framing_and_close)
{
	struct eg_head hd;

	ck_assert_ptr_null(parse("GET http://a/ HTTP/1.0\r\n\r\n", true, &hd));
	ck_assert(hd.close);
	ck_assert_ptr_null(parse("GET http://a/ HTTP/1.0\r\n"
	                         "Connection: keep-alive\r\n\r\n",
	    true, &hd));
	ck_assert(!hd.close);
	ck_assert_ptr_null(parse("GET http://a/ HTTP/1.1\r\n"
	                         "Connection: Keep-Alive, close\r\n\r\n",
	    true, &hd));
	ck_assert(hd.close);
	ck_assert_ptr_null(
	    parse("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false, &hd));
	ck_assert_int_eq(hd.status, 200);
	ck_assert(hd.has_length && hd.length == 12);
	ck_assert_ptr_nonnull(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
	                            "Transfer-Encoding: chunked\r\n\r\n",
	    false, &hd));
	ck_assert_ptr_nonnull(parse("HTTP/1.1 20 OK\r\n\r\n", false, &hd));
	ck_assert_ptr_nonnull(parse("HTTP/1.1 200OK\r\n\r\n", false, &hd));
	ck_assert_ptr_null(parse("HTTP/1.1 204\r\n\r\n", false, &hd));
	/* A response is held to the same: the proxy frames it too. */
	ck_assert_str_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	                       "Connection: Content-Length\r\n\r\n",
	                     false, &hd),
	    "bad_connection");
	ck_assert_str_eq(parse("HTTP/1.1 200 OK\r\nConnection: close,"
	                       "transfer-encoding\r\nTransfer-Encoding: "
	                       "chunked\r\n\r\n",
	                     false, &hd),
	    "bad_connection");
	ck_assert_ptr_null(parse("HTTP/1.1 200 OK\r\nConnection: close\r\n"
	                         "Content-Length: 2\r\n\r\n",
	    false, &hd));
}
END_TEST

START_TEST(test_hop_by_hop)
{
	struct eg_head hd;

	ck_assert_ptr_null(
	    parse("GET http://a/ HTTP/1.1\r\nConnection: X-Secret"
	          "\r\nX-Secret: 1\r\nProxy-Authorization: Bearer g\r\n"
	          "Keep-Alive: 5\r\nX-Fine: 2\r\nTransfer-Encoding: "
	          "chunked\r\n\r\n",
	        true, &hd));
	ck_assert_uint_eq(hd.nh, 6);
	ck_assert(eg_hdr_hop(&hd, &hd.h[0])); /* Connection */
	ck_assert(eg_hdr_hop(&hd, &hd.h[1])); /* listed in Connection */
	ck_assert(eg_hdr_hop(&hd, &hd.h[2])); /* the grant */
	ck_assert(eg_hdr_hop(&hd, &hd.h[3]));
	ck_assert(!eg_hdr_hop(&hd, &hd.h[4]));
	ck_assert(!eg_hdr_hop(&hd, &hd.h[5]));
	/* A name listed by a Connection header that comes after it; a
	 * response's own; none without a Connection header. */
	ck_assert_ptr_null(
	    parse("GET http://a/ HTTP/1.1\r\nX-Secret: 1\r\n"
	          "X-Fine: 2\r\nconnection: x-fine , X-SECRET\r\n\r\n",
	        true, &hd));
	ck_assert(eg_hdr_hop(&hd, &hd.h[0]));
	ck_assert(eg_hdr_hop(&hd, &hd.h[1]));
	ck_assert_ptr_null(parse("HTTP/1.1 200 OK\r\nConnection: X-Up\r\n"
	                         "X-Up: 1\r\nUpgrade: h2c\r\nTE: "
	                         "trailers\r\nX-Down: 1\r\n\r\n",
	    false, &hd));
	ck_assert(eg_hdr_hop(&hd, &hd.h[1]));
	ck_assert(eg_hdr_hop(&hd, &hd.h[2]));
	ck_assert(eg_hdr_hop(&hd, &hd.h[3]));
	ck_assert(!eg_hdr_hop(&hd, &hd.h[4]));
	ck_assert_ptr_null(parse("GET http://a/ HTTP/1.1\r\nHost: a\r\n"
	                         "X-Secret: 1\r\n\r\n",
	    true, &hd));
	ck_assert(eg_hdr_hop(&hd, &hd.h[0]));
	ck_assert(!eg_hdr_hop(&hd, &hd.h[1]));
}
END_TEST

/* Every byte as the first of a header name and of a method: only
 * RFC 9110 tchars are taken. */
START_TEST(test_tchar)
{
	const char *tchars = "!#$%&'*+-.^_`|~";
	struct eg_head hd;
	char req[64];

	for (int c = 1; c < 256; c++) {
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr(tchars, c) != NULL;

		snprintf(req, sizeof(req),
		    "GET http://a/ HTTP/1.1\r\n"
		    "%cX: 1\r\n\r\n",
		    c);
		ck_assert_msg((parse(req, true, &hd) == NULL) == ok,
		    "header name byte 0x%02x", c);
		snprintf(req, sizeof(req), "%cET http://a/ HTTP/1.1\r\n\r\n",
		    c);
		ck_assert_msg((parse(req, true, &hd) == NULL) == ok,
		    "method byte 0x%02x", c);
	}
}
END_TEST

START_TEST(test_targets)
{
	char host[300];
	uint16_t port;
	const char *path;
	size_t plen;

	ck_assert_int_eq(eg_http_absolute("http://u:p@Example.com:8080/x?q", 31,
	                     host, sizeof(host), &port, &path, &plen),
	    0);
	ck_assert_str_eq(host, "Example.com");
	ck_assert_uint_eq(port, 8080);
	ck_assert_uint_eq(plen, 4);
	ck_assert_int_eq(eg_http_absolute("http://[::1]/", 13, host,
	                     sizeof(host), &port, &path, &plen),
	    0);
	ck_assert_str_eq(host, "[::1]");
	ck_assert_uint_eq(port, 80);
	ck_assert_int_ne(eg_http_absolute("https://a/", 10, host, sizeof(host),
	                     &port, &path, &plen),
	    0);
	ck_assert_int_ne(eg_http_absolute("/x", 2, host, sizeof(host), &port,
	                     &path, &plen),
	    0);
	ck_assert_int_ne(eg_http_absolute("http://a:0/", 11, host, sizeof(host),
	                     &port, &path, &plen),
	    0);
	ck_assert_int_ne(eg_http_absolute("http://a:99999/", 15, host,
	                     sizeof(host), &port, &path, &plen),
	    0);
	ck_assert_int_ne(eg_http_absolute("http://a/#f", 11, host, sizeof(host),
	                     &port, &path, &plen),
	    0);
	ck_assert_int_eq(eg_http_authority("a.example:443", 13, 0, host,
	                     sizeof(host), &port),
	    0);
	ck_assert_uint_eq(port, 443);
	ck_assert_int_eq(eg_http_authority("[fe80::1%25eth0]:80", 19, 0, host,
	                     sizeof(host), &port),
	    0);
	ck_assert_str_eq(host, "[fe80::1%25eth0]");
	ck_assert_int_ne(eg_http_authority("a.example:", 10, 0, host,
	                     sizeof(host), &port),
	    0);
	ck_assert_int_ne(eg_http_authority("a.example:4x3", 13, 0, host,
	                     sizeof(host), &port),
	    0);
	ck_assert_int_ne(eg_http_authority("[::1]443", 8, 0, host, sizeof(host),
	                     &port),
	    0);
}
END_TEST

START_TEST(test_grant_header)
{
	char g[64];

	ck_assert_int_eq(eg_http_grant("Bearer abc.def", 14, g, sizeof(g)), 0);
	ck_assert_str_eq(g, "abc.def");
	/* Basic run:abc.def */
	ck_assert_int_eq(eg_http_grant("Basic cnVuOmFiYy5kZWY=", 22, g,
	                     sizeof(g)),
	    0);
	ck_assert_str_eq(g, "abc.def");
	ck_assert_int_ne(eg_http_grant("Basic cnVu", 10, g, sizeof(g)), 0);
	ck_assert_int_ne(eg_http_grant("Digest x", 8, g, sizeof(g)), 0);
	ck_assert_int_ne(eg_http_grant("Basic !!!", 9, g, sizeof(g)), 0);
}
END_TEST

static long
feed_all(const char *s, bool *done)
{
	struct eg_chunk c;

	memset(&c, 0, sizeof(c));
	return eg_chunk_feed(&c, s, strlen(s), done);
}

/* What a response head still arriving may begin with. */
static const struct {
	const char *s;
	bool ok;
} prefixes[] = {
    {"H", true},
    {"HTTP/1.", true},
    {"HTTP/1.1 200 OK\r", true},
    {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", true},
    {"HTTP/1.1 200 OK\r\nX: a\tb\r\n\r", true},
    {"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", false}, /* bare LF */
    {"HTTP/1.1 200 OK\r\nX: 1\n", false},
    {"HTTP/1.1 200 OK\rX", false}, /* lone CR */
    {"HTTP/1.1 200 \x01K", false},
    {"HTTP/1.1 200 OK\x7f", false},
    {"SSH-2.0-OpenSSH_9.2\r\n", false},
    {"http/1.1 200 OK\r\n", false},
    {"\r\n", false},
    {"<html>", false},
};

START_TEST(test_resp_prefix)
{
	const char *s = prefixes[_i].s;

	ck_assert_msg(eg_http_resp_prefix_ok(s, strlen(s)) == prefixes[_i].ok,
	    "case %d: %s", _i, s);
}
END_TEST

START_TEST(test_chunks)
{
	static const struct {
		const char *body;
		long want; /* bytes of the body; -1 refused; 0 incomplete */
	} t[] = {
	    {"5\r\nhello\r\n0\r\n\r\n", 15},
	    {"5\r\nhello\r\n0\r\n\r\nGET next", 15},
	    {"5;ext=1\r\nhello\r\n0\r\n\r\n", 21},
	    {"A\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n", 32},
	    {"5\r\nhello\r\n", 0},
	    {"5\r\nhelloX\r\n0\r\n\r\n", -1},
	    {"g\r\n", -1},
	    {"-5\r\n", -1},
	    {" 5\r\n", -1},
	    {"5 \r\n", -1},
	    {"5\n", -1},
	    {"\r\n", -1},
	    {"1000000000000000\r\n", -1},
	    {"0\r\n\n", -1},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		bool done;
		long r = feed_all(t[i].body, &done);

		if (t[i].want < 0)
			ck_assert_msg(r < 0, "case %zu: %ld", i, r);
		else if (t[i].want == 0)
			ck_assert_msg(r >= 0 && !done, "case %zu", i);
		else
			ck_assert_msg(done && r == t[i].want, "case %zu: %ld",
			    i, r);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("egress_http");
	TCase *tc = tcase_create("http");

	tcase_add_test(tc, test_requests);
	tcase_add_test(tc, test_header_count);
	tcase_add_test(tc, test_framing_and_close);
	tcase_add_test(tc, test_hop_by_hop);
	tcase_add_test(tc, test_tchar);
	tcase_add_test(tc, test_targets);
	tcase_add_test(tc, test_grant_header);
	tcase_add_test(tc, test_chunks);
	tcase_add_loop_test(tc, test_resp_prefix, 0,
	    sizeof(prefixes) / sizeof(prefixes[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
