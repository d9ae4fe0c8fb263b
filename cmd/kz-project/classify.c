/*
 * Classification of an admitted turn's files, before any worker is
 * leased: each admitted blob is read whole, its size and SHA-256 checked
 * against the snapshot (the bytes classified are the bytes the worker
 * will be given: materialize checks the same digests), and classified
 * with libkz's classifier, the one kz-run applies to --file and inline
 * scripts.  Nothing is written: no copy of a room's files is left on disk
 * for anyone to clean up, whichever user asked.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_classify.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kzp.h"
#include "banned.h"

/* Reads exactly want bytes of fd into a new buffer (NUL-terminated). */
static int
read_whole(int fd, int64_t want, char **out)
{
	char *b;
	int64_t got = 0;
	ssize_t n;

	if ((b = malloc((size_t)want + 1)) == NULL)
		return KZ_ENOMEM;
	while (got < want) {
		if ((n = read(fd, b + got, (size_t)(want - got))) < 0 &&
		    errno == EINTR)
			continue;
		if (n <= 0) {
			free(b);
			return n < 0 ? KZ_ESYS : KZ_ECRYPTO;
		}
		got += n;
	}
	b[want] = '\0';
	*out = b;
	return 0;
}

/* One admitted item: KZ_CLASS_OK, KZ_CLASS_HOST_ADMIN or a KZ_E*. */
static int
classify_one(int blobs, const cJSON *it)
{
	const char *sha = cJSON_GetStringValue(kz_json_get(it, "sha256"));
	unsigned char h[crypto_hash_sha256_BYTES];
	char got[KZP_SHA_HEX + 1], why[128];
	char *text = NULL;
	int64_t want = (int64_t)cJSON_GetNumberValue(kz_json_get(it, "size"));
	int fd = -1, e;

	if (want < 0 || want > KZ_CLASSIFY_MAX)
		return KZ_ETOOBIG;
	if ((e = kzp_blob_open_item(blobs, it, &want, &fd)) != 0 ||
	    (e = read_whole(fd, want, &text)) != 0)
		goto out;
	crypto_hash_sha256(h, (unsigned char *)text, (size_t)want);
	kz_hex(h, sizeof(h), got);
	if (strcmp(got, sha) != 0) {
		e = KZ_ECRYPTO;
		goto out;
	}
	e = (int)kz_classify(text, (size_t)want, why, sizeof(why));
out:
	if (fd >= 0)
		close(fd);
	free(text);
	return e;
}

int
kzp_classify(const struct kzp *p, const cJSON *snap, bool *admin,
    struct kzp_res *r)
{
	const cJSON *it;
	int blobs = -1, e = 0;

	*admin = false;
	if (kzp_blob_dir(p->blobdir, &blobs) != 0)
		blobs = -1;
	cJSON_ArrayForEach(it, kz_json_get(snap, "items"))
	{
		if ((e = classify_one(blobs, it)) == KZ_CLASS_HOST_ADMIN) {
			*admin = true;
			e = 0;
			break;
		}
		if (e != 0)
			break;
	}
	if (blobs >= 0)
		close(blobs);
	if (e == KZ_ECRYPTO)
		kzp_fail(r, KZ_WE_REFUSED, KZP_DIGEST_MISMATCH);
	else if (e != 0)
		kzp_fail(r, KZ_WE_UNAVAILABLE,
		    "a file could not be classified whole");
	return e;
}
