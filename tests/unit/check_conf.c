/* Config parsing: fail closed on anything malformed; env overrides file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_check.h"
#include "banned.h"

static const char *const known[] = {"KZ_A", "KZ_B", "KZ_SIZE", "KZ_ON", NULL};

static char *
write_tmp(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/kzconf.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

struct ccase {
	const char *text;
	int want;
};

static const struct ccase ccases[] = {
    {"KZ_A = 1\n# comment\n\nKZ_B=two words \n", 0},
    {"KZ_A = 1", 0},
    {"KZ_A 1\n", KZ_ECONF},
    {"KZ_C = 1\n", KZ_ECONF},
    {"kz_a = 1\n", KZ_ECONF},
    {"KZ_A = 1\nKZ_A = 2\n", KZ_ECONF},
    {" = 1\n", KZ_ECONF},
    {"KZ_A-B = 1\n", KZ_ECONF},
};

START_TEST(test_conf_table)
{
	char *p = write_tmp(ccases[_i].text), why[128] = "";
	struct kz_conf *c = NULL;
	int r = kz_conf_load(p, known, &c, why, sizeof(why));

	ck_assert_msg(r == ccases[_i].want, "case %d: %s (%s)", _i,
	    kz_errname(r), why);
	if (r != 0)
		ck_assert(why[0] != '\0');
	kz_conf_free(c);
	unlink(p);
}
END_TEST

START_TEST(test_conf_values)
{
	char *p = write_tmp("KZ_A = 7\nKZ_B = file\nKZ_SIZE = 64M\n"
	                    "KZ_ON = off\n"),
	     why[128];
	struct kz_conf *c;
	int64_t n;
	uint64_t sz;
	bool b;

	ck_assert_int_eq(kz_conf_load(p, known, &c, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_conf_int(c, "KZ_A", 0, 0, 10, &n, why, sizeof(why)),
	    0);
	ck_assert_int_eq(n, 7);
	ck_assert_int_eq(kz_conf_int(c, "KZ_A", 0, 0, 5, &n, why, sizeof(why)),
	    KZ_ECONF);
	ck_assert_int_eq(kz_conf_int(c, "KZ_B", 0, 0, 5, &n, why, sizeof(why)),
	    KZ_ECONF);
	ck_assert_int_eq(kz_conf_size(c, "KZ_SIZE", 0, UINT64_MAX, &sz, why,
	                     sizeof(why)),
	    0);
	ck_assert_uint_eq(sz, 64u << 20);
	ck_assert_int_eq(kz_conf_bool(c, "KZ_ON", true, &b, why, sizeof(why)),
	    0);
	ck_assert(!b);
	ck_assert_str_eq(kz_conf_str(c, "KZ_B", "d"), "file");
	ck_assert_str_eq(kz_conf_origin(c, "KZ_B"), "file");
	setenv("KZ_B", "env", 1);
	ck_assert_str_eq(kz_conf_str(c, "KZ_B", "d"), "env");
	ck_assert_str_eq(kz_conf_origin(c, "KZ_B"), "env");
	unsetenv("KZ_B");
	ck_assert_str_eq(kz_conf_str(NULL, "KZ_B", "d"), "d");
	{
		char out[16];

		/* A path setting: the value, else dir/default, else the
		 * default; too long for out names the key. */
		ck_assert_int_eq(kz_conf_copy(c, "KZ_B", "/run", "x", out,
		                     sizeof(out), why, sizeof(why)),
		    0);
		ck_assert_str_eq(out, "file");
		ck_assert_int_eq(kz_conf_copy(c, "KZ_NONE", "/run", "x.sock",
		                     out, sizeof(out), why, sizeof(why)),
		    0);
		ck_assert_str_eq(out, "/run/x.sock");
		ck_assert_int_eq(kz_conf_copy(c, "KZ_NONE", NULL, "", out,
		                     sizeof(out), why, sizeof(why)),
		    0);
		ck_assert_str_eq(out, "");
		ck_assert_int_eq(kz_conf_copy(c, "KZ_NONE", "/a/long/run/dir",
		                     "x.sock", out, sizeof(out), why,
		                     sizeof(why)),
		    KZ_ECONF);
		ck_assert_str_eq(why, "KZ_NONE is too long");
	}
	kz_conf_free(c);
	unlink(p);
	ck_assert_int_eq(kz_conf_load("/nonexistent/kz.conf", known, &c, why,
	                     sizeof(why)),
	    KZ_ECONF);
	ck_assert_int_eq(kz_conf_load("/tmp", known, &c, why, sizeof(why)),
	    KZ_ECONF);
}
END_TEST

