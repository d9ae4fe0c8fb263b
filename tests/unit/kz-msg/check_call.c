/* kz-msg's judgement of a reply's first bytes (cmd/kz-msg/call.c). */
#include <check.h>
#include <string.h>

#include "msg.h"
#include "kz_check.h"

static const struct {
	const char *b;
	size_t n;
	int eof;
	int want; /* 0 or KZ_EPROTO */
	const char *shown; /* in why when refused */
} cases[] = {
    {"\0\0\0\x20", 4, 0, 0, NULL},
    {"\0\x10\0\0", 4, 0, 0, NULL}, /* exactly 1 MiB */
    {"\0\x10\0\x01", 4, 0, KZ_EPROTO, "'\\x00\\x10\\x00\\x01'"},
    {"\0\0\0\0", 4, 0, KZ_EPROTO, "'\\x00\\x00\\x00\\x00'"},
    {"HTTP/1.1 400 Bad Request\r\n", 26, 0, KZ_EPROTO,
        "'HTTP/1.1 400 Bad Request...'"},
    {"-ERR unknown command", 20, 0, KZ_EPROTO, "'-ERR unknown command'"},
    {"+OK\r\n", 5, 0, KZ_EPROTO, "'+OK\\x0d\\x0a'"},
    {"it's", 4, 0, KZ_EPROTO, "'it\\x27s'"},
    {"\0\0", 2, 0, 0, NULL}, /* undecided yet */
    {"\0\0", 2, 1, KZ_EPROTO, "'\\x00\\x00'"}, /* closed short */
    {"", 0, 1, 0, NULL}, /* the caller's EOF */
};

START_TEST(test_sniff)
{
	char why[200];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(msg_sniff((const unsigned char *)cases[i].b,
		                  cases[i].n, 1024 * 1024, cases[i].eof, why,
		                  sizeof(why)) == cases[i].want,
		    "case %zu", i);
		if (cases[i].shown == NULL)
			continue;
		ck_assert_msg(strstr(why, "does not speak kz frames") != NULL &&
		        strstr(why, cases[i].shown) != NULL,
		    "case %zu: %s", i, why);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-msg call");
	TCase *tc = tcase_create("sniff");

	tcase_add_test(tc, test_sniff);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
