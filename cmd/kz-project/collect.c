/*
 * blob-collect, an operator's op: removes the blobs nothing references.
 * A blob is referenced by a resource version (res:I:v:N's sha); versions
 * are never deleted (a revoked resource keeps them), so what is left to
 * collect is a put no version ever named (an abandoned upload, a version
 * or an output refused after its put) and the partial write (.tmp-*) of a
 * put that died.
 *
 * Fail closed: every reference is read before anything is removed, and a
 * store that cannot be read to the end removes nothing.  The grace
 * (KZ_PROJECT_BLOB_GRACE) covers the backend's two calls, a put and the
 * version that names it: a blob is removed only when it is older than the
 * grace, decided under the store's exclusive lock, and a put or a version
 * sets its time to now under the shared one (blob.c).  So a blob is never
 * removed between a version's check of it and the version.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <hiredis/hiredis.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kzp.h"
#include "banned.h"

#define TMP_PREFIX ".tmp-"

/*
 * A list of the store's names: the referenced digests (sorted, for
 * bsearch) or the entries to remove.
 */
struct names {
	char (*v)[KZP_SHA_HEX + 1];
	size_t n, cap;
};

/* What one collection did. */
struct tally {
	int64_t kept, young, removed, bytes, partial, failed;
};

static int
names_add(struct names *l, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (v == NULL)
			return KZ_ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	snprintf(l->v[l->n++], KZP_SHA_HEX + 1, "%s", name);
	return 0;
}

static int
sha_cmp(const void *a, const void *b)
{
	return memcmp(a, b, KZP_SHA_HEX);
}

static bool
refs_has(const struct names *rf, const char *sha)
{
	return rf->n > 0 &&
	    bsearch(sha, rf->v, rf->n, sizeof(*rf->v), sha_cmp) != NULL;
}

static int
add_ref(void *arg, const char *sha)
{
	return kzp_sha_ok(sha) ? names_add(arg, sha) : 0;
}

/*
 * Whether the store is one server holding every key: SCAN lists only the
 * keys of the server it is sent to, and a cluster node that does not own
 * the deployment's slot (or a slot half-moved) would list no version, and
 * every old blob would look unreferenced.  *single false for a cluster.
 */
static int
store_single(struct kzp *p, bool *single, char *why, size_t wlen)
{
	const char *av[] = {"INFO", "cluster"};
	redisReply *rep;
	int e;

	if ((e = kz_store_cmd(p->st, 2, av, &rep, why, wlen)) != 0)
		return e;
	/* An answer that does not say is no proof of one server. */
	if (rep->type != REDIS_REPLY_STRING ||
	    strstr(rep->str, "cluster_enabled:") == NULL) {
		kz_why(why, wlen, "INFO cluster did not say");
		e = KZ_EPROTO;
	} else
		*single = strstr(rep->str, "cluster_enabled:0") != NULL;
	freeReplyObject(rep);
	return e;
}

/* Sorted, each digest once (a blob many versions name counts once). */
static void
names_sort_unique(struct names *l)
{
	size_t w = 0;

	qsort(l->v, l->n, sizeof(*l->v), sha_cmp);
	for (size_t i = 0; i < l->n; i++)
		if (w == 0 || sha_cmp(l->v[i], l->v[w - 1]) != 0)
			memmove(l->v[w++], l->v[i], sizeof(*l->v));
	l->n = w;
}

/*
 * Every page of the versions (lua/refs.lua), from one server: the same at
 * the end as at the start (its run id), or nothing is taken from them.
 */
static int
refs_pages(struct kzp *p, struct names *rf, struct kzp_res *r)
{
	char cur[32] = "0", id0[64], id1[64], why[KZP_WHY];
	int e;

	if ((e = kz_store_runid(p->st, id0, sizeof(id0), why, sizeof(why))) !=
	    0)
		return e;
	do
		e = kzp_refs_page(p, cur, add_ref, rf, r);
	while (e == 0 && strcmp(cur, "0") != 0);
	if (e != 0)
		return e;
	if ((e = kz_store_runid(p->st, id1, sizeof(id1), why, sizeof(why))) !=
	        0 ||
	    strcmp(id0, id1) != 0)
		return KZ_EUNAVAIL;
	return 0;
}

/* Every digest a version names, sorted; all of them or a failure. */
static int
refs_read(struct kzp *p, struct names *rf, struct kzp_res *r)
{
	char why[KZP_WHY];
	bool single = true;
	int e;

	if ((e = kzp_connect(p, r)) != 0)
		return e;
	if ((e = store_single(p, &single, why, sizeof(why))) == 0 && !single) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "blob-collect does not read a cluster store (SCAN lists "
		    "one node's keys): nothing removed");
		return KZ_EDENIED;
	}
	if (e == 0)
		e = refs_pages(p, rf, r);
	if (e == KZ_EUNAVAIL || (e != 0 && r->code == NULL)) {
		if (p->st != NULL) {
			kz_store_free(p->st);
			p->st = NULL;
		}
		kzp_fail(r, KZ_WE_STORE_UNAVAILABLE,
		    "the references could not be read from one server: "
		    "nothing removed");
		return KZ_EUNAVAIL;
	}
	if (e != 0)
		return e;
	names_sort_unique(rf);
	return 0;
}

static bool
partial_name(const char *name)
{
	return strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 &&
	    strlen(name) <= KZP_SHA_HEX;
}

