/* kz-sandbox relay.c: proxy request heads, the grant injected once. */
#include <check.h>
#include <string.h>

#include "sbx.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *in;
	int want;
	const char *expect;
} cases[] = {
    {"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n", 0,
        "CONNECT example.org:443 HTTP/1.1\r\nProxy-Authorization: Bearer "
        "G1\r\nHost: example.org:443\r\n\r\n"},
    {"GET http://example.org/a HTTP/1.1\r\nProxy-Authorization: Bearer "
     "forged\r\nproxy-authorization: Basic eA==\r\nAccept: */*\r\n\r\n",
        0,
        "GET http://example.org/a HTTP/1.1\r\nProxy-Authorization: "
        "Bearer G1\r\nAccept: */*\r\nConnection: close\r\n\r\n"},
    /* A plain-HTTP head carries one request: the client's keep-alive
     * fields go, the relay's Connection: close is the only one. */
    {"GET http://example.org/ HTTP/1.1\r\nProxy-Connection: keep-alive\r\n"
     "connection: Keep-Alive\r\nKeep-Alive: timeout=5\r\nConnectionX: "
     "1\r\n\r\n",
        0,
        "GET http://example.org/ HTTP/1.1\r\nProxy-Authorization: Bearer "
        "G1\r\nConnectionX: 1\r\nConnection: close\r\n\r\n"},
    {"CONNECT example.org:443 HTTP/1.0\r\n\r\n", 0,
        "CONNECT example.org:443 HTTP/1.0\r\nProxy-Authorization: Bearer "
        "G1\r\n\r\n"},
    {"GET /relative HTTP/1.1\r\n\r\n", KZ_EPROTO, NULL},
    {"CONNECT example.org HTTP/1.1\r\n\r\n", KZ_EPROTO, NULL},
    {"CONNECT a/b:443 HTTP/1.1\r\n\r\n", KZ_EPROTO, NULL},
    {"GET http://x HTTP/2\r\n\r\n", KZ_EPROTO, NULL},
    {"GET  http://x HTTP/1.1\r\n\r\n", KZ_EPROTO, NULL},
    {"GET http://x HTTP/1.1\r\nNoColon\r\n\r\n", KZ_EPROTO, NULL},
    {"GET http://x HTTP/1.1\r\nA: b\nInjected: 1\r\n\r\n", KZ_EPROTO, NULL},
    {"GET http://x HTTP/1.1\r\n", KZ_EPROTO, NULL},
    {"", KZ_EPROTO, NULL},
};

START_TEST(test_heads)
{
	char out[4096];
	size_t n = 0;
	int r = sbx_relay_head(cases[_i].in, strlen(cases[_i].in), "G1", out,
	    sizeof(out), &n);

	ck_assert_int_eq(r, cases[_i].want);
	if (r == 0) {
		ck_assert_uint_eq(n, strlen(cases[_i].expect));
		ck_assert(memcmp(out, cases[_i].expect, n) == 0);
	}
}
END_TEST

START_TEST(test_bad_grant_and_room)
{
	const char *in = "CONNECT a:1 HTTP/1.1\r\n\r\n";
	char out[40];
	size_t n;

	ck_assert_int_eq(sbx_relay_head(in, strlen(in), "bad grant", out,
	                     sizeof(out), &n),
	    KZ_EPROTO);
	ck_assert_int_eq(sbx_relay_head(in, strlen(in), "G\r\nX: 1", out,
	                     sizeof(out), &n),
	    KZ_EPROTO);
	ck_assert_int_eq(sbx_relay_head(in, strlen(in), "G1", out, 10, &n),
	    KZ_ETOOBIG);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-relay");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_heads, 0,
	    sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_bad_grant_and_room);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
