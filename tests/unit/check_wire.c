/* Wire codes and exit statuses: every code maps to its documented status,
 * and what is outside the closed set fails toward refusal. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kz_err.h"
#include "kz_exit.h"
#include "kz_wire.h"
#include "kz_check.h"
#include "banned.h"

struct row {
	const char *code;
	enum kz_exit exit;
};

/* Written out, not generated: the table is what kz-protocol(7) states. */
static const struct row rows[] = {
    {"bad_request", KZ_EXIT_USAGE},
    {"frame_too_large", KZ_EXIT_USAGE},
    {"unauthorized_peer", KZ_EXIT_REFUSED},
    {"operator_only", KZ_EXIT_REFUSED},
    {"admission_closed", KZ_EXIT_UNAVAIL},
    {"store_unavailable", KZ_EXIT_UNAVAIL},
    {"not_owner", KZ_EXIT_REFUSED},
    {"stale_token", KZ_EXIT_REFUSED},
    {"resource_audience_changed", KZ_EXIT_REFUSED},
    {"manifest_changed", KZ_EXIT_REFUSED},
    {"isolation_denied", KZ_EXIT_REFUSED},
    {"refused", KZ_EXIT_REFUSED},
    {"busy", KZ_EXIT_REFUSED},
    {"unavailable", KZ_EXIT_UNAVAIL},
    {"internal", KZ_EXIT_INTERNAL},
    /* Outside the set: a refusal, never success or usage. */
    {"made_up", KZ_EXIT_REFUSED},
    {"", KZ_EXIT_REFUSED},
    {"Bad_Request", KZ_EXIT_REFUSED},
    {NULL, KZ_EXIT_INTERNAL},
};

START_TEST(test_exit_for_wire)
{
	ck_assert_int_eq(kz_exit_for_wire(rows[_i].code), rows[_i].exit);
}
END_TEST

START_TEST(test_codes_are_the_set)
{
	const char *all[] = {
#define X(name, code, exit) KZ_WE_##name,
	    KZ_WIRE_CODES(X)
#undef X
	};
	size_t n = sizeof(all) / sizeof(all[0]);

	/* Every code in the X-macro is in the table above, spelled alike,
	 * and no two codes are the same string. */
	ck_assert_uint_eq(n, 15);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(all[i], rows[i].code);
		for (size_t j = i + 1; j < n; j++)
			ck_assert_str_ne(all[i], all[j]);
	}
	ck_assert_str_eq(KZ_WE_AUDIENCE_CHANGED, "resource_audience_changed");
}
END_TEST

START_TEST(test_exit_for_err)
{
	ck_assert_int_eq(kz_exit_for_err(0), KZ_EXIT_OK);
	ck_assert_int_eq(kz_exit_for_err(KZ_EUNAVAIL), KZ_EXIT_UNAVAIL);
	ck_assert_int_eq(kz_exit_for_err(KZ_ETIMEDOUT), KZ_EXIT_UNAVAIL);
	ck_assert_int_eq(kz_exit_for_err(KZ_EPEER), KZ_EXIT_UNAVAIL);
	ck_assert_int_eq(kz_exit_for_err(KZ_EDENIED), KZ_EXIT_REFUSED);
	ck_assert_int_eq(kz_exit_for_err(KZ_ECRYPTO), KZ_EXIT_REFUSED);
	ck_assert_int_eq(kz_exit_for_err(KZ_ECONF), KZ_EXIT_USAGE);
	ck_assert_int_eq(kz_exit_for_err(KZ_EJSON), KZ_EXIT_USAGE);
	ck_assert_int_eq(kz_exit_for_err(KZ_ENOMEM), KZ_EXIT_INTERNAL);
	ck_assert_int_eq(kz_exit_for_err(KZ_ESYS), KZ_EXIT_INTERNAL);
}
END_TEST

START_TEST(test_wire_code_for_err)
{
	ck_assert_str_eq(kz_wire_code(KZ_ETOOBIG), KZ_WE_FRAME_TOO_LARGE);
	ck_assert_str_eq(kz_wire_code(KZ_EPEER), KZ_WE_UNAUTHORIZED_PEER);
	ck_assert_str_eq(kz_wire_code(KZ_ENOMEM), KZ_WE_INTERNAL);
	ck_assert_str_eq(kz_wire_code(KZ_EUNAVAIL), KZ_WE_UNAVAILABLE);
	ck_assert_str_eq(kz_wire_code(KZ_EDUPKEY), KZ_WE_BAD_REQUEST);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_exit_for_wire, 0,
	    sizeof(rows) / sizeof(rows[0]));
	tcase_add_test(tc, test_codes_are_the_set);
	tcase_add_test(tc, test_exit_for_err);
	tcase_add_test(tc, test_wire_code_for_err);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
