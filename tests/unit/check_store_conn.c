/* lib/store_conn.c: the store address syntax against a table of hostile
 * and good addresses, which addresses count as this host, the password
 * file's checks (mode, owner, type, content), the host scope, and the
 * cluster redirect parser. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_store.h"
#include "store_int.h"
#include "kz_check.h"
#include "banned.h"

static const char *const bad_addr[] = {
    "",
    "relative/path.sock",
    "unix:",
    "unix:relative",
    "tcp:",
    "tcp:127.0.0.1",
    "tcp:127.0.0.1:",
    "tcp:127.0.0.1:0",
    "tcp:127.0.0.1:65536",
    "tcp:127.0.0.1:6379x",
    "tcp:127.0.0.1:-1",
    "tcp::6379",
    "tcp:localhost:6379",
    "tcp:store.example:6379",
    "tcp:[::1:6379",
    "tcp:[::1]6379",
    "tcp:10.255.77.1:6379 ",
    "tcp:10.255.77.1:6379\n",
    "sentinel:",
    "sentinel:10.0.0.1:26379",
    "sentinel:10.0.0.1:26379/",
    "sentinel:/kzp",
    "sentinel:10.0.0.1:26379,/kzp",
    "sentinel:10.0.0.1:26379/kz{p}",
    "sentinel:10.0.0.1:26379/kz p",
    "sentinel:10.0.0.1:1,10.0.0.1:2,10.0.0.1:3,10.0.0.1:4,10.0.0.1:5,"
    "10.0.0.1:6,10.0.0.1:7,10.0.0.1:8,10.0.0.1:9/kzp",
    NULL,
};

START_TEST(test_addr_bad)
{
	struct kz_store_addr a;
	char why[200];
	int i;

	for (i = 0; bad_addr[i] != NULL; i++) {
		why[0] = '\0';
		ck_assert_msg(kz_store_addr_parse(bad_addr[i], &a, why,
		                  sizeof(why)) == KZ_EINVAL,
		    "accepted '%s'", bad_addr[i]);
		ck_assert_msg(strstr(why, "tcp:HOST:PORT") != NULL, "why: %s",
		    why);
	}
}
END_TEST

START_TEST(test_addr_good)
{
	struct kz_store_addr a;

	ck_assert(
	    kz_store_addr_parse("/run/kaizen/store.sock", &a, NULL, 0) == 0);
	ck_assert(a.kind == KZ_STORE_UNIX);
	ck_assert_str_eq(a.path, "/run/kaizen/store.sock");
	ck_assert(kz_store_addr_parse("unix:/x.sock", &a, NULL, 0) == 0);
	ck_assert_str_eq(a.path, "/x.sock");
	ck_assert(kz_store_addr_local(&a));
	ck_assert(kz_store_addr_parse("tcp:10.1.2.3:6380", &a, NULL, 0) == 0);
	ck_assert(a.kind == KZ_STORE_TCP && a.n == 1 && a.hp[0].port == 6380);
	ck_assert_str_eq(a.hp[0].host, "10.1.2.3");
	ck_assert(!kz_store_addr_local(&a));
	ck_assert(kz_store_addr_parse("tcp:[::1]:7", &a, NULL, 0) == 0);
	ck_assert_str_eq(a.hp[0].host, "::1");
	ck_assert(kz_store_addr_local(&a));
	ck_assert(kz_store_addr_parse("tcp:127.0.0.9:7", &a, NULL, 0) == 0);
	ck_assert(kz_store_addr_local(&a));
	ck_assert(kz_store_addr_parse("sentinel:127.0.0.1:26379,[fd00::2]:"
	                              "26380/kz-p.1",
	              &a, NULL, 0) == 0);
	ck_assert(a.kind == KZ_STORE_SENTINEL && a.n == 2);
	ck_assert_str_eq(a.name, "kz-p.1");
	ck_assert_str_eq(a.hp[1].host, "fd00::2");
	ck_assert_int_eq(a.hp[1].port, 26380);
	/* One sentinel off this host makes the whole address remote. */
	ck_assert(!kz_store_addr_local(&a));
}
END_TEST

static char dir[64];

static const char *
pwfile(const char *body, mode_t mode)
{
	static char p[128];
	FILE *f;

	snprintf(p, sizeof(p), "%s/pw", dir);
	unlink(p);
	ck_assert((f = fopen(p, "w")) != NULL);
	fputs(body, f);
	fclose(f);
	ck_assert(chmod(p, mode) == 0);
	return p;
}

