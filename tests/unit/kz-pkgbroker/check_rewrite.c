/* Package documents and index pages as the client gets them: an npm
 * document keeps only what npm install reads, its tarballs point at the
 * broker, and a version whose tarball is elsewhere is gone; a PEP 503
 * page's anchors are resolved and kept only on the upstream's origin,
 * and the page written back escapes what it carries; Accept picks PEP 691
 * JSON or HTML. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>

#include "pkgbroker.h"
#include "kz_json.h"
#include "kz_check.h"
#include "banned.h"

static struct pb_upstream up;

static void
setup(void)
{
	char why[128];

	ck_assert_int_eq(pb_upstream_parse("http://127.0.0.1:4873", &up, why,
	                     sizeof(why)),
	    0);
}

static const char npm_doc
    [] = "{\"name\":\"kz-top\",\"readme\":\"SECRET-README\","
         "\"maintainers\":[{\"email\":\"SECRET@x\"}],"
         "\"dist-tags\":{\"latest\":\"2.0.0\",\"old\":\"0.1.0\"},"
         "\"versions\":{\"2.0.0\":{\"name\":\"kz-top\",\"version\":\"2.0.0\","
         "\"dependencies\":{\"kz-leaf\":\"1.0.0\"},\"_npmUser\":{\"email\":"
         "\"SECRET@x\"},\"scripts\":{\"postinstall\":\"x\"},\"dist\":{"
         "\"tarball\":\"http://127.0.0.1:4873/kz-top/-/kz-top-2.0.0.tgz\","
         "\"integrity\":\"sha512-abc\",\"signatures\":[{\"sig\":\"SECRET\"}]}},"
         "\"0.1.0\":{\"name\":\"kz-top\",\"version\":\"0.1.0\",\"dist\":{"
         "\"tarball\":\"http://evil.example/kz-top-0.1.0.tgz\"}},"
         "\"0.2.0\":{\"name\":\"kz-top\",\"version\":\"0.2.0\",\"dist\":{"
         "\"tarball\":\"http://127.0.0.1:4873/other/../../etc/passwd\"}}}}";

START_TEST(test_npm)
{
	cJSON *doc = NULL, *out;
	char why[160], *txt;

	ck_assert_int_eq(kz_json_parse_object(npm_doc, strlen(npm_doc), &doc,
	                     why, sizeof(why)),
	    0);
	out = pb_npm_rewrite(doc, "kz-top", &up, "http://127.0.0.1:9", why,
	    sizeof(why));
	ck_assert_ptr_nonnull(out);
	txt = kz_json_print(out);
	ck_assert_ptr_null(strstr(txt, "SECRET"));
	ck_assert_ptr_null(strstr(txt, "evil"));
	ck_assert_ptr_null(strstr(txt, "0.1.0"));
	ck_assert_ptr_null(strstr(txt, "0.2.0"));
	ck_assert_ptr_null(strstr(txt, "4873"));
	ck_assert_ptr_nonnull(strstr(txt,
	    "\"tarball\":\"http://127.0.0.1:9/kz-top/-/kz-top-2.0.0.tgz\""));
	ck_assert_ptr_nonnull(strstr(txt, "\"integrity\":\"sha512-abc\""));
	ck_assert_ptr_nonnull(strstr(txt, "\"hasInstallScript\":true"));
	ck_assert_ptr_nonnull(
	    strstr(txt, "\"dist-tags\":{\"latest\":\"2.0.0\"}"));
	free(txt);
	cJSON_Delete(out);
	/* A document that is not the package asked for is refused. */
	ck_assert_ptr_null(
	    pb_npm_rewrite(doc, "kz-other", &up, "http://h", why, sizeof(why)));
	cJSON_Delete(doc);
}
END_TEST

static const char page[] =
    "<html><body>\n"
    "<a href=\"kzalpha-1.0-py3-none-any.whl#sha256="
    "d5a7df8e0cc10d66af7399d2e90982b295ec5170c623bb818d9659363d8e31a7\" "
    "data-requires-python=\"&gt;=3.7&lt;4\">kzalpha-1.0-py3-none-any.whl</a>\n"
    "<A HREF='../../packages/kzalpha-0.9.tar.gz#md5=abc'>old</A>\n"
    "<a href=\"http://127.0.0.1:4873/p/kzalpha-0.8.zip\" data-yanked>y</a>\n"
    "<a href=\"http://evil.example/kzalpha-0.7.whl\">evil</a>\n"
    "<a href=\"//evil.example/kzalpha-0.6.whl\">evil</a>\n"
    "<a href=\"../../../../../../kzalpha-0.5.whl\">up</a>\n"
    "<a href=\"kzalpha-0.4.whl?x=1\">query</a>\n"
    "<a href=\"javascript:alert(1)\">js</a>\n"
    "<a href=\"README.txt\">readme</a>\n"
    "<a href=\"kz%20alpha-0.3.whl\">space</a>\n"
    "<abbr>not an anchor</abbr>\n</body></html>";

