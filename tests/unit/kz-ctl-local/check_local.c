/*
 * The local controller without kz-lease: a create makes the worker's
 * directory, gives it an id of its own and starts the worker with the
 * runtime asked for in SANDBOX_RUNTIME; a refused create (unknown runtime,
 * bad id, no id left) leaves nothing behind; the inventory is the set of
 * worker directories, whole or refused; delete stops the worker, found by
 * its command line whatever its pid file says, and confirms its absence.
 * The worker is a shell script standing in for kz-sandbox.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "ctl.h"
#include "kz_check.h"
#include "banned.h"

static char top[64];
static struct ctl_conf conf;

static void
setup(void)
{
	char p[PATH_MAX + 64];
	FILE *f;

	snprintf(top, sizeof(top), "/tmp/kz-ctl-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	memset(&conf, 0, sizeof(conf));
	snprintf(conf.workers_dir, sizeof(conf.workers_dir), "%s/workers", top);
	snprintf(conf.worker_bin, sizeof(conf.worker_bin), "%s/worker.sh", top);
	snprintf(conf.host_dir, sizeof(conf.host_dir), "%s/host", top);
	conf.ids_first = 2100200001;
	conf.ids_last = 2100200002;
	conf.frame_max = 1 << 20;
	/* reap and files (kz-sandbox's) answer at once; serve --id ID
	 * --socket WORKERS/ID/sock ...: it records its
	 * runtime and its ids beside its socket, then waits. */
	snprintf(p, sizeof(p), "%s", conf.worker_bin);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fprintf(f,
	    "#!/bin/sh\ncase $1 in reap) exit 0;; files) echo 1000; exit 0;; "
	    "esac\nd=$(dirname \"$5\")\n"
	    "echo \"$SANDBOX_RUNTIME $*\" >\"$d/seen.tmp\"\n"
	    "mv \"$d/seen.tmp\" \"$d/seen\"\n"
	    "while :; do sleep 0.2; done\n");
	fclose(f);
	ck_assert_int_eq(chmod(p, 0755), 0);
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

/* What the started worker recorded: "RUNTIME ARGS...". */
static void
seen(const char *id, char *out, size_t len)
{
	char p[PATH_MAX + 64];
	ssize_t n = 0;

	snprintf(p, sizeof(p), "%s/%s/seen", conf.workers_dir, id);
	for (int i = 0; i < 100 && (n = kz_read_small(p, out, len)) <= 0; i++)
		usleep(20000);
	ck_assert_int_gt(n, 0);
}