START_TEST(test_auth_file)
{
	char why[200];
	const char *av[3];
	char link[160];

	snprintf(dir, sizeof(dir), "/tmp/kz-sc.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	kz_store_auth_clear();
	ck_assert_int_eq(kz_store_auth_argv(av), 0);
	ck_assert(kz_store_auth_load("kz", pwfile("s3cret\n", 0600), why,
	              sizeof(why)) == 0);
	ck_assert_int_eq(kz_store_auth_argv(av), 3);
	ck_assert_str_eq(av[1], "kz");
	ck_assert_str_eq(av[2], "s3cret");
	ck_assert(kz_store_auth_set());
	/* Readable by group or others, empty, two lines, a symlink, a
	 * directory, missing: refused, the password in no reason. */
	ck_assert(kz_store_auth_load("kz", pwfile("s3cret", 0640), why,
	              sizeof(why)) == KZ_ECONF);
	ck_assert(strstr(why, "not readable by group or others") != NULL);
	ck_assert(kz_store_auth_load("kz", pwfile("s3cret", 0604), why,
	              sizeof(why)) == KZ_ECONF);
	ck_assert(kz_store_auth_load("kz", pwfile("", 0600), why,
	              sizeof(why)) == KZ_ECONF);
	ck_assert(kz_store_auth_load("kz", pwfile("\n", 0600), why,
	              sizeof(why)) == KZ_ECONF);
	ck_assert(kz_store_auth_load("kz", pwfile("s3cret\nmore\n", 0600), why,
	              sizeof(why)) == KZ_ECONF);
	ck_assert(strstr(why, "s3cret") == NULL);
	snprintf(link, sizeof(link), "%s/ln", dir);
	ck_assert(symlink(pwfile("s3cret", 0600), link) == 0);
	ck_assert(kz_store_auth_load("kz", link, why, sizeof(why)) == KZ_ECONF);
	ck_assert(kz_store_auth_load("kz", dir, why, sizeof(why)) == KZ_ECONF);
	ck_assert(kz_store_auth_load("kz", "/nonexistent/pw", why,
	              sizeof(why)) == KZ_ECONF);
	/* A bad user name. */
	ck_assert(kz_store_auth_load("k z", pwfile("s3cret", 0600), why,
	              sizeof(why)) == KZ_ECONF);
	ck_assert(kz_store_auth_load("", pwfile("s3cret", 0600), why,
	              sizeof(why)) == KZ_ECONF);
	/* The refusals left the first credentials in place. */
	ck_assert_int_eq(kz_store_auth_argv(av), 3);
	ck_assert_str_eq(av[2], "s3cret");
	kz_store_auth_clear();
	ck_assert(!kz_store_auth_set());
	unlink(link);
	unlink(pwfile("", 0600));
	rmdir(dir);
}
END_TEST

START_TEST(test_scope_and_moved)
{
	struct kz_store_addr a;

	ck_assert(kz_store_scope_set("host-1.a_b") == 0);
	ck_assert_str_eq(kz_store_scope(), "host-1.a_b");
	ck_assert(kz_store_scope_set("h{x}") == KZ_EINVAL);
	ck_assert(kz_store_scope_set("h:x") == KZ_EINVAL);
	ck_assert_str_eq(kz_store_scope(), "host-1.a_b");
	ck_assert(kz_store_scope_set("") == 0);
	ck_assert(kz_store_moved("MOVED 5718 127.0.0.1:7002", &a));
	ck_assert(a.kind == KZ_STORE_TCP && a.hp[0].port == 7002);
	ck_assert(kz_store_moved("MOVED 1 fd00::1:7002", &a));
	ck_assert_str_eq(a.hp[0].host, "fd00::1");
	ck_assert(!kz_store_moved("MOVED 1 host.example:7002", &a));
	ck_assert(!kz_store_moved("MOVED 1", &a));
	ck_assert(!kz_store_moved("ASK 1 127.0.0.1:7002", &a));
	ck_assert(kz_store_err_tryagain("TRYAGAIN Multiple keys request"));
	ck_assert(!kz_store_err_tryagain("ERR TRYAGAIN"));
	ck_assert(kz_store_err_moved_primary("READONLY You can't write"));
	ck_assert(
	    kz_store_err_moved_primary("CLUSTERDOWN The cluster is down"));
	ck_assert(!kz_store_err_moved_primary("ERR unknown"));
}
END_TEST

/* ASK names a slot and a node; anything else is not followed. */
START_TEST(test_ask)
{
	static const char *const bad[] = {"ASK", "ASK 1", "ASK x 127.0.0.1:1",
	    "ASK 16384 127.0.0.1:7002", "ASK -1 127.0.0.1:7002",
	    "ASK 1 host.example:7002", "ASK 1 127.0.0.1:0",
	    "ASK 1 127.0.0.1:70000", "ASK 1 :7002", "MOVED 1 127.0.0.1:7002",
	    "ASK  1 127.0.0.1:7002", NULL};
	struct kz_store_addr a;
	int slot = -1, i;

	ck_assert(kz_store_ask("ASK 5718 127.0.0.1:7003", &slot, &a));
	ck_assert_int_eq(slot, 5718);
	ck_assert(a.kind == KZ_STORE_TCP && a.hp[0].port == 7003);
	ck_assert_str_eq(a.hp[0].host, "127.0.0.1");
	ck_assert(kz_store_ask("ASK 0 fd00::2:6379", &slot, &a));
	ck_assert_int_eq(slot, 0);
	ck_assert_str_eq(a.hp[0].host, "fd00::2");
	for (i = 0; bad[i] != NULL; i++)
		ck_assert_msg(!kz_store_ask(bad[i], &slot, &a), "%s", bad[i]);
	ck_assert(!kz_store_moved("ASK 1 127.0.0.1:7002", &a));
}
END_TEST

/* The backoff doubles from 10 ms to a ceiling of 160 ms. */
START_TEST(test_migrate_delay)
{
	static const int want[] = {10, 20, 40, 80, 160, 160, 160};
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_int_eq(kz_store_migrate_delay((int)i), want[i]);
	ck_assert_int_eq(kz_store_migrate_delay(1000), 160);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("store_conn");
	TCase *tc = tcase_create("conn");

	tcase_add_test(tc, test_addr_bad);
	tcase_add_test(tc, test_addr_good);
	tcase_add_test(tc, test_auth_file);
	tcase_add_test(tc, test_scope_and_moved);
	tcase_add_test(tc, test_ask);
	tcase_add_test(tc, test_migrate_delay);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