/*
 * An entry's age: 1 when it is older than the grace (its size in *size),
 * 0 when younger, -1 when it is not a regular file (not the store's) or
 * is gone.
 */
static int
stale(const struct kzp *p, int dfd, const char *name, time_t now, int64_t *size)
{
	struct stat sb;

	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISREG(sb.st_mode))
		return -1;
	*size = sb.st_size;
	return now - sb.st_mtime >= p->blob_grace;
}

/*
 * The plan: every entry of the store a version names is kept; one that no
 * version names, or a partial write, is a candidate when it is older than
 * the grace.  Counts go to t as if every candidate were removed.
 */
static int
plan(const struct kzp *p, int dfd, const struct names *rf, struct names *c,
    struct tally *t)
{
	time_t now = time(NULL);
	struct dirent *de;
	int64_t size;
	DIR *d;
	int fd, age, e = 0;

	/* The listing's own descriptor shares dfd's open file, and its lock. */
	if ((fd = dup(dfd)) < 0)
		return KZ_ESYS;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return KZ_ESYS;
	}
	while (e == 0 && (de = readdir(d)) != NULL) {
		bool sha = kzp_sha_ok(de->d_name);

		if (sha && refs_has(rf, de->d_name))
			t->kept++;
		else if ((!sha && !partial_name(de->d_name)) ||
		    (age = stale(p, dfd, de->d_name, now, &size)) < 0)
			; /* not the store's: left as it is */
		else if (age == 0)
			t->young++;
		else if ((e = names_add(c, de->d_name)) == 0) {
			*(sha ? &t->removed : &t->partial) += 1;
			t->bytes += size;
		}
	}
	closedir(d);
	return e;
}

/*
 * Removes the candidates that are still older than the grace, each decided
 * and removed under the exclusive lock, so no put or renewal comes between;
 * t is recounted with what was removed.
 */
static void
sweep(const struct kzp *p, int dfd, const struct names *c, struct tally *t)
{
	time_t now = time(NULL);
	int64_t size;
	int age;

	t->removed = t->partial = t->bytes = 0;
	for (size_t i = 0; i < c->n; i++) {
		const char *name = c->v[i];

		if (kzp_blob_lock(dfd, LOCK_EX) != 0) {
			t->failed++;
			continue;
		}
		if ((age = stale(p, dfd, name, now, &size)) == 0)
			t->young++;
		else if (age < 0)
			; /* gone meanwhile */
		else if (unlinkat(dfd, name, 0) != 0) {
			kz_log(KZ_LOG_WARN, "collect.unlink", KZ_ESYS,
			    strerror(errno), NULL);
			t->failed++;
		} else {
			*(kzp_sha_ok(name) ? &t->removed : &t->partial) += 1;
			t->bytes += size;
		}
		flock(dfd, LOCK_UN);
	}
}

static void
reply(cJSON *out, bool dry, size_t refs, const struct tally *t)
{
	cJSON_AddBoolToObject(out, "dry", dry);
	cJSON_AddNumberToObject(out, "referenced", (double)refs);
	cJSON_AddNumberToObject(out, "kept", (double)t->kept);
	cJSON_AddNumberToObject(out, "young", (double)t->young);
	cJSON_AddNumberToObject(out, "removed", (double)t->removed);
	cJSON_AddNumberToObject(out, "partial", (double)t->partial);
	cJSON_AddNumberToObject(out, "bytes", (double)t->bytes);
	cJSON_AddNumberToObject(out, "failed", (double)t->failed);
}

/*
 * The references, the plan, its audit record, then the removal: a plan
 * that cannot be recorded removes nothing, and the removal never goes
 * beyond the plan (an entry renewed meanwhile is kept).
 */
static int
collect(struct kzp *p, int dfd, bool dry, cJSON *out, struct kzp_res *r)
{
	struct names rf = {0};
	struct names c = {0};
	struct tally t = {0};
	struct kzp_res ok = {0};
	int e;

	if ((e = refs_read(p, &rf, r)) != 0)
		goto out;
	if ((e = plan(p, dfd, &rf, &c, &t)) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "the blob store cannot be listed");
		goto out;
	}
	if (!dry && c.n > 0 &&
	    kzp_audit(p, "projection", "blob_collect", NULL, NULL, NULL, &ok,
	        t.removed + t.partial, t.bytes) != 0) {
		kzp_fail(r, KZ_WE_UNAVAILABLE,
		    "the audit sink is unavailable: nothing removed");
		e = KZ_EUNAVAIL;
		goto out;
	}
	if (!dry)
		sweep(p, dfd, &c, &t);
	reply(out, dry, rf.n, &t);
out:
	free(rf.v);
	free(c.v);
	return e;
}

int
kzp_op_blob_collect(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	struct tally none = {0};
	char why[KZP_WHY];
	bool dry;
	int dfd, e;

	if (kz_json_bool_opt(req, "dry", false, &dry, why, sizeof(why)) != 0)
		return kzp_bad(r, "field 'dry' must be a boolean");
	if ((dfd = open(p->blobdir,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		if (errno != ENOENT) {
			kzp_fail(r, KZ_WE_INTERNAL, "blob store unavailable");
			return KZ_ESYS;
		}
		reply(out, dry, 0, &none); /* nothing was ever put */
		return 0;
	}
	e = collect(p, dfd, dry, out, r);
	close(dfd);
	if (e == 0 && !p->oneshot)
		kz_log(KZ_LOG_INFO, "blob.collect", 0, NULL, "dry",
		    dry ? "1" : "0", NULL);
	return e;
}
