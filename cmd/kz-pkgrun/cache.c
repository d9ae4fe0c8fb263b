/*
 * The content-addressed package cache: PKGRUN_CACHE/<sha256 hex>/ holds
 * manifest.json and pkg/, the package tree, all of it owned by the runner
 * and writable by nobody.  An entry is made in a fresh private directory
 * and renamed into place only when complete, so a reader never sees half
 * a package.  Nothing trusts an entry because of where it is: every
 * invocation copies the tree out again through the same walk that hashed
 * it at admission, and refuses the run unless the bytes it copied hash to
 * the name it asked for.  A changed byte in the cache therefore fails
 * closed; it can never run as the package that was reviewed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_io.h"
#include "kz_key.h"
#include "kz_path.h"
#include "kz_log.h"
#include "kz_tree.h"
#include "pkgrun.h"
#include "banned.h"

bool
pr_hash_hex_ok(const char *s)
{
	return s != NULL && strlen(s) == PR_HASH_HEX &&
	    strspn(s, "0123456789abcdef") == PR_HASH_HEX;
}

static struct pr_tree_opts
opts(const struct pr_conf *c, bool sealed)
{
	/* A sealed source is a cache entry: the copy is a projection's. */
	struct pr_tree_opts o = {c->entries_max, c->package_max, sealed,
	    sealed ? c->free_min : 0};

	return o;
}

/* Reads all of fd (a regular file of at most max bytes) into *out. */
static int
slurp(int fd, size_t max, char **out, size_t *len, char *why, size_t wlen)
{
	struct stat st;
	char *buf;
	ssize_t n;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > max) {
		kz_why(why, wlen,
		    "the manifest is not a regular file of at "
		    "most %zu bytes",
		    max);
		return KZ_EINVAL;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL)
		return KZ_ENOMEM;
	n = read(fd, buf, (size_t)st.st_size + 1);
	if (n != (ssize_t)st.st_size) {
		free(buf);
		kz_why(why, wlen, "the manifest changed while it was read");
		return KZ_EINVAL;
	}
	buf[n] = '\0';
	*out = buf, *len = (size_t)n;
	return 0;
}

static int
open_cache(const struct pr_conf *c, bool create, int *fd, char *why,
    size_t wlen)
{
	if (create && mkdir(c->cache, 0755) != 0 && errno != EEXIST) {
		kz_why(why, wlen, "cannot make the cache: %s", strerror(errno));
		return KZ_EUNAVAIL;
	}
	*fd = open(c->cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0) {
		kz_why(why, wlen, "the cache is unavailable: %s",
		    strerror(errno));
		return KZ_EUNAVAIL;
	}
	return 0;
}

