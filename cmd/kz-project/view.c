/*
 * The lookups, predicates and digests that the policy (admit.c) and the
 * verification (verify.c) share over one view (view.h): the index of a
 * view's entries by id, the project-grant rule (who may read an item),
 * readiness, the digests of a manifest and of a roster, the bounds rule,
 * and whether a member is a room's entire audience.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_json.h"
#include "kzp.h"
#include "view.h"
#include "banned.h"

static int
idx_cmp(const void *a, const void *b, void *key)
{
	return strcmp(jstr(*(const cJSON *const *)a, key),
	    jstr(*(const cJSON *const *)b, key));
}

int
kzp_idx_build(struct idx *ix, const cJSON *arr, const char *key)
{
	const cJSON *c;

	ix->n = 0;
	if ((ix->v = calloc((size_t)count(arr) + 1, sizeof(*ix->v))) == NULL)
		return KZ_ENOMEM;
	cJSON_ArrayForEach(c, arr) if (jstr(c, key) != NULL) ix->v[ix->n++] = c;
	qsort_r(ix->v, ix->n, sizeof(*ix->v), idx_cmp, (void *)key);
	return 0;
}

/* The entry whose key is s (ids are unique within a view or manifest). */
const cJSON *
kzp_idx_find(const struct idx *ix, const char *key, const char *s)
{
	size_t lo = 0, hi = ix->n;

	if (s == NULL)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(jstr(ix->v[mid], key), s) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ix->n && strcmp(jstr(ix->v[lo], key), s) == 0 ? ix->v[lo] :
	                                                            NULL;
}

void
kzp_idx_free(struct idx *ix)
{
	free(ix->v);
	ix->v = NULL;
	ix->n = 0;
}

/*
 * One predicate for every kind of item (the project-grant rule): the owner
 * reads; anyone else reads only through a link whose pointer is shared and
 * whose room or project the reader is in right now.  A private-library file
 * is readable by its owner only, and a revoked item by nobody.
 */
bool
kzp_can_read(const cJSON *f, const char *mh)
{
	const cJSON *g;

	if (f == NULL || !jtrue(f, "exists") || jtrue(f, "revoked"))
		return false;
	/* A connection-bound item resolves only through its connection
	 * under this member, owner included (the declared-source rule). */
	if (kz_json_get(f, "conn") != NULL && !jtrue(f, "conn_ok"))
		return false;
	if (jeq(f, "owner", mh))
		return true;
	if (jeq(f, "kind", "library"))
		return false;
	cJSON_ArrayForEach(g,
	    kz_json_get(f, "grants")) if (jtrue(g, "member_in") &&
	    jtrue(g, "shared")) return true;
	return false;
}

bool
kzp_ready(const cJSON *f)
{
	return jtrue(f, "ready") && jnum(f, "cur") > 0 &&
	    jstr(f, "path") != NULL && jstr(f, "sha") != NULL &&
	    jnum(f, "size") >= 0;
}

static void
sha_hex(crypto_hash_sha256_state *st, char out[KZP_SHA_HEX + 1])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256_final(st, h);
	kz_hex(h, sizeof(h), out);
}

void
kzp_manifest_digest(const cJSON *items, char out[KZP_SHA_HEX + 1])
{
	crypto_hash_sha256_state st;
	const cJSON *c;
	char line[KZP_PATH_MAX + KZP_ID_MAX + KZP_SHA_HEX + 96];

	crypto_hash_sha256_init(&st);
	cJSON_ArrayForEach(c, items)
	{
		int n = snprintf(line, sizeof(line),
		    "%s%c%lld%c%s%c%lld%c%s%c%s\n",
		    jstr(c, "id") ? jstr(c, "id") : "", 0,
		    (long long)jnum(c, "ver"), 0,
		    jstr(c, "path") ? jstr(c, "path") : "", 0,
		    (long long)jnum(c, "size"), 0,
		    jstr(c, "sha256") ? jstr(c, "sha256") : "", 0,
		    jstr(c, "src") ? jstr(c, "src") : "");

		if (n > 0)
			crypto_hash_sha256_update(&st, (unsigned char *)line,
			    (size_t)n < sizeof(line) ? (size_t)n :
			                               sizeof(line) - 1);
	}
	sha_hex(&st, out);
}

void
kzp_roster_digest(const cJSON *roster, char out[KZP_SHA_HEX + 1])
{
	crypto_hash_sha256_state st;
	const cJSON *c;

	crypto_hash_sha256_init(&st);
	cJSON_ArrayForEach(c, roster)
	{
		if (!cJSON_IsString(c))
			continue;
		crypto_hash_sha256_update(&st, (unsigned char *)c->valuestring,
		    strlen(c->valuestring));
		crypto_hash_sha256_update(&st, (unsigned char *)"\n", 1);
	}
	sha_hex(&st, out);
}

/*
 * The bounds rule: counts, per-file bytes and aggregate bytes are
 * bounded.
 */
bool
kzp_within(const cJSON *a, const cJSON *b, const struct kzp_bounds *bd)
{
	int64_t n = 0, total = 0;
	const cJSON *lists[2] = {a, b}, *c;

	for (int i = 0; i < 2; i++) {
		cJSON_ArrayForEach(c, lists[i])
		{
			int64_t sz = jnum(c, "size");

			if (sz < 0 || sz > bd->max_file_bytes)
				return false;
			total += sz;
			n++;
		}
	}
	return n <= bd->max_files && total <= bd->max_total_bytes;
}

bool
kzp_roster_alone(const cJSON *roster, const char *mh)
{
	return count(roster) == 1 && has_str(roster, mh);
}
