/* The fetches in flight (load.c): 32 of one run, PKGBROKER_FETCHES_MAX of
 * all runs; a fetch given back frees its place; a run with none left is
 * forgotten. */
#include <check.h>
#include <stdlib.h>

#include "serve.h"
#include "kz_check.h"
#include "banned.h"

START_TEST(test_per_run)
{
	struct pb_conf c = {.fetches_max = 1000};
	struct pb_srv s = {.c = &c};

	for (int i = 0; i < PB_RUN_FETCHES; i++)
		ck_assert_int_eq(pb_load_take(&s, "run-a"), 0);
	ck_assert_int_eq(pb_load_take(&s, "run-a"), KZ_ETOOBIG);
	ck_assert_int_eq(pb_load_take(&s, "run-b"), 0);
	pb_load_give(&s, "run-a");
	ck_assert_int_eq(pb_load_take(&s, "run-a"), 0);
	ck_assert_int_eq(s.inflight, PB_RUN_FETCHES + 1);
	free(s.loads);
}
END_TEST

START_TEST(test_broker_wide)
{
	struct pb_conf c = {.fetches_max = 3};
	struct pb_srv s = {.c = &c};

	ck_assert_int_eq(pb_load_take(&s, "run-a"), 0);
	ck_assert_int_eq(pb_load_take(&s, "run-a"), 0);
	ck_assert_int_eq(pb_load_take(&s, "run-b"), 0);
	ck_assert_int_eq(pb_load_take(&s, "run-c"), KZ_EUNAVAIL);
	ck_assert_int_eq(pb_load_take(&s, "run-a"), KZ_EUNAVAIL);
	pb_load_give(&s, "run-b");
	ck_assert_uint_eq(s.nloads, 1); /* run-b has none: forgotten */
	ck_assert_int_eq(pb_load_take(&s, "run-c"), 0);
	/* A run never counted gives nothing back. */
	pb_load_give(&s, "run-z");
	ck_assert_int_eq(s.inflight, 3);
	free(s.loads);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("pb_load");
	TCase *tc = tcase_create("load");

	tcase_add_test(tc, test_per_run);
	tcase_add_test(tc, test_broker_wide);
	suite_add_tcase(su, tc);
	return kz_check_run(su);
}
