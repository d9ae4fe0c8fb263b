/*
 * The canonical encoding of a package and its exact copy.
 *
 * A package is its manifest and a tree of directories and regular files.
 * The tree is listed first (names only, each checked against the
 * rooted-path grammar, types from lstat), then sorted bytewise by path, so
 * the encoding does not depend on the order a directory happens to return.
 * Every file is then opened through kz_path_open beneath the tree's root
 * (no symlink, no other mount, one link, a regular file), read whole, and
 * fed to SHA-256 as it is copied, so the bytes copied are the bytes hashed.
 *
 * Encoding: "kz-pkgrun-tree-v1\0", the manifest's length (8 bytes, big
 * endian) and bytes, the entry count (8 bytes), then per entry in order:
 * 'd' or 'f', one mode byte (1 when the owner may execute a file, else 0),
 * the path's length (4 bytes) and bytes, and for a file its size (8 bytes)
 * and contents.  A changed byte, name, type, executable bit or manifest is
 * a different hash.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_key.h"
#include "kz_path.h"
#include "pkgrun.h"
#include "banned.h"

static const char tree_tag[] = "kz-pkgrun-tree-v1";

struct entry {
	char *rel;
	bool dir, exec;
	uint64_t size;
};

struct list {
	struct entry *e;
	size_t n, cap;
	uint64_t bytes;
	const struct pr_tree_opts *o;
};

static void
list_release(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->e[i].rel);
	free(l->e);
	memset(l, 0, sizeof(*l));
}

static int
list_add(struct list *l, const char *rel, const struct stat *st, char *why,
    size_t wlen)
{
	struct entry *e;

	if ((int64_t)l->n >= l->o->entries_max) {
		kz_why(why, wlen, "the package has more than %lld entries",
		    (long long)l->o->entries_max);
		return KZ_ETOOBIG;
	}
	if (S_ISREG(st->st_mode) &&
	    (l->bytes += (uint64_t)st->st_size) > l->o->bytes_max) {
		kz_why(why, wlen, "the package is larger than %llu bytes",
		    (unsigned long long)l->o->bytes_max);
		return KZ_ETOOBIG;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;

		if ((e = reallocarray(l->e, cap, sizeof(*e))) == NULL)
			return KZ_ENOMEM;
		l->e = e, l->cap = cap;
	}
	e = &l->e[l->n];
	if ((e->rel = strdup(rel)) == NULL)
		return KZ_ENOMEM;
	e->dir = S_ISDIR(st->st_mode);
	e->exec = !e->dir && (st->st_mode & S_IXUSR) != 0;
	e->size = e->dir ? 0 : (uint64_t)st->st_size;
	l->n++;
	return 0;
}

/* What an entry that is neither a directory nor a regular file is. */
static int
bad_type(mode_t m)
{
	if (S_ISLNK(m))
		return KZ_EPATH_SYMLINK;
	if (S_ISFIFO(m))
		return KZ_EPATH_FIFO;
	if (S_ISCHR(m) || S_ISBLK(m))
		return KZ_EPATH_DEVICE;
	return KZ_EPATH_NOTREG;
}

/* A cache entry is sealed: ours, and writable by nobody. */
static int
check_sealed(const struct list *l, const struct stat *st, const char *rel,
    char *why, size_t wlen)
{
	if (!l->o->sealed)
		return 0;
	if (st->st_uid != geteuid() || (st->st_mode & 0222) != 0) {
		kz_why(why, wlen, "the cache entry is not sealed at %s", rel);
		return KZ_EDENIED;
	}
	return 0;
}

static int walk(int rootfd, const char *prefix, struct list *l, char *why,
    size_t wlen);

static int
walk_one(int rootfd, int dfd, const char *prefix, const char *name,
    struct list *l, char *why, size_t wlen)
{
	char rel[KZ_PATH_MAX + 1];
	struct stat st;
	int r;

