/* The keyed MAC chain: records verify, any edited byte does not, prev
 * links each record to the one before, and a different key fails;
 * integers are stored as their digits; audit files are opened only when
 * they are regular files, and read up to their size at open. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_json.h"
#include "audit.h"
#include "kz_check.h"
#include "banned.h"

static struct aud_chain chain;

static void
setup(void)
{
	memset(&chain, 0, sizeof(chain));
	memset(chain.key.k, 3, sizeof(chain.key.k));
}

static char *
rec(const char *ev, size_t *len)
{
	cJSON *e = cJSON_Parse(ev);
	char *line = NULL;

	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(aud_record_format(&chain, "lease", 1234, e,
	                     1700000000123LL, &line, len),
	    0);
	cJSON_Delete(e);
	ck_assert_int_eq(line[*len - 1], '\n');
	return line;
}

START_TEST(test_roundtrip)
{
	static const unsigned char zero[AUD_MAC_BYTES];
	unsigned char mac1[AUD_MAC_BYTES];
	struct aud_rec r;
	char why[160], *l1, *l2;
	size_t n1, n2;

	l1 = rec("{\"worker_id\":\"w1\"}", &n1);
	memcpy(mac1, chain.mac, sizeof(mac1));
	l2 = rec("{\"worker_id\":\"w2\",\"token\":9007199254740991}", &n2);
	ck_assert_uint_eq(chain.seq, 2);
	ck_assert_int_eq(aud_record_check(&chain.key, l1, n1 - 1, true, &r, why,
	                     sizeof(why)),
	    0);
	ck_assert_uint_eq(r.seq, 1);
	ck_assert_int_eq(r.ts_ms, 1700000000123LL);
	/* The writer's uid, stamped by the sink, under the MAC. */
	ck_assert_int_eq(r.uid, 1234);
	ck_assert_ptr_nonnull(
	    strstr(l1, "Z\",\"uid\":1234,\"kind\":\"lease\","));
	ck_assert(memcmp(r.prev, zero, AUD_MAC_BYTES) == 0);
	ck_assert(memcmp(r.mac, mac1, AUD_MAC_BYTES) == 0);
	ck_assert_str_eq(kz_json_get(kz_json_get(r.json, "event"), "worker_id")
	                     ->valuestring,
	    "w1");
	aud_rec_release(&r);
	ck_assert_int_eq(aud_record_check(&chain.key, l2, n2 - 1, false, &r,
	                     why, sizeof(why)),
	    0);
	ck_assert_uint_eq(r.seq, 2);
	ck_assert(memcmp(r.prev, mac1, AUD_MAC_BYTES) == 0);
	ck_assert(memcmp(r.mac, chain.mac, AUD_MAC_BYTES) == 0);
	free(l1);
	free(l2);
}
END_TEST

#define Z64 "0000000000000000000000000000000000000000000000000000000000000000"

/* A record written before the uid was stamped has none (-1); a uid that
 * is not a uid is not a record. */
START_TEST(test_uid_form)
{
	static const char *const pre = "{\"seq\":1,\"ts\":\"2026-11-30T12:00:"
	                               "00.000Z\",";
	static const char
	    *const post = "\"kind\":\"lease\",\"event\":{},\"prev\":\"" Z64
	                  "\",\"mac\":\"" Z64 "\"}";
	static const char *const uids[] = {"", "\"uid\":-1,", "\"uid\":\"0\",",
	    "\"uid\":4294967296,", "\"uid\":1.5,"};
	struct aud_rec r;
	char line[512], why[160];

	for (size_t i = 0; i < sizeof(uids) / sizeof(uids[0]); i++) {
		snprintf(line, sizeof(line), "%s%s%s", pre, uids[i], post);
		ck_assert_int_eq(aud_record_parse(line, strlen(line), &r, why,
		                     sizeof(why)) == 0,
		    i == 0);
		if (i == 0)
			ck_assert_int_eq(r.uid, -1);
		aud_rec_release(&r);
	}
}
END_TEST

