/* Broker tokens: a fresh token verifies and names its run; every
 * tampering, another key, a spliced signature, bad encodings, a lifetime
 * over the limit, an expired or future token are refused with their own
 * reason; the Authorization forms npm and pip send are read, others are
 * not. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "pkgbroker.h"
#include "kz_signed.h"
#include "kz_check.h"
#include "banned.h"

static unsigned char pk[32], sk[64], pk2[32], sk2[64];
static const char *run = "0123456789abcdef0123456789abcdef";
static const int64_t now = 1800000000;

static void
setup(void)
{
	ck_assert_int_ge(sodium_init(), 0);
	crypto_sign_keypair(pk, sk);
	crypto_sign_keypair(pk2, sk2);
}

static enum pb_tok
verify(const char *t, int64_t at)
{
	struct pb_claims cl;

	return pb_token_verify(pk, t, strlen(t), at, 900, &cl);
}

static void
mint(const unsigned char *key, const char *r, int64_t at, int64_t ttl,
    char *out)
{
	ck_assert_int_eq(pb_token_mint(key, r, PB_UID_NONE, at, ttl, out,
	                     PB_TOKEN_MAX + 1),
	    0);
}

START_TEST(test_good)
{
	char t[PB_TOKEN_MAX + 1];
	struct pb_claims cl;

	mint(sk, run, now, 300, t);
	ck_assert_int_eq(pb_token_verify(pk, t, strlen(t), now + 10, 900, &cl),
	    PB_TOK_OK);
	ck_assert_str_eq(cl.run, run);
	ck_assert_int_eq(cl.exp, now + 300);
}
END_TEST

START_TEST(test_times)
{
	char t[PB_TOKEN_MAX + 1];

	mint(sk, run, now, 300, t);
	ck_assert_int_eq(verify(t, now + 300), PB_TOK_EXPIRED);
	ck_assert_int_eq(verify(t, now + 10000), PB_TOK_EXPIRED);
	ck_assert_int_eq(verify(t, now - 3600), PB_TOK_NOT_YET);
	mint(sk, run, now, 3600, t);
	ck_assert_int_eq(verify(t, now + 1), PB_TOK_LIFETIME);
	ck_assert_int_ne(pb_token_mint(sk, run, PB_UID_NONE, now, 0, t,
	                     sizeof(t)),
	    0);
	ck_assert_int_ne(pb_token_mint(sk, "", PB_UID_NONE, now, 10, t,
	                     sizeof(t)),
	    0);
	ck_assert_int_ne(pb_token_mint(sk, run, -2, now, 10, t, sizeof(t)), 0);
	ck_assert_int_ne(pb_token_mint(sk, run, PB_UID_MAX + 1LL, now, 10, t,
	                     sizeof(t)),
	    0);
}
END_TEST

START_TEST(test_forged)
{
	char t[PB_TOKEN_MAX + 1], u[PB_TOKEN_MAX + 1], s[2 * PB_TOKEN_MAX];
	char *dot;

	mint(sk2, run, now, 300, t);
	ck_assert_int_eq(verify(t, now), PB_TOK_FORGED);
	/* Another run's claims under this run's signature. */
	mint(sk, run, now, 300, t);
	mint(sk, "ffffffffffffffffffffffffffffffff", now, 300, u);
	dot = strchr(t, '.');
	snprintf(s, sizeof(s), "%.*s%s", (int)(strchr(u, '.') - u), u, dot);
	ck_assert_int_eq(verify(s, now), PB_TOK_FORGED);
	/* One flipped character anywhere. */
	for (size_t i = 0; i < strlen(t); i++) {
		char c = t[i];

		if (c == '.')
			continue;
		t[i] = c == 'A' ? 'B' : 'A';
		ck_assert_msg(verify(t, now) != PB_TOK_OK, "flip at %zu", i);
		t[i] = c;
	}
	ck_assert_int_eq(verify(t, now), PB_TOK_OK);
}
END_TEST

