/* kz-reset evidence.c: cgroup.procs text, the projection wipe (never
 * following a symlink out of it), and the list of missing evidence. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reset.h"
#include "banned.h"

START_TEST(test_procs_only)
{
	ck_assert(evidence_procs_only("123\n", 123));
	ck_assert(!evidence_procs_only("", 123));
	ck_assert(!evidence_procs_only("123\n456\n", 123));
	ck_assert(!evidence_procs_only("456\n123\n", 123));
	ck_assert(!evidence_procs_only("1234\n", 123));
	ck_assert(!evidence_procs_only("123", 123));
}
END_TEST

static void
touch(const char *p)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert(fd >= 0);
	ck_assert(write(fd, "x", 1) == 1);
	close(fd);
}

START_TEST(test_projection_wipe)
{
	char d[64], p[160], out[160], cmd[160];
	struct stat sb;

	snprintf(d, sizeof(d), "/tmp/kz-reset-unit.XXXXXX");
	ck_assert(mkdtemp(d) != NULL);
	snprintf(out, sizeof(out), "%s/outside", d);
	ck_assert(mkdir(out, 0755) == 0);
	snprintf(p, sizeof(p), "%s/outside/keep", d);
	touch(p);
	snprintf(p, sizeof(p), "%s/proj", d);
	ck_assert(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/proj/f", d);
	touch(p);
	chmod(p, 0444);
	snprintf(p, sizeof(p), "%s/proj/sub", d);
	ck_assert(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/proj/sub/g", d);
	touch(p);
	/* Links to a directory and a file outside: removed, not followed. */
	snprintf(p, sizeof(p), "%s/proj/sub/dirlink", d);
	ck_assert(symlink(out, p) == 0);
	snprintf(p, sizeof(p), "%s/proj/filelink", d);
	snprintf(cmd, sizeof(cmd), "%s/outside/keep", d);
	ck_assert(symlink(cmd, p) == 0);
	snprintf(p, sizeof(p), "%s/proj", d);
	ck_assert(evidence_projection(p));
	ck_assert(stat(cmd, &sb) == 0);
	/* A projection path that is itself a symlink is not evidence. */
	snprintf(p, sizeof(p), "%s/projlink", d);
	ck_assert(symlink(out, p) == 0);
	ck_assert(!evidence_projection(p));
	ck_assert(stat(cmd, &sb) == 0);
	snprintf(p, sizeof(p), "%s/absent", d);
	ck_assert(!evidence_projection(p));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d);
	ck_assert(system(cmd) == 0);
}
END_TEST

START_TEST(test_missing)
{
	cJSON *ev = cJSON_CreateObject(), *m;

	cJSON_AddBoolToObject(ev, "wipe_ok", true);
	cJSON_AddBoolToObject(ev, "health_id", false);
	cJSON_AddNumberToObject(ev, "count", 0);
	cJSON_AddBoolToObject(ev, "projection_empty", false);
	m = evidence_missing(ev);
	ck_assert_int_eq(cJSON_GetArraySize(m), 2);
	ck_assert_str_eq(cJSON_GetArrayItem(m, 0)->valuestring, "health_id");
	ck_assert_str_eq(cJSON_GetArrayItem(m, 1)->valuestring,
	    "projection_empty");
	cJSON_Delete(m);
	cJSON_Delete(ev);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("reset-evidence");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nf;

	tcase_add_test(tc, test_procs_only);
	tcase_add_test(tc, test_projection_wipe);
	tcase_add_test(tc, test_missing);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
