/*
 * The read-only projection.  Every admitted file is copied from the blob
 * store into a fresh private temporary directory next to the destination
 * while its bytes are hashed; path, size, count, total bytes and SHA-256
 * are checked against the snapshot, and only when every file matches is
 * the tree made read-only (files 0444, directories 0555) and renamed into
 * place.  A mismatch removes the temporary tree: no byte is delivered.
 * Nothing is fsynced: a projection serves one run, its destination must
 * be new, and a crash that could leave it unsynced ends that run too.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kz_path.h"
#include "kz_tree.h"
#include "kzp.h"
#include "banned.h"

#define COPY_BUF (256 * 1024)
#define DEPTH_MAX 32

int
kzp_relpath_ok(const char *path)
{
	size_t n = strlen(path);

	if (n > KZP_PATH_MAX)
		return KZ_EPATH_LEN;
	return kz_path_check(path, n, NULL, 0);
}

int
kzp_open_beneath(int dirfd, const char *rel, int *fd)
{
	return kz_path_open(dirfd, rel, strlen(rel), KZ_PATH_FILE, fd, NULL, 0);
}

static int
chmod_ro(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (S_ISLNK(sb->st_mode))
		return -1;
	return chmod(p, flag == FTW_DP ? 0555 : 0444);
}

static int
write_all(int fd, const unsigned char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return KZ_ESYS;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A projection being written: its private root and the blob directory. */
struct proj {
	int root;
	int blobs;
	bool subdirs; /* directories made below the root */
};

/*
 * Opens (creating, 0700) the parent directory of rel beneath the root,
 * each step O_NOFOLLOW (kz_path_mkparent); a file at the top is written
 * through a duplicate of the root.  Whether a directory was made decides
 * whether delivery has directories to make read-only.
 */
static int
open_parent(struct proj *pj, const char *rel, int *pfd, const char **base)
{
	bool created = false;
	int e;

	e = kz_path_mkparent(pj->root, rel, 0700, (uid_t)-1, (gid_t)-1, pfd,
	    base, &created);
	if (e == 0 && created)
		pj->subdirs = true;
	return e;
}

/*
 * Copies exactly the admitted size from one blob to rel beneath the root,
 * hashing the same buffer that is written, so the bytes proven are the
 * bytes delivered (one read of each byte).  The blob's size must be the
 * admitted size; a blob that shrinks while read comes up short and one
 * that grows adds nothing that is delivered: either way what lands is
 * exactly the admitted size and digest, or nothing.
 */
