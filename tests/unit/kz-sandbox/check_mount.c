/* kz-sandbox mount.c: the normalized mount table used as wipe evidence. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "kz_check.h"
#include "banned.h"

static const char mi_a
    [] = "21 1 0:20 / / rw - ext4 /dev/vda rw\n"
         "40 30 0:40 / /st rw - tmpfs tmpfs rw,size=1024k\n"
         "41 40 0:41 / /st/workspace rw,nosuid - tmpfs tmpfs rw,size=2048k\n"
         "42 40 0:42 / /st/tmp rw,nosuid - tmpfs tmpfs rw,size=1024k\n"
         "43 1 0:43 / /stx rw - tmpfs tmpfs rw\n";
/* The same after the two tmpfs were replaced: new ids, new order. */
static const char mi_b
    [] = "21 1 0:20 / / rw - ext4 /dev/vda rw\n"
         "40 30 0:40 / /st rw - tmpfs tmpfs rw,size=1024k\n"
         "52 40 0:52 / /st/tmp rw,nosuid - tmpfs tmpfs rw,size=1024k\n"
         "51 40 0:51 / /st/workspace rw,nosuid - tmpfs tmpfs rw,size=2048k\n";
/* An extra mount under the stage. */
static const char mi_c
    [] = "40 30 0:40 / /st rw - tmpfs tmpfs rw,size=1024k\n"
         "41 40 0:41 / /st/workspace rw,nosuid - tmpfs tmpfs rw,size=2048k\n"
         "42 40 0:42 / /st/tmp rw,nosuid - tmpfs tmpfs rw,size=1024k\n"
         "44 41 0:44 / /st/workspace/x rw - tmpfs tmpfs rw\n";

START_TEST(test_normalize)
{
	char *a = sbx_mnt_normalize(mi_a, "/st");
	char *b = sbx_mnt_normalize(mi_b, "/st");
	char *c = sbx_mnt_normalize(mi_c, "/st");
	char *all = sbx_mnt_normalize(mi_a, "");

	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a, b);
	ck_assert_str_ne(a, c);
	ck_assert_ptr_null(strstr(a, "/stx")); /* a sibling is not "under" */
	ck_assert_ptr_null(strstr(a, " 0:4")); /* no ids */
	ck_assert_ptr_nonnull(strstr(all, "/stx"));
	free(a);
	free(b);
	free(c);
	free(all);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-mount");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_normalize);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
