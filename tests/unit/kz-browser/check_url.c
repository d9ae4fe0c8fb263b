/* The opening address's origin: what kz-egress is asked to admit and what
 * the agent's same-origin rule compares.  Hostile spellings are refused,
 * never reduced to something admissible. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "kzb.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *url;
	int ok;
	const char *origin, *host;
	int port;
} cases[] = {
    {"http://origin.kz.test/", 1, "http://origin.kz.test", "origin.kz.test",
        80},
    {"https://Example.COM/a?b#c", 1, "https://example.com", "example.com", 443},
    {"http://h:8080/x", 1, "http://h:8080", "h", 8080},
    {"https://h:443/", 1, "https://h", "h", 443},
    {"http://h?q", 1, "http://h", "h", 80},
    {"http://h#f", 1, "http://h", "h", 80},
    /* Credentials in the address: never admitted. */
    {"http://user:pw@h/", 0, NULL, NULL, 0},
    {"http://h@169.254.169.254/", 0, NULL, NULL, 0},
    /* Not http(s). */
    {"file:///etc/passwd", 0, NULL, NULL, 0},
    {"chrome://version", 0, NULL, NULL, 0},
    {"javascript:alert(1)", 0, NULL, NULL, 0},
    {"HTTP://h/", 0, NULL, NULL, 0},
    {"data:text/html,x", 0, NULL, NULL, 0},
    /* Malformed authorities. */
    {"http:///x", 0, NULL, NULL, 0},
    {"http://h:/", 0, NULL, NULL, 0},
    {"http://h:0/", 0, NULL, NULL, 0},
    {"http://h:65536/", 0, NULL, NULL, 0},
    {"http://h:80a/", 0, NULL, NULL, 0},
    {"http://:80/", 0, NULL, NULL, 0},
    {"http://[::1]/", 0, NULL, NULL, 0},
    /* Spellings Chromium would read as another authority. */
    {"http://good.test\\.evil.test/", 0, NULL, NULL, 0},
    {"http://evil.test\\@good.test/", 0, NULL, NULL, 0},
    {"http://go\tod.test/", 0, NULL, NULL, 0},
    {"http://good.test\n.evil/", 0, NULL, NULL, 0},
    {"http://good test/", 0, NULL, NULL, 0},
};

START_TEST(test_origin)
{
	char origin[KZB_URL_MAX], host[256];
	int port = -1, r;

	r = kzb_url_origin(cases[_i].url, origin, sizeof(origin), host,
	    sizeof(host), &port);
	if (!cases[_i].ok) {
		ck_assert_msg(r != 0, "%s was accepted", cases[_i].url);
		return;
	}
	ck_assert_msg(r == 0, "%s was refused", cases[_i].url);
	ck_assert_str_eq(origin, cases[_i].origin);
	ck_assert_str_eq(host, cases[_i].host);
	ck_assert_int_eq(port, cases[_i].port);
}
END_TEST

/* A host longer than the caller's buffer is refused, not cut. */
START_TEST(test_long_host)
{
	char url[600], origin[KZB_URL_MAX], host[16];
	int port;

	snprintf(url, sizeof(url), "http://%0300d.example/", 0);
	ck_assert_int_ne(kzb_url_origin(url, origin, sizeof(origin), host,
	                     sizeof(host), &port),
	    0);
}
END_TEST

/* The member's navigate: what never reaches Chromium (a script, its
 * debug addresses, characters it would drop) and what is left to the
 * managed policy. */
static const struct {
	const char *url;
	int ok;
} navs[] = {
    {"http://origin.kz.test/", 1},
    {"https://h/a?b#c", 1},
    {"about:blank", 1},
    {"data:text/html,x", 1},
    {"file:///etc/passwd", 1}, /* the policy's */
    {"view-source:http://h/", 1}, /* the policy's */
    {"h/no-scheme", 1},
    {"javascript:alert(1)", 0},
    {"JavaScript:alert(1)", 0},
    {"java\tscript:alert(1)", 0},
    {"java\nscript:alert(1)", 0},
    {" javascript:alert(1)", 0},
    {"\x01javascript:alert(1)", 0},
    {"chrome://hang", 0},
    {"CHROME://crash", 0},
    {"chrome:crash", 0},
    {"chrome://inducebrowsercrashforrealz/", 0},
    {"about:crash", 0},
    {"about:blank#x", 0},
    {"About:hang", 0},
    {"http://h/a b", 0},
    {"http://h/\x7f", 0},
};

START_TEST(test_nav)
{
	struct kzb_out o = {0};
	int r = kzb_nav_check(navs[_i].url, &o);

	if (navs[_i].ok)
		ck_assert_msg(r == 0, "%s was refused: %s", navs[_i].url,
		    o.why);
	else
		ck_assert_msg(r != 0 && o.code != NULL && o.why[0] != '\0',
		    "%s was let through", navs[_i].url);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("browser_url");
	TCase *tc = tcase_create("url");

	tcase_add_loop_test(tc, test_origin, 0,
	    (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, test_long_host);
	tcase_add_loop_test(tc, test_nav, 0, sizeof(navs) / sizeof(navs[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
