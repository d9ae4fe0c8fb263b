/* kz-sandbox classify.c: scripts that require root are host administration. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_classify.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	const char *text;
	enum kz_class want;
} cases[] = {
    {"#!/bin/sh\necho hello\n", KZ_CLASS_OK},
    {"#!/usr/bin/sudo /bin/sh\necho hi\n", KZ_CLASS_HOST_ADMIN},
    {"#!/usr/bin/env sudo bash\n", KZ_CLASS_HOST_ADMIN},
    {"#!/bin/sh\nsudo apt-get install x\n", KZ_CLASS_HOST_ADMIN},
    {"#!/bin/sh\nset -e; /usr/bin/sudo -n true\n", KZ_CLASS_HOST_ADMIN},
    {"make && sudo make install\n", KZ_CLASS_HOST_ADMIN},
    {"if true; then visudo -c; fi\n", KZ_CLASS_HOST_ADMIN},
    {"echo 'x ALL=(ALL) NOPASSWD: ALL' >> /etc/sudoers\n", KZ_CLASS_HOST_ADMIN},
    {"cp f /etc/sudoers.d/x\n", KZ_CLASS_HOST_ADMIN},
    {"if [ \"$EUID\" -ne 0 ]; then exit 1; fi\n", KZ_CLASS_HOST_ADMIN},
    {"[ \"$(id -u)\" -ne 0 ] && exit 1\n", KZ_CLASS_HOST_ADMIN},
    {"su -c 'id' root\n", KZ_CLASS_HOST_ADMIN},
    {"x=$(pkexec id)\n", KZ_CLASS_HOST_ADMIN},
    {"import os\nif os.geteuid() != 0: raise SystemExit\n",
        KZ_CLASS_HOST_ADMIN},
    {"import subprocess\nsubprocess.run([\"sudo\", \"ls\"])\n",
        KZ_CLASS_HOST_ADMIN},
    {"echo \"This script must be run as root\"\n", KZ_CLASS_HOST_ADMIN},
    /* Assignments, keywords and wrapper commands before the command. */
    {"FOO=1 sudo id\n", KZ_CLASS_HOST_ADMIN},
    {"A=1 B=\"x y\" /usr/bin/sudo id\n", KZ_CLASS_HOST_ADMIN},
    {"env A=1 sudo id\n", KZ_CLASS_HOST_ADMIN},
    {"env -i -u HOME sudo id\n", KZ_CLASS_HOST_ADMIN},
    {"nice -n 5 sudo id\n", KZ_CLASS_HOST_ADMIN},
    {"timeout 5s sudo id\n", KZ_CLASS_HOST_ADMIN},
    {"find . | xargs -0 sudo rm\n", KZ_CLASS_HOST_ADMIN},
    {"if sudo -n true; then :; fi\n", KZ_CLASS_HOST_ADMIN},
    {"while doas id; do :; done\n", KZ_CLASS_HOST_ADMIN},
    {"exec sudo id\n", KZ_CLASS_HOST_ADMIN},
    /* Words that merely contain the names, and comments, are fine. */
    {"FOO=sudo make\n", KZ_CLASS_OK},
    {"echo sudo\n", KZ_CLASS_OK},
    {"timeout 5 make test\n", KZ_CLASS_OK},
    {"#!/bin/sh\n# we never use sudo here\necho pseudo sudoku\n", KZ_CLASS_OK},
    {"grep -r suffix .\nsummary=1\n", KZ_CLASS_OK},
    {"echo --sudo-less flag\n", KZ_CLASS_OK},
    {"", KZ_CLASS_OK},
};

START_TEST(test_table)
{
	char why[256] = "";

	ck_assert_msg(kz_classify(cases[_i].text, strlen(cases[_i].text), why,
	                  sizeof(why)) == cases[_i].want,
	    "case %d: %s", _i, cases[_i].text);
	if (cases[_i].want == KZ_CLASS_HOST_ADMIN)
		ck_assert(strncmp(why, "host_administration", 19) == 0);
}
END_TEST

START_TEST(test_nul)
{
	static const char t[] = "echo ok\0\nsudo id\n";
	static const char u[] = "echo ok\0sudo id\n";
	char why[256];

	/* bash and perl read on after a NUL byte: what follows one is
	 * classified like any other line (it used to be skipped). */
	ck_assert(kz_classify(t, sizeof(t) - 1, why, sizeof(why)) ==
	    KZ_CLASS_HOST_ADMIN);
	ck_assert(kz_classify(u, sizeof(u) - 1, why, sizeof(why)) ==
	    KZ_CLASS_HOST_ADMIN);
}
END_TEST

START_TEST(test_file)
{
	char dir[] = "/tmp/kzclass.XXXXXX", p[64], why[256];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	/* The whole file is read: a sudo line after 2 MiB of comments is
	 * found (only the first 1 MiB used to be checked). */
	snprintf(p, sizeof(p), "%s/big.sh", dir);
	f = fopen(p, "w");
	for (int i = 0; i < 2 * 1024 * 16; i++)
		fprintf(f, "# %61s\n", "padding");
	fputs("sudo id\n", f);
	fclose(f);
	ck_assert_int_eq(kz_classify_file(p, why, sizeof(why)),
	    KZ_CLASS_HOST_ADMIN);
	unlink(p);
	snprintf(p, sizeof(p), "%s/ok.py", dir);
	f = fopen(p, "w");
	fputs("print('hello')\n", f);
	fclose(f);
	ck_assert_int_eq(kz_classify_file(p, why, sizeof(why)), KZ_CLASS_OK);
	unlink(p);
	/* Not a regular file, or missing: no verdict, an error. */
	snprintf(p, sizeof(p), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	ck_assert_int_eq(kz_classify_file(p, why, sizeof(why)),
	    KZ_EPATH_NOTREG);
	unlink(p);
	ck_assert_int_lt(kz_classify_file(p, why, sizeof(why)), 0);
	rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("classify");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_table, 0,
	    sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_nul);
	tcase_add_test(tc, test_file);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
