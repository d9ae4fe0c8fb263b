/*
 * The package: the server-derived profile, the canonical workspace, the
 * authored tree and its digest, resource resolution and materialization.
 * Every file of the package is opened through kz_path_open().
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_json.h"
#include "kz_key.h"
#include "kz_path.h"
#include "pv.h"
#include "banned.h"

static const char *const profile_fields[] = {"v", "kind", "deadline_ms",
    "skills", "prompts", "themes", "extensions", "tests", "lock", NULL};

static int
str_list(const cJSON *o, const char *key, const char **out, size_t *n,
    char *why, size_t wlen)
{
	const cJSON *a = kz_json_get(o, key), *e;

	*n = 0;
	if (a == NULL)
		return 0;
	if (!cJSON_IsArray(a)) {
		kz_why(why, wlen, "%s must be an array", key);
		return KZ_ETYPE;
	}
	cJSON_ArrayForEach(e, a)
	{
		if (!cJSON_IsString(e) || *n >= PV_MAX_RES) {
			kz_why(why, wlen, "%s: strings, at most %d", key,
			    PV_MAX_RES);
			return KZ_ETYPE;
		}
		out[(*n)++] = e->valuestring;
	}
	return 0;
}

static int
read_small(const char *file, size_t max, char **out, size_t *len, char *why,
    size_t wlen)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	char *b = NULL;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size > max) {
		kz_why(why, wlen,
		    "cannot read a regular file of at most %zu bytes", max);
		if (fd >= 0)
			close(fd);
		return KZ_EINVAL;
	}
	if ((b = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return KZ_ENOMEM;
	}
	n = read(fd, b, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(b);
		kz_why(why, wlen, "short read");
		return KZ_EINVAL;
	}
	b[n] = '\0';
	*out = b;
	*len = (size_t)n;
	return 0;
}

static int
profile_fields_load(struct pv_profile *p, char *why, size_t wlen)
{
	const char *kind;
	int64_t v;
	int r;

	if ((r = kz_json_only(p->root, profile_fields, why, wlen)) != 0 ||
	    (r = kz_json_int(p->root, "v", 1, 1, &v, why, wlen)) != 0 ||
	    (r = kz_json_str(p->root, "kind", 16, &kind, why, wlen)) != 0 ||
	    (r = str_list(p->root, "skills", p->skills, &p->nskills, why,
	         wlen)) != 0 ||
	    (r = str_list(p->root, "prompts", p->prompts, &p->nprompts, why,
	         wlen)) != 0 ||
	    (r = str_list(p->root, "themes", p->themes, &p->nthemes, why,
	         wlen)) != 0 ||
	    (r = str_list(p->root, "extensions", p->exts, &p->nexts, why,
	         wlen)) != 0 ||
	    (r = str_list(p->root, "tests", p->tests, &p->ntests, why, wlen)) !=
	        0 ||
	    (r = kz_json_str_opt(p->root, "lock", KZ_PATH_MAX, NULL, &p->lock,
	         why, wlen)) != 0)
		return r;
	if (strcmp(kind, "skill") == 0)
		p->kind = PV_SKILL;
	else if (strcmp(kind, "extension") == 0)
		p->kind = PV_EXTENSION;
	else {
		kz_why(why, wlen, "kind must be skill or extension");
		return KZ_ERANGE;
	}
	if (p->kind == PV_SKILL && (p->nexts || p->ntests || p->lock)) {
		kz_why(why, wlen,
		    "a skill profile has no extensions, tests or lock");
		return KZ_EINVAL;
	}
	if (p->kind == PV_EXTENSION && (p->nexts == 0 || p->ntests == 0)) {
		kz_why(why, wlen,
		    "an extension profile needs extensions and tests");
		return KZ_EMISSING;
	}
	return 0;
}

void
pv_sha256_hex(const char *buf, size_t len, char hex[PV_DIGEST_HEX + 1])
{
	unsigned char d[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(d, (const unsigned char *)buf, len);
	kz_hex(d, sizeof(d), hex);
}

int
pv_profile_digest(const char *file, char hex[PV_DIGEST_HEX + 1], char *why,
    size_t wlen)
{
	char *buf = NULL;
	size_t len;
	int r;

	if ((r = read_small(file, PV_MAX_PROFILE, &buf, &len, why, wlen)) != 0)
		return r;
	pv_sha256_hex(buf, len, hex);
	free(buf);
	return 0;
}

int
pv_profile_load(const char *file, int64_t deadline_max, struct pv_profile *p,
    char *why, size_t wlen)
{
	char *buf = NULL;
	size_t len;
	int r;

	memset(p, 0, sizeof(*p));
	if ((r = read_small(file, PV_MAX_PROFILE, &buf, &len, why, wlen)) != 0)
		return r;
	pv_sha256_hex(buf, len, p->sha256);
	r = kz_json_parse_object(buf, len, &p->root, why, wlen);
	free(buf);
	if (r != 0)
		return r;
	if ((r = profile_fields_load(p, why, wlen)) != 0 ||
	    (r = kz_json_int(p->root, "deadline_ms", 100, deadline_max,
	         &p->deadline_ms, why, wlen)) != 0) {
		pv_profile_release(p);
		return r;
	}
	return 0;
}

void
pv_profile_release(struct pv_profile *p)
{
	cJSON_Delete(p->root);
	memset(p, 0, sizeof(*p));
}

/*
 * The working directory is the workspace: an absolute path with no symlink
 * on the way, a directory owned by us that nobody else may write.
 */
