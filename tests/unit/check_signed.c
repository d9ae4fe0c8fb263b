/* Signed blobs: a blob made from a body opens with its public half; a
 * changed byte, a wrong key, every bad encoding, a body that is not an
 * object or lacks the version and times, and bad times are each refused;
 * key pairs come from the field key, one per subkey. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <cJSON.h>

#include "kz_signed.h"
#include "kz_check.h"
#include "banned.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define MAX 1024

static unsigned char pk[32], sk[64], pk2[32], sk2[64];
static const char *run = "0123456789abcdef0123456789abcdef";
static char dir[64];

static void
setup(void)
{
	ck_assert_int_ge(sodium_init(), 0);
	crypto_sign_keypair(pk, sk);
	crypto_sign_keypair(pk2, sk2);
	snprintf(dir, sizeof(dir), "/tmp/kzsigned.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Opens b and, when it opens, checks its times at now as a verifier
 * with a 600 s limit would. */
static enum kz_signed_res
check(const char *b, int64_t now)
{
	struct kz_signed_times t;
	enum kz_signed_res r;
	cJSON *o;

	r = kz_signed_open(pk, b, strlen(b), MAX, &o, &t);
	if (r != KZ_SIGNED_OK) {
		ck_assert_ptr_null(o);
		return r;
	}
	cJSON_Delete(o);
	return kz_signed_current(&t, now, 600);
}

/* A blob signed with sk over any text at all, as a hostile issuer holding
 * the key could: the body checks must hold after the signature. */
static void
sign_raw(const char *txt, char *out, size_t len)
{
	char enc[MAX], senc[128];
	unsigned char sig[crypto_sign_BYTES];

	sodium_bin2base64(enc, sizeof(enc), (const unsigned char *)txt,
	    strlen(txt), B64URL);
	crypto_sign_detached(sig, NULL, (unsigned char *)enc, strlen(enc), sk);
	sodium_bin2base64(senc, sizeof(senc), sig, sizeof(sig), B64URL);
	ck_assert_int_lt(snprintf(out, len, "%s.%s", enc, senc), (int)len);
}

START_TEST(test_round_trip)
{
	char b[MAX + 1];
	struct kz_signed_times t;
	cJSON *o = kz_signed_body_new(run, 1000000, 600), *got;

	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_nonnull(cJSON_AddStringToObject(o, "aud", "x"));
	ck_assert_int_eq(kz_signed_make(sk, o, b, sizeof(b)), 0);
	cJSON_Delete(o);
	ck_assert_int_eq(kz_signed_open(pk, b, strlen(b), MAX, &got, &t),
	    KZ_SIGNED_OK);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(got, "run")
	                     ->valuestring,
	    run);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(got, "aud")
	                     ->valuestring,
	    "x");
	cJSON_Delete(got);
	ck_assert_int_eq(t.iat, 1000000);
	ck_assert_int_eq(t.nbf, 1000000);
	ck_assert_int_eq(t.exp, 1000600);
	ck_assert_int_eq(kz_signed_current(&t, 1000001, 600), KZ_SIGNED_OK);
}
END_TEST

START_TEST(test_times)
{
	char b[MAX + 1];
	cJSON *o = kz_signed_body_new(run, 1000000, 600);

	ck_assert_int_eq(kz_signed_make(sk, o, b, sizeof(b)), 0);
	cJSON_Delete(o);
	ck_assert_int_eq(check(b, 1000600), KZ_SIGNED_EXPIRED);
	ck_assert_int_eq(check(b, 2000000), KZ_SIGNED_EXPIRED);
	ck_assert_int_eq(check(b, 999000), KZ_SIGNED_NOT_YET);
	/* Within the clock skew. */
	ck_assert_int_eq(check(b, 1000000 - KZ_SIGNED_SKEW), KZ_SIGNED_OK);
	ck_assert_int_eq(check(b, 1000000 - KZ_SIGNED_SKEW - 1),
	    KZ_SIGNED_NOT_YET);
	o = kz_signed_body_new(run, 1000000, 601);
	ck_assert_int_eq(kz_signed_make(sk, o, b, sizeof(b)), 0);
	cJSON_Delete(o);
	ck_assert_int_eq(check(b, 1000001), KZ_SIGNED_LIFETIME);
	/* A late nbf cannot stretch a lifetime either way. */
	sign_raw("{\"v\":1,\"iat\":1000000,\"nbf\":1000500,\"exp\":1000600}", b,
	    sizeof(b));
	ck_assert_int_eq(check(b, 1000001), KZ_SIGNED_NOT_YET);
	/* Without nbf the blob is valid from iat. */
	sign_raw("{\"v\":1,\"iat\":1000000,\"exp\":1000600}", b, sizeof(b));
	ck_assert_int_eq(check(b, 1000001), KZ_SIGNED_OK);
}
END_TEST

