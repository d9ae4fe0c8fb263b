/*
 * kz-project's views, read by the policy (admit.c) and the verification
 * (verify.c): typed accessors over one cJSON view, and the lookups and
 * predicates both sides share (view.c).
 */
#ifndef KZP_VIEW_H
#define KZP_VIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <cJSON.h>

#include "kz_json.h"
#include "kzp.h"

static inline const char *
jstr(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static inline bool
jeq(const cJSON *o, const char *k, const char *want)
{
	const char *s = jstr(o, k);

	return s != NULL && want != NULL && strcmp(s, want) == 0;
}

static inline int64_t
jnum(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

static inline bool
jtrue(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(kz_json_get(o, k));
}

static inline bool
has_str(const cJSON *arr, const char *s)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, arr) if (cJSON_IsString(c) &&
	    strcmp(c->valuestring, s) == 0) return true;
	return false;
}

static inline int
count(const cJSON *arr)
{
	const cJSON *c;
	int n = 0;

	cJSON_ArrayForEach(c, arr) n++;
	return n;
}

/*
 * An array of objects sorted by one string member, for lookups by id: a
 * view holds one entry per file and a decision looks each one up per link
 * and per item, which a linear scan makes quadratic.
 */
struct idx {
	const cJSON **v;
	size_t n;
};

int kzp_idx_build(struct idx *ix, const cJSON *arr, const char *key);
/* The entry whose key is s (ids are unique within a view or manifest). */
const cJSON *kzp_idx_find(const struct idx *ix, const char *key, const char *s);
void kzp_idx_free(struct idx *ix);

static inline const cJSON *
facts_of(const struct idx *res, const char *rid)
{
	return kzp_idx_find(res, "id", rid);
}

/* A file with a ready version: path, digest and size known. */
bool kzp_ready(const cJSON *f);
/* The bounds rule over the items of a and b together. */
bool kzp_within(const cJSON *a, const cJSON *b, const struct kzp_bounds *bd);
/* Whether the roster is exactly the member mh. */
bool kzp_roster_alone(const cJSON *roster, const char *mh);

#endif