/* Flipping any single byte of a record breaks it. */
START_TEST(test_every_byte)
{
	struct aud_rec r;
	char why[160], *l;
	size_t n;

	l = rec("{\"worker_id\":\"w1\",\"token\":5}", &n);
	for (size_t i = 0; i < n - 1; i++) {
		char c = l[i];

		l[i] = c == 'a' ? 'b' : c == '0' ? '1' : 'a';
		ck_assert_msg(aud_record_check(&chain.key, l, n - 1, false, &r,
		                  why, sizeof(why)) != 0,
		    "byte %zu edited unseen", i);
		l[i] = c;
	}
	ck_assert_int_eq(aud_record_check(&chain.key, l, n - 1, false, &r, why,
	                     sizeof(why)),
	    0);
	free(l);
}
END_TEST

START_TEST(test_wrong_key_and_truncation)
{
	struct kz_key other;
	struct aud_rec r;
	char why[160], *l;
	size_t n;

	l = rec("{}", &n);
	memset(other.k, 4, sizeof(other.k));
	ck_assert_int_eq(aud_record_check(&other, l, n - 1, false, &r, why,
	                     sizeof(why)),
	    KZ_ECRYPTO);
	for (size_t k = 0; k < n - 1; k++)
		ck_assert(aud_record_check(&chain.key, l, k, false, &r, why,
		              sizeof(why)) != 0);
	free(l);
}
END_TEST

/* A line with a valid MAC suffix but a body that is not a record. */
START_TEST(test_form)
{
	struct aud_rec r;
	char why[160];
	static const char *bad[] = {
	    "",
	    "{}",
	    "not json",
	    "{\"seq\":1}",
	    "{\"seq\":0,\"ts\":\"2020-01-01T00:00:00.000Z\",\"kind\":\"lease\","
	    "\"event\":{},\"prev\":\"00\",\"mac\":\"00\"}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert(aud_record_check(&chain.key, bad[i], strlen(bad[i]),
		              false, &r, why, sizeof(why)) != 0);
		ck_assert(aud_record_parse(bad[i], strlen(bad[i]), &r, why,
		              sizeof(why)) != 0);
	}
}
END_TEST

START_TEST(test_ts)
{
	char buf[32];
	int64_t ms;

	aud_ts_format(1700000000123LL, buf);
	ck_assert_str_eq(buf, "2023-11-14T22:13:20.123Z");
	ck_assert_int_eq(aud_ts_parse(buf, &ms), 0);
	ck_assert_int_eq(ms, 1700000000123LL);
	ck_assert_int_eq(aud_ts_parse("2023-11-14T22:13:20Z", &ms), 0);
	ck_assert_int_eq(ms, 1700000000000LL);
	ck_assert_int_eq(aud_ts_parse("1700000000", &ms), 0);
	ck_assert_int_eq(ms, 1700000000000LL);
	ck_assert_int_ne(aud_ts_parse("2023-11-14T22:13:20+01:00", &ms), 0);
	ck_assert_int_ne(aud_ts_parse("2023-11-14", &ms), 0);
	ck_assert_int_ne(aud_ts_parse("2023-11-14T22:13:20.1Z", &ms), 0);
	ck_assert_int_ne(aud_ts_parse("yesterday", &ms), 0);
}
END_TEST

/* cJSON prints 5000000000000001 as 5e+15: the record must hold the
 * integer the schema accepted, digit for digit, under its MAC. */
START_TEST(test_int_exact)
{
	static const char *const ints[] = {"0", "-1", "4503599627370497",
	    "5000000000000001", "9007199254740991", "-9007199254740991"};
	struct aud_rec r;
	char ev[128], want[64], why[160], *l;
	size_t n;

	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		snprintf(ev, sizeof(ev), "{\"token\":%s,\"e\":{\"x\":%s}}",
		    ints[i], ints[i]);
		snprintf(want, sizeof(want), "{\"token\":%s,\"e\":{\"x\":%s}}",
		    ints[i], ints[i]);
		l = rec(ev, &n);
		ck_assert_msg(strstr(l, want) != NULL, "%s stored as %s",
		    ints[i], l);
		ck_assert_int_eq(aud_record_check(&chain.key, l, n - 1, false,
		                     &r, why, sizeof(why)),
		    0);
		free(l);
	}
}
END_TEST