/* A token bound to a worker's uid: good only from a socket peer with that
 * uid; never from another uid, root included, nor over TCP (no peer
 * credentials).  An unbound token is good only over TCP.  A "uid" that
 * is not a uid, or one spliced onto another token's signature, is not a
 * token. */
START_TEST(test_bound)
{
	static const struct {
		int64_t tok, peer;
		enum pb_tok want;
	} cases[] = {
	    {2100000001, 2100000001, PB_TOK_OK},
	    {2100000001, 2100000002, PB_TOK_WRONG_PEER},
	    {2100000001, 0, PB_TOK_WRONG_PEER},
	    {0, 2100000001, PB_TOK_WRONG_PEER},
	    {2100000001, -1, PB_TOK_WRONG_PEER},
	    {PB_UID_NONE, -1, PB_TOK_OK},
	    {PB_UID_NONE, 0, PB_TOK_UNBOUND},
	    {PB_UID_NONE, 2100000001, PB_TOK_UNBOUND},
	};
	char t[PB_TOKEN_MAX + 1], u[PB_TOKEN_MAX + 1], s[2 * PB_TOKEN_MAX];
	static const char *const bad[] = {"-1", "1.5", "\"1\"", "null",
	    "2147483647", NULL};
	struct pb_claims cl;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(pb_token_mint(sk, run, cases[i].tok, now, 300,
		                     t, sizeof(t)),
		    0);
		ck_assert_int_eq(pb_token_verify(pk, t, strlen(t), now, 900,
		                     &cl),
		    PB_TOK_OK);
		ck_assert_int_eq(cl.uid, cases[i].tok);
		ck_assert_msg(pb_token_peer(&cl, cases[i].peer) ==
		        cases[i].want,
		    "case %zu", i);
	}
	/* The binding is signed: an unbound body under a bound signature. */
	ck_assert_int_eq(pb_token_mint(sk, run, 7, now, 300, t, sizeof(t)), 0);
	ck_assert_int_eq(pb_token_mint(sk, run, PB_UID_NONE, now, 300, u,
	                     sizeof(u)),
	    0);
	snprintf(s, sizeof(s), "%.*s%s", (int)(strchr(u, '.') - u), u,
	    strchr(t, '.'));
	ck_assert_int_eq(verify(s, now), PB_TOK_FORGED);
	for (int i = 0; bad[i] != NULL; i++) {
		cJSON *o = kz_signed_body_new(run, now, 300);

		ck_assert_ptr_nonnull(o);
		cJSON_AddStringToObject(o, "aud", "kz-pkgbroker");
		cJSON_AddRawToObject(o, "uid", bad[i]);
		ck_assert_int_eq(kz_signed_make(sk, o, t, sizeof(t)), 0);
		cJSON_Delete(o);
		ck_assert_msg(pb_token_verify(pk, t, strlen(t), now, 900,
		                  &cl) == PB_TOK_MALFORMED,
		    "uid %s", bad[i]);
	}
}
END_TEST

/* A socket connection takes only the token of the run it was bound
 * to: another run's (the previous tenant's, on the same worker and
 * uid) is refused, and so is every token where none is bound. */
START_TEST(test_run)
{
	char t[PB_TOKEN_MAX + 1];
	struct pb_claims cl, none;

	ck_assert_int_eq(pb_token_mint(sk, run, 7, now, 300, t, sizeof(t)), 0);
	ck_assert_int_eq(pb_token_verify(pk, t, strlen(t), now, 900, &cl),
	    PB_TOK_OK);
	ck_assert_int_eq(pb_token_run(&cl, run), PB_TOK_OK);
	ck_assert_int_eq(pb_token_run(&cl, "0123456789abcdef0123456789abcdee"),
	    PB_TOK_OTHER_RUN);
	ck_assert_int_eq(pb_token_run(&cl, "0123456789abcdef"),
	    PB_TOK_OTHER_RUN);
	ck_assert_int_eq(pb_token_run(&cl, NULL), PB_TOK_OTHER_RUN);
	ck_assert_int_eq(pb_token_run(&cl, ""), PB_TOK_OTHER_RUN);
	memset(&none, 0, sizeof(none));
	ck_assert_int_eq(pb_token_run(&none, ""), PB_TOK_OTHER_RUN);
	ck_assert_str_eq(pb_tok_code(PB_TOK_OTHER_RUN), "token_other_run");
}
END_TEST

