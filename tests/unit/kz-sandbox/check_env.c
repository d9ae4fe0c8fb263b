/* kz-sandbox env.c: names, duplicates, bounds, the safe set, proxies,
 * the package broker's settings. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "sbx.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *name;
	bool ok;
} names[] = {
    {"PATH", true},
    {"a_b9", true},
    {"_X", true},
    {"", false},
    {"9A", false},
    {"A-B", false},
    {"A=B", false},
    {"A B", false},
    {"\xc3\xa9", false},
};

START_TEST(test_names)
{
	ck_assert(sbx_env_name_ok(names[_i].name) == names[_i].ok);
}
END_TEST

static const char *
get(const struct sbx_env *e, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, n) == 0 && e->v[i][n] == '=')
			return e->v[i] + n + 1;
	return NULL;
}

START_TEST(test_safe_set)
{
	struct sbx_env e;
	char why[128];

	sbx_env_init(&e);
	ck_assert_int_eq(sbx_env_add(&e, "HOME", "/workspace/h", why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(sbx_env_add(&e, "HOME", "x", why, sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(sbx_env_finish(&e, 0, why, sizeof(why)), 0);
	ck_assert_str_eq(get(&e, "HOME"), "/workspace/h");
	ck_assert_str_eq(get(&e, "PATH"), "/usr/local/bin:/usr/bin:/bin");
	ck_assert_ptr_null(get(&e, "HTTP_PROXY"));
	ck_assert_ptr_null(e.v[e.n]);
	sbx_env_release(&e);
}
END_TEST

START_TEST(test_proxy_forced)
{
	struct sbx_env e;
	char why[128];

	sbx_env_init(&e);
	ck_assert_int_eq(sbx_env_add(&e, "HTTPS_PROXY", "http://evil:1", why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(sbx_env_finish(&e, 3128, why, sizeof(why)), 0);
	ck_assert_str_eq(get(&e, "HTTPS_PROXY"), "http://127.0.0.1:3128");
	ck_assert_str_eq(get(&e, "http_proxy"), "http://127.0.0.1:3128");
	sbx_env_release(&e);
}
END_TEST

START_TEST(test_bounds)
{
	struct sbx_env e;
	char why[128], name[32];
	int r = 0, i;

	sbx_env_init(&e);
	for (i = 0; i < SBX_ENV_MAX + 5 && r == 0; i++) {
		snprintf(name, sizeof(name), "V%d", i);
		r = sbx_env_add(&e, name, "1", why, sizeof(why));
	}
	ck_assert_int_eq(r, KZ_ETOOBIG);
	ck_assert_int_eq(i, SBX_ENV_MAX + 1);
	ck_assert_int_eq(sbx_env_finish(&e, 3128, why, sizeof(why)), 0);
	sbx_env_release(&e);
	sbx_env_init(&e);
	{
		static char big[SBX_ENV_BYTES];

		memset(big, 'a', sizeof(big) - 1);
		ck_assert_int_eq(sbx_env_add(&e, "BIG", big, why, sizeof(why)),
		    KZ_ETOOBIG);
	}
	sbx_env_release(&e);
}
END_TEST

/* A full request, then the fixed set, proxies and the broker's settings
 * still fit; the request's own names stay; a token that is not one is
 * refused. */
START_TEST(test_broker)
{
	struct sbx_env e;
	char why[128], name[32], rc[SBX_NPMRC_MAX] = "";
	int i;

	sbx_env_init(&e);
	for (i = 0; i < SBX_ENV_MAX - 1; i++) {
		snprintf(name, sizeof(name), "V%d", i);
		ck_assert_int_eq(sbx_env_add(&e, name, "1", why, sizeof(why)),
		    0);
	}
	ck_assert_int_eq(sbx_env_add(&e, "PIP_INDEX_URL", "http://mine/", why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(sbx_env_broker(&e, 4873, "abc.DEF-_9", rc, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(sbx_env_finish(&e, 3128, why, sizeof(why)), 0);
	ck_assert_str_eq(get(&e, "PIP_INDEX_URL"), "http://mine/");
	ck_assert_str_eq(get(&e, "NPM_CONFIG_USERCONFIG"), SBX_NPMRC);
	ck_assert_str_eq(get(&e, "NO_PROXY"), "127.0.0.1,localhost");
	ck_assert_str_eq(rc,
	    "registry=http://127.0.0.1:4873/\n"
	    "//127.0.0.1:4873/:_authToken=abc.DEF-_9\n");
	ck_assert_ptr_null(e.v[e.n]);
	sbx_env_release(&e);
	sbx_env_init(&e);
	ck_assert_int_eq(sbx_env_broker(&e, 4873, "abc.def", rc, why,
	                     sizeof(why)),
	    0);
	ck_assert_str_eq(get(&e, "PIP_INDEX_URL"),
	    "http://__token__:abc.def@127.0.0.1:4873/simple/");
	sbx_env_release(&e);
	sbx_env_init(&e);
	ck_assert_int_eq(sbx_env_broker(&e, 4873, "a@b/c", rc, why,
	                     sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(sbx_env_broker(&e, 4873, "", rc, why, sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(sbx_env_broker(&e, 4873, "a\nb", rc, why, sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(e.n, 0);
	sbx_env_release(&e);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-env");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_names, 0,
	    sizeof(names) / sizeof(names[0]));
	tcase_add_test(tc, test_safe_set);
	tcase_add_test(tc, test_proxy_forced);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_broker);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
