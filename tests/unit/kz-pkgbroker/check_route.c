/* The closed set of paths: each registry path is classified with its
 * package name and upstream path; a table of hostile paths (dot segments,
 * escapes, queries smuggled in names, other npm endpoints, bad names) is
 * refused.  Also the Host check, PEP 503 normalization and the upstream
 * URL rule (http only, no credentials). */
#include <check.h>
#include <string.h>

#include "pkgbroker.h"
#include "kz_check.h"
#include "banned.h"

struct good {
	const char *path;
	enum pb_kind kind;
	const char *name, *upath;
};

static const struct good goods[] = {
    {"/kz-top", PB_NPM_DOC, "kz-top", "/kz-top"},
    {"/@kz-test%2fmid", PB_NPM_DOC, "@kz-test/mid", "/@kz-test%2fmid"},
    {"/@kz-test%2Fmid", PB_NPM_DOC, "@kz-test/mid", "/@kz-test%2Fmid"},
    {"/kz-top/-/kz-top-2.0.0.tgz", PB_NPM_TARBALL, "kz-top",
        "/kz-top/-/kz-top-2.0.0.tgz"},
    {"/@kz-test/mid/-/mid-1.2.0.tgz", PB_NPM_TARBALL, "@kz-test/mid",
        "/@kz-test/mid/-/mid-1.2.0.tgz"},
    {"/simple/", PB_PY_INDEX, "", "/"},
    {"/simple/KzAlpha/", PB_PY_PROJECT, "kzalpha", "/kzalpha/"},
    {"/simple/zope.interface", PB_PY_PROJECT, "zope-interface",
        "/zope-interface/"},
    {"/simple/a__b--c/", PB_PY_PROJECT, "a-b-c", "/a-b-c/"},
    {"/files/simple/kzalpha/kzalpha-1.0-py3-none-any.whl", PB_PY_FILE,
        "kzalpha", "/simple/kzalpha/kzalpha-1.0-py3-none-any.whl"},
    {"/files/p/x/Foo_Bar-1.0.tar.gz", PB_PY_FILE, "foo-bar",
        "/p/x/Foo_Bar-1.0.tar.gz"},
    {"/pyfiles/packages/ab/kzalpha-1.0.tar.gz", PB_PY_FILE, "kzalpha",
        "/packages/ab/kzalpha-1.0.tar.gz"},
};

/* Every one of these must be refused (PB_BIND_PATH too: a broker
 * forward's bind is never a registry request). */
static const char *const bads[] = {"", "kz-top", "/", "//kz-top", "/-/whoami",
    "/-/v1/search", "/-/npm/v1/security/audits", "/-/user/org.couchdb.user:x",
    "/kz-top/1.0.0", "/kz-top/latest", "/.hidden", "/_private", "/..", "/.",
    "/kz%2ftop", "/@s%2f..", "/@s%2fa%2fb", "/@%2fname", "/@scope%2f",
    "/kz top", "/kz\ttop", "/kz-top/-/../../etc/passwd.tgz", "/kz-top/-/x.tar",
    "/kz-top/-/.tgz", "/kz-top/-/a/b.tgz", "/../kz-top/-/x.tgz",
    "/@s/../-/x.tgz", "/simple/a/b/", "/simple/../", "/simple/..",
    "/simple/a%2fb/", "/simple/~x/", "/files/", "/files/a/../b.whl",
    "/files/./b.whl", "/files//b.whl", "/files/b.exe", "/files/README",
    "/files/a/b.whl/", "/files/a%2e%2e/b.whl", "/files/a b.whl",
    "/files/../etc/shadow.whl", "/pyfiles/", "/pyfiles/../x.whl",
    "/pyfiles/a/b.exe", "/pyfiles//b.whl", PB_BIND_PATH, "/-/kz/bind/x.tgz",
    NULL};