START_TEST(test_create_list_delete)
{
	static struct ctl_inv inv;
	char ep[PATH_MAX], why[256], s[4096], want[PATH_MAX + 16];

	/* The gvisor worker holds two. */
	conf.ids_last = 2100200003;
	ck_assert_int_eq(ctl_create(&conf, "wa", "gvisor", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	snprintf(want, sizeof(want), "%s/wa/sock", conf.workers_dir);
	ck_assert_str_eq(ep, want);
	seen("wa", s, sizeof(s));
	ck_assert_msg(strncmp(s, "gvisor serve --id wa ", 21) == 0, "%s", s);
	ck_assert_ptr_nonnull(strstr(s, "--uid 2100200001 --gid 2100200001"));
	ck_assert_ptr_nonnull(
	    strstr(s, "--gvisor-uid 2100200002 --gvisor-gid 2100200002"));
	ck_assert_int_eq(ctl_create(&conf, "wb", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	seen("wb", s, sizeof(s));
	ck_assert_msg(strncmp(s, "native ", 7) == 0, "%s", s);
	/* Each worker its own host ids; a native one has no second. */
	ck_assert_ptr_nonnull(strstr(s, "--uid 2100200003"));
	ck_assert_ptr_null(strstr(s, "--gvisor-uid"));
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, 2);
	ck_assert_int_eq(ctl_gone(&conf, "wa", why, sizeof(why)), 0);
	ck_assert_int_eq(ctl_delete(&conf, "wa", why, sizeof(why)), 0);
	snprintf(want, sizeof(want), "%s/wa", conf.workers_dir);
	ck_assert_int_ne(access(want, F_OK), 0);
	/* Deleting what is absent confirms its absence again. */
	ck_assert_int_eq(ctl_delete(&conf, "wa", why, sizeof(why)), 0);
	ck_assert_int_eq(ctl_delete(&conf, "wb", why, sizeof(why)), 0);
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, 0);
}
END_TEST

START_TEST(test_refusals_leave_nothing)
{
	static struct ctl_inv inv;
	char ep[PATH_MAX], why[256];

	ck_assert_int_eq(ctl_create(&conf, "wa", "kvm", ep, sizeof(ep), why,
	                     sizeof(why)),
	    KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "runtime"));
	ck_assert_int_eq(ctl_create(&conf, "../x", "native", ep, sizeof(ep),
	                     why, sizeof(why)),
	    KZ_EDENIED);
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, 0);
	/* Two ids in the range: the third create has none left. */
	ck_assert_int_eq(ctl_create(&conf, "w1", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(ctl_create(&conf, "w2", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(ctl_create(&conf, "w3", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    KZ_EDENIED);
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, 2);
	ck_assert_int_eq(ctl_delete(&conf, "w1", why, sizeof(why)), 0);
	ck_assert_int_eq(ctl_delete(&conf, "w2", why, sizeof(why)), 0);
}
END_TEST

/* A worker whose pid file is gone (a start that failed half-way) is still
 * found and stopped before its absence is confirmed. */
START_TEST(test_delete_without_pid_file)
{
	char ep[PATH_MAX], why[256], s[4096], p[PATH_MAX + 64], buf[32];
	int64_t pid;

	ck_assert_int_eq(ctl_create(&conf, "wa", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	seen("wa", s, sizeof(s));
	snprintf(p, sizeof(p), "%s/wa/pid", conf.workers_dir);
	for (int i = 0; i < 100 && kz_read_small(p, buf, sizeof(buf)) <= 0; i++)
		usleep(20000);
	ck_assert_int_gt(kz_read_small(p, buf, sizeof(buf)), 0);
	buf[strcspn(buf, "\n")] = '\0';
	ck_assert_int_eq(kz_parse_int(buf, 2, 1 << 22, &pid), 0);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(ctl_delete(&conf, "wa", why, sizeof(why)), 0);
	/* Gone, or a zombie for whoever reaps it: no command line. */
	snprintf(p, sizeof(p), "/proc/%lld/cmdline", (long long)pid);
	ck_assert_int_le(kz_read_small(p, s, sizeof(s)), 0);
}
END_TEST

/* The inventory is directories of ours; one that does not fit whole is
 * refused, never cut. */
START_TEST(test_inventory_whole)
{
	static struct ctl_inv inv;
	char p[PATH_MAX + 64], why[256];
	int fd;

	ck_assert_int_eq(mkdir(conf.workers_dir, 0755), 0);
	snprintf(p, sizeof(p), "%s/wlog", conf.workers_dir);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT, 0644), 0);
	close(fd);
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, 0);
	for (int i = 0; i <= CTL_INV_MAX; i++) {
		snprintf(p, sizeof(p), "%s/w%04d", conf.workers_dir, i);
		ck_assert_int_eq(mkdir(p, 0755), 0);
	}
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), KZ_EUNAVAIL);
	ck_assert_ptr_nonnull(strstr(why, "does not fit"));
	snprintf(p, sizeof(p), "%s/w0000", conf.workers_dir);
	ck_assert_int_eq(rmdir(p), 0);
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, CTL_INV_MAX);
}
END_TEST

/* A workers directory others may write is refused: nothing is made in
 * it. */
