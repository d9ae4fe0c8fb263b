/* kz-sandbox classify.c: scripts that require root are host administration. */
#include <check.h>
#include <string.h>

#include "sbx.h"
#include "banned.h"

static const struct {
	const char *text;
	enum sbx_class want;
} cases[] = {
	{"#!/bin/sh\necho hello\n", SBX_CLASS_OK},
	{"#!/usr/bin/sudo /bin/sh\necho hi\n", SBX_CLASS_HOST_ADMIN},
	{"#!/usr/bin/env sudo bash\n", SBX_CLASS_HOST_ADMIN},
	{"#!/bin/sh\nsudo apt-get install x\n", SBX_CLASS_HOST_ADMIN},
	{"#!/bin/sh\nset -e; /usr/bin/sudo -n true\n", SBX_CLASS_HOST_ADMIN},
	{"make && sudo make install\n", SBX_CLASS_HOST_ADMIN},
	{"if true; then visudo -c; fi\n", SBX_CLASS_HOST_ADMIN},
	{"echo 'x ALL=(ALL) NOPASSWD: ALL' >> /etc/sudoers\n",
	    SBX_CLASS_HOST_ADMIN},
	{"cp f /etc/sudoers.d/x\n", SBX_CLASS_HOST_ADMIN},
	{"if [ \"$EUID\" -ne 0 ]; then exit 1; fi\n", SBX_CLASS_HOST_ADMIN},
	{"[ \"$(id -u)\" -ne 0 ] && exit 1\n", SBX_CLASS_HOST_ADMIN},
	{"su -c 'id' root\n", SBX_CLASS_HOST_ADMIN},
	{"x=$(pkexec id)\n", SBX_CLASS_HOST_ADMIN},
	{"import os\nif os.geteuid() != 0: raise SystemExit\n",
	    SBX_CLASS_HOST_ADMIN},
	{"import subprocess\nsubprocess.run([\"sudo\", \"ls\"])\n",
	    SBX_CLASS_HOST_ADMIN},
	{"echo \"This script must be run as root\"\n", SBX_CLASS_HOST_ADMIN},
	/* Words that merely contain the names, and comments, are fine. */
	{"#!/bin/sh\n# we never use sudo here\necho pseudo sudoku\n",
	    SBX_CLASS_OK},
	{"grep -r suffix .\nsummary=1\n", SBX_CLASS_OK},
	{"echo --sudo-less flag\n", SBX_CLASS_OK},
	{"", SBX_CLASS_OK},
};

START_TEST(test_table)
{
	char why[256] = "";

	ck_assert_msg(sbx_classify(cases[_i].text, strlen(cases[_i].text), why,
	    sizeof(why)) == cases[_i].want, "case %d: %s", _i, cases[_i].text);
	if (cases[_i].want == SBX_CLASS_HOST_ADMIN)
		ck_assert(strncmp(why, "host_administration", 19) == 0);
}
END_TEST

START_TEST(test_nul)
{
	static const char t[] = "echo ok\0sudo x\n";
	char why[256];

	/* Text after a NUL is not a script line a shell would run, but a
	 * file with one is treated by its prefix only. */
	ck_assert(sbx_classify(t, sizeof(t) - 1, why, sizeof(why)) ==
	    SBX_CLASS_OK);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-classify");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nf;

	tcase_add_loop_test(tc, test_table, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_nul);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
