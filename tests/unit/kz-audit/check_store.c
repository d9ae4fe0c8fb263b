/* The log directory: commit, reopen and continue, rotation continuing the
 * chain, crash recovery of a torn tail or a hole, damage refused, one
 * writer at a time. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64];
static struct kz_key key;

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kzaudit.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(key.k, 9, sizeof(key.k));
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void
add_n(struct aud_store *s, int n, uint64_t *last)
{
	cJSON *ev = cJSON_Parse(
	    "{\"worker_id\":\"w\",\"reason\":\"filler "
	    "text to make the record longer than a hundred bytes or so\"}");
	char why[200];

	for (int i = 0; i < n; i++)
		ck_assert_int_eq(aud_store_add(s, "lease", 0, ev, last, why,
		                     sizeof(why)),
		    0);
	ck_assert_int_eq(aud_store_commit(s, why, sizeof(why)), 0);
	cJSON_Delete(ev);
}

static int
verify_dir(void)
{
	char **files = NULL, why[200];
	size_t n = 0;
	FILE *out = tmpfile(), *err = tmpfile();
	int rc;

	ck_assert_int_eq(aud_dir_files(dir, &files, &n, why, sizeof(why)), 0);
	rc = aud_verify(&key, files, n, out, err);
	aud_paths_free(files, n);
	fclose(out);
	fclose(err);
	return rc;
}

static struct aud_store *
open_store(uint64_t max)
{
	struct aud_store *s = NULL;
	char why[200];

	ck_assert_msg(aud_store_open(dir, max, &key, &s, why, sizeof(why)) == 0,
	    "open: %s", why);
	return s;
}

START_TEST(test_reopen_continues)
{
	struct aud_store *s = open_store(1 << 20);
	struct aud_store_stats st;
	uint64_t seq;

	add_n(s, 5, &seq);
	ck_assert_uint_eq(seq, 5);
	aud_store_stats(s, &st);
	ck_assert_uint_eq(st.fsyncs, 1);
	ck_assert_uint_eq(st.records, 5);
	aud_store_free(s);
	s = open_store(1 << 20);
	add_n(s, 1, &seq);
	ck_assert_uint_eq(seq, 6);
	aud_store_free(s);
	ck_assert_int_eq(verify_dir(), 0);
}
END_TEST

/*
 * A log written before the schema refused invisible characters holds
 * records with them (here added under the schema, as such a sink did):
 * the chain never consults the schema, so startup continues it and
 * verify accepts every record, old and new.
 */
START_TEST(test_old_invisible_records)
{
	static const char *const evs[] = {
	    "{\"reason\":\"al\\u200bice \\u200c\\u200d\\u2060\\ufeff\"}",
	    "{\"reason\":\"tag \\udb40\\udc41\\udb40\\udc7f vs "
	    "\\ufe0f\\udb40\\udd00\"}",
	    "{\"reason\":\"soft\\u00adhyphen \\u180e \\u034f\"}",
	};
	struct aud_store *s = open_store(1 << 20);
	char why[200];
	uint64_t seq;

	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		cJSON *ev = cJSON_Parse(evs[i]);

		ck_assert_ptr_nonnull(ev);
		ck_assert_int_eq(aud_store_add(s, "lease", 0, ev, &seq, why,
		                     sizeof(why)),
		    0);
		cJSON_Delete(ev);
	}
	ck_assert_int_eq(aud_store_commit(s, why, sizeof(why)), 0);
	aud_store_free(s);
	ck_assert_int_eq(verify_dir(), 0);
	s = open_store(1 << 20);
	add_n(s, 1, &seq);
	ck_assert_uint_eq(seq, 4);
	aud_store_free(s);
	ck_assert_int_eq(verify_dir(), 0);
}
END_TEST

START_TEST(test_rotation)
{
	struct aud_store *s = open_store(4096);
	struct aud_store_stats st;
	char **files = NULL, why[200];
	size_t n = 0;
	uint64_t seq;

	add_n(s, 100, &seq);
	aud_store_stats(s, &st);
	ck_assert_uint_ge(st.rotations, 3);
	aud_store_free(s);
	ck_assert_int_eq(aud_dir_files(dir, &files, &n, why, sizeof(why)), 0);
	ck_assert_uint_eq(n, st.rotations + 1);
	for (size_t i = 0; i < n; i++) {
		struct stat sb;

		ck_assert_int_eq(stat(files[i], &sb), 0);
		ck_assert_int_le(sb.st_size, 4096);
	}
	aud_paths_free(files, n);
	ck_assert_int_eq(verify_dir(), 0);
	s = open_store(4096);
	add_n(s, 1, &seq);
	ck_assert_uint_eq(seq, 101);
	aud_store_free(s);
	ck_assert_int_eq(verify_dir(), 0);
	/* A crash right after a rotation leaves the newest file empty: the
	 * chain continues from the file before it. */
	{
		char path[160];
		int fd;

		snprintf(path, sizeof(path), "%s/audit-%06zu.jsonl", dir,
		    n + 1);
		ck_assert_int_ge(fd = open(path, O_CREAT | O_WRONLY, 0640), 0);
		close(fd);
	}
	s = open_store(4096);
	add_n(s, 1, &seq);
	ck_assert_uint_eq(seq, 102);
	aud_store_free(s);
	ck_assert_int_eq(verify_dir(), 0);
}
END_TEST

