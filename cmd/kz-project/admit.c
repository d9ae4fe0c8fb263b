/*
 * The admission policy: one module that decides, from one consistent view
 * of the store, what a turn may project (admit); whether it still may,
 * right before bytes load, is verify.c.  Pure over cJSON views so every
 * rule is unit-tested without a store.  The rules are numbered as in
 * kz-project(8).
 *
 * This file keeps the decision (admit) and its steps; view.c holds the
 * lookups, predicates and digests it shares with verify.c.
 */
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_json.h"
#include "kzp.h"
#include "view.h"
#include "banned.h"

static const cJSON *
item_of(const cJSON *items, const char *rid)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, items) if (jeq(c, "id", rid)) return c;
	return NULL;
}

static cJSON *
make_item(const cJSON *f, const char *src)
{
	cJSON *it = cJSON_CreateObject();

	if (it == NULL)
		return NULL;
	cJSON_AddStringToObject(it, "id", jstr(f, "id"));
	cJSON_AddNumberToObject(it, "ver", (double)jnum(f, "cur"));
	cJSON_AddStringToObject(it, "path", jstr(f, "path"));
	cJSON_AddNumberToObject(it, "size", (double)jnum(f, "size"));
	cJSON_AddStringToObject(it, "sha256", jstr(f, "sha"));
	cJSON_AddStringToObject(it, "kind",
	    jstr(f, "kind") ? jstr(f, "kind") : "document");
	cJSON_AddStringToObject(it, "src", src);
	return it;
}

static int
cmp_path(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a,
	            *y = *(const cJSON *const *)b;

	return strcmp(jstr(x, "path"), jstr(y, "path"));
}

/* Sorts items by path (the place rule has kept every path apart). */
static int
sort_items(cJSON *items)
{
	int n = count(items), i = 0;
	cJSON **v = calloc((size_t)n + 1, sizeof(*v));

	if (v == NULL)
		return KZ_ENOMEM;
	while (items->child != NULL)
		v[i++] = cJSON_DetachItemViaPointer(items, items->child);
	qsort(v, (size_t)n, sizeof(v[0]), cmp_path);
	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(items, v[i]);
	free(v);
	return 0;
}

struct adm {
	const cJSON *view;
	struct idx res; /* the view's facts by id */
	const struct kzp_turn *t;
	const struct kzp_bounds *b;
	cJSON *items;
	cJSON *scope_add;
	cJSON *left_out; /* {id, reason} of files the place rule left out */
	bool priv;
	const char *selection;
};

/*
 * The selector rule: requested ids are selectors, re-resolved under the
 * member.
 */
static int
add_requested(struct adm *a, const cJSON *ids, const char *src,
    struct kzp_res *r)
{
	const cJSON *c, *f;
	bool retr = strcmp(src, "retrieved") == 0;

	cJSON_ArrayForEach(c, ids)
	{
		if (!cJSON_IsString(c) || !kzp_id_ok(c->valuestring)) {
			kzp_fail(r, KZ_WE_BAD_REQUEST,
			    "a requested file is named by id only");
			return KZ_EINVAL;
		}
		/* Retrieval never widens a shared audience (the
		 * private-retrieval rule). */
		if (retr && !a->priv) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "a retrieved document is "
			    "projected only in a private turn");
			return KZ_EDENIED;
		}
		f = facts_of(&a->res, c->valuestring);
		if (!kzp_can_read(f, a->t->mh)) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "a requested id is not "
			    "readable by the initiating member");
			return KZ_EDENIED;
		}
		/* Library files come only through the selection (the
		 * library rule). */
		if (!retr && jeq(f, "kind", "library")) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "a private-library file is "
			    "bound to the chat as a selection, not requested");
			return KZ_EDENIED;
		}
		if (!kzp_ready(f)) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "a requested file is not ready");
			return KZ_EDENIED;
		}
		if (!retr && !has_str(a->scope_add, c->valuestring))
			cJSON_AddItemToArray(a->scope_add,
			    cJSON_CreateString(c->valuestring));
		if (item_of(a->items, c->valuestring) == NULL)
			cJSON_AddItemToArray(a->items, make_item(f, src));
	}
	return 0;
}

