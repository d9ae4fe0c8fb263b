/*
 * place.c: the place rule over a projection's files.  Each row takes its
 * paths in line, each only while it clashes with none taken before it, and
 * names which were taken; a path equal to, a directory of or beneath a
 * taken one is never taken, and a sibling or a mere string prefix is.
 * Files are also taken only while they stay within the bounds, and one
 * left out takes no place.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "kzp.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *name;
	const char *paths[8];
	const char *taken; /* one character per path: 1 taken, 0 left */
} rows[] = {
    {"distinct", {"a.txt", "b.txt", "c/d.txt", NULL}, "111"},
    {"equal", {"a.txt", "a.txt", NULL}, "10"},
    {"beneath a file", {"a.txt", "a.txt/x", NULL}, "10"},
    {"a directory of a file", {"a.txt/x", "a.txt", NULL}, "10"},
    {"deep beneath", {"d", "d/e/f/g.txt", NULL}, "10"},
    {"deep directory of", {"d/e/f/g.txt", "d/e", "d", NULL}, "100"},
    /* A string prefix that is not a directory is no clash. */
    {"string prefix", {"a.txt", "a.txt-b", "a.txtx/y", "a.tx", NULL}, "1111"},
    {"siblings", {"a/x", "a/y", "a/z/w", NULL}, "111"},
    /* '-' sorts before '/': the clash is found past a sibling. */
    {"sort order", {"a.txt-b", "a.txt/x", "a.txt", NULL}, "110"},
    {"equal, then beneath", {"a", "a", "a/b", "c", NULL}, "1001"},
    /* A path left out takes no place: what it would block is taken. */
    {"left out blocks nothing", {"a/b", "a", "a/c", NULL}, "101"},
    {"first wins", {"x/y", "x", "x/y/z", "x/q", NULL}, "1001"},
    {"none", {NULL}, ""},
};

START_TEST(take_in_line)
{
	struct kzp_paths *ps;
	size_t n = 0;
	char got[16] = "";

	while (rows[_i].paths[n] != NULL)
		n++;
	ck_assert_int_eq(kzp_paths_new(rows[_i].paths, n, &ps), 0);
	for (size_t i = 0; i < n; i++) {
		bool ok = !kzp_paths_clash(ps, i);

		if (ok)
			kzp_paths_take(ps, i);
		got[i] = ok ? '1' : '0';
	}
	kzp_paths_free(ps);
	ck_assert_msg(strcmp(got, rows[_i].taken) == 0, "%s: %s", rows[_i].name,
	    got);
	ck_assert_msg(kzp_paths_disjoint(rows[_i].paths, n) ==
	        (strchr(rows[_i].taken, '0') == NULL),
	    "%s: disjoint", rows[_i].name);
}
END_TEST

/* Many candidates under one directory: each lookup stays a search. */
START_TEST(many)
{
	enum { N = 20000 };
	static char buf[N][24];
	static const char *paths[N + 1];
	struct kzp_paths *ps;
	int taken = 0;

	for (int i = 0; i < N; i++) {
		snprintf(buf[i], sizeof(buf[i]), "d/%d/f.txt", i % (N / 2));
		paths[i] = buf[i];
	}
	paths[N] = "d";
	ck_assert_int_eq(kzp_paths_new(paths, N + 1, &ps), 0);
	for (int i = 0; i <= N; i++)
		if (!kzp_paths_clash(ps, (size_t)i)) {
			kzp_paths_take(ps, (size_t)i);
			taken++;
		}
	kzp_paths_free(ps);
	/* Each path twice: the first of each is taken; "d" holds files. */
	ck_assert_int_eq(taken, N / 2);
	ck_assert(!kzp_paths_disjoint(paths, N));
	ck_assert(kzp_paths_disjoint(paths, N / 2));
}
END_TEST

/* Paths and bounds together, in line (bounds: 3 files, 10 each, 20). */
START_TEST(in_line)
{
	static const struct kzp_bounds b = {3, 10, 20};
	static const char *const files =
	    "[{\"path\":\"a\",\"size\":5},{\"path\":\"a/x\",\"size\":1},"
	    "{\"path\":\"big\",\"size\":11},{\"path\":\"b\",\"size\":10},"
	    "{\"path\":\"c\",\"size\":6},{\"path\":\"d\",\"size\":5},"
	    "{\"path\":\"e\",\"size\":0},{\"path\":\"d\",\"size\":0}]";
	static const char *const want[] = {NULL, "path_clash", "over_bounds",
	    NULL, "over_bounds", NULL, "over_bounds", "path_clash"};
	cJSON *arr = cJSON_Parse(files);
	const cJSON *v[8];
	const char *why[8];
	int n = 0;

	ck_assert_ptr_nonnull(arr);
	for (const cJSON *c = arr->child; c != NULL; c = c->next)
		v[n++] = c;
	ck_assert_int_eq(kzp_place_in_line(v, (size_t)n, &b, why), 0);
	for (int i = 0; i < n; i++)
		ck_assert_msg(want[i] == NULL ?
		        why[i] == NULL :
		        why[i] != NULL && strcmp(why[i], want[i]) == 0,
		    "file %d: %s", i, why[i] ? why[i] : "taken");
	cJSON_Delete(arr);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-project place");
	TCase *tc = tcase_create("place");

	tcase_add_loop_test(tc, take_in_line, 0,
	    sizeof(rows) / sizeof(rows[0]));
	tcase_add_test(tc, many);
	tcase_add_test(tc, in_line);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
