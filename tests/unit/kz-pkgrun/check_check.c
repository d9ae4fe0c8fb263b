/*
 * What an invocation may carry and what may come back: the request
 * grammar over a table of hostile inputs, the environment guard, and the
 * sanitizer (valid UTF-8 out, no control characters but tab and newline).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkgrun.h"
#include "kz_check.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void
good(struct pr_inv *iv)
{
	memset(iv, 0, sizeof(*iv));
	iv->package = HEX64;
	iv->tool = "echo";
	iv->actor = "alice";
	iv->conversation = "c-1";
}

START_TEST(test_good)
{
	struct pr_inv iv;
	char why[128];

	good(&iv);
	ck_assert_int_eq(pr_inv_check(&iv, why, sizeof(why)), 0);
	iv.room = "room-1";
	iv.workspace = "alice/ws";
	iv.files[iv.nfiles++] = "src/main.c";
	iv.files[iv.nfiles++] = "\xef\xbc\x8e\xef\xbc\x8e"; /* U+FF0E x2 */
	iv.args[iv.nargs++] = "héllo wörld";
	ck_assert_int_eq(pr_inv_check(&iv, why, sizeof(why)), 0);
}
END_TEST

enum field { PKG, TOOL, ACTOR, CONV, ROOM, WS, ARG, FILE_, RID };
static const struct {
	enum field f;
	const char *v;
} bads[] = {
    {PKG, ""},
    {PKG, "0123"},
    {PKG, HEX64 "0"},
    {PKG, "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"},
    {PKG, "../3456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
    {TOOL, ""},
    {TOOL, "Echo"},
    {TOOL, "../echo"},
    {TOOL, "a b"},
    {TOOL, "0123456789012345678901234567890123456789012345678901234567890123x"},
    {ACTOR, ""},
    {ACTOR, "al\nice"},
    {ACTOR, "al\x7fice"},
    {ACTOR, "al\xc2\x85ice"},
    {CONV, "\xff"},
    {ROOM, "r\r"},
    {WS, "/abs"},
    {WS, "../up"},
    {WS, "a//b"},
    {ARG, "line\nbreak"},
    {ARG, "\x1b[31m"},
    {ARG, ""},
    {ARG, "\xc0\xaf"},
    {FILE_, "/etc/passwd"},
    {FILE_, "../../etc/passwd"},
    {FILE_, "a/../b"},
    {FILE_, "./a"},
    {FILE_, "a/"},
    {FILE_, ""},
    {FILE_, "a\\b"},
    {FILE_, "a\tb"},
    {FILE_, "a\xed\xa0\x80"},
    {RID, ""},
    {RID, "r/1"},
    {RID, "r 1"},
};

START_TEST(test_bad)
{
	struct pr_inv iv;
	char why[128] = "";

	good(&iv);
	switch (bads[_i].f) {
	case PKG:
		iv.package = bads[_i].v;
		break;
	case TOOL:
		iv.tool = bads[_i].v;
		break;
	case ACTOR:
		iv.actor = bads[_i].v;
		break;
	case CONV:
		iv.conversation = bads[_i].v;
		break;
	case ROOM:
		iv.room = bads[_i].v;
		break;
	case WS:
		iv.workspace = bads[_i].v;
		break;
	case ARG:
		iv.args[iv.nargs++] = bads[_i].v;
		break;
	case RID:
		iv.rid = bads[_i].v;
		break;
	case FILE_:
		iv.workspace = "ws";
		iv.files[iv.nfiles++] = bads[_i].v;
		break;
	}
	ck_assert_int_eq(pr_inv_check(&iv, why, sizeof(why)), KZ_EINVAL);
	ck_assert(why[0] != '\0');
	ck_assert_ptr_null(strchr(why, '\n'));
}
END_TEST

/* Member files come from <conversation>/<actor> beneath the workspace
 * root, so an identity that is not one path segment cannot take them; it
 * may still call a tool without files. */
START_TEST(test_files_need_segments)
{
	static const char *const ids[] = {"a/b", "..", ".", "a\\b", "/x"};
	struct pr_inv iv;
	char why[128];

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		good(&iv);
		iv.actor = ids[i];
		ck_assert_int_eq(pr_inv_check(&iv, why, sizeof(why)), 0);
		iv.files[iv.nfiles++] = "a.txt";
		ck_assert_int_eq(pr_inv_check(&iv, why, sizeof(why)),
		    KZ_EINVAL);
		good(&iv);
		iv.conversation = ids[i];
		iv.files[iv.nfiles++] = "a.txt";
		ck_assert_int_eq(pr_inv_check(&iv, why, sizeof(why)),
		    KZ_EINVAL);
	}
	good(&iv);
	iv.files[iv.nfiles++] = "a.txt";
	ck_assert_int_eq(pr_inv_check(&iv, why, sizeof(why)), 0);
}
END_TEST