START_TEST(test_workers_dir_ours)
{
	static struct ctl_inv inv;
	char ep[PATH_MAX], why[256];

	ck_assert_int_eq(mkdir(conf.workers_dir, 0777), 0);
	ck_assert_int_eq(chmod(conf.workers_dir, 0777), 0);
	ck_assert_int_eq(ctl_create(&conf, "wa", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "not ours alone"));
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, 0);
}
END_TEST

/* Two workers directories (two deployments) of one host record: the
 * second's worker gets the other id, a third has none left, and a delete
 * whose directory names the other's id kills nothing. */
START_TEST(test_two_workers_dirs)
{
	static struct ctl_conf other;
	char ep[PATH_MAX], why[256], s[4096], p[PATH_MAX + 64];
	FILE *f;

	other = conf;
	snprintf(other.workers_dir, sizeof(other.workers_dir), "%s/other", top);
	ck_assert_int_eq(ctl_create(&conf, "wa", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(ctl_create(&other, "wa", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	seen("wa", s, sizeof(s));
	ck_assert_ptr_nonnull(strstr(s, "--uid 2100200001"));
	snprintf(p, sizeof(p), "%s/wa/ids", other.workers_dir);
	ck_assert_int_gt(kz_read_small(p, s, sizeof(s)), 0);
	ck_assert_str_eq(s, "2100200002\n");
	ck_assert_int_eq(ctl_create(&other, "wb", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    KZ_EDENIED);
	ck_assert_ptr_nonnull(strstr(why, "no free worker id"));
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fprintf(f, "2100200001\n");
	fclose(f);
	ck_assert_int_eq(ctl_delete(&other, "wa", why, sizeof(why)),
	    KZ_EDENIED);
	ck_assert_msg(strstr(why, "uid 2100200001 is another worker's") != NULL,
	    "%s", why);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fprintf(f, "2100200002\n");
	fclose(f);
	ck_assert_int_eq(ctl_delete(&other, "wa", why, sizeof(why)), 0);
	ck_assert_int_eq(ctl_delete(&conf, "wa", why, sizeof(why)), 0);
}
END_TEST

/* A gvisor worker with no second uid free is refused, and its first is
 * free again. */
START_TEST(test_gvisor_second_refused)
{
	static struct ctl_inv inv;
	char ep[PATH_MAX], why[256], s[4096];

	conf.ids_last = 2100200001;
	ck_assert_int_eq(ctl_create(&conf, "wa", "gvisor", ep, sizeof(ep), why,
	                     sizeof(why)),
	    KZ_EDENIED);
	ck_assert_msg(strstr(why, "no free worker id") != NULL, "%s", why);
	ck_assert_int_eq(ctl_list(&conf, &inv, why, sizeof(why)), 0);
	ck_assert_int_eq((int)inv.n, 0);
	ck_assert_int_eq(ctl_create(&conf, "wb", "native", ep, sizeof(ep), why,
	                     sizeof(why)),
	    0);
	seen("wb", s, sizeof(s));
	ck_assert_ptr_nonnull(strstr(s, "--uid 2100200001"));
	ck_assert_int_eq(ctl_delete(&conf, "wb", why, sizeof(why)), 0);
}
END_TEST

START_TEST(test_runtime_names)
{
	ck_assert(ctl_runtime_ok("native"));
	ck_assert(ctl_runtime_ok("gvisor"));
	ck_assert(!ctl_runtime_ok(""));
	ck_assert(!ctl_runtime_ok("Native"));
	ck_assert(!ctl_runtime_ok("runsc"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-ctl-local");
	TCase *tc = tcase_create("local");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_create_list_delete);
	tcase_add_test(tc, test_refusals_leave_nothing);
	tcase_add_test(tc, test_gvisor_second_refused);
	tcase_add_test(tc, test_runtime_names);
	tcase_add_test(tc, test_delete_without_pid_file);
	tcase_add_test(tc, test_inventory_whole);
	tcase_add_test(tc, test_workers_dir_ours);
	tcase_add_test(tc, test_two_workers_dirs);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
