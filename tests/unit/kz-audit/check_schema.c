/* The closed event schema: a table of hostile events, each refused with
 * the right reason and field and without echoing the value; accepted
 * events come out with raw ids replaced by keyed hashes. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "audit.h"
#include "kz_check.h"
#include "banned.h"

static struct kz_key idkey;

static cJSON *
parse(const char *s)
{
	cJSON *j = NULL;
	char why[128];

	ck_assert_msg(kz_json_parse_object(s, strlen(s), &j, why,
	                  sizeof(why)) == 0,
	    "bad test JSON %s: %s", s, why);
	return j;
}

struct bad {
	const char *kind, *event;
	enum aud_refusal reason;
	const char *field;
};

/* Every value that must be refused contains SECRET, which must never
 * appear in the reason. */
static const struct bad bads[] = {
    {"nope", "{}", AUD_R_KIND, "kind"},
    {"", "{}", AUD_R_KIND, "kind"},
    {"Dispatch", "{}", AUD_R_KIND, "kind"},
    {"lease", "{\"bogus\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"lease", "{\"stdout\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"lease", "{\"env\":{\"K\":\"SECRET\"}}", AUD_R_FIELD, "(unknown)"},
    {"lease", "{\"Worker_id\":\"w\"}", AUD_R_FIELD, "(unknown)"},
    {"egress_refusal", "{\"worker_id\":\"w\"}", AUD_R_FIELD, "(unknown)"},
    {"lease", "{\"reason\":\"a\\nSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\rSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\tSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u2028SECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u007fSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"actor\":\"a\\nSECRET\"}", AUD_R_MULTILINE, "actor"},
    {"lease", "{\"reason\":\"/etc/SECRET\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"open /etc/SECRET failed\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"path=/SECRET\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"~/SECRET\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"~root/SECRET\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"file:SECRET\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"FILE:///SECRET\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"https://h/SECRET?q\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"reason\":\"C:\\\\SECRET\"}", AUD_R_PATH, "reason"},
    {"lease", "{\"worker_id\":\"/SECRET\"}", AUD_R_PATH, "worker_id"},
    {"lease", "{\"worker_id\":\"a b SECRET\"}", AUD_R_CHARSET, "worker_id"},
    {"lease", "{\"worker_id\":\"\"}", AUD_R_LENGTH, "worker_id"},
    {"lease",
        "{\"capability\":\"SECRETSECRETSECRETSECRETSECRETSECRET"
        "SECRETSECRETSECRETSECRETSECRET\"}",
        AUD_R_LENGTH, "capability"},
    {"lease", "{\"actor_hash\":\"ABCSECRET\"}", AUD_R_CHARSET, "actor_hash"},
    {"lease", "{\"worker_id\":{\"x\":\"SECRET\"}}", AUD_R_NESTED, "worker_id"},
    {"lease", "{\"worker_id\":[\"SECRET\"]}", AUD_R_NESTED, "worker_id"},
    {"lease", "{\"worker_id\":7}", AUD_R_TYPE, "worker_id"},
    {"lease", "{\"worker_id\":null}", AUD_R_TYPE, "worker_id"},
    {"lease", "{\"token\":\"SECRET\"}", AUD_R_TYPE, "token"},
    {"lease", "{\"token\":-1}", AUD_R_RANGE, "token"},
    {"lease", "{\"token\":1.5}", AUD_R_RANGE, "token"},
    {"lease", "{\"token\":1e300}", AUD_R_RANGE, "token"},
    {"lease", "{\"warm\":1}", AUD_R_TYPE, "warm"},
    {"egress_refusal", "{\"port\":65536}", AUD_R_RANGE, "port"},
    {"egress_refusal", "{\"host\":\"h/SECRET\"}", AUD_R_CHARSET, "host"},
    {"reset", "{\"evidence\":{\"a\":\"SECRET\"}}", AUD_R_TYPE, "evidence"},
    {"reset", "{\"evidence\":{\"a\":{\"b\":1}}}", AUD_R_NESTED, "evidence"},
    {"reset", "{\"evidence\":{\"A B\":1}}", AUD_R_CHARSET, "evidence"},
    {"reset", "{\"evidence\":[1]}", AUD_R_TYPE, "evidence"},
    {"reset", "{\"missing\":[[\"SECRET\"]]}", AUD_R_NESTED, "missing"},
    {"reset", "{\"missing\":[\"/SECRET\"]}", AUD_R_PATH, "missing"},
    {"reset", "{\"missing\":\"SECRET\"}", AUD_R_TYPE, "missing"},
    {"lease",
        "{\"actor\":\"a\",\"actor_hash\":"
        "\"0123456789abcdef0123456789abcdef\"}",
        AUD_R_CONFLICT, "actor"},
    /* An identifier hash is the keyed hash, 32 lowercase hex digits: a
     * raw numeric id, or a hash of another length, is not one. */
    {"lease", "{\"actor_hash\":\"1234567\"}", AUD_R_LENGTH, "actor_hash"},
    {"lease", "{\"member_hash\":\"0\"}", AUD_R_LENGTH, "member_hash"},
    {"lease", "{\"session_hash\":\"0123456789abcdef0123456789abcde\"}",
        AUD_R_LENGTH, "session_hash"},
    {"lease", "{\"conversation_hash\":\"0123456789abcdef0123456789abcdef0\"}",
        AUD_R_LENGTH, "conversation_hash"},
    {"lease",
        "{\"actor_hash\":\"0123456789abcdef0123456789abcdef"
        "0123456789abcdef0123456789abcdef\"}",
        AUD_R_LENGTH, "actor_hash"},
    {"lease", "{\"actor_hash\":\"0123456789ABCDEF0123456789abcdef\"}",
        AUD_R_CHARSET, "actor_hash"},
    {"egress_refusal", "{\"run_hash\":\"12345\"}", AUD_R_LENGTH, "run_hash"},
    {"projection", "{\"room_hash\":\"12345\"}", AUD_R_LENGTH, "room_hash"},
    {"projection", "{\"project_hash\":\"12345\"}", AUD_R_LENGTH,
        "project_hash"},
    /* package_hash is kz-pkgrun's SHA-256 of the package: 64 digits. */
    {"package", "{\"package_hash\":\"0123456789abcdef0123456789abcdef\"}",
        AUD_R_LENGTH, "package_hash"},
    /* Characters a terminal acts on: C1 controls, bidi controls. */
    {"lease", "{\"reason\":\"a\\u009b31mSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u0080SECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u0085SECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u009fSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u202aSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u202eSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u2066SECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u2069SECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u200fSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u061cSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"pkg_refusal", "{\"package\":\"a\\u202eSECRET\"}", AUD_R_MULTILINE,
        "package"},
    /* The rest of the bidi controls, and in a raw id (hashed, never
     * stored, but read by whoever looks it up). */
    {"lease", "{\"reason\":\"a\\u202bSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u202cSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u202dSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u2067SECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u2068SECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"reason\":\"a\\u200eSECRET\"}", AUD_R_MULTILINE, "reason"},
    {"lease", "{\"member\":\"a\\u202eSECRET\"}", AUD_R_MULTILINE, "member"},
    {"lease", "{\"actor\":\"a\\u0085SECRET\"}", AUD_R_MULTILINE, "actor"},
    /* Characters a reader is shown as nothing: "al<ZWSP>ice" reads as
     * "alice".  Zero-width characters and the word joiner, BOM, soft
     * hyphen, Mongolian vowel separator, variation selectors, tag
     * characters (U+E0041 TAG A, U+E007F CANCEL TAG, as surrogate
     * pairs), and the other default-ignorable characters. */
    {"lease", "{\"reason\":\"a\\u200bSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u200cSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u200dSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u2060SECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u2063SECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\ufeffSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"\\ufeffSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u00adSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u180eSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u180bSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\ufe00SECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\ufe0fSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u034fSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u3164SECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u115fSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\u206aSECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\ufff9SECRET\"}", AUD_R_INVISIBLE, "reason"},
    {"lease", "{\"reason\":\"a\\udb40\\udc41SECRET\"}", AUD_R_INVISIBLE,
        "reason"},
    {"lease", "{\"reason\":\"a\\udb40\\udc01SECRET\"}", AUD_R_INVISIBLE,
        "reason"},
    {"lease", "{\"reason\":\"a\\udb40\\udc7fSECRET\"}", AUD_R_INVISIBLE,
        "reason"},
    {"lease", "{\"reason\":\"a\\udb40\\udd00SECRET\"}", AUD_R_INVISIBLE,
        "reason"},
    {"lease", "{\"reason\":\"a\\ud834\\udd73SECRET\"}", AUD_R_INVISIBLE,
        "reason"},
    {"pkg_refusal", "{\"package\":\"left\\u200bSECRET\"}", AUD_R_INVISIBLE,
        "package"},
    {"pkg_refusal", "{\"package\":\"left\\u00adSECRET\"}", AUD_R_INVISIBLE,
        "package"},
    /* A raw id with one would hash to an id nobody searching by the name
     * as read would find. */
    {"lease", "{\"member\":\"al\\u200bSECRET\"}", AUD_R_INVISIBLE, "member"},
    {"lease", "{\"actor\":\"al\\udb40\\udc41SECRET\"}", AUD_R_INVISIBLE,
        "actor"},
    {"lease", "{\"session\":\"s\\ufe0fSECRET\"}", AUD_R_INVISIBLE, "session"},
    {"dispatch", "{\"conversation\":\"c\\u2060SECRET\"}", AUD_R_INVISIBLE,
        "conversation"},
    /* Token, hash and host fields are ASCII (their alphabet refused these
     * before): the invisible character is named first. */
    {"egress_refusal", "{\"host\":\"a\\u200bSECRET.example\"}", AUD_R_INVISIBLE,
        "host"},
    {"browser_open", "{\"host\":\"SECRET\\u00ad.example\"}", AUD_R_INVISIBLE,
        "host"},
    {"lease", "{\"worker_id\":\"w\\ufeffSECRET\"}", AUD_R_INVISIBLE,
        "worker_id"},
    {"reset", "{\"missing\":[\"x\\u200dSECRET\"]}", AUD_R_INVISIBLE, "missing"},
    {"lease", "{\"audience_version\":-3}", AUD_R_RANGE, "audience_version"},
    /* An output record names no file, path or content. */
    {"output", "{\"name\":\"SECRET.txt\"}", AUD_R_FIELD, "(unknown)"},
    {"output", "{\"file\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"output", "{\"content_b64\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"output", "{\"resource\":\"/SECRET\"}", AUD_R_PATH, "resource"},
    {"output", "{\"bytes\":-1}", AUD_R_RANGE, "bytes"},
    /* A package invocation names no argument, member file or output. */
    {"package", "{\"args\":[\"SECRET\"]}", AUD_R_FIELD, "(unknown)"},
    {"package", "{\"file\":\"SECRET.txt\"}", AUD_R_FIELD, "(unknown)"},
    {"package", "{\"stdout\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"package", "{\"package_hash\":\"SECRET\"}", AUD_R_CHARSET, "package_hash"},
    {"package", "{\"tool\":\"/SECRET\"}", AUD_R_PATH, "tool"},
    /* kz-pkgbroker: a refusal carries no token, path or URL. */
    {"pkg_refusal", "{\"token\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"pkg_refusal", "{\"path\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"pkg_refusal", "{\"package\":\"/SECRET\"}", AUD_R_PATH, "package"},
    {"pkg_refusal", "{\"package\":\"http://SECRET\"}", AUD_R_PATH, "package"},
    {"pkg_refusal", "{\"host\":\"h/SECRET\"}", AUD_R_CHARSET, "host"},
    {"pkg_refusal", "{\"bytes\":-1}", AUD_R_RANGE, "bytes"},
    /* A browser record names no URL, page content or member input. */
    {"browser_open", "{\"url\":\"http://h/SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"browser_action", "{\"text\":\"SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"browser_page", "{\"url\":\"http://h/SECRET\"}", AUD_R_FIELD, "(unknown)"},
    {"browser_failed", "{\"host\":\"h/SECRET\"}", AUD_R_CHARSET, "host"},
    {"browser_failed", "{\"reason\":\"at http://10.0.0.1/SECRET\"}", AUD_R_PATH,
        "reason"},
};

START_TEST(test_hostile)
{
	const struct bad *b = &bads[_i];
	struct aud_refusal_info ri;
	cJSON *ev = parse(b->event), *clean = NULL;
	int r;

	r = aud_schema_check(b->kind, ev, &idkey, &clean, &ri);
	ck_assert_msg(r == KZ_EDENIED, "case %d (%s) not refused", _i,
	    b->event);
	ck_assert_ptr_null(clean);
	ck_assert_msg(ri.reason == b->reason, "case %d: reason %s, want %s", _i,
	    aud_refusal_name(ri.reason), aud_refusal_name(b->reason));
	ck_assert_str_eq(ri.field, b->field);
	ck_assert_ptr_null(strstr(ri.why, "SECRET"));
	ck_assert_ptr_nonnull(strstr(ri.why, "field") ? ri.why : NULL);
	cJSON_Delete(ev);
}
END_TEST

START_TEST(test_not_object)
{
	struct aud_refusal_info ri;
	cJSON *clean = NULL, *arr = cJSON_CreateArray();

	ck_assert_int_eq(aud_schema_check("lease", arr, &idkey, &clean, &ri),
	    KZ_EDENIED);
	ck_assert_str_eq(ri.field, "event");
	ck_assert_int_eq(aud_schema_check("lease", NULL, &idkey, &clean, &ri),
	    KZ_EDENIED);
	ck_assert_int_eq(aud_schema_check(NULL, arr, &idkey, &clean, &ri),
	    KZ_EDENIED);
	ck_assert_str_eq(ri.field, "kind");
	cJSON_Delete(arr);
}
END_TEST

START_TEST(test_accept_and_hash)
{
	struct aud_refusal_info ri;
	char want[KZ_IDHASH_HEX + 1];
	cJSON *ev = parse(
	    "{\"worker_id\":\"w-1\",\"exit_status\":0,"
	    "\"actor\":\"alice\",\"session\":\"s-1\",\"capability\":"
	    "\"code.run\",\"audience_version\":3,\"manifest_digest\":"
	    "\"sha256:ab12\",\"reason\":\"worker exited: code 0, see a/b\"}");
	cJSON *clean = NULL;
	char *s;

	ck_assert_int_eq(aud_schema_check("dispatch", ev, &idkey, &clean, &ri),
	    0);
	s = kz_json_print(clean);
	ck_assert_ptr_null(strstr(s, "alice"));
	ck_assert_ptr_null(strstr(s, "s-1"));
	ck_assert_ptr_null(kz_json_get(clean, "actor"));
	ck_assert_int_eq(kz_key_idhash(&idkey, "actor", "alice", want), 0);
	ck_assert_str_eq(kz_json_get(clean, "actor_hash")->valuestring, want);
	ck_assert_int_eq(kz_key_idhash(&idkey, "session", "s-1", want), 0);
	ck_assert_str_eq(kz_json_get(clean, "session_hash")->valuestring, want);
	ck_assert_str_eq(kz_json_get(clean, "worker_id")->valuestring, "w-1");
	free(s);
	cJSON_Delete(clean);
	cJSON_Delete(ev);
}
END_TEST

/* Identifier hashes of the right length, and text that is not a control:
 * accented letters, a dash, an emoji, a zero-width joiner. */
START_TEST(test_accept_hash_and_text)
{
	static const char *const ok[][2] = {
	    {"lease", "{\"actor_hash\":\"0123456789abcdef0123456789abcdef\"}"},
	    {"egress_refusal",
	        "{\"run_hash\":\"0123456789abcdef0123456789abcdef\"}"},
	    {"package",
	        "{\"package_hash\":\"0123456789abcdef0123456789abcdef"
	        "0123456789abcdef0123456789abcdef\"}"},
	    {"lease", "{\"reason\":\"caf\\u00e9 \\u2014 \\u00a0ok\"}"},
	    {"lease", "{\"reason\":\"a \\ud83d\\ude00 b \\u2030\"}"},
	    /* Visible characters next to the invisible ranges. */
	    {"lease",
	        "{\"reason\":\"\\u00ac\\u00ae \\u200a\\u2010 \\u2070 "
	        "\\ufdff\\ufe10 \\ufffd \\u3163\\u3165 \\u180a\\u1810\"}"},
	    {"lease", "{\"member\":\"caf\\u00e9-\\u65e5\\u672c\"}"},
	};
	struct aud_refusal_info ri;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cJSON *ev = parse(ok[i][1]), *clean = NULL;

		ck_assert_msg(aud_schema_check(ok[i][0], ev, &idkey, &clean,
		                  &ri) == 0,
		    "%s refused: %s", ok[i][1], ri.why);
		cJSON_Delete(clean);
		cJSON_Delete(ev);
	}
}
END_TEST

START_TEST(test_every_kind)
{
	struct aud_refusal_info ri;
	cJSON *ev = parse("{\"rid\":\"r1\",\"outcome\":\"ok\"}"), *clean;

	for (int i = 0; aud_kinds[i] != NULL; i++) {
		clean = NULL;
		ck_assert_int_eq(aud_schema_check(aud_kinds[i], ev, &idkey,
		                     &clean, &ri),
		    0);
		ck_assert(aud_kind_known(aud_kinds[i]));
		cJSON_Delete(clean);
	}
	ck_assert(!aud_kind_known("nope"));
	cJSON_Delete(ev);
}
END_TEST

START_TEST(test_input_split)
{
	cJSON *line = parse("{\"kind\":\"lease\",\"worker_id\":\"w\"}");
	cJSON *ev = NULL;
	const char *kind;
	char why[128];

	ck_assert_int_eq(aud_input_split(line, &kind, &ev, why, sizeof(why)),
	    0);
	ck_assert_str_eq(kind, "lease");
	ck_assert_ptr_null(kz_json_get(ev, "kind"));
	ck_assert_ptr_nonnull(kz_json_get(ev, "worker_id"));
	cJSON_Delete(ev);
	cJSON_Delete(line);
	line = parse("{\"kind\":\"lease\",\"event\":{},\"x\":1}");
	ck_assert_int_ne(aud_input_split(line, &kind, &ev, why, sizeof(why)),
	    0);
	cJSON_Delete(line);
	line = parse("{\"event\":{}}");
	ck_assert_int_ne(aud_input_split(line, &kind, &ev, why, sizeof(why)),
	    0);
	cJSON_Delete(line);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-audit schema");
	TCase *tc = tcase_create("schema");

	memset(idkey.k, 7, sizeof(idkey.k));
	tcase_add_loop_test(tc, test_hostile, 0,
	    (int)(sizeof(bads) / sizeof(bads[0])));
	tcase_add_test(tc, test_not_object);
	tcase_add_test(tc, test_accept_and_hash);
	tcase_add_test(tc, test_accept_hash_and_text);
	tcase_add_test(tc, test_every_kind);
	tcase_add_test(tc, test_input_split);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