int
pv_workspace_check(char *cwd, size_t len, char *why, size_t wlen)
{
	const char *pwd = getenv("PWD");
	struct stat st;
	size_t n;

	if (getcwd(cwd, len) == NULL || cwd[0] != '/') {
		kz_why(why, wlen, "no usable working directory");
		return KZ_EINVAL;
	}
	/* The kernel's cwd is physical; PWD tells how the caller got here. */
	if (pwd != NULL && strcmp(pwd, cwd) != 0) {
		kz_why(why, wlen,
		    "working directory was reached through a "
		    "symlink (PWD differs from the physical path)");
		return KZ_EDENIED;
	}
	n = strlen(cwd);
	for (size_t i = 1; i <= n; i++) {
		char c = cwd[i];

		if (c != '/' && c != '\0')
			continue;
		cwd[i] = '\0';
		if (lstat(cwd, &st) != 0 || !S_ISDIR(st.st_mode)) {
			kz_why(why, wlen,
			    "working directory path crosses a "
			    "symlink or a non-directory");
			cwd[i] = c;
			return KZ_EDENIED;
		}
		cwd[i] = c;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
		kz_why(why, wlen,
		    "working directory is not owned by us or is "
		    "writable by others");
		return KZ_EDENIED;
	}
	return 0;
}

/* ---- the tree ---- */

static int
tree_add(struct pv_tree *t, const char *rel, char *why, size_t wlen)
{
	char **np;

	if (t->n >= PV_MAX_FILES) {
		kz_why(why, wlen, "more than %d files", PV_MAX_FILES);
		return KZ_ETOOBIG;
	}
	if ((np = realloc(t->paths, (t->n + 1) * sizeof(*np))) == NULL)
		return KZ_ENOMEM;
	t->paths = np;
	if ((t->paths[t->n] = strdup(rel)) == NULL)
		return KZ_ENOMEM;
	t->n++;
	return 0;
}

static int
scan_dir(int dfd, const char *prefix, int depth, bool skip, struct pv_tree *t,
    char *why, size_t wlen)
{
	DIR *d;
	struct dirent *e;
	char rel[KZ_PATH_MAX + 1];
	int r = 0, sub;

	if (depth > KZ_PATH_DEPTH_MAX || (d = fdopendir(dfd)) == NULL) {
		close(dfd);
		kz_why(why, wlen, "package tree too deep or unreadable");
		return KZ_EPATH_LEN;
	}
	while (r == 0 && (e = readdir(d)) != NULL) {
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (skip && depth == 0 &&
		    strcmp(e->d_name, "node_modules") == 0)
			continue;
		if (snprintf(rel, sizeof(rel), "%s%s%s", prefix,
		        *prefix ? "/" : "", e->d_name) >= (int)sizeof(rel)) {
			r = KZ_EPATH_LEN;
			break;
		}
		if ((r = kz_path_check(rel, strlen(rel), why, wlen)) != 0)
			break;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			r = KZ_ESYS;
			break;
		}
		if (S_ISREG(st.st_mode)) {
			r = tree_add(t, rel, why, wlen);
		} else if (S_ISDIR(st.st_mode)) {
			sub = openat(dirfd(d), e->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = sub < 0 ?
			    KZ_EPATH_SYMLINK :
			    scan_dir(sub, rel, depth + 1, skip, t, why, wlen);
		} else {
			kz_why(why, wlen,
			    "package holds something that is not "
			    "a file or directory: %s",
			    rel);
			r = S_ISLNK(st.st_mode) ? KZ_EPATH_SYMLINK :
			                          KZ_EPATH_NOTREG;
		}
	}
	closedir(d);
	return r;
}