/* The bound holds on the sanitized text and never splits a character. */
START_TEST(test_result_bound)
{
	char s[] = "ab\xef\xbf\xbd\xef\xbf\xbd";
	size_t n = strlen(s);

	ck_assert(!pr_result_bound(s, &n, 64));
	ck_assert_uint_eq(n, 8);
	ck_assert(pr_result_bound(s, &n, 7));
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(s, "ab\xef\xbf\xbd");
	ck_assert(pr_result_bound(s, &n, 3));
	ck_assert_str_eq(s, "ab");
	ck_assert(pr_result_bound(s, &n, 0));
	ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_env_guard)
{
	const char *secret[] = {"KZ_FIELD_KEY", "GITHUB_TOKEN", "aws_secret",
	    "AWS_SECRET", "DB_PASSWORD", "KEY", "api_key", NULL};
	const char *fine[] = {"KZ_PKG_DIR", "HOME", "LANG", "KEYBOARD", "PATH",
	    "KZ_PKG_TOOL", NULL};

	for (int i = 0; secret[i] != NULL; i++)
		ck_assert_msg(pr_env_name_secret(secret[i]), "%s", secret[i]);
	for (int i = 0; fine[i] != NULL; i++)
		ck_assert_msg(!pr_env_name_secret(fine[i]), "%s", fine[i]);
}
END_TEST

static const struct {
	const char *in;
	size_t len;
	const char *out;
} sans[] = {
    {"plain\n", 6, "plain\n"},
    {"tab\there", 8, "tab\there"},
    {"h\xc3\xa9", 3, "h\xc3\xa9"},
    {"\x1b[31mred", 8, "\xef\xbf\xbd[31mred"},
    {"a\0b", 3,
        "a\xef\xbf\xbd"
        "b"},
    {"cr\r", 3, "cr\xef\xbf\xbd"},
    {"\xff\xfe", 2, "\xef\xbf\xbd\xef\xbf\xbd"},
    {"\xc2\x85", 2, "\xef\xbf\xbd"},
    {"\xe2\x80\xa8", 3, "\xef\xbf\xbd"},
    {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},
    {"\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd"},
    {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"\x7f", 1, "\xef\xbf\xbd"},
    {"", 0, ""},
};

START_TEST(test_sanitize)
{
	size_t n = 0;
	char *s = pr_sanitize(sans[_i].in, sans[_i].len, &n);

	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(n, strlen(sans[_i].out));
	ck_assert_mem_eq(s, sans[_i].out, n);
	free(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-pkgrun check");
	TCase *tc = tcase_create("check");

	tcase_add_test(tc, test_good);
	tcase_add_loop_test(tc, test_bad, 0, sizeof(bads) / sizeof(bads[0]));
	tcase_add_test(tc, test_files_need_segments);
	tcase_add_test(tc, test_result_bound);
	tcase_add_test(tc, test_env_guard);
	tcase_add_loop_test(tc, test_sanitize, 0,
	    sizeof(sans) / sizeof(sans[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
