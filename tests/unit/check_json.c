/* Strict JSON and the frame codec, against tables of hostile input. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kz_frame.h"
#include "kz_json.h"
#include "kz_check.h"
#include "banned.h"

struct jcase {
	const char *in;
	size_t len; /* 0: strlen */
	int want;
};

static const struct jcase jcases[] = {
    {"{}", 0, 0},
    {"{\"a\":1,\"b\":[1,2,{\"c\":null}]}", 0, 0},
    {"  {\"a\":\"\\u00e9\"}\n", 0, 0},
    {"[1,2]", 0, KZ_ENOTOBJ},
    {"\"str\"", 0, KZ_ENOTOBJ},
    {"42", 0, KZ_ENOTOBJ},
    {"null", 0, KZ_ENOTOBJ},
    {"{", 0, KZ_EJSON},
    {"{\"a\":}", 0, KZ_EJSON},
    {"{\"a\":1}x", 0, KZ_EJSON},
    {"{\"a\":1}{}", 0, KZ_EJSON},
    {"{\"a\":1}\0", 8, KZ_EJSON},
    {"{\"a\":\"x\ny\"}", 0, KZ_EJSON},
    {"{\"a\":\"\x01\"}", 0, KZ_EJSON},
    {"{\"a\":1,\"a\":2}", 0, KZ_EDUPKEY},
    {"{\"b\":{\"x\":1,\"y\":2,\"x\":3}}", 0, KZ_EDUPKEY},
    {"{\"a\":1,\"A\":2}", 0, 0},
    {"{\"a\":\"\\u0000\"}", 0, KZ_ENULCHAR},
    {"{\"a\\u0000b\":1}", 0, KZ_ENULCHAR},
    {"{\"a\":\"\\\\u0000\"}", 0, 0},
    {"{\"a\":\"\xff\"}", 0, KZ_EUTF8},
    {"{\"a\":\"\xc0\xaf\"}", 0, KZ_EUTF8},
    {"{\"a\":\"\xed\xa0\x80\"}", 0, KZ_EUTF8},
    {"{\"a\":\"\xf4\x90\x80\x80\"}", 0, KZ_EUTF8},
    {"{\"a\":\"\xe2\x82\"}", 0, KZ_EUTF8},
    {"{\"a\":[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]}", 0, 0},
    {"{\"a\":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}", 0, KZ_EDEPTH},
    {"", 0, KZ_EJSON},
};

START_TEST(test_json_table)
{
	const struct jcase *c = &jcases[_i];
	size_t len = c->len ? c->len : strlen(c->in);
	cJSON *v = NULL;
	char why[128] = "";
	int r = kz_json_parse_object(c->in, len, &v, why, sizeof(why));

	ck_assert_msg(r == c->want, "case %d: got %s want %s (%s)", _i,
	    kz_errname(r), kz_errname(c->want), why);
	ck_assert(r == 0 ? v != NULL : v == NULL);
	if (r != 0)
		ck_assert_msg(why[0] != '\0', "case %d: no reason", _i);
	cJSON_Delete(v);
}
END_TEST

