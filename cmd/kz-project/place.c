/*
 * The place rule over a projection's files (kz-project(8)): every admitted
 * file must be writable next to every other, so no two paths are equal and
 * none is a directory of another ("a.txt" and "a.txt/x" cannot both be
 * files), and together they stay within the bounds.  The room's links are
 * placed when they are made (lua/place_fn.lua); here admission takes the
 * files in its order of precedence, each only while it fits beside those
 * taken before it (admit.c), and verification proves a manifest
 * clash-free (verify.c).  A path set holds each candidate path and each of
 * its parent directories once, sorted, so a lookup is a binary search and
 * n candidates cost O(n log n) per level of depth, at any bound.
 */
#include <stdlib.h>
#include <string.h>

#include "kzp.h"
#include "view.h"
#include "banned.h"

/* One path or parent directory of the candidates. */
struct pnode {
	const char *s; /* points into a candidate path */
	size_t len;
	bool file; /* a taken file is here */
	bool dir; /* a taken file is beneath */
};

struct kzp_paths {
	struct pnode *v;
	size_t n;
	const char *const *paths;
	size_t np;
};

static int
pcmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

static int
node_cmp(const void *a, const void *b)
{
	const struct pnode *x = a, *y = b;

	return pcmp(x->s, x->len, y->s, y->len);
}

static struct pnode *
find(const struct kzp_paths *ps, const char *s, size_t len)
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = pcmp(ps->v[mid].s, ps->v[mid].len, s, len);

		if (c == 0)
			return &ps->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int
kzp_paths_new(const char *const *paths, size_t np, struct kzp_paths **out)
{
	struct kzp_paths *ps;
	size_t n = 0, k = 0;

	for (size_t i = 0; i < np; i++) {
		n++;
		for (const char *c = paths[i]; *c != '\0'; c++)
			n += *c == '/';
	}
	if ((ps = calloc(1, sizeof(*ps))) == NULL ||
	    (ps->v = calloc(n + 1, sizeof(*ps->v))) == NULL) {
		free(ps);
		return KZ_ENOMEM;
	}
	for (size_t i = 0; i < np; i++) {
		const char *p = paths[i];

		for (const char *c = p; *c != '\0'; c++)
			if (*c == '/')
				ps->v[k++] = (struct pnode){.s = p,
				    .len = (size_t)(c - p)};
		ps->v[k++] = (struct pnode){.s = p, .len = strlen(p)};
	}
	qsort(ps->v, k, sizeof(*ps->v), node_cmp);
	/* One node per distinct string. */
	for (size_t i = 0; i < k; i++)
		if (ps->n == 0 || node_cmp(&ps->v[ps->n - 1], &ps->v[i]) != 0)
			ps->v[ps->n++] = ps->v[i];
	ps->paths = paths;
	ps->np = np;
	*out = ps;
	return 0;
}

bool
kzp_paths_clash(const struct kzp_paths *ps, size_t i)
{
	const char *p = ps->paths[i];
	const struct pnode *at = find(ps, p, strlen(p)), *d;

	/* Taken here already, or a taken file lies beneath this path. */
	if (at->file || at->dir)
		return true;
	/* A taken file is one of this path's directories. */
	for (const char *c = p; *c != '\0'; c++)
		if (*c == '/' && (d = find(ps, p, (size_t)(c - p))) != NULL &&
		    d->file)
			return true;
	return false;
}

void
kzp_paths_take(struct kzp_paths *ps, size_t i)
{
	const char *p = ps->paths[i];
	struct pnode *d;

	find(ps, p, strlen(p))->file = true;
	for (const char *c = p; *c != '\0'; c++)
		if (*c == '/' && (d = find(ps, p, (size_t)(c - p))) != NULL)
			d->dir = true;
}

void
kzp_paths_free(struct kzp_paths *ps)
{
	if (ps == NULL)
		return;
	free(ps->v);
	free(ps);
}

bool
kzp_paths_disjoint(const char *const *paths, size_t np)
{
	struct kzp_paths *ps;
	bool ok = true;

	/* Out of memory proves nothing (the fail-closed rule). */
	if (kzp_paths_new(paths, np, &ps) != 0)
		return false;
	for (size_t i = 0; i < np && ok; i++) {
		ok = !kzp_paths_clash(ps, i);
		kzp_paths_take(ps, i);
	}
	kzp_paths_free(ps);
	return ok;
}

int
kzp_place_in_line(const cJSON *const *v, size_t n, const struct kzp_bounds *b,
    const char **why)
{
	struct kzp_paths *ps;
	const char **paths = calloc(n + 1, sizeof(*paths));
	int64_t files = 0, bytes = 0;

	for (size_t i = 0; paths != NULL && i < n; i++)
		paths[i] = jstr(v[i], "path");
	if (paths == NULL || kzp_paths_new(paths, n, &ps) != 0) {
		free(paths);
		return KZ_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t sz = jnum(v[i], "size");

		why[i] = NULL;
		if (kzp_paths_clash(ps, i))
			why[i] = "path_clash";
		else if (sz < 0 || sz > b->max_file_bytes ||
		    files + 1 > b->max_files || bytes + sz > b->max_total_bytes)
			why[i] = "over_bounds";
		if (why[i] != NULL)
			continue;
		kzp_paths_take(ps, i);
		files++;
		bytes += sz;
	}
	kzp_paths_free(ps);
	free(paths);
	return 0;
}