/* Builds the entry in tmp beneath cfd: pkg/ and manifest.json, sealed. */
static int
build(const struct pr_conf *c, int cfd, const char *tmp, int srcfd,
    const char *man, size_t mlen, unsigned char hash[PR_HASH_BYTES], char *why,
    size_t wlen)
{
	struct pr_tree_opts o = opts(c, false);
	int tfd = -1, pfd = -1, mfd = -1, r = KZ_ESYS;

	if ((tfd = openat(cfd, tmp,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    mkdirat(tfd, PR_PKG_DIR, 0755) != 0 ||
	    (pfd = openat(tfd, PR_PKG_DIR,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		kz_why(why, wlen, "cannot make a cache entry: %s",
		    strerror(errno));
		goto out;
	}
	if ((r = pr_tree_hash(srcfd, man, mlen, pfd, &o, hash, why, wlen)) != 0)
		goto out;
	r = KZ_ESYS;
	if ((mfd = openat(tfd, PR_MANIFEST_NAME,
	         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)) <
	        0 ||
	    kz_write_full(mfd, man, mlen, -1) != 0 || fsync(mfd) != 0 ||
	    fchmod(pfd, 0555) != 0 || fchmod(tfd, 0555) != 0 ||
	    fsync(tfd) != 0) {
		kz_why(why, wlen, "cannot write the cache entry: %s",
		    strerror(errno));
		goto out;
	}
	r = 0;
out:
	if (mfd >= 0)
		close(mfd);
	if (pfd >= 0)
		close(pfd);
	if (tfd >= 0)
		close(tfd);
	return r;
}

/* An entry that was already there is verified, never replaced. */
static int
verify_existing(const struct pr_conf *c, const char *hex, char *why,
    size_t wlen)
{
	char *man = NULL;
	size_t mlen = 0;
	int efd = -1, r;

	if ((r = pr_cache_open(c, hex, &efd, &man, &mlen, why, wlen)) == 0)
		r = pr_cache_stage(c, efd, hex, man, mlen, -1, why, wlen);
	if (efd >= 0)
		close(efd);
	free(man);
	return r;
}

static int
admit_tree(const struct pr_conf *c, int srcfd, const char *man, size_t mlen,
    char hex[PR_HASH_HEX + 1], char *why, size_t wlen)
{
	unsigned char hash[PR_HASH_BYTES];
	char tmp[64];
	int cfd = -1, r;

	if ((r = open_cache(c, true, &cfd, why, wlen)) != 0)
		return r;
	if ((r = pr_mkdir_fresh(cfd, ".admit", 0700, tmp, sizeof(tmp))) != 0) {
		kz_why(why, wlen, "cannot write the cache: %s",
		    strerror(errno));
		close(cfd);
		return KZ_EUNAVAIL;
	}
	r = build(c, cfd, tmp, srcfd, man, mlen, hash, why, wlen);
	kz_hex(hash, sizeof(hash), hex);
	/* Audited before it is in place: an admission that cannot be
	 * recorded never reaches the cache. */
	if (r == 0 && pr_audit_admit(c, hex, "ok", NULL, why, wlen) != 0)
		r = KZ_EUNAVAIL;
	if (r == 0 && renameat2(cfd, tmp, cfd, hex, RENAME_NOREPLACE) != 0) {
		if (errno == EEXIST)
			r = verify_existing(c, hex, why, wlen);
		else {
			kz_why(why, wlen, "cannot commit the cache entry: %s",
			    strerror(errno));
			r = KZ_ESYS;
		}
	}
	if (kz_tree_remove(cfd, tmp) != 0)
		kz_log(KZ_LOG_WARN, "pkgrun.cleanup", KZ_ESYS,
		    "an unpacked entry could not be removed", NULL);
	close(cfd);
	return r;
}

int
pr_cache_admit(const struct pr_conf *c, const char *srcdir, const char *mpath,
    char hex[PR_HASH_HEX + 1], struct pr_manifest *m, char *why, size_t wlen)
{
	char *man = NULL;
	size_t mlen = 0;
	int mfd, srcfd = -1, r;

	mfd = open(mpath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (mfd < 0) {
		kz_why(why, wlen, "cannot open the manifest: %s",
		    strerror(errno));
		return KZ_EINVAL;
	}
	r = slurp(mfd, PR_MANIFEST_MAX, &man, &mlen, why, wlen);
	close(mfd);
	if (r != 0 || (r = pr_manifest_parse(man, mlen, m, why, wlen)) != 0)
		goto out;
	srcfd = open(srcdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (srcfd < 0) {
		kz_why(why, wlen, "cannot open the package directory: %s",
		    strerror(errno));
		r = KZ_EINVAL;
		goto out;
	}
	if ((r = pr_manifest_check_tree(m, srcfd, why, wlen)) == 0)
		r = admit_tree(c, srcfd, man, mlen, hex, why, wlen);
out:
	if (r != 0)
		pr_manifest_release(m);
	if (srcfd >= 0)
		close(srcfd);
	free(man);
	return r;
}

int
pr_cache_open(const struct pr_conf *c, const char *hex, int *entryfd,
    char **manifest, size_t *mlen, char *why, size_t wlen)
{
	struct stat st;
	int cfd, efd = -1, mfd = -1, r;

	*entryfd = -1;
	if (!pr_hash_hex_ok(hex)) {
		kz_why(why, wlen,
		    "a package is named by 64 lowercase hex "
		    "digits");
		return KZ_EINVAL;
	}
	if ((r = open_cache(c, false, &cfd, why, wlen)) != 0)
		return r;
	r = kz_path_open(cfd, hex, PR_HASH_HEX, KZ_PATH_DIR, &efd, NULL, 0);
	close(cfd);
	if (r != 0) {
		kz_why(why, wlen, "no such package in the cache");
		return r == KZ_EPATH_NOENT ? KZ_ENOENT : KZ_EDENIED;
	}
	if ((r = kz_path_open(efd, PR_MANIFEST_NAME, strlen(PR_MANIFEST_NAME),
	         KZ_PATH_FILE, &mfd, NULL, 0)) != 0 ||
	    fstat(mfd, &st) != 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 0222) != 0) {
		kz_why(why, wlen, "the cache entry's manifest is not sealed");
		r = KZ_ECRYPTO;
	} else
		r = slurp(mfd, PR_MANIFEST_MAX, manifest, mlen, why, wlen);
	if (mfd >= 0)
		close(mfd);
	if (r != 0) {
		close(efd);
		return r;
	}
	*entryfd = efd;
	return 0;
}

int
pr_cache_stage(const struct pr_conf *c, int entryfd, const char *hex,
    const char *manifest, size_t mlen, int dstfd, char *why, size_t wlen)
{
	struct pr_tree_opts o = opts(c, true);
	unsigned char want[PR_HASH_BYTES], got[PR_HASH_BYTES];
	struct stat st;
	int pfd = -1, r;

	if (kz_unhex(hex, want, sizeof(want)) != 0)
		return KZ_EINVAL;
	if (fstat(entryfd, &st) != 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 0222) != 0) {
		kz_why(why, wlen, "the cache entry is not sealed");
		return KZ_ECRYPTO;
	}
	if ((r = kz_path_open(entryfd, PR_PKG_DIR, strlen(PR_PKG_DIR),
	         KZ_PATH_DIR, &pfd, NULL, 0)) != 0) {
		kz_why(why, wlen, "the cache entry has no package tree");
		return KZ_ECRYPTO;
	}
	r = pr_tree_hash(pfd, manifest, mlen, dstfd, &o, got, why, wlen);
	close(pfd);
	/* Whatever else the walk met, the entry is not what was admitted;
	 * only a failure to write the copy, or no room to write it, is the
	 * host's own. */
	if (r != 0)
		return r == KZ_ESYS || r == KZ_ENOMEM || r == KZ_EUNAVAIL ?
		    r :
		    KZ_ECRYPTO;
	if (!kz_ct_equal(want, got, sizeof(want))) {
		kz_why(why, wlen, "the cache entry does not match its hash");
		return KZ_ECRYPTO;
	}
	return 0;
}
