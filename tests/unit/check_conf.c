/* Config parsing: fail closed on anything malformed; env overrides file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_conf.h"
#include "banned.h"

static const char *const known[] = {"KZ_A", "KZ_B", "KZ_SIZE", "KZ_ON",
    NULL};

static char *
write_tmp(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/kzconf.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

struct ccase {
	const char *text;
	int want;
};

static const struct ccase ccases[] = {
	{"KZ_A = 1\n# comment\n\nKZ_B=two words \n", 0},
	{"KZ_A = 1", 0},
	{"KZ_A 1\n", KZ_ECONF},
	{"KZ_C = 1\n", KZ_ECONF},
	{"kz_a = 1\n", KZ_ECONF},
	{"KZ_A = 1\nKZ_A = 2\n", KZ_ECONF},
	{" = 1\n", KZ_ECONF},
	{"KZ_A-B = 1\n", KZ_ECONF},
};

START_TEST(test_conf_table)
{
	char *p = write_tmp(ccases[_i].text), why[128] = "";
	struct kz_conf *c = NULL;
	int r = kz_conf_load(p, known, &c, why, sizeof(why));

	ck_assert_msg(r == ccases[_i].want, "case %d: %s (%s)", _i,
	    kz_errname(r), why);
	if (r != 0)
		ck_assert(why[0] != '\0');
	kz_conf_free(c);
	unlink(p);
}
END_TEST

START_TEST(test_conf_values)
{
	char *p = write_tmp("KZ_A = 7\nKZ_B = file\nKZ_SIZE = 64M\n"
	    "KZ_ON = off\n"), why[128];
	struct kz_conf *c;
	int64_t n;
	uint64_t sz;
	bool b;

	ck_assert_int_eq(kz_conf_load(p, known, &c, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_conf_int(c, "KZ_A", 0, 0, 10, &n, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(n, 7);
	ck_assert_int_eq(kz_conf_int(c, "KZ_A", 0, 0, 5, &n, why,
	    sizeof(why)), KZ_ECONF);
	ck_assert_int_eq(kz_conf_int(c, "KZ_B", 0, 0, 5, &n, why,
	    sizeof(why)), KZ_ECONF);
	ck_assert_int_eq(kz_conf_size(c, "KZ_SIZE", 0, UINT64_MAX, &sz, why,
	    sizeof(why)), 0);
	ck_assert_uint_eq(sz, 64u << 20);
	ck_assert_int_eq(kz_conf_bool(c, "KZ_ON", true, &b, why,
	    sizeof(why)), 0);
	ck_assert(!b);
	ck_assert_str_eq(kz_conf_str(c, "KZ_B", "d"), "file");
	ck_assert_str_eq(kz_conf_origin(c, "KZ_B"), "file");
	setenv("KZ_B", "env", 1);
	ck_assert_str_eq(kz_conf_str(c, "KZ_B", "d"), "env");
	ck_assert_str_eq(kz_conf_origin(c, "KZ_B"), "env");
	unsetenv("KZ_B");
	ck_assert_str_eq(kz_conf_str(NULL, "KZ_B", "d"), "d");
	{
		char out[16];

		/* A path setting: the value, else dir/default, else the
		 * default; too long for out names the key. */
		ck_assert_int_eq(kz_conf_copy(c, "KZ_B", "/run", "x", out,
		    sizeof(out), why, sizeof(why)), 0);
		ck_assert_str_eq(out, "file");
		ck_assert_int_eq(kz_conf_copy(c, "KZ_NONE", "/run", "x.sock",
		    out, sizeof(out), why, sizeof(why)), 0);
		ck_assert_str_eq(out, "/run/x.sock");
		ck_assert_int_eq(kz_conf_copy(c, "KZ_NONE", NULL, "", out,
		    sizeof(out), why, sizeof(why)), 0);
		ck_assert_str_eq(out, "");
		ck_assert_int_eq(kz_conf_copy(c, "KZ_NONE", "/a/long/run/dir",
		    "x.sock", out, sizeof(out), why, sizeof(why)), KZ_ECONF);
		ck_assert_str_eq(why, "KZ_NONE is too long");
	}
	kz_conf_free(c);
	unlink(p);
	ck_assert_int_eq(kz_conf_load("/nonexistent/kz.conf", known, &c, why,
	    sizeof(why)), KZ_ECONF);
	ck_assert_int_eq(kz_conf_load("/tmp", known, &c, why, sizeof(why)),
	    KZ_ECONF);
}
END_TEST

START_TEST(test_parse_numbers)
{
	int64_t v;
	uint64_t u;

	ck_assert_int_eq(kz_parse_int("12", 0, 20, &v), 0);
	ck_assert_int_eq(kz_parse_int("-3", -5, 20, &v), 0);
	ck_assert_int_eq(kz_parse_int("", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int(" 1", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("1x", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("0x10", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("99999999999999999999", 0, INT64_MAX,
	    &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("21", 0, 20, &v), KZ_ERANGE);
	ck_assert_int_eq(kz_parse_size("1K", 4096, &u), 0);
	ck_assert_uint_eq(u, 1024);
	ck_assert_int_eq(kz_parse_size("5K", 4096, &u), KZ_ERANGE);
	ck_assert_int_eq(kz_parse_size("1KB", 4096, &u), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_size("-1", 4096, &u), KZ_EINVAL);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nf;

	tcase_add_loop_test(tc, test_conf_table, 0,
	    sizeof(ccases) / sizeof(ccases[0]));
	tcase_add_test(tc, test_conf_values);
	tcase_add_test(tc, test_parse_numbers);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
