/*
 * The content-addressed blob store: one directory, one read-only file per
 * content, named by the lowercase hex SHA-256 of its bytes.  A blob is
 * written to a temporary name, hashed while it is written, and renamed to
 * its digest only when complete, so a name always promises its content
 * (materialize checks that promise again before delivering bytes).
 *
 * The store's lock is a flock on its directory: shared while a blob takes
 * its name (a put) or is renewed (a version names it), exclusive while
 * blob-collect decides on one blob and removes it (collect.c).  Both the
 * put and the renewal set the blob's time to now under the lock, so a
 * blob about to be named by a version is never older than the grace when
 * collect looks at it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_json.h"
#include "kz_path.h"
#include "kzp.h"
#include "banned.h"

#define BLOB_BUF (128 * 1024)

int
kzp_blob_lock(int dfd, int how)
{
	while (flock(dfd, how) != 0)
		if (errno != EINTR)
			return KZ_ESYS;
	return 0;
}

bool
kzp_sha_ok(const char *s)
{
	return s != NULL && strlen(s) == KZP_SHA_HEX &&
	    strspn(s, "0123456789abcdef") == KZP_SHA_HEX;
}

static int
copy_hash(int in, int out, int64_t max, unsigned char h[32], int64_t *size)
{
	static unsigned char buf[BLOB_BUF];
	crypto_hash_sha256_state st;
	int64_t total = 0;
	ssize_t n;

	crypto_hash_sha256_init(&st);
	for (;;) {
		n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return KZ_ESYS;
		if (n == 0)
			break;
		if ((total += n) > max)
			return KZ_ETOOBIG;
		crypto_hash_sha256_update(&st, buf, (size_t)n);
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return KZ_ESYS;
			off += w;
		}
	}
	crypto_hash_sha256_final(&st, h);
	*size = total;
	return 0;
}

int
kzp_blob_put(const char *blobdir, int srcfd, int64_t max, kzp_blob_check *check,
    const void *arg, char sha[KZP_SHA_HEX + 1], int64_t *size,
    struct kzp_res *r)
{
	unsigned char h[32], rnd[8];
	char tmp[32], rh[17];
	int dfd = -1, fd = -1, e;

	if (mkdir(blobdir, 0700) != 0 && errno != EEXIST) {
		kzp_fail(r, KZ_WE_INTERNAL, "blob store unavailable");
		return KZ_ESYS;
	}
	if ((dfd = open(blobdir,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "blob store unavailable");
		return KZ_ESYS;
	}
	randombytes_buf(rnd, sizeof(rnd));
	kz_hex(rnd, sizeof(rnd), rh);
	snprintf(tmp, sizeof(tmp), ".tmp-%s", rh);
	if ((fd = openat(dfd, tmp,
	         O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) <
	    0) {
		kzp_fail(r, KZ_WE_INTERNAL, "blob store not writable");
		e = KZ_ESYS;
		goto out;
	}
	if ((e = copy_hash(srcfd, fd, max, h, size)) != 0) {
		kzp_fail(r, e == KZ_ETOOBIG ? KZ_WE_REFUSED : KZ_WE_INTERNAL,
		    e == KZ_ETOOBIG ? "the file is over the size bound" :
		                      "the blob could not be written");
		goto out;
	}
	kz_hex(h, sizeof(h), sha);
	if (fchmod(fd, 0444) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "the blob could not be stored");
		e = KZ_ESYS;
		goto out;
	}
	/* The copy is checked, not the source its writer may still change. */
	if (check != NULL && (e = check(fd, arg, r)) != 0)
		goto out;
	if (fsync(fd) != 0 || kzp_blob_lock(dfd, LOCK_SH) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "the blob could not be stored");
		e = KZ_ESYS;
		goto out;
	}
	/* Its age counts from its name: a slow check is not a grace spent. */
	if (futimens(fd, NULL) != 0 || renameat(dfd, tmp, dfd, sha) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "the blob could not be stored");
		e = KZ_ESYS;
		goto out;
	}
	tmp[0] = '\0';
out:
	if (fd >= 0) {
		close(fd);
		if (tmp[0] != '\0')
			unlinkat(dfd, tmp, 0);
	}
	close(dfd);
	return e;
}

int
kzp_blob_dir(const char *blobdir, int *dfd)
{
	*dfd = open(blobdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return *dfd >= 0 ? 0 : KZ_ENOENT;
}

int
kzp_blob_open_at(int dfd, const char *sha, int *fd)
{
	if (!kzp_sha_ok(sha))
		return KZ_EINVAL;
	return kz_path_open(dfd, sha, KZP_SHA_HEX, KZ_PATH_FILE, fd, NULL, 0);
}

int
kzp_blob_open_item(int dfd, const cJSON *item, int64_t *size, int *fd)
{
	const char *sha = cJSON_GetStringValue(kz_json_get(item, "sha256"));
	struct stat sb;

	*size = (int64_t)cJSON_GetNumberValue(kz_json_get(item, "size"));
	*fd = -1;
	if (sha == NULL || kzp_blob_open_at(dfd, sha, fd) != 0)
		return KZ_ECRYPTO;
	if (fstat(*fd, &sb) != 0 || sb.st_size != *size) {
		close(*fd);
		*fd = -1;
		return KZ_ECRYPTO;
	}
	return 0;
}

int
kzp_blob_open(const char *blobdir, const char *sha, int *fd)
{
	int dfd, e;

	if (!kzp_sha_ok(sha))
		return KZ_EINVAL;
	if ((e = kzp_blob_dir(blobdir, &dfd)) != 0)
		return e;
	e = kzp_blob_open_at(dfd, sha, fd);
	close(dfd);
	return e;
}

int
kzp_blob_renew(const char *blobdir, const char *sha, int64_t *size)
{
	struct stat sb;
	int dfd, fd = -1, e;

	if (!kzp_sha_ok(sha))
		return KZ_EINVAL;
	if ((dfd = open(blobdir,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return KZ_ENOENT;
	if ((e = kzp_blob_lock(dfd, LOCK_SH)) == 0 &&
	    (e = kzp_blob_open_at(dfd, sha, &fd)) == 0)
		e = fstat(fd, &sb) != 0 || futimens(fd, NULL) != 0 ? KZ_ESYS :
		                                                     0;
	if (e == 0)
		*size = sb.st_size;
	if (fd >= 0)
		close(fd);
	close(dfd);
	return e;
}
