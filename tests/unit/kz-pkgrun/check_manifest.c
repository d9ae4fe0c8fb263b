/*
 * The manifest and the closed collaboration policy: a missing or unknown
 * class makes a tool absent (never listed, never found), a shared room
 * takes only classes that admit it, and no manifest can make a tool that
 * runs arbitrary code anything but private_only.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "pkgrun.h"
#include "kz_check.h"

#define TOOL(n, cls) "{\"name\":\"" n "\",\"command\":[\"bin/x\"]" cls "}"
#define MAN(tools) "{\"name\":\"p\",\"tools\":[" tools "]}"

static int
parse(const char *s, struct pr_manifest *m)
{
	char why[256];

	return pr_manifest_parse(s, strlen(s), m, why, sizeof(why));
}

START_TEST(test_classes)
{
	ck_assert_int_eq(pr_class_parse("private_only"), PR_CLASS_PRIVATE_ONLY);
	ck_assert_int_eq(pr_class_parse("actor_read"), PR_CLASS_ACTOR_READ);
	ck_assert_int_eq(pr_class_parse("shared_safe"), PR_CLASS_SHARED_SAFE);
	/* Closed and exact: no case folding, no prefix, no padding. */
	ck_assert_int_eq(pr_class_parse("Shared_safe"), PR_CLASS_NONE);
	ck_assert_int_eq(pr_class_parse("shared_safe "), PR_CLASS_NONE);
	ck_assert_int_eq(pr_class_parse("shared"), PR_CLASS_NONE);
	ck_assert_int_eq(pr_class_parse(""), PR_CLASS_NONE);
	ck_assert_int_eq(pr_class_parse(NULL), PR_CLASS_NONE);
	ck_assert(!pr_class_shared(PR_CLASS_PRIVATE_ONLY));
	ck_assert(pr_class_shared(PR_CLASS_ACTOR_READ));
	ck_assert(pr_class_shared(PR_CLASS_SHARED_SAFE));
	ck_assert(!pr_class_shared(PR_CLASS_NONE));
	ck_assert(!pr_class_files(PR_CLASS_SHARED_SAFE));
	ck_assert(pr_class_files(PR_CLASS_ACTOR_READ));
	ck_assert_str_eq(pr_class_name(PR_CLASS_NONE), "none");
}
END_TEST

START_TEST(test_absent)
{
	struct pr_manifest m;
	const struct pr_tool *t;
	char why[128];

	ck_assert_int_eq(parse(MAN(TOOL("a",
	                           ",\"class\":\"shared_safe\"") "," TOOL("nocl"
	                                                                  "s",
	                           "") "," TOOL("bad",
	                           ",\"class\":\"superuser\"") "," TOOL("num",
	                           ",\"class\":7") "," TOOL("sh",
	                           ",\"class\":\"private_only\","
	                           "\"runs_code\":true")),
	                     &m),
	    0);
	ck_assert_int_eq(m.ntools, 5);
	ck_assert_ptr_nonnull(pr_manifest_tool(&m, "a"));
	ck_assert_ptr_null(pr_manifest_tool(&m, "nocls"));
	ck_assert_ptr_null(pr_manifest_tool(&m, "bad"));
	ck_assert_ptr_null(pr_manifest_tool(&m, "num"));
	ck_assert_ptr_null(pr_manifest_tool(&m, "nosuch"));
	t = pr_manifest_tool(&m, "sh");
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(pr_tool_allowed(t, false, 1, why, sizeof(why)), 0);
	ck_assert_int_eq(pr_tool_allowed(t, true, 0, why, sizeof(why)),
	    KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "shared room"));
	t = pr_manifest_tool(&m, "a");
	ck_assert_int_eq(pr_tool_allowed(t, true, 0, why, sizeof(why)), 0);
	ck_assert_int_eq(pr_tool_allowed(t, true, 1, why, sizeof(why)),
	    KZ_EDENIED);
	pr_manifest_release(&m);
}
END_TEST

/* Manifests a reviewer could not have meant: each refused whole. */
static const char *const bads[] = {
    "",
    "[]",
    "{\"tools\":[]}",
    MAN(TOOL("a", ",\"class\":\"shared_safe\",\"runs_code\":true")),
    MAN(TOOL("a", ",\"class\":\"actor_read\",\"runs_code\":true")),
    MAN(TOOL("a", "") "," TOOL("a", "")),
    MAN(TOOL("A", "")),
    MAN(TOOL("-a", "")),
    MAN(TOOL("a b", "")),
    MAN(TOOL("a", ",\"extra\":1")),
    MAN(TOOL("a", ",\"runs_code\":\"yes\"")),
    "{\"name\":\"p\",\"tools\":[],\"hooks\":[]}",
    "{\"name\":\"p\",\"name\":\"q\",\"tools\":[]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[]}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":\"bin/x\"}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"/bin/sh\"]}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"../x\"]}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"a//b\"]}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"a/./b\"]}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"a\\u0001\"]}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"x\",\"\"]}]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"x\",1]}]}",
    "{\"name\":\"p\",\"tools\":[7]}",
    "{\"name\":\"p\",\"tools\":[{\"name\":\"a\",\"command\":[\"x\"]}]}x",
};

START_TEST(test_bad)
{
	struct pr_manifest m;

	ck_assert_int_ne(parse(bads[_i], &m), 0);
	ck_assert_ptr_null(m.json);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-pkgrun manifest");
	TCase *tc = tcase_create("manifest");

	tcase_add_test(tc, test_classes);
	tcase_add_test(tc, test_absent);
	tcase_add_loop_test(tc, test_bad, 0, sizeof(bads) / sizeof(bads[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
