/*
 * classify.c: an admitted turn's blobs classified in place.  Each case
 * stores real blobs (kzp_blob_put) and builds a snapshot's items by hand;
 * a blob that is not what was admitted (other bytes, other size, absent)
 * is never classified as clean.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_classify.h"
#include "kz_json.h"
#include "kzp.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64], blobs[96];
static struct kzp P;

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kzp-classify.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(blobs, sizeof(blobs), "%s/blobs", dir);
	memset(&P, 0, sizeof(P));
	P.blobdir = blobs;
	ck_assert_int_eq(sodium_init() >= 0, 1);
}

static void
teardown(void)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", dir, dir);
	ck_assert(system(cmd) == 0);
}

/* Stores text as a blob; its digest in sha. */
static void
blob(const char *text, char sha[KZP_SHA_HEX + 1])
{
	char p[128];
	struct kzp_res r = {0};
	int64_t size;
	int fd;

	snprintf(p, sizeof(p), "%s/in", dir);
	ck_assert((fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600)) >= 0);
	ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	ck_assert(lseek(fd, 0, SEEK_SET) == 0);
	ck_assert_int_eq(kzp_blob_put(blobs, fd, 1 << 20, NULL, NULL, sha,
	                     &size, &r),
	    0);
	close(fd);
}

/* A snapshot with items {sha, size} in the order given. */
static cJSON *
snap(int n, const char *const *shas, const long *sizes)
{
	cJSON *s = cJSON_CreateObject(), *items, *it;

	items = cJSON_AddArrayToObject(s, "items");
	for (int i = 0; i < n; i++) {
		it = cJSON_CreateObject();
		cJSON_AddStringToObject(it, "path", "f");
		cJSON_AddStringToObject(it, "sha256", shas[i]);
		cJSON_AddNumberToObject(it, "size", (double)sizes[i]);
		cJSON_AddItemToArray(items, it);
	}
	return s;
}

static int
run(cJSON *s, bool *admin, struct kzp_res *r)
{
	int e = kzp_classify(&P, s, admin, r);

	cJSON_Delete(s);
	return e;
}

START_TEST(test_clean_and_admin)
{
	char a[KZP_SHA_HEX + 1], b[KZP_SHA_HEX + 1];
	struct kzp_res r = {0};
	bool admin = true;

	blob("echo hello\n", a);
	blob("#!/bin/sh\nsudo apt-get install -y x\n", b);
	ck_assert_int_eq(run(snap(1, (const char *[]){a}, (long[]){11}), &admin,
	                     &r),
	    0);
	ck_assert(!admin);
	ck_assert_ptr_null(r.code);
	/* A clean file first does not hide the one after it. */
	ck_assert_int_eq(run(snap(2, (const char *[]){a, b}, (long[]){11, 36}),
	                     &admin, &r),
	    0);
	ck_assert(admin);
	ck_assert_ptr_null(r.code);
}
END_TEST

/* Text after a NUL byte is classified too (bash runs it). */
START_TEST(test_after_nul)
{
	char p[128], sha[KZP_SHA_HEX + 1];
	static const char text[] = "echo one\n\0sudo id\n";
	struct kzp_res r = {0};
	int64_t size;
	bool admin = false;
	int fd;

	snprintf(p, sizeof(p), "%s/nul", dir);
	ck_assert((fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600)) >= 0);
	ck_assert(
	    write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1);
	ck_assert(lseek(fd, 0, SEEK_SET) == 0);
	ck_assert_int_eq(kzp_blob_put(blobs, fd, 1 << 20, NULL, NULL, sha,
	                     &size, &r),
	    0);
	close(fd);
	ck_assert_int_eq(run(snap(1, (const char *[]){sha},
	                         (long[]){(long)size}),
	                     &admin, &r),
	    0);
	ck_assert(admin);
}
END_TEST

/* What was admitted is not what is stored: refused, never clean. */
START_TEST(test_not_the_admitted_bytes)
{
	char a[KZP_SHA_HEX + 1], p[192];
	struct kzp_res r = {0};
	bool admin = false;
	int fd;

	blob("echo hello\n", a);
	/* Same size, other bytes. */
	snprintf(p, sizeof(p), "%s/%s", blobs, a);
	ck_assert(chmod(p, 0644) == 0);
	ck_assert((fd = open(p, O_WRONLY)) >= 0);
	ck_assert(write(fd, "sudo  id\n\n\n", 11) == 11);
	close(fd);
	ck_assert_int_eq(run(snap(1, (const char *[]){a}, (long[]){11}), &admin,
	                     &r),
	    KZ_ECRYPTO);
	ck_assert_str_eq(r.code, KZ_WE_REFUSED);
	ck_assert(!admin);
	/* Another size than admitted. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(run(snap(1, (const char *[]){a}, (long[]){12}), &admin,
	                     &r),
	    KZ_ECRYPTO);
	/* No such blob, and a name that is not a digest. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(run(snap(1,
	                         (const char *[]){"0000000000000000000"
	                                          "0000000000000000000000000000"
	                                          "00000000000000000"},
	                         (long[]){1}),
	                     &admin, &r),
	    KZ_ECRYPTO);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(run(snap(1, (const char *[]){"../in"}, (long[]){1}),
	                     &admin, &r),
	    KZ_ECRYPTO);
	ck_assert_str_eq(r.why,
	    "a file's bytes do not match the admitted digest");
}
END_TEST

/* Over the classifier's bound: cannot be classified whole, unavailable. */
START_TEST(test_too_large)
{
	char a[KZP_SHA_HEX + 1];
	struct kzp_res r = {0};
	bool admin = false;

	blob("x", a);
	ck_assert_int_eq(run(snap(1, (const char *[]){a},
	                         (long[]){KZ_CLASSIFY_MAX + 1}),
	                     &admin, &r),
	    KZ_ETOOBIG);
	ck_assert_str_eq(r.code, KZ_WE_UNAVAILABLE);
	ck_assert(!admin);
}
END_TEST

/* No blob directory at all: nothing is clean. */
START_TEST(test_no_blob_dir)
{
	struct kzp_res r = {0};
	bool admin = false;

	P.blobdir = "/nonexistent/kzp-blobs";
	ck_assert_int_eq(run(snap(1,
	                         (const char *[]){"aaaaaaaaaaaaaaaaaaaa"
	                                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	                                          "aaaaaaaaaaaaaaaa"},
	                         (long[]){1}),
	                     &admin, &r),
	    KZ_ECRYPTO);
	ck_assert_str_eq(r.code, KZ_WE_REFUSED);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-project classify");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_clean_and_admin);
	tcase_add_test(tc, test_after_nul);
	tcase_add_test(tc, test_not_the_admitted_bytes);
	tcase_add_test(tc, test_too_large);
	tcase_add_test(tc, test_no_blob_dir);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