START_TEST(test_good)
{
	const struct good *g = &goods[_i];
	struct pb_route r;
	char why[160];

	ck_assert_msg(pb_route(g->path, &r, why, sizeof(why)) == 0, "%s: %s",
	    g->path, why);
	ck_assert_int_eq(r.kind, g->kind);
	ck_assert_str_eq(r.name, g->name);
	ck_assert_str_eq(r.upath, g->upath);
	ck_assert(r.files_origin == (strncmp(g->path, "/pyfiles/", 9) == 0));
}
END_TEST

START_TEST(test_bad)
{
	struct pb_route r;
	char why[160] = "";

	for (int i = 0; bads[i] != NULL; i++) {
		ck_assert_msg(pb_route(bads[i], &r, why, sizeof(why)) != 0,
		    "'%s' was routed", bads[i]);
		ck_assert_int_eq(r.kind, PB_NONE);
		ck_assert_ptr_nonnull(strstr(why, "registry protocols"));
	}
	ck_assert_int_ne(pb_route(NULL, &r, why, sizeof(why)), 0);
}
END_TEST

START_TEST(test_long)
{
	char p[PB_PATH_MAX + 8];
	struct pb_route r;
	char why[160];

	memset(p, 'a', sizeof(p) - 1);
	p[0] = '/';
	p[sizeof(p) - 1] = '\0';
	ck_assert_int_ne(pb_route(p, &r, why, sizeof(why)), 0);
	p[PB_NAME_MAX + 2] = '\0'; /* one over npm's longest name */
	ck_assert_int_ne(pb_route(p, &r, why, sizeof(why)), 0);
	p[PB_NAME_MAX + 1] = '\0';
	ck_assert_int_eq(pb_route(p, &r, why, sizeof(why)), 0);
}
END_TEST

START_TEST(test_host)
{
	const char *hosts = "127.0.0.1, localhost";

	ck_assert(pb_host_allowed(hosts, "127.0.0.1:4873"));
	ck_assert(pb_host_allowed(hosts, "127.0.0.1"));
	ck_assert(pb_host_allowed(hosts, "LOCALHOST:80"));
	ck_assert(!pb_host_allowed(hosts, NULL));
	ck_assert(!pb_host_allowed(hosts, ""));
	ck_assert(!pb_host_allowed(hosts, "registry.npmjs.org"));
	ck_assert(!pb_host_allowed(hosts, "127.0.0.1.evil:80"));
	ck_assert(!pb_host_allowed(hosts, "127.0.0.1:"));
	ck_assert(!pb_host_allowed(hosts, "127.0.0.1:80x"));
	ck_assert(!pb_host_allowed(hosts, "127.0.0.1:123456"));
	ck_assert(!pb_host_allowed(hosts, "localhos"));
	ck_assert(!pb_host_allowed(hosts, "[::1]:80"));
	ck_assert(pb_host_allowed("[::1]", "[::1]:80"));
}
END_TEST