/* A number that is not an integer the schema accepts is not stored. */
START_TEST(test_int_refused)
{
	static const char *const bad[] = {"{\"token\":1.5}",
	    "{\"token\":9007199254740992}", "{\"token\":-9007199254740992}",
	    "{\"token\":1e300}", "{\"e\":{\"x\":0.25}}"};
	char *line = NULL;
	size_t n;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *e = cJSON_Parse(bad[i]);

		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(aud_record_format(&chain, "lease", 0, e, 1,
		                     &line, &n),
		    KZ_EINVAL);
		ck_assert_ptr_null(line);
		ck_assert_uint_eq(chain.seq, 0);
		cJSON_Delete(e);
	}
}
END_TEST

static char tdir[64];

static void
tdir_make(void)
{
	snprintf(tdir, sizeof(tdir), "/tmp/kzchain.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
}

static void
tdir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Opening path must fail at once, with one line naming it and saying
 * what is wrong. */
static void
open_fails(const char *path, const char *what)
{
	struct aud_file af;
	char msg[512] = "";
	FILE *err = tmpfile();

	ck_assert_int_eq(aud_file_open(path, err, &af), KZ_EXIT_USAGE);
	rewind(err);
	ck_assert_ptr_nonnull(fgets(msg, sizeof(msg), err));
	ck_assert_msg(strstr(msg, path) != NULL && strstr(msg, what) != NULL,
	    "'%s' for %s", msg, path);
	ck_assert_int_eq(fgetc(err), EOF);
	fclose(err);
}

/* A log directory is not trusted: a symbolic link (to /dev/zero), a FIFO
 * or a device would make a reader hang or read forever. */
START_TEST(test_file_hostile)
{
	char path[128];

	tdir_make();
	snprintf(path, sizeof(path), "%s/link", tdir);
	ck_assert_int_eq(symlink("/dev/zero", path), 0);
	open_fails(path, "symbolic link");
	snprintf(path, sizeof(path), "%s/fifo", tdir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	open_fails(path, "not a regular file");
	open_fails("/dev/zero", "not a regular file");
	open_fails(tdir, "not a regular file");
	snprintf(path, sizeof(path), "%s/none", tdir);
	open_fails(path, "cannot open");
	tdir_remove();
}
END_TEST

/* What is appended after the open is not read: a reader ends. */
START_TEST(test_file_size_at_open)
{
	struct aud_file af;
	char path[128], last[16] = "";
	size_t len, lines = 0;
	bool nl;
	FILE *w;
	int r;

	tdir_make();
	snprintf(path, sizeof(path), "%s/audit-000001.jsonl", tdir);
	ck_assert_ptr_nonnull(w = fopen(path, "w"));
	fputs("one\ntwo\n", w);
	fflush(w);
	ck_assert_int_eq(aud_file_open(path, stderr, &af), 0);
	fputs("three\nfour\n", w);
	fclose(w);
	while ((r = aud_file_getline(&af, &len, &nl)) == 1) {
		lines++;
		ck_assert(nl);
		snprintf(last, sizeof(last), "%s", af.line);
	}
	ck_assert_int_eq(r, 0);
	ck_assert_uint_eq(lines, 2);
	ck_assert_str_eq(last, "two");
	aud_file_close(&af);
	tdir_remove();
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-audit chain");
	TCase *tc = tcase_create("chain");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_uid_form);
	tcase_add_test(tc, test_every_byte);
	tcase_add_test(tc, test_wrong_key_and_truncation);
	tcase_add_test(tc, test_form);
	tcase_add_test(tc, test_ts);
	tcase_add_test(tc, test_int_exact);
	tcase_add_test(tc, test_int_refused);
	tcase_add_test(tc, test_file_hostile);
	tcase_add_test(tc, test_file_size_at_open);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
