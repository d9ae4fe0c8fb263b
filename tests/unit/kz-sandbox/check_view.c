/* kz-sandbox view.c: the root view's lists, links and synthesized /etc. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "sbx_view.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *p;
	bool ok;
} paths[] = {
    {"/opt/tools", true},
    {"/a", true},
    {"/", false},
    {"", false},
    {"relative", false},
    {"/a/../b", false},
    {"/a/./b", false},
    {"/a//b", false},
    {"/a/", false},
    {"/a\nb", false},
};

START_TEST(test_path_ok)
{
	ck_assert(sbx_view_path_ok(paths[_i].p) == paths[_i].ok);
}
END_TEST

static const struct {
	const char *p, *dir;
	bool under;
} unders[] = {
    {"/etc", "/etc", true},
    {"/etc/ssl", "/etc", true},
    {"/etcx", "/etc", false},
    {"/et", "/etc", false},
    {"/run/kaizen/workers", "/run/kaizen", true},
    {"/run", "/run/kaizen", false},
};

START_TEST(test_under)
{
	ck_assert(
	    sbx_view_under(unders[_i].p, unders[_i].dir) == unders[_i].under);
}
END_TEST

/* A top-level link is recreated only when it stays in the allowlist. */
static const struct {
	const char *t;
	bool ok;
} links[] = {
    {"usr/bin", true},
    {"/usr/lib", true},
    {"usr/lib64", true},
    {"lib", true},
    {"var/home", false},
    {"/home", false},
    {"../etc", false},
    {"usr/../etc", false},
    {"", false},
    {"/", false},
    {"usrx/bin", false},
};

START_TEST(test_link_ok)
{
	ck_assert(sbx_view_link_ok(links[_i].t) == links[_i].ok);
}
END_TEST

START_TEST(test_next)
{
	const char *p = " /a, /b ,,/c\t";
	char buf[16];

	ck_assert(sbx_view_next(&p, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "/a");
	ck_assert(sbx_view_next(&p, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "/b");
	ck_assert(sbx_view_next(&p, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "/c");
	ck_assert(!sbx_view_next(&p, buf, sizeof(buf)));
}
END_TEST

START_TEST(test_etc_text)
{
	struct sbx_conf c;
	char buf[512];

	sbx_conf_defaults(&c);
	c.uid = 2100000007, c.gid = 2100000008;
	ck_assert_int_gt(sbx_view_etc_text(&c, "passwd", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf,
	    "sandbox:x:2100000007:2100000008:sandbox:/workspace:/bin/sh\n");
	ck_assert_int_gt(sbx_view_etc_text(&c, "group", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "sandbox:x:2100000008:\n");
	ck_assert_int_gt(sbx_view_etc_text(&c, "hostname", buf, sizeof(buf)),
	    0);
	ck_assert_str_eq(buf, "sandbox\n");
	ck_assert_int_eq(sbx_view_etc_text(&c, "shadow", buf, sizeof(buf)),
	    KZ_ENOENT);
	ck_assert_int_eq(sbx_view_etc_text(&c, "passwd", buf, 8), KZ_ETOOBIG);
}
END_TEST

/* What the configuration alone can get wrong is a config error (exit 2),
 * before anything is looked up. */
static const struct {
	const char *mask, *extra, *host;
	int want;
} checks[] = {
    {"", "", "sandbox", 0},
    {"/usr/share/doc", "/opt/a,/srv/b", "sandbox", 0},
    {"usr", "", "sandbox", KZ_ECONF},
    {"", "/etc/ssl", "sandbox", KZ_ECONF},
    {"", "/tmp/x", "sandbox", KZ_ECONF},
    {"", "/workspace", "sandbox", KZ_ECONF},
    {"", "/opt,/opt/a", "sandbox", KZ_ECONF},
    {"", "/opt/../etc", "sandbox", KZ_ECONF},
    {"", "", "", KZ_ECONF},
    {"", "", "a b", KZ_ECONF},
    {"/proc/self", "", "sandbox", KZ_ECONF},
};

START_TEST(test_check)
{
	struct sbx_conf c;
	char why[256] = "";

	sbx_conf_defaults(&c);
	snprintf(c.masks, sizeof(c.masks), "%s", checks[_i].mask);
	snprintf(c.extra_ro, sizeof(c.extra_ro), "%s", checks[_i].extra);
	snprintf(c.hostname, sizeof(c.hostname), "%s", checks[_i].host);
	ck_assert_int_eq(sbx_view_check(&c, why, sizeof(why)), checks[_i].want);
	if (checks[_i].want != 0)
		ck_assert(why[0] != '\0');
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-view");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_path_ok, 0,
	    sizeof(paths) / sizeof(paths[0]));
	tcase_add_loop_test(tc, test_under, 0,
	    sizeof(unders) / sizeof(unders[0]));
	tcase_add_loop_test(tc, test_link_ok, 0,
	    sizeof(links) / sizeof(links[0]));
	tcase_add_test(tc, test_next);
	tcase_add_test(tc, test_etc_text);
	tcase_add_loop_test(tc, test_check, 0,
	    sizeof(checks) / sizeof(checks[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