	if ((size_t)snprintf(rel, sizeof(rel), "%s%s%s", prefix,
	        prefix[0] ? "/" : "", name) >= sizeof(rel) ||
	    (r = kz_path_check(rel, strlen(rel), NULL, 0)) != 0) {
		kz_why(why, wlen,
		    "the package has an entry whose name is "
		    "not a rooted path");
		return KZ_EPATH_LEN;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		kz_why(why, wlen, "%s: %s", rel, strerror(errno));
		return KZ_ESYS;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		r = bad_type(st.st_mode);
		kz_why(why, wlen, "%s: %s", rel, kz_strerror(r));
		return r;
	}
	if ((r = check_sealed(l, &st, rel, why, wlen)) != 0 ||
	    (r = list_add(l, rel, &st, why, wlen)) != 0)
		return r;
	return S_ISDIR(st.st_mode) ? walk(rootfd, rel, l, why, wlen) : 0;
}

/* Lists the directory prefix ("" for the root) beneath rootfd. */
static int
walk(int rootfd, const char *prefix, struct list *l, char *why, size_t wlen)
{
	struct dirent *de;
	DIR *d = NULL;
	int dfd = -1, r;

	if (prefix[0] == '\0')
		dfd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if ((r = kz_path_open(rootfd, prefix, strlen(prefix), KZ_PATH_DIR,
	              &dfd, why, wlen)) != 0)
		return r;
	if (dfd < 0 || (d = fdopendir(dfd)) == NULL) {
		if (dfd >= 0)
			close(dfd);
		kz_why(why, wlen, "cannot list the package: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	r = 0;
	while (r == 0 && (errno = 0, de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			r = walk_one(rootfd, dirfd(d), prefix, de->d_name, l,
			    why, wlen);
	if (r == 0 && errno != 0) {
		kz_why(why, wlen, "cannot list the package: %s",
		    strerror(errno));
		r = KZ_ESYS;
	}
	closedir(d);
	return r;
}

static int
cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->rel,
	    ((const struct entry *)b)->rel);
}

static void
put_be(crypto_hash_sha256_state *h, uint64_t v, int bytes)
{
	unsigned char b[8];

	for (int i = 0; i < bytes; i++)
		b[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
	crypto_hash_sha256_update(h, b, (unsigned long long)bytes);
}

/* Hashes (and copies to out, when >= 0) exactly e->size bytes of in. */
static int
feed(crypto_hash_sha256_state *h, int in, int out, const struct entry *e,
    char *why, size_t wlen)
{
	unsigned char buf[65536];
	uint64_t left = e->size;
	struct stat st;
	ssize_t n;

	if (fstat(in, &st) != 0 || (uint64_t)st.st_size != e->size) {
		kz_why(why, wlen, "%s changed while it was read", e->rel);
		return KZ_EDENIED;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if ((uint64_t)n > left) {
			kz_why(why, wlen, "%s grew while it was read", e->rel);
			return KZ_EDENIED;
		}
		left -= (uint64_t)n;
		crypto_hash_sha256_update(h, buf, (unsigned long long)n);
		if (out >= 0 && kz_write_full(out, buf, (size_t)n, -1) != 0) {
			kz_why(why, wlen, "cannot copy %s: %s", e->rel,
			    strerror(errno));
			return KZ_ESYS;
		}
	}
	if (n < 0 || left != 0) {
		kz_why(why, wlen, "%s: short read", e->rel);
		return n < 0 ? KZ_ESYS : KZ_EDENIED;
	}
	return 0;
}

static int
file_entry(crypto_hash_sha256_state *h, int rootfd, int dstfd,
    const struct entry *e, char *why, size_t wlen)
{
	int in = -1, out = -1, r;

	if ((r = kz_path_open(rootfd, e->rel, strlen(e->rel), KZ_PATH_FILE, &in,
	         why, wlen)) != 0) {
		kz_why(why, wlen, "%s: %s", e->rel, kz_strerror(r));
		return r;
	}
	if (dstfd >= 0 &&
	    (out = openat(dstfd, e->rel,
	         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	         e->exec ? 0555 : 0444)) < 0) {
		kz_why(why, wlen, "cannot copy %s: %s", e->rel,
		    strerror(errno));
		close(in);
		return KZ_ESYS;
	}
	put_be(h, e->size, 8);
	r = feed(h, in, out, e, why, wlen);
	close(in);
	if (out >= 0 && close(out) != 0 && r == 0)
		r = KZ_ESYS;
	return r;
}

static int
hash_list(const struct list *l, int rootfd, const char *manifest, size_t mlen,
    int dstfd, unsigned char hash[PR_HASH_BYTES], char *why, size_t wlen)
{
	crypto_hash_sha256_state h;
	int r = 0;

	crypto_hash_sha256_init(&h);
	crypto_hash_sha256_update(&h, (const unsigned char *)tree_tag,
	    sizeof(tree_tag));
	put_be(&h, mlen, 8);
	crypto_hash_sha256_update(&h, (const unsigned char *)manifest, mlen);
	put_be(&h, l->n, 8);
	for (size_t i = 0; r == 0 && i < l->n; i++) {
		const struct entry *e = &l->e[i];
		unsigned char t[2] = {e->dir ? 'd' : 'f', e->exec ? 1 : 0};

		crypto_hash_sha256_update(&h, t, 2);
		put_be(&h, strlen(e->rel), 4);
		crypto_hash_sha256_update(&h, (const unsigned char *)e->rel,
		    strlen(e->rel));
		if (!e->dir)
			r = file_entry(&h, rootfd, dstfd, e, why, wlen);
		else if (dstfd >= 0 && mkdirat(dstfd, e->rel, 0755) != 0) {
			kz_why(why, wlen, "cannot copy %s: %s", e->rel,
			    strerror(errno));
			r = KZ_ESYS;
		}
	}
	crypto_hash_sha256_final(&h, hash);
	/* Deepest first, so each directory is sealed after its contents. */
	for (size_t i = l->n; r == 0 && dstfd >= 0 && i-- > 0;)
		if (l->e[i].dir && fchmodat(dstfd, l->e[i].rel, 0555, 0) != 0)
			r = KZ_ESYS;
	return r;
}

int
pr_tree_hash(int srcfd, const char *manifest, size_t mlen, int dstfd,
    const struct pr_tree_opts *o, unsigned char hash[PR_HASH_BYTES], char *why,
    size_t wlen)
{
	struct pr_space sp = {0, 0};
	struct list l;
	struct stat st;
	uint64_t bytes = 0;
	int r;

	memset(&l, 0, sizeof(l));
	l.o = o;
	if (fstat(srcfd, &st) != 0 || !S_ISDIR(st.st_mode)) {
		kz_why(why, wlen, "the package root is not a directory");
		return KZ_EPATH_NOTDIR;
	}
	if ((r = check_sealed(&l, &st, ".", why, wlen)) != 0 ||
	    (r = walk(srcfd, "", &l, why, wlen)) != 0)
		goto out;
	qsort(l.e, l.n, sizeof(l.e[0]), cmp_entry);
	/* A copy takes its room first. */
	for (size_t i = 0; i < l.n; i++)
		bytes += pr_space_file(l.e[i].size);
	if (dstfd >= 0 &&
	    (r = pr_space_take(dstfd, o->free_min, bytes, l.n, &sp, why,
	         wlen)) != 0)
		goto out;
	r = hash_list(&l, srcfd, manifest, mlen, dstfd, hash, why, wlen);
	pr_space_give(&sp);
out:
	list_release(&l);
	return r;
}

int
pr_mkdir_fresh(int parentfd, const char *prefix, mode_t mode, char *name,
    size_t len)
{
	unsigned char rnd[6];
	char hex[sizeof(rnd) * 2 + 1];

	for (int tries = 0; tries < 8; tries++) {
		randombytes_buf(rnd, sizeof(rnd));
		kz_hex(rnd, sizeof(rnd), hex);
		if ((size_t)snprintf(name, len, "%s-%s", prefix, hex) >= len)
			return KZ_ETOOBIG;
		if (mkdirat(parentfd, name, mode) == 0)
			return fchmodat(parentfd, name, mode, 0) == 0 ? 0 :
			                                                KZ_ESYS;
		if (errno != EEXIST)
			return KZ_ESYS;
	}
	return KZ_ESYS;
}