START_TEST(test_parse_numbers)
{
	int64_t v;
	uint64_t u;

	ck_assert_int_eq(kz_parse_int("12", 0, 20, &v), 0);
	ck_assert_int_eq(kz_parse_int("-3", -5, 20, &v), 0);
	ck_assert_int_eq(kz_parse_int("", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int(" 1", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("1x", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("0x10", 0, 20, &v), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("99999999999999999999", 0, INT64_MAX, &v),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_parse_int("21", 0, 20, &v), KZ_ERANGE);
	ck_assert_int_eq(kz_parse_size("1K", 4096, &u), 0);
	ck_assert_uint_eq(u, 1024);
	ck_assert_int_eq(kz_parse_size("5K", 4096, &u), KZ_ERANGE);
	ck_assert_int_eq(kz_parse_size("1KB", 4096, &u), KZ_EINVAL);
	ck_assert_int_eq(kz_parse_size("-1", 4096, &u), KZ_EINVAL);
}
END_TEST

/*
 * The one socket rule: RUN/NAME/NAME.sock when RUN/NAME is a directory,
 * else RUN/NAME.sock; a name with a slash or an empty one is refused, and
 * a path that does not fit is an error, not a truncation.  With file,
 * kz_sock_in: the same rule for another file of the daemon.
 */
struct scase {
	const char *name;
	bool mkdir, mkfile;
	size_t len;
	int want;
	const char *leaf; /* expected, after "RUN/" */
	const char *file; /* kz_sock_in's, or NULL: kz_sock_default */
};

static const struct scase scases[] = {
    {"kz-audit", false, false, 256, 0, "kz-audit.sock", NULL},
    {"kz-audit", true, false, 256, 0, "kz-audit/kz-audit.sock", NULL},
    {"store", true, false, 256, 0, "store/store.sock", NULL},
    /* A file of that name is no directory: the flat layout. */
    {"kz-lease", false, true, 256, 0, "kz-lease.sock", NULL},
    {"", false, false, 256, KZ_EINVAL, NULL, NULL},
    {"../x", false, false, 256, KZ_EINVAL, NULL, NULL},
    {"a/b", false, false, 256, KZ_EINVAL, NULL, NULL},
    {"kz-project", false, false, 8, KZ_ERANGE, NULL, NULL},
    {"kz-project", true, false, 30, KZ_ERANGE, NULL, NULL},
    {"kz-egress", true, false, 256, 0, "kz-egress/kz-egress-status.sock",
        "kz-egress-status.sock"},
    {"kz-egress", false, false, 256, 0, "kz-egress-status.sock",
        "kz-egress-status.sock"},
    {"kz-egress", true, false, 256, KZ_EINVAL, NULL, "../x.sock"},
    {"kz-egress", false, false, 256, KZ_EINVAL, NULL, ""},
    {"../x", false, false, 256, KZ_EINVAL, NULL, "x.sock"},
};

START_TEST(test_sock_default)
{
	const struct scase *sc = &scases[_i];
	char run[] = "/tmp/kzrun.XXXXXX", sub[128], want[256], out[256];
	int r;

	ck_assert_ptr_nonnull(mkdtemp(run));
	snprintf(sub, sizeof(sub), "%s/%s", run, sc->name);
	if (sc->mkdir)
		ck_assert_int_eq(mkdir(sub, 0700), 0);
	if (sc->mkfile)
		fclose(fopen(sub, "w"));
	memset(out, 'x', sizeof(out));
	r = sc->file != NULL ?
	    kz_sock_in(run, sc->name, sc->file, out, sc->len) :
	    kz_sock_default(run, sc->name, out, sc->len);
	ck_assert_msg(r == sc->want, "case %d: %s", _i, kz_errname(r));
	if (sc->leaf != NULL) {
		snprintf(want, sizeof(want), "%s/%s", run, sc->leaf);
		ck_assert_str_eq(out, want);
	}
	if (sc->mkdir)
		rmdir(sub);
	if (sc->mkfile)
		unlink(sub);
	rmdir(run);
}
END_TEST

/* KZ_AUDIT and KZ_AUDIT_SOCKET from the environment over the rule. */
struct acase {
	const char *audit, *sock;
	int want;
	const char *out; /* NULL: RUN/kz-audit.sock */
};

static const struct acase acases[] = {
    {NULL, NULL, 0, NULL},
    {"on", NULL, 0, NULL},
    {"yes", "/s/a.sock", 0, "/s/a.sock"},
    {"off", NULL, 0, ""},
    {"off", "/s/a.sock", 0, ""},
    {"0", "", 0, ""},
    {NULL, "", KZ_ECONF, NULL},
    {"on", "", KZ_ECONF, NULL},
    {"maybe", NULL, KZ_ECONF, NULL},
    {"", NULL, KZ_ECONF, NULL},
};

START_TEST(test_conf_audit)
{
	const struct acase *ac = &acases[_i];
	static const char *const keys[] = {"KZ_AUDIT", "KZ_AUDIT_SOCKET", NULL};
	struct kz_conf *c = NULL;
	char out[128] = "?", why[160] = "";
	int r;

	unsetenv("KZ_AUDIT");
	unsetenv("KZ_AUDIT_SOCKET");
	if (ac->audit != NULL)
		setenv("KZ_AUDIT", ac->audit, 1);
	if (ac->sock != NULL)
		setenv("KZ_AUDIT_SOCKET", ac->sock, 1);
	ck_assert_int_eq(kz_conf_load(NULL, keys, &c, why, sizeof(why)), 0);
	r = kz_conf_audit(c, "/nonexistent-run", out, sizeof(out), why,
	    sizeof(why));
	ck_assert_msg(r == ac->want, "case %d: %s (%s)", _i, kz_errname(r),
	    why);
	if (r != 0)
		ck_assert(why[0] != '\0');
	else
		ck_assert_str_eq(out,
		    ac->out ? ac->out : "/nonexistent-run/kz-audit.sock");
	kz_conf_free(c);
	unsetenv("KZ_AUDIT");
	unsetenv("KZ_AUDIT_SOCKET");
}
END_TEST

START_TEST(test_conf_sock)
{
	static const char *const keys[] = {"KZ_S", "KZ_RUN_DIR", NULL};
	struct kz_conf *c = NULL;
	char out[64], why[128] = "", run[64];

	unsetenv("KZ_RUN_DIR");
	setenv("KZ_S", "/x/y.sock", 1);
	ck_assert_int_eq(kz_conf_load(NULL, keys, &c, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_run_dir(c, run, sizeof(run), why, sizeof(why)), 0);
	ck_assert_str_eq(run, KZ_RUN_DIR_DEFAULT);
	ck_assert_int_eq(kz_conf_sock(c, "KZ_S", run, "kz-lease", out,
	                     sizeof(out), why, sizeof(why)),
	    0);
	ck_assert_str_eq(out, "/x/y.sock");
	setenv("KZ_S", "", 1);
	ck_assert_int_eq(kz_conf_sock(c, "KZ_S", run, "kz-lease", out,
	                     sizeof(out), why, sizeof(why)),
	    KZ_ECONF);
	ck_assert(strstr(why, "KZ_S") != NULL);
	unsetenv("KZ_S");
	ck_assert_int_eq(kz_conf_sock(c, "KZ_S", "/nonexistent-run", "kz-lease",
	                     out, sizeof(out), why, sizeof(why)),
	    0);
	ck_assert_str_eq(out, "/nonexistent-run/kz-lease.sock");
	ck_assert_int_eq(kz_conf_sock(c, "KZ_S",
	                     "/nonexistent-run-that-is-"
	                     "far-too-long-for-the-buffer",
	                     "kz-lease", out, 32, why, sizeof(why)),
	    KZ_ECONF);
	setenv("KZ_RUN_DIR", "", 1);
	ck_assert_int_eq(kz_run_dir(c, run, sizeof(run), why, sizeof(why)),
	    KZ_ECONF);
	unsetenv("KZ_RUN_DIR");
	kz_conf_free(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_conf_table, 0,
	    sizeof(ccases) / sizeof(ccases[0]));
	tcase_add_test(tc, test_conf_values);
	tcase_add_test(tc, test_parse_numbers);
	tcase_add_loop_test(tc, test_sock_default, 0,
	    sizeof(scases) / sizeof(scases[0]));
	tcase_add_loop_test(tc, test_conf_audit, 0,
	    sizeof(acases) / sizeof(acases[0]));
	tcase_add_test(tc, test_conf_sock);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
