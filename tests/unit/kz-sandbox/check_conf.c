/* kz-sandbox conf.c: defaults, options, bounds and cross-field checks. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "kz_check.h"
#include "banned.h"

START_TEST(test_defaults)
{
	struct sbx_conf c;
	char why[256];

	sbx_conf_defaults(&c);
	ck_assert_str_eq(c.root, "/");
	ck_assert_int_eq(c.uid, 2100000000);
	ck_assert_int_eq(c.gid, 2100000000);
	ck_assert_uint_eq(c.ws_size, 256u << 20);
	ck_assert_int_eq(c.timeout_s, 60);
	ck_assert_str_eq(c.egress_sock, "");
	ck_assert_int_eq(c.userns, 0);
	ck_assert_int_eq(c.browser_prestart, 0);
	ck_assert_int_eq(c.userns_uid, 2100000000);
	ck_assert_int_eq(c.sigpending, 256);
	ck_assert_uint_eq(c.msgqueue, 800u << 10);
	ck_assert_int_eq(c.leases_max, 4096);
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), 0);
}
END_TEST

static const struct {
	const char *opt, *val;
	int want;
} ocases[] = {
    {"memory", "64M", 0},
    {"memory", "1K", KZ_ERANGE},
    {"memory", "lots", KZ_ERANGE},
    {"pids", "0", KZ_ERANGE},
    {"pids", "64", 0},
    {"uid", "0", KZ_ERANGE},
    {"gid", "-1", KZ_ERANGE},
    {"timeout", "86401", KZ_ERANGE},
    {"timeout", "1", 0},
    {"workspace-size", "2M", 0},
    {"cpu", "5", KZ_ERANGE},
    {"no-such-option", "1", KZ_ENOENT},
    {"root", "/srv/root", 0},
    {"stdout-max", "1K", 0},
    {"stdout-max", "1", KZ_ERANGE},
    {"userns", "on", 0},
    {"userns", "off", 0},
    {"userns", "maybe", KZ_EINVAL},
    {"browser-prestart", "yes", 0},
    {"browser-prestart", "no", 0},
    {"browser-prestart", "soon", KZ_EINVAL},
    {"userns-host-uid", "0", KZ_ERANGE},
    {"userns-host-uid", "100000", 0},
    {"userns-host-gid", "0", KZ_ERANGE},
    {"cgroup-root", "/cg", 0},
    {"sigpending", "8", KZ_ERANGE},
    {"sigpending", "64", 0},
    {"msgqueue", "0", 0},
    {"msgqueue", "2G", KZ_ERANGE},
    {"io-read-bps", "0", 0},
    {"io-write-bps", "10M", 0},
    {"leases-max", "0", KZ_ERANGE},
    {"clean-memory", "1K", KZ_ERANGE},
};

START_TEST(test_options)
{
	struct sbx_conf c;
	char why[256] = "";

	sbx_conf_defaults(&c);
	ck_assert_int_eq(sbx_conf_opt(&c, ocases[_i].opt, ocases[_i].val, why,
	                     sizeof(why)),
	    ocases[_i].want);
}
END_TEST

START_TEST(test_checks)
{
	struct sbx_conf c;
	char why[256];

	sbx_conf_defaults(&c);
	snprintf(c.root, sizeof(c.root), "relative");
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	sbx_conf_defaults(&c);
	snprintf(c.root, sizeof(c.root), "/a/../b");
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	sbx_conf_defaults(&c);
	snprintf(c.cg_parent, sizeof(c.cg_parent), "a/b");
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	sbx_conf_defaults(&c);
	snprintf(c.id, sizeof(c.id), "../x");
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	sbx_conf_defaults(&c);
	snprintf(c.cg_version, sizeof(c.cg_version), "v3");
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	snprintf(c.cg_version, sizeof(c.cg_version), "v2");
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), 0);
	snprintf(c.cg_root, sizeof(c.cg_root), "sys/fs/cgroup");
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	/* The host's nobody and nogroup are never the code's ids: other
	 * processes hold them and share their per-uid limits. */
	sbx_conf_defaults(&c);
	c.uid = 65534;
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	sbx_conf_defaults(&c);
	c.gid = 65534;
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	sbx_conf_defaults(&c);
	c.userns = 1;
	c.userns_uid = 65534;
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), KZ_ECONF);
	/* Inside a user namespace 65534 maps to an unprivileged host id. */
	c.userns_uid = 300000;
	c.uid = c.gid = 65534;
	ck_assert_int_eq(sbx_conf_check(&c, why, sizeof(why)), 0);
	ck_assert(sbx_id_valid("w-1.a_b"));
	ck_assert(!sbx_id_valid(""));
	ck_assert(!sbx_id_valid(".hidden"));
	ck_assert(!sbx_id_valid("a b"));
}
END_TEST

START_TEST(test_env_override)
{
	struct sbx_conf c;
	char why[256] = "";

	sbx_conf_defaults(&c);
	setenv("SANDBOX_PIDS", "77", 1);
	ck_assert_int_eq(sbx_conf_load(&c, NULL, why, sizeof(why)), 0);
	ck_assert_int_eq(c.pids, 77);
	setenv("SANDBOX_PIDS", "0", 1);
	ck_assert_int_ne(sbx_conf_load(&c, NULL, why, sizeof(why)), 0);
	unsetenv("SANDBOX_PIDS");
	ck_assert_int_ne(sbx_conf_load(&c, "/nonexistent/kz.conf", why,
	                     sizeof(why)),
	    0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-conf");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_defaults);
	tcase_add_loop_test(tc, test_options, 0,
	    sizeof(ocases) / sizeof(ocases[0]));
	tcase_add_test(tc, test_checks);
	tcase_add_test(tc, test_env_override);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
