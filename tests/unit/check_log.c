/* Log lines are single JSON objects with the fields in the documented order;
 * error names are stable. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kz_check.h"
#include "banned.h"

static char *
capture(void (*fn)(void))
{
	static char buf[4096];
	int p[2], saved = dup(STDERR_FILENO);
	ssize_t n;

	ck_assert_int_eq(pipe(p), 0);
	dup2(p[1], STDERR_FILENO);
	fn();
	dup2(saved, STDERR_FILENO);
	close(p[1]);
	close(saved);
	n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static void
one(void)
{
	kz_log_init("kz-test", KZ_LOG_INFO);
	kz_log_set_rid("r-1");
	kz_log(KZ_LOG_WARN, "test.event", KZ_ETIMEDOUT, "a\nmulti-line msg",
	    "worker", "w1", "skipped", NULL, NULL);
	kz_log(KZ_LOG_DEBUG, "test.hidden", 0, "below the level", NULL);
}

START_TEST(test_line_shape)
{
	char *out = capture(one), *nl = strchr(out, '\n');
	cJSON *v;
	const cJSON *c;
	static const char *const order[] = {"ts", "level", "bin", "event",
	    "rid", "worker", "err", "msg", NULL};
	int i = 0;

	ck_assert_ptr_nonnull(nl);
	ck_assert_str_eq(nl + 1, ""); /* exactly one line: debug filtered */
	ck_assert_int_eq(kz_json_parse_object(out, (size_t)(nl - out), &v, NULL,
	                     0),
	    0);
	for (c = v->child; c != NULL; c = c->next, i++) {
		ck_assert_ptr_nonnull(order[i]);
		ck_assert_str_eq(c->string, order[i]);
	}
	ck_assert_ptr_null(order[i]);
	ck_assert_str_eq(kz_json_get(v, "err")->valuestring, "KZ_ETIMEDOUT");
	ck_assert_str_eq(kz_json_get(v, "level")->valuestring, "warn");
	cJSON_Delete(v);
}
END_TEST

START_TEST(test_err_names)
{
	ck_assert_str_eq(kz_errname(0), "KZ_OK");
	ck_assert_str_eq(kz_errname(KZ_ENOMEM), "KZ_ENOMEM");
	ck_assert_str_eq(kz_errname(KZ_EPATH_SYMLINK), "KZ_EPATH_SYMLINK");
	ck_assert_str_eq(kz_errname(KZ_EINTERNAL), "KZ_EINTERNAL");
	ck_assert_str_eq(kz_errname(-1), "KZ_E?");
	ck_assert_str_eq(kz_errname(KZ_ERR_BASE_), "KZ_E?");
	ck_assert_str_eq(kz_errname(KZ_ERR_END_), "KZ_E?");
	ck_assert_str_eq(kz_strerror(KZ_ETOOBIG), "over the size limit");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log+err");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_line_shape);
	tcase_add_test(tc, test_err_names);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