/* The room's own links, and the scope resolved earlier for this member. */
static int
add_room(struct adm *a, struct kzp_res *r)
{
	const cJSON *c, *f;
	const char *mh = a->t->mh;

	cJSON_ArrayForEach(c, kz_json_get(a->view, "links"))
	{
		const char *rid = jstr(c, "rid");

		if (rid == NULL || (!jtrue(c, "shared") && !jeq(c, "by", mh)))
			continue;
		f = facts_of(&a->res, rid);
		/* A file still uploading is not yet part of the room. */
		if (!kzp_can_read(f, mh) || !kzp_ready(f) ||
		    item_of(a->items, rid) != NULL)
			continue;
		cJSON_AddItemToArray(a->items, make_item(f, "room"));
	}
	/* Later turns use the resolved scope; it never narrows (the
	 * selector rule). */
	cJSON_ArrayForEach(c, kz_json_get(a->view, "scope"))
	{
		if (!cJSON_IsString(c) ||
		    item_of(a->items, c->valuestring) != NULL)
			continue;
		f = facts_of(&a->res, c->valuestring);
		if (!kzp_can_read(f, mh) || !kzp_ready(f)) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "the conversation's "
			    "resolved scope is no longer readable");
			return KZ_EDENIED;
		}
		cJSON_AddItemToArray(a->items, make_item(f, "scope"));
	}
	return 0;
}

/* A file considered for the projection, and its place in line. */
struct cand {
	cJSON *item;
	int cls; /* 0 this turn's ids, 1 the scope, 2 the room's links */
	int64_t order; /* request order, or the link's place in the room */
};

static int
cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->cls != y->cls)
		return x->cls - y->cls;
	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	return strcmp(jstr(x->item, "id"), jstr(y->item, "id"));
}

static int64_t
index_of(const cJSON *arr, const char *s)
{
	const cJSON *c;
	int64_t i = 0;

	cJSON_ArrayForEach(c, arr)
	{
		if (cJSON_IsString(c) && strcmp(c->valuestring, s) == 0)
			return i;
		i++;
	}
	return -1;
}

/*
 * Where a file stands in line: what the member asked for by id (this
 * turn's ids, then the conversation's resolved scope) before the room's
 * links, and links in the order they were made (first come, first
 * served).
 */
static struct cand
rank(const struct adm *a, const struct idx *links, cJSON *it)
{
	const char *id = jstr(it, "id");
	const cJSON *l = kzp_idx_find(links, "rid", id);
	int64_t i;

	if ((i = index_of(a->t->select, id)) >= 0)
		return (struct cand){it, 0, i};
	if ((i = index_of(a->t->retrieved, id)) >= 0)
		return (struct cand){it, 0, KZP_LIST_MAX + i};
	if (has_str(kz_json_get(a->view, "scope"), id))
		return (struct cand){it, 1, 0};
	return (struct cand){it, 2, jnum(l, "seq")};
}

static void
leave_out(struct adm *a, cJSON *it, const char *reason)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL) {
		cJSON_AddStringToObject(o, "id", jstr(it, "id"));
		cJSON_AddStringToObject(o, "reason", reason);
		cJSON_AddItemToArray(a->left_out, o);
	}
	cJSON_Delete(cJSON_DetachItemViaPointer(a->items, it));
}

/*
 * The place rule at admission.  Links are placed when they are made, but
 * a room can still hold files that do not fit together (a bound lowered
 * since, a project file in the scope, a member's own private link): the
 * files are taken in line, each only while it fits beside those taken
 * before it.  A file of the room or of the scope that does not fit is left
 * out, with its reason in the snapshot, and the rest goes, so no member's
 * links can refuse a room to everyone.  An id asked for in this turn is
 * the member's own request: when it does not fit, the turn is refused.
 */
