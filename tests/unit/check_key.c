/* Field keys: file checks, subkey separation, keyed identifier hashing. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_key.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kzkey.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void
write_file(const char *p, const void *b, size_t n, mode_t mode)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

START_TEST(test_key_files)
{
	char p[128], why[128], lk[160];
	unsigned char b[64] = {0};
	struct kz_key k;

	snprintf(p, sizeof(p), "%s/field.key", dir);
	ck_assert_int_eq(kz_key_generate(p, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_key_generate(p, why, sizeof(why)), KZ_EEXIST);
	chmod(p, 0644);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), KZ_EKEY);
	ck_assert_ptr_nonnull(strstr(why, "0644"));
	/* Owner-only read (a systemd credential) loads; group read does not. */
	chmod(p, 0400);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), 0);
	chmod(p, 0440);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), KZ_EKEY);
	chmod(p, 0640);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), KZ_EKEY);
	chmod(p, 0600);
	write_file(p, b, 31, 0600);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), KZ_EKEY);
	write_file(p, b, 33, 0600);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), KZ_EKEY);
	write_file(p, b, 32, 0600);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), 0);
	/* A symlink to a good key is refused: the path is what is trusted. */
	snprintf(lk, sizeof(lk), "%s/link.key", dir);
	ck_assert_int_eq(symlink(p, lk), 0);
	ck_assert_int_ne(kz_key_load(lk, &k, why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "%s", dir);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), KZ_EKEY);
	snprintf(p, sizeof(p), "%s/missing", dir);
	ck_assert_int_eq(kz_key_load(p, &k, why, sizeof(why)), KZ_ENOENT);
}
END_TEST

START_TEST(test_subkeys_and_hashes)
{
	struct kz_key m, a, b, m2, a2;
	char h1[KZ_IDHASH_HEX + 1], h2[KZ_IDHASH_HEX + 1];
	unsigned char raw[4];

	memset(m.k, 7, sizeof(m.k));
	memset(m2.k, 8, sizeof(m2.k));
	ck_assert_int_eq(kz_key_derive(&m, KZ_SUBKEY_IDHASH, &a), 0);
	ck_assert_int_eq(kz_key_derive(&m, KZ_SUBKEY_AUDIT, &b), 0);
	ck_assert(!kz_ct_equal(a.k, b.k, sizeof(a.k)));
	ck_assert(!kz_ct_equal(a.k, m.k, sizeof(a.k)));
	ck_assert_int_eq(kz_key_derive(&m2, KZ_SUBKEY_IDHASH, &a2), 0);
	ck_assert_int_eq(kz_key_idhash(&a, "actor", "alice", h1), 0);
	ck_assert_int_eq(strlen(h1), KZ_IDHASH_HEX);
	ck_assert_int_eq(kz_key_idhash(&a, "actor", "alice", h2), 0);
	ck_assert_str_eq(h1, h2);
	/* Another kind, another key, or a shifted boundary: another hash. */
	ck_assert_int_eq(kz_key_idhash(&a, "member", "alice", h2), 0);
	ck_assert_str_ne(h1, h2);
	ck_assert_int_eq(kz_key_idhash(&a2, "actor", "alice", h2), 0);
	ck_assert_str_ne(h1, h2);
	ck_assert_int_eq(kz_key_idhash2(&a, "ws", "ab", "c", h1), 0);
	ck_assert_int_eq(kz_key_idhash2(&a, "ws", "a", "bc", h2), 0);
	ck_assert_str_ne(h1, h2);
	ck_assert_ptr_null(strstr(h1, "alice"));
	ck_assert_int_eq(kz_unhex("0aff10", raw, 3), 0);
	ck_assert_int_eq(raw[1], 0xff);
	ck_assert_int_ne(kz_unhex("0aff1", raw, 3), 0);
	ck_assert_int_ne(kz_unhex("0aff1g", raw, 3), 0);
	kz_key_wipe(&m);
	ck_assert_int_eq(m.k[0], 0);
}
END_TEST

START_TEST(test_load_subkey)
{
	struct kz_key m, want, got;
	char p[128], why[128];

	snprintf(p, sizeof(p), "%s/field.key", dir);
	ck_assert_int_eq(kz_key_generate(p, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_key_load(p, &m, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_key_derive(&m, KZ_SUBKEY_GRANT, &want), 0);
	ck_assert_int_eq(kz_key_load_subkey(p, KZ_SUBKEY_GRANT, &got, why,
	                     sizeof(why)),
	    0);
	ck_assert(kz_ct_equal(want.k, got.k, sizeof(got.k)));
	ck_assert(!kz_ct_equal(m.k, got.k, sizeof(got.k)));
	/* A refused key file is refused the same way, with the reason. */
	chmod(p, 0644);
	ck_assert_int_eq(kz_key_load_subkey(p, KZ_SUBKEY_GRANT, &got, why,
	                     sizeof(why)),
	    KZ_EKEY);
	ck_assert_ptr_nonnull(strstr(why, "0644"));
	kz_key_wipe(&m);
	kz_key_wipe(&want);
	kz_key_wipe(&got);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("key");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_key_files);
	tcase_add_test(tc, test_subkeys_and_hashes);
	tcase_add_test(tc, test_load_subkey);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
