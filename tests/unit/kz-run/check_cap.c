/* kz-run cap.c: the capability a run names against what it asks for. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "run.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *cap;
	bool egress;
	size_t noutputs;
	int want;
	const char *says; /* in why when refused */
} cases[] = {
    {NULL, false, 0, 0, NULL},
    {"code.run", false, 2, 0, NULL},
    {"code.run.egress", true, 1, 0, NULL},
    {"code.run.private", false, 0, 0, NULL},
    /* Refused: more than the capability allows, or no capability. */
    {NULL, true, 0, 1, "code.run does not allow egress"},
    {"code.run", true, 0, 1, "does not allow egress"},
    {"code.run.private", true, 0, 1, "does not allow egress"},
    {"code.run.private", false, 1, 1, "does not allow linking outputs"},
    {"code.run.admin", false, 0, 1, "not one of the run capabilities"},
    {"", false, 0, 1, "not one of"},
    {"CODE.RUN", false, 0, 1, "not one of"},
    {"code.run ", false, 0, 1, "not one of"},
};

START_TEST(test_cap)
{
	struct run_opts o = {0};
	char why[200] = "";

	o.cap = cases[_i].cap;
	o.egress = cases[_i].egress;
	o.noutputs = cases[_i].noutputs;
	ck_assert_int_eq(run_cap_check(&o, why, sizeof(why)), cases[_i].want);
	if (cases[_i].says != NULL)
		ck_assert_ptr_nonnull(strstr(why, cases[_i].says));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-run cap");
	TCase *tc = tcase_create("cap");

	tcase_add_loop_test(tc, test_cap, 0, sizeof(cases) / sizeof(cases[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