static const char *const malformed[] = {"x", ".", "a.b.c", "abc.", ".abc",
    "!!!.???", "eyJ2IjoxfQ", "eyJ2IjoxfQ.", "a b.c", NULL};

START_TEST(test_malformed)
{
	for (int i = 0; malformed[i] != NULL; i++)
		ck_assert_msg(verify(malformed[i], now) == PB_TOK_MALFORMED,
		    "case %d", i);
	ck_assert_int_eq(verify("", now), PB_TOK_MISSING);
}
END_TEST

/* Blobs signed with the broker's own key but not shaped as its tokens: an
 * egress-grant-shaped body (no audience), another audience, no nbf, an
 * unknown field.  Each is malformed, never a token. */
START_TEST(test_not_a_token)
{
	static const char *const extra[][2] = {{NULL, NULL},
	    {"aud", "kz-egress"}, {"aud", "kz-pkgbroker"},
	    {"aud", "kz-pkgbroker"}};
	char t[PB_TOKEN_MAX + 1];

	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		cJSON *o = kz_signed_body_new(run, now, 300);

		ck_assert_ptr_nonnull(o);
		if (extra[i][0] != NULL)
			cJSON_AddStringToObject(o, extra[i][0], extra[i][1]);
		if (i == 2)
			cJSON_DeleteItemFromObjectCaseSensitive(o, "nbf");
		if (i == 3)
			cJSON_AddStringToObject(o, "caps", "turn");
		ck_assert_int_eq(kz_signed_make(sk, o, t, sizeof(t)), 0);
		cJSON_Delete(o);
		ck_assert_msg(verify(t, now + 1) == PB_TOK_MALFORMED,
		    "case %zu", i);
	}
}
END_TEST

START_TEST(test_auth_header)
{
	char t[PB_TOKEN_MAX + 1], hdr[2048], b64[1024], out[PB_TOKEN_MAX + 1];
	char up[PB_TOKEN_MAX + 32];

	mint(sk, run, now, 300, t);
	snprintf(hdr, sizeof(hdr), "Bearer %s", t);
	ck_assert_int_eq(pb_token_from_auth(hdr, out, sizeof(out)), PB_TOK_OK);
	ck_assert_str_eq(out, t);
	snprintf(up, sizeof(up), "__token__:%s", t);
	sodium_bin2base64(b64, sizeof(b64), (unsigned char *)up, strlen(up),
	    sodium_base64_VARIANT_ORIGINAL);
	snprintf(hdr, sizeof(hdr), "Basic %s", b64);
	ck_assert_int_eq(pb_token_from_auth(hdr, out, sizeof(out)), PB_TOK_OK);
	ck_assert_str_eq(out, t);
	ck_assert_int_eq(pb_token_from_auth(NULL, out, sizeof(out)),
	    PB_TOK_MISSING);
	ck_assert_int_eq(pb_token_from_auth("Bearer ", out, sizeof(out)),
	    PB_TOK_MISSING);
	ck_assert_int_eq(pb_token_from_auth("Digest x", out, sizeof(out)),
	    PB_TOK_MALFORMED);
	ck_assert_int_eq(pb_token_from_auth("Basic !!!", out, sizeof(out)),
	    PB_TOK_MALFORMED);
	/* Basic without a colon, and a token with a control character. */
	ck_assert_int_eq(pb_token_from_auth("Basic YWJj", out, sizeof(out)),
	    PB_TOK_MALFORMED);
	ck_assert_int_eq(pb_token_from_auth("Bearer a\x01z", out, sizeof(out)),
	    PB_TOK_MALFORMED);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pkgbroker_token");
	TCase *tc = tcase_create("token");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_times);
	tcase_add_test(tc, test_forged);
	tcase_add_test(tc, test_bound);
	tcase_add_test(tc, test_run);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_not_a_token);
	tcase_add_test(tc, test_auth_header);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