static int
fit(struct adm *a, struct kzp_res *r)
{
	int n = count(a->items), i = 0, e = KZ_ENOMEM;
	struct cand *c = calloc((size_t)n + 1, sizeof(*c));
	const cJSON **v = calloc((size_t)n + 1, sizeof(*v));
	const char **why = calloc((size_t)n + 1, sizeof(*why));
	struct idx links = {NULL, 0};
	cJSON *it;

	if (c == NULL || v == NULL || why == NULL ||
	    kzp_idx_build(&links, kz_json_get(a->view, "links"), "rid") != 0)
		goto out;
	cJSON_ArrayForEach(it, a->items) c[i++] = rank(a, &links, it);
	qsort(c, (size_t)n, sizeof(*c), cand_cmp);
	for (i = 0; i < n; i++)
		v[i] = c[i].item;
	if ((e = kzp_place_in_line(v, (size_t)n, a->b, why)) != 0)
		goto out;
	for (i = 0; i < n && e == 0; i++) {
		if (why[i] != NULL && c[i].cls == 0)
			e = KZ_EDENIED;
		else if (why[i] != NULL)
			leave_out(a, c[i].item, why[i]);
	}
out:
	if (e == KZ_ENOMEM)
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
	else if (e != 0)
		kzp_fail(r, KZ_WE_REFUSED,
		    "the files requested by id do not fit together: one path "
		    "twice or inside another, or over the configured bounds");
	kzp_idx_free(&links);
	free(c);
	free(v);
	free(why);
	return e;
}

/*
 * Whether the selection fits beside the files taken: no path of it
 * clashes with theirs or its own, and together they are within bounds.
 */
static bool
selection_fits(const struct adm *a, const cJSON *sel)
{
	int n = count(a->items) + count(sel), i = 0;
	const cJSON **v = calloc((size_t)n + 1, sizeof(*v));
	const char **why = calloc((size_t)n + 1, sizeof(*why));
	const cJSON *it;
	bool ok = false;

	if (v == NULL || why == NULL)
		goto out;
	cJSON_ArrayForEach(it, a->items) v[i++] = it;
	cJSON_ArrayForEach(it, sel) v[i++] = it;
	if (kzp_place_in_line(v, (size_t)n, a->b, why) != 0)
		goto out;
	for (ok = true, i = 0; i < n; i++)
		ok &= why[i] == NULL;
out:
	free(v);
	free(why);
	return ok;
}

/*
 * The sole-audience and withheld-selection rules: the owner-scoped
 * selection joins only while the member is the room's entire audience,
 * every file resolves, is ready and fits.  When withheld, the run goes on
 * with the room's own files, or without files if it never named the
 * contract; only a run that asked for files and had no other source is
 * refused with the specific reason.
 */
static int
add_selection(struct adm *a, struct kzp_res *r)
{
	const cJSON *c, *f;
	const char *mh = a->t->mh, *reason = NULL;
	cJSON *sel = cJSON_CreateArray();
	int e = 0;

	cJSON_ArrayForEach(c, kz_json_get(a->view, "sel"))
	{
		if (!jeq(c, "owner", mh))
			continue;
		if (!a->priv) {
			a->selection = "not_considered";
			goto out;
		}
		f = facts_of(&a->res, jstr(c, "rid"));
		if (!kzp_can_read(f, mh) || !jeq(f, "owner", mh) ||
		    !jeq(f, "kind", "library"))
			reason = "a selected file cannot be resolved";
		else if (!kzp_ready(f))
			reason = "a selected file is not ready";
		else if (item_of(a->items, jstr(f, "id")) == NULL)
			cJSON_AddItemToArray(sel, make_item(f, "selection"));
	}
	if (sel->child == NULL && reason == NULL)
		goto out;
	if (reason == NULL && !selection_fits(a, sel))
		reason = "the selection does not fit beside the room's files "
		         "(the projection bound, or a path they hold)";
	if (reason != NULL) {
		a->selection = "withheld";
		if (a->items->child == NULL && a->t->contract) {
			kzp_fail(r, KZ_WE_REFUSED, "%s", reason);
			e = KZ_EDENIED;
		}
		goto out;
	}
	a->selection = "included";
	while (sel->child != NULL)
		cJSON_AddItemToArray(a->items,
		    cJSON_DetachItemViaPointer(sel, sel->child));
out:
	cJSON_Delete(sel);
	return e;
}

