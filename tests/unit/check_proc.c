/* lib/proc.c: the pids a predicate picks, and a uid's live processes (a
 * zombie is not one). */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kz_proc.h"
#include "kz_check.h"
#include "banned.h"

/* A uid no one on a test host runs as. */
#define UID 2099888777

static bool
is_pid(pid_t pid, const void *arg)
{
	return pid == *(const pid_t *)arg;
}

START_TEST(test_pids)
{
	pid_t me = getpid(), out[2] = {0, 0};

	ck_assert_int_eq(kz_proc_pids(is_pid, &me, out, 2), 1);
	ck_assert_int_eq(out[0], me);
	ck_assert_int_eq(kz_proc_pids(is_pid, &me, NULL, 0), 0);
}
END_TEST

/* A child as UID: 1 while it runs, 0 once it is a zombie. */
START_TEST(test_uid_live)
{
	int p[2], st;
	pid_t pid;
	char c;

	ck_assert_int_eq(kz_proc_uid_live(UID, 1000), 0);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_ge(pid = fork(), 0);
	if (pid == 0) {
		close(p[0]);
		if (setresuid(UID, UID, UID) != 0)
			_exit(1);
		(void)!write(p[1], "x", 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	ck_assert_int_eq(kz_proc_uid_live(UID, 1000), 1);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	/* Dead but not reaped: a zombie, which holds no per-user limit. */
	ck_assert_int_eq(waitid(P_PID, pid, NULL, WEXITED | WNOWAIT), 0);
	ck_assert_int_eq(kz_proc_uid_live(UID, 1000), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	close(p[0]);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("proc");
	TCase *tc = tcase_create("proc");

	tcase_add_test(tc, test_pids);
	tcase_add_test(tc, test_uid_live);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
