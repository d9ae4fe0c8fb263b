/* The Prometheus text exposition of kz-metrics (cmd/kz-metrics/expo.c). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "kz_check.h"

static const struct {
	const char *s;
	bool metric, label;
} names[] = {
    {"kz_up", true, true},
    {"kz:lease:workers", true, false},
    {"_x", true, true},
    {"__reserved", true, false},
    {"a1", true, true},
    {"1a", false, false},
    {"", false, false},
    {"kz-up", false, false},
    {"kz up", false, false},
    {"kz_\xc3\xa9", false, false},
    {"kz\n", false, false},
    {"kz{x}", false, false},
    {"kz.lease", false, false},
};

START_TEST(test_names)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		ck_assert_msg(mx_name_ok(names[i].s) == names[i].metric,
		    "metric name %zu", i);
		ck_assert_msg(mx_label_name_ok(names[i].s) == names[i].label,
		    "label name %zu", i);
	}
}
END_TEST

static const struct {
	const char *in;
	bool help;
	const char *out;
} escapes[] = {
    {"plain", false, "plain"},
    {"a\"b", false, "a\\\"b"},
    {"a\"b", true, "a\"b"},
    {"back\\slash", false, "back\\\\slash"},
    {"back\\slash", true, "back\\\\slash"},
    {"two\nlines", false, "two\\nlines"},
    {"two\nlines", true, "two\\nlines"},
    {"\\\"\n", false, "\\\\\\\"\\n"},
    {"caf\xc3\xa9 {x=\"1\"}", false, "caf\xc3\xa9 {x=\\\"1\\\"}"},
    {"", false, ""},
};

START_TEST(test_escape)
{
	char out[64], tiny[4];

	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		ck_assert_int_eq(mx_escape(escapes[i].in, escapes[i].help, out,
		                     sizeof(out)),
		    0);
		ck_assert_str_eq(out, escapes[i].out);
	}
	ck_assert_int_eq(mx_escape("abcd", false, tiny, sizeof(tiny)),
	    KZ_ENOSPC);
	ck_assert_int_eq(mx_escape("a\"", false, tiny, 3), KZ_ENOSPC);
	ck_assert_int_eq(mx_escape("abc", false, tiny, sizeof(tiny)), 0);
}
END_TEST

static char *
text_of(struct mx *m)
{
	char *t;
	size_t n;

	ck_assert_int_eq(mx_text(m, &t, &n), 0);
	ck_assert_uint_eq(strlen(t), n);
	return t;
}

START_TEST(test_families)
{
	const char *a[] = {"daemon", "kz-audit", NULL};
	const char *b[] = {"daemon", "kz-lease", NULL};
	const char *r[] = {"reason", "we\"ird\\\n", NULL};
	struct mx *m;
	char *t;

	ck_assert_int_eq(mx_new(&m), 0);
	ck_assert_int_eq(mx_add(m, "kz_up", MX_GAUGE, "Up.", a, 1), 0);
	ck_assert_int_eq(mx_add(m, "kz_x_total", MX_COUNTER, "X\nY\\.", r, 3),
	    0);
	/* A later sample of an earlier family stays with its family. */
	ck_assert_int_eq(mx_add(m, "kz_up", MX_GAUGE, "Up.", b, 0), 0);
	ck_assert_int_eq(mx_add(m, "kz_g", MX_GAUGE, "G.", NULL, 0.25), 0);
	ck_assert_int_eq(mx_add(m, "kz_g", MX_GAUGE, "G.", NULL, -2), 0);
	ck_assert_int_eq(mx_add(m, "kz_big", MX_GAUGE, "B.", NULL, 1e20), 0);
	t = text_of(m);
	ck_assert_str_eq(t,
	    "# HELP kz_up Up.\n# TYPE kz_up gauge\n"
	    "kz_up{daemon=\"kz-audit\"} 1\nkz_up{daemon=\"kz-lease\"} 0\n"
	    "# HELP kz_x_total X\\nY\\\\.\n# TYPE kz_x_total counter\n"
	    "kz_x_total{reason=\"we\\\"ird\\\\\\n\"} 3\n"
	    "# HELP kz_g G.\n# TYPE kz_g gauge\nkz_g 0.25\nkz_g -2\n"
	    "# HELP kz_big B.\n# TYPE kz_big gauge\nkz_big 1e+20\n");
	free(t);
	mx_free(m);
}
END_TEST

static const struct {
	const char *name;
	enum mx_type type;
	const char *label;
	double v;
} bad[] = {
    {"kz_x", MX_COUNTER, NULL, 1}, /* a counter without _total */
    {"_total", MX_COUNTER, NULL, 1}, {"kz-x_total", MX_COUNTER, NULL, 1},
    {"kz_x_total", MX_COUNTER, NULL, -1}, /* counters do not go down */
    {"kz_y", MX_GAUGE, NULL, NAN}, {"kz_y", MX_GAUGE, NULL, INFINITY},
    {"kz_y", MX_GAUGE, "__name__", 1}, {"kz_y", MX_GAUGE, "a-b", 1},
    {"kz_y", MX_GAUGE, "", 1},
    {"kz_same", MX_COUNTER, NULL, 1}, /* kz_same is a gauge */
};

START_TEST(test_refused)
{
	struct mx *m;
	char *t;

	ck_assert_int_eq(mx_new(&m), 0);
	ck_assert_int_eq(mx_add(m, "kz_same", MX_GAUGE, "S.", NULL, 1), 0);
	ck_assert_int_eq(mx_add(m, "kz_same", MX_GAUGE, "other help", NULL, 1),
	    KZ_EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *lb[] = {bad[i].label, "v", NULL};

		ck_assert_msg(mx_add(m, bad[i].name, bad[i].type, "H.",
		                  bad[i].label ? lb : NULL,
		                  bad[i].v) == KZ_EINVAL,
		    "case %zu", i);
	}
	t = text_of(m);
	ck_assert_str_eq(t,
	    "# HELP kz_same S.\n# TYPE kz_same gauge\n"
	    "kz_same 1\n");
	free(t);
	mx_free(m);
}
END_TEST

START_TEST(test_bounds)
{
	char name[32];
	struct mx *m;
	int r = 0;

	ck_assert_int_eq(mx_new(&m), 0);
	for (int i = 0; i <= MX_FAMILIES_MAX && r == 0; i++) {
		snprintf(name, sizeof(name), "kz_f%d", i);
		r = mx_add(m, name, MX_GAUGE, "F.", NULL, i);
	}
	ck_assert_int_eq(r, KZ_ETOOBIG);
	mx_free(m);
	ck_assert_int_eq(mx_new(&m), 0);
	r = 0;
	for (long i = 0; r == 0 && i < 1000000; i++) {
		char v[24];
		const char *lb[] = {"i", v, NULL};

		snprintf(v, sizeof(v), "%ld", i);
		r = mx_add(m, "kz_many", MX_GAUGE, "M.", lb, 1);
	}
	ck_assert_int_eq(r, KZ_ETOOBIG);
	mx_free(m);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-metrics expo");
	TCase *tc = tcase_create("expo");

	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_escape);
	tcase_add_test(tc, test_families);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_bounds);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