START_TEST(test_pyparse)
{
	struct pb_pylist l;
	char why[160];

	ck_assert_int_eq(pb_py_parse(page, strlen(page), "/simple/kzalpha/",
	                     &up, NULL, false, &l, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.v[0].url,
	    "/files/simple/kzalpha/kzalpha-1.0-py3-none-any.whl");
	ck_assert_str_eq(l.v[0].sha256,
	    "d5a7df8e0cc10d66af7399d2e90982b295ec5170c623bb818d9659363d8e31a7");
	ck_assert_str_eq(l.v[0].requires_python, ">=3.7<4");
	ck_assert_str_eq(l.v[1].url, "/files/packages/kzalpha-0.9.tar.gz");
	ck_assert_str_eq(l.v[1].sha256, "");
	ck_assert_str_eq(l.v[2].url, "/files/p/kzalpha-0.8.zip");
	ck_assert(l.v[2].yanked);
	pb_pylist_release(&l);
}
END_TEST

/* An index below a path of its origin (a repository manager's): only its
 * own files are offered, never another repository's on the same host. */
START_TEST(test_pyprefix)
{
	static const char pg
	    [] = "<a href=\"/pyidx/packages/a-1.0.whl\">own</a>\n"
	         "<a href=\"../../packages/a-0.9.whl\">own, relative</a>\n"
	         "<a href=\"/admin/secret/a-0.8.whl\">another repository</a>\n"
	         "<a href=\"../../../admin/a-0.7.whl\">up and out</a>\n"
	         "<a href=\"/pyidxother/a-0.6.whl\">a longer name</a>\n";
	struct pb_upstream u;
	struct pb_pylist l;
	char why[160];

	ck_assert_int_eq(pb_upstream_parse("http://127.0.0.1:4873/pyidx", &u,
	                     why, sizeof(why)),
	    0);
	ck_assert(pb_upstream_under(&u, "/pyidx/packages/a-1.0.whl"));
	ck_assert(!pb_upstream_under(&u, "/pyidxother/a-0.6.whl"));
	ck_assert(!pb_upstream_under(&u, "/admin/a-0.8.whl"));
	ck_assert_int_eq(pb_py_parse(pg, strlen(pg), "/pyidx/simple/a/", &u,
	                     NULL, false, &l, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.v[0].url, "/files/pyidx/packages/a-1.0.whl");
	ck_assert_str_eq(l.v[1].url, "/files/pyidx/packages/a-0.9.whl");
	pb_pylist_release(&l);
}
END_TEST

START_TEST(test_pyindex)
{
	static const char idx[] = "<a href=\"KzAlpha/\">KzAlpha</a>"
	                          "<a href=\"/simple/zope.interface/\">z</a>"
	                          "<a href=\"http://evil.example/x/\">x</a>";
	struct pb_pylist l;
	char why[160];

	ck_assert_int_eq(pb_py_parse(idx, strlen(idx), "/simple/", &up, NULL,
	                     true, &l, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.v[0].filename, "kzalpha");
	ck_assert_str_eq(l.v[1].filename, "zope-interface");
	pb_pylist_release(&l);
}
END_TEST

/* An https upstream: its absolute URLs with or without :443 map back to
 * the broker; the same host over http, or another host over https
 * (files.pythonhosted.org for pypi.org), does not. */
START_TEST(test_https)
{
	static const char doc[] =
	    "{\"name\":\"kz-leaf\",\"dist-tags\":{\"latest\":\"1.0.0\"},"
	    "\"versions\":{"
	    "\"1.0.0\":{\"name\":\"kz-leaf\",\"version\":\"1.0.0\",\"dist\":"
	    "{\"tarball\":\"https://registry.example/kz-leaf/-/kz-leaf-1.0.0."
	    "tgz\"}},"
	    "\"1.1.0\":{\"name\":\"kz-leaf\",\"version\":\"1.1.0\",\"dist\":"
	    "{\"tarball\":\"https://registry.example:443/kz-leaf/-/kz-leaf-1.1."
	    "0.tgz\"}},"
	    "\"0.9.0\":{\"name\":\"kz-leaf\",\"version\":\"0.9.0\",\"dist\":"
	    "{\"tarball\":\"http://registry.example/kz-leaf/-/kz-leaf-0.9.0."
	    "tgz\"}}}}";
	static const char pg
	    [] = "<a href=\"https://registry.example/packages/a-1.0.whl\">a</a>"
	         "<a href=\"https://files.example/packages/a-0.9.whl\">f</a>"
	         "<a href=\"http://registry.example/packages/a-0.8.whl\">h</a>"
	         "<a href=\"a-0.7.tar.gz\">rel</a>";
	static const char ix[] = "<a href=\"a/\">a</a>"
	                         "<a href=\"https://files.example/b/\">b</a>";
	struct pb_upstream u, f;
	struct pb_pylist l;
	cJSON *d = NULL, *out;
	char why[160], *txt;

	ck_assert_int_eq(pb_upstream_parse("https://registry.example", &u, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(kz_json_parse_object(doc, strlen(doc), &d, why,
	                     sizeof(why)),
	    0);
	out = pb_npm_rewrite(d, "kz-leaf", &u, "http://127.0.0.1:9", why,
	    sizeof(why));
	ck_assert_ptr_nonnull(out);
	txt = kz_json_print(out);
	ck_assert_ptr_nonnull(strstr(txt,
	    "\"tarball\":\"http://127.0.0.1:9/kz-leaf/-/kz-leaf-1.0.0.tgz\""));
	ck_assert_ptr_nonnull(strstr(txt,
	    "\"tarball\":\"http://127.0.0.1:9/kz-leaf/-/kz-leaf-1.1.0.tgz\""));
	ck_assert_ptr_null(strstr(txt, "0.9.0"));
	ck_assert_ptr_null(strstr(txt, "registry.example"));
	free(txt);
	cJSON_Delete(out);
	cJSON_Delete(d);
	ck_assert_int_eq(pb_py_parse(pg, strlen(pg), "/simple/a/", &u, NULL,
	                     false, &l, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.v[0].url, "/files/packages/a-1.0.whl");
	ck_assert_str_eq(l.v[1].url, "/files/simple/a/a-0.7.tar.gz");
	pb_pylist_release(&l);
	/* With the files upstream, its origin's files are offered under
	 * /pyfiles/; the other scheme's still are not. */
	ck_assert_int_eq(pb_upstream_parse("https://files.example", &f, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(pb_py_parse(pg, strlen(pg), "/simple/a/", &u, &f,
	                     false, &l, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.v[1].url, "/pyfiles/packages/a-0.9.whl");
	pb_pylist_release(&l);
	/* An index's project links on the files origin are not projects. */
	ck_assert_int_eq(pb_py_parse(ix, strlen(ix), "/simple/", &u, &f, true,
	                     &l, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0].filename, "a");
	pb_pylist_release(&l);
}
END_TEST

static const char *const broken[] = {"<a href=\"x.whl", "<a href='x.whl'",
    "<a href=\"x&bogus;.whl\">", "<a href=\"a\x01.whl\">", NULL};

START_TEST(test_pybroken)
{
	struct pb_pylist l;
	char why[160];

	for (int i = 0; broken[i] != NULL; i++)
		ck_assert_msg(pb_py_parse(broken[i], strlen(broken[i]),
		                  "/simple/x/", &up, NULL, false, &l, why,
		                  sizeof(why)) != 0,
		    "case %d parsed", i);
	/* A NUL anywhere in the page, in a tag's name place above all,
	 * is refused, never scanned past (it once looped for ever). */
	static const char nul1[] = "<a \0 href=\"n-1.0.tar.gz\">x</a>";
	static const char nul2[] = "<a href=\"n-1.0.tar.gz\">x</a>\0";
	ck_assert_int_ne(pb_py_parse(nul1, sizeof(nul1) - 1, "/simple/n/", &up,
	                     NULL, false, &l, why, sizeof(why)),
	    0);
	ck_assert_int_ne(pb_py_parse(nul2, sizeof(nul2) - 1, "/simple/n/", &up,
	                     NULL, false, &l, why, sizeof(why)),
	    0);
}
END_TEST

START_TEST(test_render)
{
	struct pb_pyfile f = {.filename = "a-1.0.whl",
	    .url = "/files/a-1.0.whl",
	    .requires_python = ">=3\"><script>"};
	struct pb_pylist l = {.v = &f, .n = 1, .cap = 1};
	char *h = pb_py_render(&l, "a", false, false);
	char *j = pb_py_render(&l, "a", false, true);
	cJSON *o = NULL;
	char why[128];

	ck_assert_ptr_null(strstr(h, "<script>"));
	ck_assert_ptr_nonnull(strstr(h,
	    "data-requires-python=\"&gt;=3&quot;&gt;&lt;script&gt;\""));
	ck_assert_int_eq(kz_json_parse_object(j, strlen(j), &o, why,
	                     sizeof(why)),
	    0);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(
	                     cJSON_GetObjectItemCaseSensitive(o, "meta"),
	                     "api-version")
	                     ->valuestring,
	    "1.0");
	cJSON_Delete(o);
	free(h);
	free(j);
}
END_TEST

START_TEST(test_accept)
{
	ck_assert_int_eq(pb_py_accept("application/vnd.pypi.simple.v1+json, "
	                              "application/vnd.pypi.simple.v1+html; "
	                              "q=0.1, text/html; q=0.01"),
	    1);
	ck_assert_int_eq(pb_py_accept("text/html"), 0);
	ck_assert_int_eq(pb_py_accept(NULL), 0);
	ck_assert_int_eq(pb_py_accept("*/*"), 0);
	ck_assert_int_eq(pb_py_accept("application/vnd.pypi.simple.v1+json;"
	                              "q=0.2, text/html"),
	    0);
	ck_assert_int_eq(pb_py_accept("image/png"), -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pkgbroker_rewrite");
	TCase *tc = tcase_create("rewrite");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_npm);
	tcase_add_test(tc, test_pyparse);
	tcase_add_test(tc, test_https);
	tcase_add_test(tc, test_pyindex);
	tcase_add_test(tc, test_pyprefix);
	tcase_add_test(tc, test_pybroken);
	tcase_add_test(tc, test_render);
	tcase_add_test(tc, test_accept);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
