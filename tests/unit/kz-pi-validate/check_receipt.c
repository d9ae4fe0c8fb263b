/*
 * kz-pi-validate receipt.c: the signed canonical body, staleness after a
 * file, profile or contract change, forged and re-keyed receipts,
 * supported events.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "kz_key.h"
#include "pv.h"
#include "kz_check.h"
#include "banned.h"

static char key1[64], key2[64];
#define H16(c) c c c c c c c c c c c c c c c c
static const char *A = H16("1111"), *B = H16("2222"), *C = H16("3333");
/* The profile's digest. */
static const char *P = H16("4444");

static void
setup(void)
{
	snprintf(key1, sizeof(key1), "/tmp/pv-key1.%d", (int)getpid());
	snprintf(key2, sizeof(key2), "/tmp/pv-key2.%d", (int)getpid());
	unlink(key1), unlink(key2);
	ck_assert_int_eq(kz_key_generate(key1, NULL, 0), 0);
	ck_assert_int_eq(kz_key_generate(key2, NULL, 0), 0);
}

static void
teardown(void)
{
	unlink(key1), unlink(key2);
}

static char *
signed_receipt(const char *artifact, const char *contract, const char *result)
{
	cJSON *b = cJSON_CreateObject();
	char *text = NULL, why[128];

	cJSON_AddNumberToObject(b, "v", 1);
	cJSON_AddNumberToObject(b, "files", 3);
	cJSON_AddStringToObject(b, "artifact_sha256", artifact);
	cJSON_AddStringToObject(b, "profile_sha256", P);
	cJSON_AddStringToObject(b, "contract_digest", contract);
	cJSON_AddStringToObject(b, "note", "caf\xc3\xa9 \"quoted\"\n");
	cJSON_AddStringToObject(b, "result", result);
	ck_assert_int_eq(pv_receipt_sign(b, key1, &text, why, sizeof(why)), 0);
	cJSON_Delete(b);
	return text;
}

static int
verify(const char *text, const char *key, const char *a, const char *c,
    char *why, size_t wlen)
{
	return pv_receipt_verify(text, strlen(text), key, a, P, c, why, wlen);
}

START_TEST(test_current_and_stale)
{
	char *t = signed_receipt(A, C, "pass"), why[128];

	ck_assert_int_eq(verify(t, key1, A, C, why, sizeof(why)), 0);
	ck_assert_int_eq(verify(t, key1, B, C, why, sizeof(why)), KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "files changed"));
	ck_assert_int_eq(verify(t, key1, A, B, why, sizeof(why)), KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "contract changed"));
	ck_assert_int_eq(pv_receipt_verify(t, strlen(t), key1, A, B, C, why,
	                     sizeof(why)),
	    KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "another profile"));
	free(t);
	t = signed_receipt(A, C, "fail");
	ck_assert_int_eq(verify(t, key1, A, C, why, sizeof(why)), KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "did not pass"));
	free(t);
}
END_TEST

/* The signature covers the body's compact form, not the file's layout. */
START_TEST(test_canonical_layout)
{
	char *t = signed_receipt(A, C, "pass"), *compact, why[128];
	cJSON *doc = cJSON_Parse(t);

	ck_assert_ptr_nonnull(doc);
	compact = cJSON_PrintUnformatted(doc);
	ck_assert_int_eq(verify(compact, key1, A, C, why, sizeof(why)), 0);
	free(compact);
	cJSON_Delete(doc);
	free(t);
}
END_TEST

/* Each edit of the signed body, or a foreign key, fails the signature. */
static const char *const edits[][2] = {
    {"\"fail\"", "\"pass\""}, /* result flipped */
    {"\"files\":\t3", "\"files\":\t4"}, /* a number */
    {"caf\xc3\xa9", "cafe"}, /* one character of a string */
};

START_TEST(test_forged_body)
{
	char *t = signed_receipt(A, C, "fail"), *p, why[128];
	char buf[4096];

	ck_assert_uint_lt(strlen(t), sizeof(buf));
	memcpy(buf, t, strlen(t) + 1);
	p = strstr(buf, edits[_i][0]);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(strlen(edits[_i][0]),
	    strlen(edits[_i][1]) + (_i == 2 ? 1 : 0));
	memcpy(p, edits[_i][1], strlen(edits[_i][1]));
	memmove(p + strlen(edits[_i][1]), p + strlen(edits[_i][0]),
	    strlen(p + strlen(edits[_i][0])) + 1);
	ck_assert_int_eq(verify(buf, key1, A, C, why, sizeof(why)), KZ_ECRYPTO);
	free(t);
}
END_TEST

START_TEST(test_other_key)
{
	char *t = signed_receipt(A, C, "pass"), why[128];

	ck_assert_int_eq(verify(t, key2, A, C, why, sizeof(why)), KZ_ECRYPTO);
	free(t);
}
END_TEST

static const char *const malformed[] = {
    "",
    "[]",
    "{\"v\":1}",
    "{\"v\":1,\"body\":\"x\"}",
    "{\"v\":1,\"body\":{},\"sig\":\"00\"}",
    "{\"v\":1,\"body\":{},\"sig\":\"zz\",\"sig\":\"zz\"}",
};

START_TEST(test_malformed)
{
	char why[128];

	ck_assert_int_ne(pv_receipt_verify(malformed[_i], strlen(malformed[_i]),
	                     key1, A, P, C, why, sizeof(why)),
	    0);
}
END_TEST

START_TEST(test_events)
{
	ck_assert(pv_event_supported("tool_call"));
	ck_assert(pv_event_supported("session_start"));
	ck_assert(!pv_event_supported("before_everything"));
	ck_assert(!pv_event_supported("TOOL_CALL"));
	ck_assert(!pv_event_supported(""));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pv_receipt");
	TCase *tc = tcase_create("receipt");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_current_and_stale);
	tcase_add_test(tc, test_canonical_layout);
	tcase_add_loop_test(tc, test_forged_body, 0, 3);
	tcase_add_test(tc, test_other_key);
	tcase_add_loop_test(tc, test_malformed, 0,
	    (int)(sizeof(malformed) / sizeof(malformed[0])));
	tcase_add_test(tc, test_events);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
