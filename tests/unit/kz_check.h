/*
 * What every unit suite's main ends with: the suite run, its runner
 * freed, and the exit status (0 when no test failed, 1 otherwise).
 */
#ifndef KZ_CHECK_H
#define KZ_CHECK_H

#include <check.h>

static inline int
kz_check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int nf;

	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}

#endif