static void
append_bytes(const char *text, size_t len)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/audit-000001.jsonl", dir);
	fd = open(path, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static void
append_raw(const char *text)
{
	append_bytes(text, strlen(text));
}

START_TEST(test_torn_tail_cut)
{
	struct aud_store *s = open_store(1 << 20);
	struct aud_store_stats st;
	uint64_t seq;

	add_n(s, 3, &seq);
	aud_store_free(s);
	append_raw("{\"seq\":4,\"ts\":\"20");
	ck_assert_int_eq(verify_dir(), 1);
	s = open_store(1 << 20);
	aud_store_stats(s, &st);
	ck_assert_uint_gt(st.truncated_bytes, 0);
	ck_assert_uint_eq(st.last_seq, 3);
	add_n(s, 1, &seq);
	ck_assert_uint_eq(seq, 4);
	aud_store_free(s);
	ck_assert_int_eq(verify_dir(), 0);
}
END_TEST

/* A bad record with good ones after it is damage, not a crash. */
START_TEST(test_damage_refused)
{
	struct aud_store *s = open_store(1 << 20);
	char why[200], path[160], *buf;
	FILE *f;
	long n;
	uint64_t seq;

	add_n(s, 3, &seq);
	aud_store_free(s);
	snprintf(path, sizeof(path), "%s/audit-000001.jsonl", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "r+"));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	ck_assert_ptr_nonnull(buf = calloc(1, (size_t)n + 1));
	rewind(f);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), n);
	/* Edit one byte of the second record. */
	*(strchr(strchr(buf, '\n') + 1, '"') + 1) = 'X';
	rewind(f);
	ck_assert_int_eq(fwrite(buf, 1, (size_t)n, f), n);
	fclose(f);
	free(buf);
	s = NULL;
	ck_assert_int_eq(aud_store_open(dir, 1 << 20, &key, &s, why,
	                     sizeof(why)),
	    KZ_ECRYPTO);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(why, "seq 1"));
}
END_TEST