static int
put_one(struct proj *pj, const cJSON *it, int64_t *bytes, struct kzp_res *r)
{
	static unsigned char buf[COPY_BUF];
	const char *rel = cJSON_GetStringValue(kz_json_get(it, "path"));
	const char *sha = cJSON_GetStringValue(kz_json_get(it, "sha256"));
	crypto_hash_sha256_state st;
	unsigned char h[32];
	char got[KZP_SHA_HEX + 1];
	const char *base;
	int64_t want, total = 0;
	int in = -1, out = -1, pfd = -1, e;
	ssize_t n;

	if ((e = kzp_blob_open_item(pj->blobs, it, &want, &in)) != 0)
		goto out;
	if ((e = open_parent(pj, rel, &pfd, &base)) != 0)
		goto out;
	if ((out = openat(pfd, base,
	         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) <
	    0) {
		e = KZ_ESYS;
		goto out;
	}
	crypto_hash_sha256_init(&st);
	while (total < want) {
		size_t ask = want - total < (int64_t)sizeof(buf) ?
		    (size_t)(want - total) :
		    sizeof(buf);

		if ((n = read(in, buf, ask)) < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			e = n < 0 ? KZ_ESYS : KZ_ECRYPTO;
			goto out;
		}
		total += n;
		crypto_hash_sha256_update(&st, buf, (size_t)n);
		if (write_all(out, buf, (size_t)n) != 0) {
			e = KZ_ESYS;
			goto out;
		}
	}
	crypto_hash_sha256_final(&st, h);
	kz_hex(h, sizeof(h), got);
	if (total != want || strcmp(got, sha) != 0) {
		e = KZ_ECRYPTO;
		goto out;
	}
	/* Read-only now; the tree stays private (0700) until delivered. */
	if (fchmod(out, 0444) != 0) {
		e = KZ_ESYS;
		goto out;
	}
	*bytes += total;
	e = 0;
out:
	if (e == KZ_ECRYPTO)
		kzp_fail(r, KZ_WE_REFUSED, KZP_DIGEST_MISMATCH);
	else if (e != 0)
		kzp_fail(r, KZ_WE_REFUSED,
		    "the projection could not be written");
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (pfd >= 0)
		close(pfd);
	return e;
}

/* A sibling of dest, private to us, for the tree before it is delivered. */
static int
make_tmp(const char *dest, char *tmp, size_t len)
{
	unsigned char rnd[8];
	char rh[17];
	const char *slash = strrchr(dest, '/');
	int n;

	if (dest[0] != '/' || slash == NULL || slash[1] == '\0')
		return KZ_EINVAL;
	randombytes_buf(rnd, sizeof(rnd));
	kz_hex(rnd, sizeof(rnd), rh);
	n = snprintf(tmp, len, "%.*s/.kzp-%s", (int)(slash - dest), dest, rh);
	if (n < 0 || (size_t)n >= len)
		return KZ_ETOOBIG;
	return mkdir(tmp, 0700) == 0 ? 0 : KZ_ESYS;
}

int
kzp_materialize(const struct kzp *p, const cJSON *snap, const char *dest,
    kzp_gate_fn *gate, void *arg, int64_t *files, int64_t *bytes,
    struct kzp_res *r)
{
	struct proj pj = {.root = -1, .blobs = -1};
	char tmp[PATH_MAX];
	const cJSON *it;
	struct stat sb;
	int e;

	*files = *bytes = 0;
	if (lstat(dest, &sb) == 0 || errno != ENOENT ||
	    make_tmp(dest, tmp, sizeof(tmp)) != 0) {
		kzp_fail(r, KZ_WE_BAD_REQUEST,
		    "the destination must be a new "
		    "absolute path in an existing directory");
		return KZ_EINVAL;
	}
	if ((pj.root = open(tmp,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "the projection could not start");
		e = KZ_ESYS;
		goto out;
	}
	/* A missing blob directory fails the first file, as a missing blob. */
	if (kzp_blob_dir(p->blobdir, &pj.blobs) != 0)
		pj.blobs = -1;
	cJSON_ArrayForEach(it, kz_json_get(snap, "items"))
	{
		if ((e = put_one(&pj, it, bytes, r)) != 0)
			goto out;
		(*files)++;
	}
	/* The bounds rule again, on what was actually written. */
	if (*files > p->b.max_files || *bytes > p->b.max_total_bytes ||
	    *files !=
	        (int64_t)cJSON_GetNumberValue(kz_json_get(snap, "files"))) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the projection is over the configured bounds");
		e = KZ_ETOOBIG;
		goto out;
	}
	/* The decision is recorded before any byte is delivered. */
	if (gate != NULL && (e = gate(arg, *files, *bytes, r)) != 0)
		goto out;
	/* Files are 0444 already; directories become 0555 last. */
	if ((pj.subdirs &&
	        nftw(tmp, chmod_ro, 16, FTW_DEPTH | FTW_PHYS) != 0) ||
	    fchmod(pj.root, 0555) != 0 ||
	    renameat2(AT_FDCWD, tmp, AT_FDCWD, dest, RENAME_NOREPLACE) != 0) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the projection could not be delivered");
		e = KZ_ESYS;
		goto out;
	}
	e = 0;
out:
	if (pj.root >= 0)
		close(pj.root);
	if (pj.blobs >= 0)
		close(pj.blobs);
	/* A failure after the tree was sealed (the rename refused: dest
	 * appeared meanwhile) finds its directories 0555: kz_tree_remove()
	 * unseals them, so nothing is left beside dest. */
	if (e != 0 && kz_tree_remove(AT_FDCWD, tmp) != 0)
		kz_log(KZ_LOG_WARN, "project.cleanup", KZ_ESYS,
		    "a failed projection could not be removed", NULL);
	return e;
}
