/*
 * The projection without kz-project: the named files are copied, each
 * read-only (0444, the caller's), into the leased worker's projection
 * directory, which the worker binds read-only at /projection, outside the
 * workspace.
 * The manifest digest covers each file's name, size and SHA-256, in the
 * order given, so an audit record names exactly what was projected.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_key.h"
#include "run.h"
#include "banned.h"

#define CHUNK 65536

static void
finish(crypto_hash_sha256_state *m, char digest[RUN_DIGEST_MAX])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256_final(m, h);
	memcpy(digest, "sha256:", 7);
	kz_hex(h, sizeof(h), digest + 7);
}

void
run_manifest_empty(char digest[RUN_DIGEST_MAX])
{
	crypto_hash_sha256_state m;

	crypto_hash_sha256_init(&m);
	finish(&m, digest);
}

/* Copies one open regular file to name in dfd; hashes what it copied. */
static int
copy_one(int in, int dfd, const char *name, uint64_t max,
    unsigned char h[crypto_hash_sha256_BYTES], uint64_t *size)
{
	crypto_hash_sha256_state s;
	static unsigned char buf[CHUNK];
	ssize_t n;
	int out, e = 0;

	if ((out = openat(dfd, name,
	         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)) <
	    0)
		return KZ_ESYS;
	crypto_hash_sha256_init(&s);
	*size = 0;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if ((*size += (uint64_t)n) > max) {
			e = KZ_ETOOBIG;
			break;
		}
		crypto_hash_sha256_update(&s, buf, (size_t)n);
		if (write(out, buf, (size_t)n) != n) {
			e = KZ_ESYS;
			break;
		}
	}
	if (n < 0)
		e = KZ_ESYS;
	if (e == 0 && (fchmod(out, 0444) != 0 || fsync(out) != 0))
		e = KZ_ESYS;
	close(out);
	crypto_hash_sha256_final(&s, h);
	return e;
}

static bool
name_ok(const char *b)
{
	return *b != '\0' && strcmp(b, ".") != 0 && strcmp(b, "..") != 0 &&
	    strlen(b) < 256;
}

int
run_project(const struct run_conf *c, const char *dir, const char *const *files,
    size_t n, char digest[RUN_DIGEST_MAX], uint64_t *bytes, char *why,
    size_t wlen)
{
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_state m;
	char line[320];
	const char *b;
	struct stat sb;
	uint64_t size;
	int dfd, in, e = 0;
	size_t i;

	*bytes = 0;
	crypto_hash_sha256_init(&m);
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	    0) {
		kz_why(why, wlen, "the worker has no projection directory");
		return KZ_EUNAVAIL;
	}
	for (i = 0; i < n && e == 0; i++) {
		in = -1;
		b = strrchr(files[i], '/');
		b = b != NULL ? b + 1 : files[i];
		if (!name_ok(b)) {
			kz_why(why, wlen, "a file name is not projectable");
			e = KZ_EINVAL;
		} else if ((in = open(files[i], O_RDONLY | O_CLOEXEC)) < 0 ||
		    fstat(in, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			kz_why(why, wlen,
			    "file %zu is not a readable regular file", i + 1);
			e = KZ_EINVAL;
		} else if ((e = copy_one(in, dfd, b, c->file_max, h, &size)) !=
		        0 ||
		    (*bytes += size) > c->total_max) {
			kz_why(why, wlen,
			    e == KZ_ESYS && errno == EEXIST ?
			        "two files have the same name" :
			        e == KZ_ESYS ?
			        "file %zu could not be copied" :
			        "file %zu is over the size limit",
			    i + 1);
			e = e ? e : KZ_ETOOBIG;
		} else {
			int len = snprintf(line, sizeof(line), "%s\n%llu\n", b,
			    (unsigned long long)size);

			crypto_hash_sha256_update(&m, (unsigned char *)line,
			    (size_t)len);
			crypto_hash_sha256_update(&m, h, sizeof(h));
		}
		if (in >= 0)
			close(in);
	}
	close(dfd);
	finish(&m, digest);
	return e;
}