/* The log file's bytes, malloc'd. */
static char *
file_bytes(size_t *len)
{
	char path[160], *buf;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/audit-000001.jsonl", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	ck_assert_ptr_nonnull(buf = calloc(1, (size_t)n + 1));
	rewind(f);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void
file_put(const char *buf, size_t len)
{
	char path[160];
	FILE *f;

	snprintf(path, sizeof(path), "%s/audit-000001.jsonl", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	ck_assert_int_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

/* Opening must fail as damage, name the file and line, never the bytes,
 * and leave the file as it was. */
static void
open_refused(const char *where)
{
	struct aud_store *s = NULL;
	char why[200], path[160], *before, *after;
	size_t n0, n1;

	before = file_bytes(&n0);
	ck_assert_int_eq(aud_store_open(dir, 1 << 20, &key, &s, why,
	                     sizeof(why)),
	    KZ_ECRYPTO);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(why, where) != NULL, "'%s' lacks '%s'", why,
	    where);
	ck_assert_ptr_null(strstr(why, "worker_id"));
	ck_assert_ptr_null(strstr(why, "filler"));
	ck_assert_ptr_null(strchr(why, '\n'));
	after = file_bytes(&n1);
	ck_assert_uint_eq(n0, n1);
	ck_assert(memcmp(before, after, n0) == 0);
	snprintf(path, sizeof(path), "%s/audit-000001.jsonl.cut", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	free(before);
	free(after);
	ck_assert_int_eq(verify_dir(), 1);
}

/* Complete lines that are not records are not what a crash leaves (the
 * sink acknowledges only after fdatasync, and a write is cut short only
 * after its last newline): damage, refused. */
START_TEST(test_bad_lines_refused)
{
	static const struct {
		const char *text;
		size_t len;
		const char *where;
	} cases[] = {
	    {"{\"seq\":3}\n", 10, "audit-000001.jsonl:3: "},
	    {"\n", 1, "audit-000001.jsonl:3: "},
	    {"\0\0\0garbage\n", 11, "audit-000001.jsonl:3: "},
	};
	struct aud_store *s;
	uint64_t seq;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		teardown();
		setup();
		s = open_store(1 << 20);
		add_n(s, 2, &seq);
		aud_store_free(s);
		append_bytes(cases[i].text, cases[i].len);
		open_refused(cases[i].where);
	}
}
END_TEST

/* An edit of the newest records is damage, not a crash: the sink must
 * not cut it and then reuse its seq. */
START_TEST(test_edited_tail_refused)
{
	struct aud_store *s = open_store(1 << 20);
	char *buf, *p;
	size_t n;
	uint64_t seq;

	add_n(s, 4, &seq);
	aud_store_free(s);
	buf = file_bytes(&n);
	/* The last record's worker_id "w" becomes "E". */
	p = buf + n - 1;
	while (p > buf && p[-1] != '\n')
		p--;
	p = strstr(p, "\"w\"");
	ck_assert_ptr_nonnull(p);
	memcpy(p + 1, "E", 1);
	file_put(buf, n);
	open_refused("audit-000001.jsonl:4: ");
	/* The two last records edited: the first of them is named. */
	p = buf + n - 1;
	while (p > buf && p[-1] != '\n')
		p--;
	p--;
	while (p > buf && p[-1] != '\n')
		p--;
	p = strstr(p, "\"w\"");
	memcpy(p + 1, "E", 1);
	file_put(buf, n);
	open_refused("audit-000001.jsonl:3: ");
	free(buf);
}
END_TEST

/* A hole: a file system may expose a block whose data never reached the
 * disk as NULs.  Lines holding a whole 512-byte-aligned block of NULs,
 * and the records after them, are cut like a torn tail. */
START_TEST(test_hole_cut)
{
	struct aud_store *s = open_store(1 << 20);
	struct aud_store_stats st;
	char path[160], *buf;
	size_t n, good = 0;
	uint64_t seq;

	add_n(s, 12, &seq);
	aud_store_free(s);
	buf = file_bytes(&n);
	ck_assert_uint_gt(n, 1500);
	for (size_t i = 0; i < 512; i++)
		good += buf[i] == '\n';
	memset(buf + 512, 0, 512);
	file_put(buf, n - 30); /* and a torn end */
	s = open_store(1 << 20);
	aud_store_stats(s, &st);
	ck_assert_uint_eq(st.last_seq, good);
	ck_assert_uint_gt(st.truncated_bytes, 0);
	add_n(s, 1, &seq);
	ck_assert_uint_eq(seq, good + 1);
	aud_store_free(s);
	ck_assert_int_eq(verify_dir(), 0);
	snprintf(path, sizeof(path), "%s/audit-000001.jsonl.cut", dir);
	ck_assert_int_eq(access(path, R_OK), 0);
	free(buf);
}
END_TEST

/* What follows a hole must still be what a crash leaves: an edited
 * record after it, or NULs that are no whole aligned block, are not. */
START_TEST(test_hole_edit_refused)
{
	struct aud_store *s = open_store(1 << 20);
	char *buf;
	size_t n;
	uint64_t seq;

	add_n(s, 12, &seq);
	aud_store_free(s);
	buf = file_bytes(&n);
	memset(buf + 512, 0, 512);
	buf[n - 20] = buf[n - 20] == 'a' ? 'b' : 'a';
	file_put(buf, n);
	open_refused("audit-000001.jsonl:");
	free(buf);
	teardown();
	setup();
	s = open_store(1 << 20);
	add_n(s, 12, &seq);
	aud_store_free(s);
	buf = file_bytes(&n);
	memset(buf + 700, 0, 300); /* no run up to a 512 boundary */
	file_put(buf, n);
	open_refused("audit-000001.jsonl:");
	free(buf);
}
END_TEST

START_TEST(test_one_writer)
{
	struct aud_store *s = open_store(1 << 20), *t = NULL;
	char why[200];

	ck_assert_int_eq(aud_store_open(dir, 1 << 20, &key, &t, why,
	                     sizeof(why)),
	    KZ_EEXIST);
	aud_store_free(s);
	t = open_store(1 << 20);
	aud_store_free(t);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-audit store");
	TCase *tc = tcase_create("store");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_reopen_continues);
	tcase_add_test(tc, test_old_invisible_records);
	tcase_add_test(tc, test_rotation);
	tcase_add_test(tc, test_torn_tail_cut);
	tcase_add_test(tc, test_damage_refused);
	tcase_add_test(tc, test_bad_lines_refused);
	tcase_add_test(tc, test_edited_tail_refused);
	tcase_add_test(tc, test_hole_cut);
	tcase_add_test(tc, test_hole_edit_refused);
	tcase_add_test(tc, test_damage_refused);
	tcase_add_test(tc, test_one_writer);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