static cJSON *
build_snap(struct adm *a)
{
	const struct kzp_turn *t = a->t;
	const cJSON *c, *roster = kz_json_get(a->view, "roster");
	unsigned char rnd[16];
	char sid[33], md[KZP_SHA_HEX + 1], rd[KZP_SHA_HEX + 1];
	int64_t bytes = 0;
	cJSON *s = cJSON_CreateObject();

	if (s == NULL)
		return NULL;
	randombytes_buf(rnd, sizeof(rnd));
	kz_hex(rnd, sizeof(rnd), sid);
	cJSON_ArrayForEach(c, a->items) bytes += jnum(c, "size");
	kzp_manifest_digest(a->items, md);
	kzp_roster_digest(roster, rd);
	cJSON_AddStringToObject(s, "snapshot", sid);
	cJSON_AddStringToObject(s, "room_hash", t->rh);
	cJSON_AddStringToObject(s, "actor_hash", t->mh);
	cJSON_AddStringToObject(s, "turn", t->turn);
	cJSON_AddStringToObject(s, "capability", t->capability);
	cJSON_AddBoolToObject(s, "contract", t->contract);
	cJSON_AddBoolToObject(s, "private", a->priv);
	cJSON_AddNumberToObject(s, "audience_version",
	    (double)jnum(a->view, "aver"));
	cJSON_AddItemToObject(s, "roster", cJSON_Duplicate(roster, true));
	cJSON_AddStringToObject(s, "roster_digest", rd);
	cJSON_AddNumberToObject(s, "admission_seq",
	    (double)(jnum(a->view, "seq") + 1));
	cJSON_AddStringToObject(s, "selection", a->selection);
	cJSON_AddNumberToObject(s, "files", count(a->items));
	cJSON_AddNumberToObject(s, "bytes", (double)bytes);
	cJSON_AddStringToObject(s, "manifest_digest", md);
	cJSON_AddItemToObject(s, "items", a->items);
	a->items = NULL;
	/* Only when something was left out: other snapshots are as before. */
	if (a->left_out->child != NULL) {
		cJSON_AddItemToObject(s, "left_out", a->left_out);
		a->left_out = NULL;
	}
	return s;
}

int
kzp_admit_decide(const cJSON *view, const struct kzp_turn *t,
    const struct kzp_bounds *b, cJSON **snap, cJSON **scope_add,
    struct kzp_res *r)
{
	struct adm a = {.view = view, .t = t, .b = b, .selection = "none"};
	const cJSON *roster = kz_json_get(view, "roster");
	int e;

	a.items = cJSON_CreateArray();
	a.scope_add = cJSON_CreateArray();
	a.left_out = cJSON_CreateArray();
	if (a.items == NULL || a.scope_add == NULL || a.left_out == NULL ||
	    kzp_idx_build(&a.res, kz_json_get(view, "res"), "id") != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	/* An actor that cannot be proven gets nothing (fail closed). */
	if (!jtrue(view, "exists") || !has_str(roster, t->mh)) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the initiating member is not in the room's audience");
		e = KZ_EDENIED;
		goto out;
	}
	a.priv = kzp_roster_alone(roster, t->mh);
	if ((e = add_room(&a, r)) != 0 ||
	    (e = add_requested(&a, t->select, "selector", r)) != 0 ||
	    (e = add_requested(&a, t->retrieved, "retrieved", r)) != 0)
		goto out;
	if ((e = fit(&a, r)) != 0 || (e = add_selection(&a, r)) != 0)
		goto out;
	if (sort_items(a.items) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	if ((*snap = build_snap(&a)) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	*scope_add = a.scope_add;
	a.scope_add = NULL;
out:
	kzp_idx_free(&a.res);
	cJSON_Delete(a.items);
	cJSON_Delete(a.scope_add);
	cJSON_Delete(a.left_out);
	return e;
}