static int
cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Feeds one file (opened through the rooted-path module) to the hash. */
static int
hash_file(int rootfd, const char *rel, crypto_hash_sha256_state *h,
    uint64_t *total, char *why, size_t wlen)
{
	unsigned char buf[65536], sz[8];
	struct stat st;
	int fd = -1, r;
	ssize_t n;
	uint64_t left;

	if ((r = kz_path_open(rootfd, rel, strlen(rel), KZ_PATH_FILE, &fd, why,
	         wlen)) != 0)
		return r;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > PV_MAX_FILE_BYTES ||
	    (*total += (uint64_t)st.st_size) > PV_MAX_TOTAL_BYTES) {
		close(fd);
		kz_why(why, wlen, "package file or total over the size limit");
		return KZ_ETOOBIG;
	}
	left = (uint64_t)st.st_size;
	for (int i = 0; i < 8; i++)
		sz[i] = (unsigned char)(left >> (56 - 8 * i));
	crypto_hash_sha256_update(h, (const unsigned char *)rel,
	    strlen(rel) + 1);
	crypto_hash_sha256_update(h, sz, sizeof(sz));
	while (left > 0 && (n = read(fd, buf, sizeof(buf))) > 0) {
		if ((uint64_t)n > left)
			n = (ssize_t)left;
		crypto_hash_sha256_update(h, buf, (size_t)n);
		left -= (uint64_t)n;
	}
	close(fd);
	if (left != 0) {
		kz_why(why, wlen, "file changed while hashed");
		return KZ_ESTATE;
	}
	return 0;
}

/*
 * Canonical digest: SHA-256 of "kz-pi-artifact-v1\0", then for each
 * regular file in byte order of its path: path, NUL, 8-byte big-endian
 * size, contents.  Directories carry no bytes; anything else is refused.
 */
int
pv_tree_scan(int rootfd, bool skip_modules, struct pv_tree *t, char *why,
    size_t wlen)
{
	static const char tag[] = "kz-pi-artifact-v1";
	crypto_hash_sha256_state h;
	unsigned char d[crypto_hash_sha256_BYTES];
	int dfd, r;

	memset(t, 0, sizeof(*t));
	if ((dfd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return KZ_ESYS;
	if ((r = scan_dir(dfd, "", 0, skip_modules, t, why, wlen)) != 0)
		goto out;
	if (t->n == 0) {
		kz_why(why, wlen, "package has no files");
		r = KZ_EMISSING;
		goto out;
	}
	qsort(t->paths, t->n, sizeof(*t->paths), cmp_path);
	crypto_hash_sha256_init(&h);
	crypto_hash_sha256_update(&h, (const unsigned char *)tag, sizeof(tag));
	for (size_t i = 0; i < t->n; i++)
		if ((r = hash_file(rootfd, t->paths[i], &h, &t->total, why,
		         wlen)) != 0)
			goto out;
	crypto_hash_sha256_final(&h, d);
	kz_hex(d, sizeof(d), t->digest);
out:
	if (r != 0)
		pv_tree_release(t);
	return r;
}

void
pv_tree_release(struct pv_tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->paths[i]);
	free(t->paths);
	memset(t, 0, sizeof(*t));
}

static int
res_list(int rootfd, const char *what, const char *const *l, size_t n,
    int flags, char *why, size_t wlen)
{
	char w[160];
	int fd, r;

	for (size_t i = 0; i < n; i++) {
		if ((r = kz_path_open(rootfd, l[i], strlen(l[i]), flags, &fd, w,
		         sizeof(w))) != 0) {
			kz_why(why, wlen, "%s entry %zu: %s (%s)", what, i,
			    kz_strerror(r), w);
			return r;
		}
		close(fd);
	}
	return 0;
}

int
pv_resources_check(int rootfd, const struct pv_profile *p, char *why,
    size_t wlen)
{
	int r;

	if ((r = res_list(rootfd, "skills", p->skills, p->nskills, KZ_PATH_DIR,
	         why, wlen)) != 0 ||
	    (r = res_list(rootfd, "prompts", p->prompts, p->nprompts,
	         KZ_PATH_FILE, why, wlen)) != 0 ||
	    (r = res_list(rootfd, "themes", p->themes, p->nthemes, KZ_PATH_FILE,
	         why, wlen)) != 0 ||
	    (r = res_list(rootfd, "extensions", p->exts, p->nexts, KZ_PATH_FILE,
	         why, wlen)) != 0 ||
	    (r = res_list(rootfd, "tests", p->tests, p->ntests, KZ_PATH_FILE,
	         why, wlen)) != 0)
		return r;
	if (p->lock != NULL)
		r = res_list(rootfd, "lock", &p->lock, 1, KZ_PATH_FILE, why,
		    wlen);
	return r;
}
