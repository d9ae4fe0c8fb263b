/*
 * kz-pi-validate pkg.c: the server-derived profile (fields, kinds,
 * bounds, no runtime or command) and the canonical artifact digest.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_key.h"
#define SCRATCH_TAG "pkg"
#include "scratch.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *json;
	bool ok;
} profiles[] = {
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000,\"skills\":[\"s\"]}",
        true},
    {"{\"v\":1,\"kind\":\"extension\",\"deadline_ms\":1000,"
     "\"extensions\":[\"e.js\"],\"tests\":[\"t.mjs\"],"
     "\"lock\":\"package-lock.json\"}",
        true},
    /* a model-selected runtime or command is not a profile field */
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000,\"runtime\":\"node\"}",
        false},
    {"{\"v\":1,\"kind\":\"extension\",\"deadline_ms\":1000,"
     "\"extensions\":[\"e.js\"],\"tests\":[\"t.mjs\"],\"command\":\"sh\"}",
        false},
    {"{\"v\":2,\"kind\":\"skill\",\"deadline_ms\":1000}", false},
    {"{\"v\":1,\"kind\":\"theme\",\"deadline_ms\":1000}", false},
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":99}", false},
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":300001}", false},
    {"{\"v\":1,\"kind\":\"skill\"}", false},
    /* a skill profile runs no code */
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000,\"tests\":[\"t.mjs\"]}",
        false},
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000,"
     "\"lock\":\"package-lock.json\"}",
        false},
    /* an extension needs entry points and tests */
    {"{\"v\":1,\"kind\":\"extension\",\"deadline_ms\":1000,"
     "\"extensions\":[\"e.js\"]}",
        false},
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000,\"skills\":[1]}", false},
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000,\"skills\":\"s\"}",
        false},
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000,\"kind\":\"skill\"}",
        false},
    {"{\"v\":1,\"kind\":\"skill\",\"deadline_ms\":1000} x", false},
    {"[]", false},
};

START_TEST(test_profile)
{
	struct pv_profile p;
	char why[160], file[128];
	int r;

	put("profile.json", profiles[_i].json);
	snprintf(file, sizeof(file), "%s/profile.json", dir);
	memset(&p, 0, sizeof(p));
	r = pv_profile_load(file, 300000, &p, why, sizeof(why));
	ck_assert_msg((r == 0) == profiles[_i].ok, "%s: %d %s",
	    profiles[_i].json, r, why);
	if (r == 0)
		pv_profile_release(&p);
}
END_TEST

static int
scan_rc(bool skip, struct pv_tree *t)
{
	char why[160];
	int fd = open(dir, O_RDONLY | O_DIRECTORY), r;

	ck_assert_int_ge(fd, 0);
	r = pv_tree_scan(fd, skip, t, why, sizeof(why));
	close(fd);
	return r;
}

static void
scan(bool skip, struct pv_tree *t, int want)
{
	ck_assert_int_eq(scan_rc(skip, t), want);
}

/* The documented form, computed independently of pkg.c. */
static void
expected(const char *const *paths, const char *const *texts, int n,
    char hex[65])
{
	static const char tag[] = "kz-pi-artifact-v1";
	crypto_hash_sha256_state h;
	unsigned char d[32], sz[8];

	crypto_hash_sha256_init(&h);
	crypto_hash_sha256_update(&h, (const unsigned char *)tag, sizeof(tag));
	for (int i = 0; i < n; i++) {
		uint64_t len = strlen(texts[i]);

		for (int k = 0; k < 8; k++)
			sz[k] = (unsigned char)(len >> (56 - 8 * k));
		crypto_hash_sha256_update(&h, (const unsigned char *)paths[i],
		    strlen(paths[i]) + 1);
		crypto_hash_sha256_update(&h, sz, 8);
		crypto_hash_sha256_update(&h, (const unsigned char *)texts[i],
		    len);
	}
	crypto_hash_sha256_final(&h, d);
	kz_hex(d, sizeof(d), hex);
}

START_TEST(test_digest_form)
{
	/* byte order: "a/b" < "a0" although readdir may list a0 first */
	const char *paths[] = {"a/b", "a0", "z"};
	const char *texts[] = {"bee", "", "zed\n"};
	struct pv_tree t;
	char want[65];

	put("z", "zed\n"), put("a0", ""), put("a/b", "bee");
	scan(false, &t, 0);
	expected(paths, texts, 3, want);
	ck_assert_str_eq(t.digest, want);
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.total, 7);
	pv_tree_release(&t);
}
END_TEST

/* One byte, a rename, an added empty file: each changes the digest. */
START_TEST(test_digest_changes)
{
	struct pv_tree t;
	char d0[65], p[256], q[256];

	put("x/one.md", "hello"), put("two.md", "world");
	scan(false, &t, 0);
	memcpy(d0, t.digest, sizeof(d0));
	pv_tree_release(&t);
	put("x/one.md", "hellO");
	scan(false, &t, 0);
	ck_assert_str_ne(t.digest, d0);
	pv_tree_release(&t);
	put("x/one.md", "hello");
	scan(false, &t, 0);
	ck_assert_str_eq(t.digest, d0);
	pv_tree_release(&t);
	snprintf(p, sizeof(p), "%s/two.md", dir);
	snprintf(q, sizeof(q), "%s/tw0.md", dir);
	ck_assert_int_eq(rename(p, q), 0);
	scan(false, &t, 0);
	ck_assert_str_ne(t.digest, d0);
	pv_tree_release(&t);
	ck_assert_int_eq(rename(q, p), 0);
	put("empty", "");
	scan(false, &t, 0);
	ck_assert_str_ne(t.digest, d0);
	pv_tree_release(&t);
}
END_TEST

/* A reinstalled node_modules is left out only where asked. */
START_TEST(test_digest_modules)
{
	struct pv_tree t;
	char d0[65];

	put("index.js", "x");
	scan(false, &t, 0);
	memcpy(d0, t.digest, sizeof(d0));
	pv_tree_release(&t);
	put("node_modules/dep/index.js", "y");
	scan(true, &t, 0);
	ck_assert_str_eq(t.digest, d0);
	pv_tree_release(&t);
	scan(false, &t, 0);
	ck_assert_str_ne(t.digest, d0);
	pv_tree_release(&t);
}
END_TEST

START_TEST(test_digest_refusals)
{
	struct pv_tree t;
	char p[256];

	scan(false, &t, KZ_EMISSING); /* no files */
	put("a", "a");
	snprintf(p, sizeof(p), "%s/link", dir);
	ck_assert_int_eq(symlink("a", p), 0);
	ck_assert_int_ne(scan_rc(false, &t), 0);
	unlink(p);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(p, 0644), 0);
	ck_assert_int_ne(scan_rc(false, &t), 0);
}
END_TEST

START_TEST(test_hex64)
{
	ck_assert(pv_hex64("0123456789abcdef0123456789abcdef"
	                   "0123456789abcdef0123456789abcdef"));
	ck_assert(!pv_hex64("0123456789ABCDEF0123456789abcdef"
	                    "0123456789abcdef0123456789abcdef"));
	ck_assert(!pv_hex64("0123456789abcdef"));
	ck_assert(!pv_hex64(NULL));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pv_pkg");
	TCase *tc = tcase_create("pkg");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_profile, 0,
	    (int)(sizeof(profiles) / sizeof(profiles[0])));
	tcase_add_test(tc, test_digest_form);
	tcase_add_test(tc, test_digest_changes);
	tcase_add_test(tc, test_digest_modules);
	tcase_add_test(tc, test_digest_refusals);
	tcase_add_test(tc, test_hex64);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