START_TEST(test_getters)
{
	static const char txt[] = "{\"s\":\"abc\",\"n\":5,\"f\":1.5,"
	                          "\"b\":true,\"big\":1e300,\"Case\":1}";
	static const char *const allowed[] = {"s", "n", "f", "b", "big", NULL};
	cJSON *v;
	const char *s;
	int64_t n;
	bool b;
	char why[128];

	ck_assert_int_eq(kz_json_parse_object(txt, strlen(txt), &v, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(kz_json_str(v, "s", 16, &s, why, sizeof(why)), 0);
	ck_assert_str_eq(s, "abc");
	ck_assert_int_eq(kz_json_str(v, "s", 2, &s, why, sizeof(why)),
	    KZ_ETOOBIG);
	ck_assert_int_eq(kz_json_str(v, "n", 16, &s, why, sizeof(why)),
	    KZ_ETYPE);
	ck_assert_int_eq(kz_json_str(v, "zz", 16, &s, why, sizeof(why)),
	    KZ_EMISSING);
	ck_assert_int_eq(kz_json_int(v, "n", 0, 10, &n, why, sizeof(why)), 0);
	ck_assert_int_eq(n, 5);
	ck_assert_int_eq(kz_json_int(v, "n", 6, 10, &n, why, sizeof(why)),
	    KZ_ERANGE);
	ck_assert_int_eq(kz_json_int(v, "f", 0, 10, &n, why, sizeof(why)),
	    KZ_ETYPE);
	ck_assert_int_eq(kz_json_int(v, "big", 0, INT64_MAX, &n, why,
	                     sizeof(why)),
	    KZ_ETYPE);
	ck_assert_int_eq(kz_json_bool_opt(v, "b", false, &b, why, sizeof(why)),
	    0);
	ck_assert(b);
	/* Lookups are case-sensitive: "case" is absent, "Case" is not. */
	ck_assert_ptr_null(kz_json_get(v, "case"));
	ck_assert_ptr_nonnull(kz_json_get(v, "Case"));
	ck_assert_int_eq(kz_json_only(v, allowed, why, sizeof(why)),
	    KZ_EUNKNOWN);
	ck_assert_ptr_nonnull(strstr(why, "Case"));
	cJSON_Delete(v);
}
END_TEST

START_TEST(test_envelope)
{
	cJSON *req = cJSON_Parse("{\"v\":1,\"op\":\"x\",\"id\":\"r1\"}");
	cJSON *e = kz_reply_err(req, KZ_WE_REFUSED, "no");
	char *s = kz_json_print(e);

	ck_assert_str_eq(s,
	    "{\"v\":1,\"id\":\"r1\",\"ok\":false,"
	    "\"error\":\"refused\",\"reason\":\"no\"}");
	free(s);
	cJSON_Delete(e);
	e = kz_reply_ok(NULL);
	s = kz_json_print(e);
	ck_assert_str_eq(s, "{\"v\":1,\"id\":null,\"ok\":true}");
	free(s);
	cJSON_Delete(e);
	cJSON_Delete(req);
}
END_TEST

static void
feed(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
}

struct fcase {
	const char *bytes;
	size_t len;
	int want;
};

static const struct fcase fcases[] = {
    {"\0\0\0\x02{}", 6, 0},
    {"\0\0\0\0", 4, KZ_EFRAME_EMPTY},
    {"\0\x10\0\x01", 4, KZ_ETOOBIG},
    {"\xff\xff\xff\xff", 4, KZ_ETOOBIG},
    {"\0\0\0\x05{}", 6, KZ_EFRAME_TRUNC},
    {"\0\0", 2, KZ_EFRAME_TRUNC},
    {"", 0, KZ_EEOF},
    {"\0\0\0\x02[]", 6, KZ_ENOTOBJ},
    {"\0\0\0\x03{x}", 7, KZ_EJSON},
    {"\0\0\0\x04{\"\xff\"", 8, KZ_EUTF8},
};

START_TEST(test_frame_table)
{
	const struct fcase *c = &fcases[_i];
	int sv[2];
	cJSON *v = NULL;
	char why[128];
	int r;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	feed(sv[0], c->bytes, c->len);
	close(sv[0]);
	r = kz_frame_read(sv[1], 4096, 1000, &v, why, sizeof(why));
	ck_assert_msg(r == c->want, "case %d: got %s want %s", _i,
	    kz_errname(r), kz_errname(c->want));
	cJSON_Delete(v);
	close(sv[1]);
}
END_TEST

/* What a terminal would act on or not show becomes its escape; what it
 * shows stays as it is; a byte that is not UTF-8 is U+FFFD's escape. */
START_TEST(test_inert)
{
	/* U+202E, U+200B, U+E0041 (a tag), a lone 0xff, then é. */
	static const char in[] = "{\"r\":\"a\xe2\x80\xae"
	                         "b\xe2\x80\x8b"
	                         "c\xf3\xa0\x81\x81\xff"
	                         "\xc3\xa9\"}";
	size_t n;
	char *out = kz_json_inert(in, sizeof(in) - 1, &n);

	ck_assert_ptr_nonnull(out);
	ck_assert_str_eq(out,
	    "{\"r\":\"a\\u202eb\\u200bc\\udb40\\udc41\\ufffd\xc3\xa9\"}");
	ck_assert_uint_eq(n, strlen(out));
	free(out);
	out = kz_json_inert("", 0, &n);
	ck_assert_str_eq(out, "");
	free(out);
}
END_TEST

START_TEST(test_frame_partial_and_timeout)
{
	int sv[2];
	cJSON *v = NULL, *o = cJSON_CreateObject();
	char why[128];
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* A frame written one byte at a time is reassembled. */
	pid = fork();
	if (pid == 0) {
		const char f[] = "\0\0\0\x08{\"a\":12}";

		for (size_t i = 0; i < sizeof(f) - 1; i++) {
			feed(sv[0], f + i, 1);
			usleep(2000);
		}
		_exit(0);
	}
	ck_assert_int_eq(kz_frame_read(sv[1], 4096, 2000, &v, why, sizeof(why)),
	    0);
	ck_assert_int_eq(kz_json_get(v, "a")->valueint, 12);
	cJSON_Delete(v);
	v = NULL;
	/* A silent peer times out. */
	ck_assert_int_eq(kz_frame_read(sv[1], 4096, 100, &v, why, sizeof(why)),
	    KZ_ETIMEDOUT);
	/* Round trip through the encoder. */
	cJSON_AddStringToObject(o, "k", "v");
	ck_assert_int_eq(kz_frame_write(sv[0], o, 4096, 1000), 0);
	ck_assert_int_eq(kz_frame_read(sv[1], 4096, 1000, &v, why, sizeof(why)),
	    0);
	ck_assert_str_eq(kz_json_get(v, "k")->valuestring, "v");
	/* The encoder refuses what the decoder would refuse. */
	ck_assert_int_eq(kz_frame_write(sv[0], o, 4, 1000), KZ_ETOOBIG);
	cJSON_Delete(v);
	cJSON_Delete(o);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_frame_encode_to)
{
	cJSON *o = cJSON_CreateObject();
	char small[16], big[256], *heap;
	size_t n, hn;

	cJSON_AddStringToObject(o, "key", "a value longer than sixteen");
	cJSON_AddNumberToObject(o, "n", 1234567);
	/* Into a buffer: the same bytes as the allocating encoder. */
	ck_assert_int_eq(kz_frame_encode_to(o, 4096, big, sizeof(big), &n), 0);
	ck_assert_int_eq(kz_frame_encode(o, 4096, &heap, &hn), 0);
	ck_assert_uint_eq(n, hn);
	ck_assert_int_eq(memcmp(big, heap, n), 0);
	free(heap);
	/* Too small a buffer says so, never a cut frame; over the frame
	 * limit is still KZ_ETOOBIG. */
	ck_assert_int_eq(kz_frame_encode_to(o, 4096, small, sizeof(small), &n),
	    KZ_ENOSPC);
	ck_assert_int_eq(kz_frame_encode_to(o, 8, big, sizeof(big), &n),
	    KZ_ETOOBIG);
	cJSON_Delete(o);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("json+frame");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_json_table, 0,
	    sizeof(jcases) / sizeof(jcases[0]));
	tcase_add_test(tc, test_getters);
	tcase_add_test(tc, test_envelope);
	tcase_add_loop_test(tc, test_frame_table, 0,
	    sizeof(fcases) / sizeof(fcases[0]));
	tcase_add_test(tc, test_frame_partial_and_timeout);
	tcase_add_test(tc, test_frame_encode_to);
	tcase_add_test(tc, test_inert);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
