/* Grants: a valid grant verifies; every tampering, a wrong key, bad
 * encodings, bad times and unknown capabilities are refused.  Also the
 * TURN REST credential against a known HMAC-SHA1 vector, and the HMAC
 * against RFC 2202's. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "egress.h"
#include "kz_check.h"
#include "banned.h"

static unsigned char pk[32], sk[64], pk2[32], sk2[64];
static const char *run = "0123456789abcdef0123456789abcdef";

static void
setup(void)
{
	ck_assert_int_ge(sodium_init(), 0);
	crypto_sign_keypair(pk, sk);
	crypto_sign_keypair(pk2, sk2);
}

static const char *
verify(const char *g, int64_t now)
{
	struct eg_claims cl;

	return eg_reason_str(eg_grant_verify(pk, g, strlen(g), now, 600, &cl));
}

START_TEST(test_valid)
{
	char g[EG_GRANT_MAX + 1];
	struct eg_claims cl;

	ck_assert_int_eq(eg_grant_mint(sk, run, 1000000, 600, EG_CAP_TURN, g,
	                     sizeof(g)),
	    0);
	ck_assert_ptr_null(eg_reason_str(
	    eg_grant_verify(pk, g, strlen(g), 1000001, 600, &cl)));
	ck_assert_str_eq(cl.run, run);
	ck_assert_int_eq(cl.exp, 1000600);
	ck_assert_uint_eq(cl.caps, EG_CAP_TURN);
}
END_TEST

START_TEST(test_times)
{
	char g[EG_GRANT_MAX + 1];

	ck_assert_int_eq(eg_grant_mint(sk, run, 1000000, 600, 0, g, sizeof(g)),
	    0);
	ck_assert_str_eq(verify(g, 1000600), "grant_expired");
	ck_assert_str_eq(verify(g, 2000000), "grant_expired");
	ck_assert_str_eq(verify(g, 999000), "grant_not_yet_valid");
	ck_assert_ptr_null(verify(g, 999990)); /* within the clock skew */
	/* Longer than the proxy's configured lifetime. */
	ck_assert_int_eq(eg_grant_mint(sk, run, 1000000, 601, 0, g, sizeof(g)),
	    0);
	ck_assert_str_eq(verify(g, 1000001), "grant_lifetime");
}
END_TEST

START_TEST(test_tamper)
{
	char g[EG_GRANT_MAX + 1], t[EG_GRANT_MAX + 2];
	const char *dot;
	size_t n;

	ck_assert_int_eq(eg_grant_mint(sk, run, 1000000, 600, 0, g, sizeof(g)),
	    0);
	n = strlen(g);
	dot = strchr(g, '.');
	/* Every single-character change anywhere is refused. */
	for (size_t i = 0; i < n; i++) {
		memcpy(t, g, n + 1);
		t[i] = t[i] == 'A' ? 'B' : 'A';
		if (t[i] == g[i])
			continue;
		ck_assert_msg(verify(t, 1000001) != NULL, "flip at %zu", i);
	}
	/* Truncations. */
	for (size_t i = 0; i < n; i++) {
		memcpy(t, g, i);
		t[i] = '\0';
		ck_assert_msg(verify(t, 1000001) != NULL, "trunc at %zu", i);
	}
	/* Signed by another key. */
	ck_assert_int_eq(eg_grant_mint(sk2, run, 1000000, 600, 0, t, sizeof(t)),
	    0);
	ck_assert_str_eq(verify(t, 1000001), "grant_signature");
	/* Claims of one grant with the signature of another. */
	ck_assert_int_eq(eg_grant_mint(sk, run, 1000000, 600, EG_CAP_TURN, t,
	                     sizeof(t)),
	    0);
	memcpy(strchr(t, '.'), dot, strlen(dot) + 1);
	ck_assert_str_eq(verify(t, 1000001), "grant_signature");
}
END_TEST