START_TEST(test_forged)
{
	char b[MAX + 1], t[MAX + 1];
	cJSON *o = kz_signed_body_new(run, 1000000, 600);

	ck_assert_int_eq(kz_signed_make(sk2, o, t, sizeof(t)), 0);
	ck_assert_int_eq(check(t, 1000001), KZ_SIGNED_FORGED);
	ck_assert_int_eq(kz_signed_make(sk, o, b, sizeof(b)), 0);
	cJSON_Delete(o);
	/* Every single changed character of the body's text or the
	 * signature: never accepted. */
	for (size_t i = 0; b[i] != '\0'; i++) {
		if (b[i] == '.')
			continue;
		memcpy(t, b, sizeof(b));
		t[i] = t[i] == 'A' ? 'B' : 'A';
		ck_assert_int_ne(check(t, 1000001), KZ_SIGNED_OK);
	}
	/* The body of one blob with the signature of another. */
	o = kz_signed_body_new(run, 1000000, 300);
	ck_assert_int_eq(kz_signed_make(sk, o, t, sizeof(t)), 0);
	cJSON_Delete(o);
	memcpy(strchr(t, '.'), strchr(b, '.'), strlen(strchr(b, '.')) + 1);
	ck_assert_int_eq(check(t, 1000001), KZ_SIGNED_FORGED);
}
END_TEST

START_TEST(test_malformed)
{
	static const char *const shapes[] = {"", ".", "abc", "abc.", ".abc",
	    "a.b.c", "e30.e30", "!!!.AAAA", "e30 .AAAA", "e30.AAAA\n"};
	static const char *const bodies[] = {
	    "[]",
	    "\"x\"",
	    "{\"iat\":1000000,\"exp\":1000600}",
	    "{\"v\":2,\"iat\":1000000,\"exp\":1000600}",
	    "{\"v\":1,\"exp\":1000600}",
	    "{\"v\":1,\"iat\":1000000}",
	    "{\"v\":1,\"iat\":1000600,\"exp\":1000600}",
	    "{\"v\":1,\"iat\":-1,\"exp\":1000600}",
	    "{\"v\":1,\"iat\":\"1000000\",\"exp\":1000600}",
	    "{\"v\":1,\"iat\":1000000,\"exp\":1000600,\"exp\":2000000}",
	    "{\"v\":1,\"iat\":1000000,\"exp\":1000600",
	};
	char b[MAX + 1], big[MAX + 2];

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		ck_assert_int_eq(check(shapes[i], 1000001),
		    KZ_SIGNED_MALFORMED);
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		sign_raw(bodies[i], b, sizeof(b));
		ck_assert_msg(check(b, 1000001) == KZ_SIGNED_MALFORMED, "%s",
		    bodies[i]);
	}
	/* Longer than the verifier's limit: refused before any decoding. */
	memset(big, 'A', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[10] = '.';
	ck_assert_int_eq(check(big, 1000001), KZ_SIGNED_MALFORMED);
}
END_TEST

START_TEST(test_make_limits)
{
	char b[MAX + 1], pad[KZ_SIGNED_BODY_MAX];
	cJSON *o = kz_signed_body_new(run, 1000000, 600);

	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	ck_assert_int_eq(kz_signed_make(sk, o, b, 20), KZ_ETOOBIG);
	ck_assert_ptr_nonnull(cJSON_AddStringToObject(o, "pad", pad));
	ck_assert_int_eq(kz_signed_make(sk, o, b, sizeof(b)), KZ_ETOOBIG);
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_field_key)
{
	char p[128], why[160], h1[65], h2[65], h3[65], r1[KZ_IDHASH_HEX + 1],
	    r2[KZ_IDHASH_HEX + 1];
	unsigned char kpk[32], ksk[64];

	snprintf(p, sizeof(p), "%s/field.key", dir);
	ck_assert_int_eq(kz_key_generate(p, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_signed_pubkey_hex(p, KZ_SUBKEY_GRANT, h1, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(kz_signed_pubkey_hex(p, KZ_SUBKEY_GRANT, h2, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(kz_signed_pubkey_hex(p, KZ_SUBKEY_PKGTOKEN, h3, why,
	                     sizeof(why)),
	    0);
	ck_assert_str_eq(h1, h2);
	/* One subkey's blobs never verify under another's public half. */
	ck_assert_str_ne(h1, h3);
	ck_assert_int_eq(kz_signed_keypair(p, KZ_SUBKEY_GRANT, kpk, ksk, why,
	                     sizeof(why)),
	    0);
	kz_hex(kpk, sizeof(kpk), h2);
	ck_assert_str_eq(h1, h2);
	sodium_memzero(ksk, sizeof(ksk));
	ck_assert_int_eq(kz_signed_run_hash(p, "run-1", r1, why, sizeof(why)),
	    0);
	ck_assert_int_eq(kz_signed_run_hash(p, "run-2", r2, why, sizeof(why)),
	    0);
	ck_assert_str_ne(r1, r2);
	ck_assert_int_eq(strlen(r1), KZ_IDHASH_HEX);
	ck_assert_int_ne(kz_signed_pubkey_hex("/nonexistent/key",
	                     KZ_SUBKEY_GRANT, h1, why, sizeof(why)),
	    0);
	ck_assert_ptr_null(strchr(why, '\n'));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("signed");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_times);
	tcase_add_test(tc, test_forged);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_make_limits);
	tcase_add_test(tc, test_field_key);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
