/* kz-browser conf.c: the bounds of a browser call.  BROWSER_OP_TIMEOUT_MS
 * (a page op) is its own key beside BROWSER_NAV_TIMEOUT_MS (a navigation),
 * each with its default; a value out of its range, or not a number, is a
 * bad configuration, never the default quietly; the environment overrides
 * the file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kzb.h"
#include "kz_check.h"
#include "banned.h"

/* Loads a file holding line (NULL: nothing) into c. */
static int
load(const char *line, struct kzb_conf *c, char *why, size_t wlen)
{
	char path[] = "/tmp/check_bconf.XXXXXX";
	int fd = mkstemp(path), r;
	FILE *fp;

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(fp = fdopen(fd, "w"));
	if (line != NULL)
		fprintf(fp, "%s\n", line);
	ck_assert_int_eq(fclose(fp), 0);
	r = kzb_conf_load(c, path, "/usr/sbin/kz-browser", why, wlen);
	unlink(path);
	return r;
}

START_TEST(test_defaults)
{
	struct kzb_conf c;
	char why[256] = "";

	ck_assert_msg(load(NULL, &c, why, sizeof(why)) == 0, "%s", why);
	ck_assert_int_eq(c.nav_timeout_ms, 20000);
	ck_assert_int_eq(c.op_timeout_ms, 5000);
	ck_assert_int_eq(c.io_timeout_ms, 10000);
}
END_TEST

static const struct {
	const char *line;
	int64_t op, nav; /* -1: refused */
} cases[] = {
    {"BROWSER_OP_TIMEOUT_MS = 1500", 1500, 20000},
    {"BROWSER_OP_TIMEOUT_MS = 100", 100, 20000},
    {"BROWSER_OP_TIMEOUT_MS = 600000", 600000, 20000},
    {"BROWSER_OP_TIMEOUT_MS = 99", -1, 0},
    {"BROWSER_OP_TIMEOUT_MS = 600001", -1, 0},
    {"BROWSER_OP_TIMEOUT_MS = 0", -1, 0},
    {"BROWSER_OP_TIMEOUT_MS = -5000", -1, 0},
    {"BROWSER_OP_TIMEOUT_MS = 5s", -1, 0},
    {"BROWSER_OP_TIMEOUT_MS = five", -1, 0},
    {"BROWSER_OP_TIMEOUT_MS =", -1, 0},
    {"BROWSER_OP_TIMEOUT_MS = 99999999999999999999", -1, 0},
    {"BROWSER_NAV_TIMEOUT_MS = 8000", 5000, 8000},
    {"BROWSER_NAV_TIMEOUT_MS = 99", -1, 0},
    {"BROWSER_OP_TIMEOUTMS = 1500", -1, 0},
};

START_TEST(test_timeouts)
{
	struct kzb_conf c;
	char why[256] = "";
	int r = load(cases[_i].line, &c, why, sizeof(why));

	if (cases[_i].op < 0) {
		ck_assert_msg(r != 0, "%s: accepted", cases[_i].line);
		ck_assert_msg(why[0] != '\0', "%s: no reason", cases[_i].line);
		return;
	}
	ck_assert_msg(r == 0, "%s: %s", cases[_i].line, why);
	ck_assert_int_eq(c.op_timeout_ms, cases[_i].op);
	ck_assert_int_eq(c.nav_timeout_ms, cases[_i].nav);
}
END_TEST

START_TEST(test_env_overrides)
{
	struct kzb_conf c;
	char why[256] = "";
	int r;

	ck_assert_int_eq(setenv("BROWSER_OP_TIMEOUT_MS", "2500", 1), 0);
	r = load("BROWSER_OP_TIMEOUT_MS = 1500", &c, why, sizeof(why));
	ck_assert_msg(r == 0, "%s", why);
	ck_assert_int_eq(c.op_timeout_ms, 2500);
	ck_assert_int_eq(setenv("BROWSER_OP_TIMEOUT_MS", "50", 1), 0);
	ck_assert_int_ne(load(NULL, &c, why, sizeof(why)), 0);
	ck_assert_int_eq(unsetenv("BROWSER_OP_TIMEOUT_MS"), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("browser-conf");
	TCase *tc = tcase_create("core");

	unsetenv("BROWSER_OP_TIMEOUT_MS");
	unsetenv("BROWSER_NAV_TIMEOUT_MS");
	unsetenv("BROWSER_IO_TIMEOUT_MS");
	tcase_add_test(tc, test_defaults);
	tcase_add_loop_test(tc, test_timeouts, 0,
	    sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_env_overrides);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
