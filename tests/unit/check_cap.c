/* Run capabilities: a closed set; what is outside it allows nothing. */
#include <check.h>
#include <stdlib.h>

#include "kz_cap.h"
#include "kz_check.h"
#include "banned.h"

struct row {
	const char *name;
	bool known, egress, outputs;
};

static const struct row rows[] = {
    {"code.run", true, false, true},
    {"code.run.egress", true, true, true},
    {"code.run.private", true, false, false},
    /* Unknown, near-miss and hostile names allow nothing. */
    {"code", false, false, false},
    {"Code.run", false, false, false},
    {"code.run ", false, false, false},
    {"code.run.egress.extra", false, false, false},
    {"", false, false, false},
    {NULL, false, false, false},
};

START_TEST(test_cap_table)
{
	const struct row *r = &rows[_i];

	ck_assert_int_eq(kz_cap_find(r->name) != NULL, r->known);
	ck_assert_int_eq(kz_cap_allows(r->name, 0), r->known);
	ck_assert_int_eq(kz_cap_allows(r->name, KZ_CAP_EGRESS), r->egress);
	ck_assert_int_eq(kz_cap_allows(r->name, KZ_CAP_OUTPUTS), r->outputs);
	ck_assert_int_eq(kz_cap_allows(r->name, KZ_CAP_EGRESS | KZ_CAP_OUTPUTS),
	    r->egress && r->outputs);
}
END_TEST

START_TEST(test_cap_set_is_closed)
{
	size_t n = 0;

	for (const struct kz_cap *c = kz_caps; c->name != NULL; c++, n++)
		ck_assert_ptr_nonnull(c->what);
	ck_assert_uint_eq(n, 3);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("cap");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_cap_table, 0,
	    sizeof(rows) / sizeof(rows[0]));
	tcase_add_test(tc, test_cap_set_is_closed);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
