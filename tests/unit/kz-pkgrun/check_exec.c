/*
 * The kz-sandbox command line of one tool run: the runner's own uid, gid
 * and limits, its own cgroup parent, the projection, the status
 * descriptor, the allowlisted environment and nothing else; the egress
 * relay only with both a grant and a configured socket.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "conf_fixture.h"
#include "kz_check.h"

static struct pr_conf c;
static const char *env[] = {"KZ_PKG_TOOL=echo", "HOME=/workspace", NULL};
static const char *argv_[] = {"/projection/pkg/bin/x", "a b", NULL};

static void
setup(void)
{
	conf_fixture(&c, 65536);
}

static int
count(const char **a, const char *s)
{
	int n = 0;

	for (int i = 0; a[i] != NULL; i++)
		n += strcmp(a[i], s) == 0;
	return n;
}

START_TEST(test_argv)
{
	struct pr_exec x = {"/run/kz-pkgrun/inv-1", 2100200000, 2100200001,
	    "pkgrun-1", NULL, env, argv_, NULL, NULL};
	const char *a[160];
	int i;

	ck_assert_int_eq(pr_exec_argv(&c, &x, a, 160), 0);
	ck_assert_str_eq(a[0], "/opt/kz-sandbox");
	ck_assert_str_eq(a[1], "run");
	ck_assert_str_eq(argv_val(a, "--uid"), "2100200000");
	ck_assert_str_eq(argv_val(a, "--gid"), "2100200001");
	ck_assert_str_eq(argv_val(a, "--pids"), "64");
	ck_assert_str_eq(argv_val(a, "--memory"), "268435456");
	ck_assert_str_eq(argv_val(a, "--cgroup-parent"), "kz-pkgrun");
	ck_assert_str_eq(argv_val(a, "--id"), "pkgrun-1");
	ck_assert_str_eq(argv_val(a, "--projection"), "/run/kz-pkgrun/inv-1");
	ck_assert_str_eq(argv_val(a, "--pass-fd"), "3");
	ck_assert_ptr_null(argv_val(a, "--config"));
	ck_assert_ptr_null(argv_val(a, "--egress-socket"));
	ck_assert_ptr_null(argv_val(a, "--grant-file"));
	ck_assert_ptr_null(argv_val(a, "--start-fd"));
	ck_assert_int_eq(count(a, "--env"), 2);
	/* The tool's argv follows the step, unchanged. */
	for (i = 0; a[i] != NULL && strcmp(a[i], "kz-pkgrun-step") != 0; i++)
		;
	ck_assert_str_eq(a[i + 1], "/projection/pkg/bin/x");
	ck_assert_str_eq(a[i + 2], "a b");
	ck_assert_ptr_null(a[i + 3]);
}
END_TEST

START_TEST(test_egress)
{
	struct pr_exec x = {"/s", 1, 1, "pkgrun-1", "/s.grant", env, argv_,
	    NULL, NULL};
	const char *a[160];

	/* A grant without a socket: still no network. */
	ck_assert_int_eq(pr_exec_argv(&c, &x, a, 160), 0);
	ck_assert_ptr_null(argv_val(a, "--egress-socket"));
	snprintf(c.egress_sock, sizeof(c.egress_sock), "/run/egress.sock");
	ck_assert_int_eq(pr_exec_argv(&c, &x, a, 160), 0);
	ck_assert_str_eq(argv_val(a, "--egress-socket"), "/run/egress.sock");
	ck_assert_str_eq(argv_val(a, "--grant-file"), "/s.grant");
	/* A socket without a grant: no network either. */
	x.grant_file = NULL;
	ck_assert_int_eq(pr_exec_argv(&c, &x, a, 160), 0);
	ck_assert_ptr_null(argv_val(a, "--egress-socket"));
}
END_TEST

static int
gate_never(void *arg)
{
	(void)arg;
	return -1;
}

/* A gated one-shot: kz-sandbox waits on descriptor 4, not the status's. */
START_TEST(test_gated)
{
	struct pr_exec x = {"/s", 1, 1, "pkgrun-1", NULL, env, argv_,
	    gate_never, NULL};
	const char *a[160];

	ck_assert_int_eq(pr_exec_argv(&c, &x, a, 160), 0);
	ck_assert_str_eq(argv_val(a, "--start-fd"), "4");
	ck_assert_str_eq(argv_val(a, "--pass-fd"), "3");
	ck_assert_int_eq(count(a, "--start-fd"), 1);
}
END_TEST

START_TEST(test_bounded)
{
	struct pr_exec x = {"/s", 1, 1, "pkgrun-1", NULL, env, argv_, NULL,
	    NULL};
	const char *a[20];

	ck_assert_int_eq(pr_exec_argv(&c, &x, a, 20), KZ_ETOOBIG);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-pkgrun exec");
	TCase *tc = tcase_create("exec");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_argv);
	tcase_add_test(tc, test_egress);
	tcase_add_test(tc, test_bounded);
	tcase_add_test(tc, test_gated);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