START_TEST(test_upstream)
{
	struct pb_upstream u;
	char why[160];
	static const char *const bad[] = {"https://user:pw@r.example",
	    "http://user:pw@r.example", "http://r.example:0",
	    "https://r.example:0", "https://r.example:65536",
	    "https://r.example:443x", "https://r.example?x", "https://",
	    "https:/r.example", "HTTPS://r.example", "ws://r.example",
	    "https://r.example/a#b", "file:///etc/ssl/x",
	    "http://r.example:99999", "http://r.example/a?b",
	    "http://r.example/../x", "ftp://r.example", "http://", "r.example",
	    NULL};

	ck_assert_int_eq(pb_upstream_parse("http://127.0.0.1:4873/", &u, why,
	                     sizeof(why)),
	    0);
	ck_assert_str_eq(u.url, "http://127.0.0.1:4873");
	ck_assert_int_eq(u.port, 4873);
	ck_assert_int_eq(pb_upstream_parse("http://idx.lan/pypi/", &u, why,
	                     sizeof(why)),
	    0);
	ck_assert_str_eq(u.url, "http://idx.lan:80/pypi");
	ck_assert_str_eq(u.prefix, "/pypi");
	ck_assert(!u.tls);
	ck_assert_int_eq(pb_upstream_parse("https://registry.npmjs.org", &u,
	                     why, sizeof(why)),
	    0);
	ck_assert(u.tls);
	ck_assert_str_eq(u.url, "https://registry.npmjs.org:443");
	ck_assert_str_eq(u.host, "registry.npmjs.org");
	ck_assert_int_eq(u.port, 443);
	ck_assert_int_eq(pb_upstream_parse("https://127.0.0.1:8443/py/", &u,
	                     why, sizeof(why)),
	    0);
	ck_assert_str_eq(u.url, "https://127.0.0.1:8443/py");
	ck_assert_str_eq(u.prefix, "/py");
	for (int i = 0; bad[i] != NULL; i++)
		ck_assert_msg(pb_upstream_parse(bad[i], &u, why, sizeof(why)) ==
		        KZ_ECONF,
		    "%s accepted", bad[i]);
	ck_assert_ptr_nonnull(strstr(why, "https://"));
	ck_assert_int_eq(pb_upstream_parse("", &u, why, sizeof(why)), 0);
	ck_assert_str_eq(u.url, "");
}
END_TEST

/* An absolute URL is on an upstream's origin with its port written or,
 * the scheme's default, left out; never over the other scheme, on a
 * longer host name, or on another port. */
START_TEST(test_origin)
{
	struct pb_upstream u, p;
	char why[160];

	ck_assert_int_eq(pb_upstream_parse("https://Registry.example/r", &u,
	                     why, sizeof(why)),
	    0);
	ck_assert_uint_eq(pb_upstream_origin(&u,
	                      "https://registry.example/r/x"),
	    24);
	ck_assert_uint_eq(pb_upstream_origin(&u,
	                      "HTTPS://REGISTRY.example:443/"),
	    28);
	ck_assert_uint_eq(pb_upstream_origin(&u, "https://registry.example"),
	    24);
	ck_assert_uint_eq(pb_upstream_origin(&u, "http://registry.example/r"),
	    0);
	ck_assert_uint_eq(pb_upstream_origin(&u,
	                      "https://registry.example:80/"),
	    0);
	ck_assert_uint_eq(pb_upstream_origin(&u,
	                      "https://registry.example:4430/"),
	    0);
	ck_assert_uint_eq(pb_upstream_origin(&u,
	                      "https://registry.example.evil/r"),
	    0);
	ck_assert_uint_eq(pb_upstream_origin(&u,
	                      "https://registry.example@evil/r"),
	    0);
	ck_assert_uint_eq(pb_upstream_origin(&u, "https://registry.exampl/"),
	    0);
	ck_assert_int_eq(pb_upstream_parse("http://127.0.0.1:4873", &p, why,
	                     sizeof(why)),
	    0);
	ck_assert_uint_eq(pb_upstream_origin(&p, "http://127.0.0.1:4873/a"),
	    21);
	ck_assert_uint_eq(pb_upstream_origin(&p, "http://127.0.0.1/a"), 0);
	ck_assert_uint_eq(pb_upstream_origin(&p, "https://127.0.0.1:4873/a"),
	    0);
	memset(&p, 0, sizeof(p));
	ck_assert_uint_eq(pb_upstream_origin(&p, "http:///a"), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pkgbroker_route");
	TCase *tc = tcase_create("route");

	tcase_add_loop_test(tc, test_good, 0, sizeof(goods) / sizeof(goods[0]));
	tcase_add_test(tc, test_bad);
	tcase_add_test(tc, test_long);
	tcase_add_test(tc, test_host);
	tcase_add_test(tc, test_upstream);
	tcase_add_test(tc, test_origin);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