START_TEST(test_malformed)
{
	static const char *const bad[] = {
	    "",
	    ".",
	    "abc",
	    "abc.",
	    ".abc",
	    "a.b.c",
	    "e30.e30",
	    "eyJ2IjoxfQ==.AAAA",
	    "!!!.???",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(verify(bad[i], 1000001) != NULL, "%s", bad[i]);
}
END_TEST

/* Claims signed properly but not what a grant must hold. */
START_TEST(test_bad_claims)
{
	static const char *const claims[] = {
	    "{\"v\":1,\"run\":\"ab\",\"iat\":1000000,\"exp\":1000600,"
	    "\"caps\":[\"admin\"]}",
	    "{\"v\":1,\"run\":\"ab\",\"iat\":1000000,\"exp\":1000600,"
	    "\"mode\":\"public_internet\"}",
	    "{\"v\":2,\"run\":\"ab\",\"iat\":1000000,\"exp\":1000600}",
	    "{\"v\":1,\"iat\":1000000,\"exp\":1000600}",
	    "{\"v\":1,\"run\":\"ab\",\"iat\":1000000,\"exp\":999999}",
	    "{\"v\":1,\"run\":\"ab\",\"iat\":1000000,\"exp\":1000600,"
	    "\"exp\":1000601}",
	    "[1]",
	};

	for (size_t i = 0; i < sizeof(claims) / sizeof(claims[0]); i++) {
		char enc[512], sig64[128], g[EG_GRANT_MAX + 1];
		unsigned char sig[64];

		sodium_bin2base64(enc, sizeof(enc),
		    (const unsigned char *)claims[i], strlen(claims[i]),
		    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
		crypto_sign_detached(sig, NULL, (unsigned char *)enc,
		    strlen(enc), sk);
		sodium_bin2base64(sig64, sizeof(sig64), sig, sizeof(sig),
		    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
		snprintf(g, sizeof(g), "%s.%s", enc, sig64);
		ck_assert_msg(verify(g, 1000001) != NULL, "%s", claims[i]);
	}
}
END_TEST

START_TEST(test_turn_credential)
{
	char u[256], p[64];

	/* Python: base64(hmac.new(b"secret", b"1700000000:alice", sha1)). */
	ck_assert_int_eq(eg_turn_credential((const unsigned char *)"secret", 6,
	                     "alice", 1700000000, u, sizeof(u), p, sizeof(p)),
	    0);
	ck_assert_str_eq(u, "1700000000:alice");
	ck_assert_str_eq(p, "d8soP47RbdIKLDUOpnJPVQyq5Ts=");
}
END_TEST

/* RFC 2202, section 3: every HMAC-SHA1 test case, keys longer than the
 * block included. */
START_TEST(test_hmac_sha1_rfc2202)
{
	static const struct {
		const char *key; /* hex */
		const char *data; /* hex, or NULL: the text below */
		const char *text;
		const char *mac;
	} v[] = {
	    {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", NULL, "Hi There",
	        "b617318655057264e28bc0b6fb378c8ef146be00"},
	    {"4a656665", NULL, "what do ya want for nothing?",
	        "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
	    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "dd", NULL,
	        "125d7342b9ac11cd91a39af48aa17b4f63f175d3"},
	    {"0102030405060708090a0b0c0d0e0f10111213141516171819", "cd", NULL,
	        "4c9007f4026250c6bc8414f9bf50c86c2d7235da"},
	    {"0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c", NULL,
	        "Test With Truncation",
	        "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"},
	    {"aa", NULL,
	        "Test Using Larger Than Block-Size Key - Hash Key First",
	        "aa4ae5e15272d00e95705637ce8a3b55ed402112"},
	    {"aa", NULL,
	        "Test Using Larger Than Block-Size Key and Larger "
	        "Than One Block-Size Data",
	        "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"},
	};
	/* Repeat counts: the key byte (case 3 to 7) and the data byte. */
	static const size_t klen[] = {20, 4, 20, 25, 20, 80, 80};
	static const size_t dlen[] = {0, 0, 50, 50, 0, 0, 0};
	unsigned char key[80], data[80], mac[EG_SHA1_BYTES];
	char hex[2 * EG_SHA1_BYTES + 1];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		const unsigned char *msg = (const unsigned char *)v[i].text;
		size_t mlen = v[i].text ? strlen(v[i].text) : dlen[i];

		if (strlen(v[i].key) == 2 * klen[i]) {
			ck_assert_int_eq(sodium_hex2bin(key, sizeof(key),
			                     v[i].key, strlen(v[i].key), NULL,
			                     NULL, NULL),
			    0);
		} else {
			ck_assert_int_eq(sodium_hex2bin(key, 1, v[i].key, 2,
			                     NULL, NULL, NULL),
			    0);
			memset(key, key[0], klen[i]);
		}
		if (v[i].data != NULL) {
			ck_assert_int_eq(sodium_hex2bin(data, 1, v[i].data, 2,
			                     NULL, NULL, NULL),
			    0);
			memset(data, data[0], dlen[i]);
			msg = data;
		}
		eg_hmac_sha1(key, klen[i], msg, mlen, mac);
		sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
		ck_assert_msg(strcmp(hex, v[i].mac) == 0, "case %zu: %s", i + 1,
		    hex);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("egress_grant");
	TCase *tc = tcase_create("grant");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_valid);
	tcase_add_test(tc, test_times);
	tcase_add_test(tc, test_tamper);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_bad_claims);
	tcase_add_test(tc, test_turn_credential);
	tcase_add_test(tc, test_hmac_sha1_rfc2202);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
