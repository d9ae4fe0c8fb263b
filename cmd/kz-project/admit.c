/*
 * The admission policy: one module that decides, from one consistent view
 * of the store, what a turn may project (admit) and whether it still may,
 * right before bytes load (verify).  Pure over cJSON views so every rule is
 * unit-tested without a store.  The rules are numbered as in kz-project(8).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

#define ITEMS_MAX 4096

static const char *
jstr(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool
jeq(const cJSON *o, const char *k, const char *want)
{
	const char *s = jstr(o, k);

	return s != NULL && want != NULL && strcmp(s, want) == 0;
}

static int64_t
jnum(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

static bool
jtrue(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(kz_json_get(o, k));
}

static bool
has_str(const cJSON *arr, const char *s)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, arr) if (cJSON_IsString(c) &&
	    strcmp(c->valuestring, s) == 0) return true;
	return false;
}

static int
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

static int
idx_cmp(const void *a, const void *b, void *key)
{
	return strcmp(jstr(*(const cJSON *const *)a, key),
	    jstr(*(const cJSON *const *)b, key));
}

static int
idx_build(struct idx *ix, const cJSON *arr, const char *key)
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
static const cJSON *
idx_find(const struct idx *ix, const char *key, const char *s)
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

static void
idx_free(struct idx *ix)
{
	free(ix->v);
	ix->v = NULL;
	ix->n = 0;
}

static const cJSON *
facts_of(const struct idx *res, const char *rid)
{
	return idx_find(res, "id", rid);
}

static const cJSON *
item_of(const cJSON *items, const char *rid)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, items) if (jeq(c, "id", rid)) return c;
	return NULL;
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

static bool
ready(const cJSON *f)
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
		    "%s%c%lld%c%s%c%lld%c%s%c"
		    "%s\n",
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

/*
 * The bounds rule: counts, per-file bytes and aggregate bytes are
 * bounded.
 */
static bool
within(const cJSON *a, const cJSON *b, const struct kzp_bounds *bd)
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

static int
cmp_path(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a,
	            *y = *(const cJSON *const *)b;

	return strcmp(jstr(x, "path"), jstr(y, "path"));
}

/* Sorts items by path and refuses two items at one path. */
static int
sort_items(cJSON *items, struct kzp_res *r)
{
	cJSON *v[ITEMS_MAX];
	int n = 0;

	while (items->child != NULL && n < ITEMS_MAX)
		v[n++] = cJSON_DetachItemViaPointer(items, items->child);
	qsort(v, (size_t)n, sizeof(v[0]), cmp_path);
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(items, v[i]);
	for (int i = 1; i < n; i++)
		if (strcmp(jstr(v[i], "path"), jstr(v[i - 1], "path")) == 0) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "two admitted files share one path");
			return KZ_EDENIED;
		}
	return 0;
}

struct adm {
	const cJSON *view;
	struct idx res; /* the view's facts by id */
	const struct kzp_turn *t;
	const struct kzp_bounds *b;
	cJSON *items;
	cJSON *scope_add;
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
		if (!ready(f)) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "a requested file is not "
			    "ready");
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
		if (!kzp_can_read(f, mh) || !ready(f) ||
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
		if (!kzp_can_read(f, mh) || !ready(f)) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "the conversation's "
			    "resolved scope is no longer readable");
			return KZ_EDENIED;
		}
		cJSON_AddItemToArray(a->items, make_item(f, "scope"));
	}
	return 0;
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
		else if (!ready(f))
			reason = "a selected file is not ready";
		else if (item_of(a->items, jstr(f, "id")) == NULL)
			cJSON_AddItemToArray(sel, make_item(f, "selection"));
	}
	if (sel->child == NULL && reason == NULL)
		goto out;
	if (reason == NULL && !within(a->items, sel, a->b))
		reason = "the selection is over the projection bound";
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

static bool
roster_alone(const cJSON *roster, const char *mh)
{
	return count(roster) == 1 && has_str(roster, mh);
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
	if (a.items == NULL || a.scope_add == NULL ||
	    idx_build(&a.res, kz_json_get(view, "res"), "id") != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	/* An actor that cannot be proven gets nothing (fail closed). */
	if (!jtrue(view, "exists") || !has_str(roster, t->mh)) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the initiating member is not in "
		    "the room's audience");
		e = KZ_EDENIED;
		goto out;
	}
	a.priv = roster_alone(roster, t->mh);
	if ((e = add_room(&a, r)) != 0 ||
	    (e = add_requested(&a, t->select, "selector", r)) != 0 ||
	    (e = add_requested(&a, t->retrieved, "retrieved", r)) != 0)
		goto out;
	if (!within(a.items, NULL, b)) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the projection is over the "
		    "configured bounds");
		e = KZ_EDENIED;
		goto out;
	}
	if ((e = add_selection(&a, r)) != 0 ||
	    (e = sort_items(a.items, r)) != 0)
		goto out;
	if ((*snap = build_snap(&a)) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	*scope_add = a.scope_add;
	a.scope_add = NULL;
out:
	idx_free(&a.res);
	cJSON_Delete(a.items);
	cJSON_Delete(a.scope_add);
	return e;
}

static int
changed(struct kzp_res *r, const char *code, const char *why)
{
	kzp_fail(r, code, "%s", why);
	return KZ_EDENIED;
}

/* The view and snapshot, indexed for one verification. */
struct vix {
	struct idx res; /* the view's facts by id */
	struct idx links; /* the room's links by rid */
	struct idx items; /* the snapshot's items by id */
};

static bool
selected(const cJSON *view, const char *id)
{
	const cJSON *l;

	cJSON_ArrayForEach(l,
	    kz_json_get(view, "sel")) if (jeq(l, "rid", id)) return true;
	return false;
}

/*
 * The manifest-change rule, the admitted side: each item still resolves to
 * the same bytes.
 */
static int
verify_items(const cJSON *snap, const cJSON *view, const struct vix *x,
    bool withheld, struct kzp_res *r)
{
	const char *mh = jstr(snap, "actor_hash");
	const cJSON *it, *f;

	cJSON_ArrayForEach(it, kz_json_get(snap, "items"))
	{
		const char *id = jstr(it, "id"), *src = jstr(it, "src");

		/* A withheld selection is not loaded, so it proves nothing. */
		if (withheld && strcmp(src, "selection") == 0)
			continue;
		f = facts_of(&x->res, id);
		if (!kzp_can_read(f, mh) || !ready(f))
			return changed(r, KZ_WE_MANIFEST_CHANGED,
			    "an admitted "
			    "file was removed or is no longer readable");
		if (jnum(f, "cur") != jnum(it, "ver"))
			return changed(r, KZ_WE_MANIFEST_CHANGED,
			    "a new version "
			    "of an admitted file landed after admission");
		if (!jeq(f, "path", jstr(it, "path")) ||
		    !jeq(f, "sha", jstr(it, "sha256")) ||
		    jnum(f, "size") != jnum(it, "size"))
			return changed(r, KZ_WE_MANIFEST_CHANGED,
			    "an admitted "
			    "file changed after admission");
		if ((strcmp(src, "room") == 0 &&
		        idx_find(&x->links, "rid", id) == NULL) ||
		    (strcmp(src, "selection") == 0 && !selected(view, id)))
			return changed(r, KZ_WE_MANIFEST_CHANGED,
			    "an admitted "
			    "file was removed from the room");
	}
	return 0;
}

/*
 * The manifest-change rule, the live side: only this run's own later links
 * are tolerated.  "Own" needs a turn on both sides: a link made with no
 * turn ("-", the default) belongs to no run, so it never passes as the
 * running turn's file, even when the run itself was admitted with none.
 */
/* Whether a turn names one (a link or run without one carries "-"). */
static bool
turned(const char *turn)
{
	return turn != NULL && *turn != '\0' && strcmp(turn, "-") != 0;
}

static int
verify_links(const cJSON *snap, const cJSON *view, const struct vix *x,
    struct kzp_res *r)
{
	const char *mh = jstr(snap, "actor_hash"), *turn = jstr(snap, "turn");
	const cJSON *l, *f;

	cJSON_ArrayForEach(l, kz_json_get(view, "links"))
	{
		const char *rid = jstr(l, "rid");

		if (rid == NULL || (!jtrue(l, "shared") && !jeq(l, "by", mh)))
			continue;
		if (idx_find(&x->items, "id", rid) != NULL)
			continue;
		f = facts_of(&x->res, rid);
		if (!kzp_can_read(f, mh) || !ready(f))
			continue;
		if (turned(turn) && jeq(l, "by", mh) && jeq(l, "turn", turn) &&
		    jnum(l, "seq") > jnum(snap, "admission_seq"))
			continue;
		return changed(r, KZ_WE_MANIFEST_CHANGED,
		    "the room's manifest "
		    "changed between admission and dispatch");
	}
	return 0;
}

/*
 * The sole-audience, withheld-selection and freshness rules, at the load.
 * A snapshot without the selection was admitted for the audience it
 * records, and any change to that audience refuses it, as before.  One
 * with the selection loses the selection when the audience moved (the
 * version, the roster, or the member no longer alone): the run goes on
 * with the room's own admitted files, each verified against live state
 * like any other, or with no file if it never named the contract.  The
 * member hears resource_audience_changed only when the run asked for
 * files and the selection was its only source.  A retrieved document is
 * projected in a private turn only, so it cannot outlive the audience.
 */
static int
audience(const cJSON *snap, const cJSON *view, bool *withheld,
    struct kzp_res *r)
{
	const char *mh = jstr(snap, "actor_hash");
	const cJSON *roster = kz_json_get(view, "roster"), *it;
	char rd[KZP_SHA_HEX + 1];
	bool sel = false, retr = false, other = false;

	*withheld = false;
	cJSON_ArrayForEach(it, kz_json_get(snap, "items"))
	{
		sel |= jeq(it, "src", "selection");
		retr |= jeq(it, "src", "retrieved");
		other |= !jeq(it, "src", "selection");
	}
	kzp_roster_digest(roster, rd);
	if (jnum(view, "aver") == jnum(snap, "audience_version") &&
	    jeq(snap, "roster_digest", rd) &&
	    (!sel || roster_alone(roster, mh)))
		return 0;
	if (!sel)
		return changed(r, KZ_WE_AUDIENCE_CHANGED,
		    "the room's audience changed since admission");
	if (retr)
		return changed(r, KZ_WE_REFUSED,
		    "a retrieved document is projected only in a private "
		    "turn, and the room's audience changed");
	if (!other && jtrue(snap, "contract"))
		return changed(r, KZ_WE_AUDIENCE_CHANGED,
		    "the selection was withheld: the room's audience "
		    "changed since admission");
	*withheld = true;
	return 0;
}

int
kzp_verify_decide(const cJSON *snap, const cJSON *view,
    const struct kzp_bounds *b, bool *withheld, struct kzp_res *r)
{
	const char *mh = jstr(snap, "actor_hash");
	const cJSON *roster = kz_json_get(view, "roster");
	struct vix x = {{NULL, 0}, {NULL, 0}, {NULL, 0}};
	int e;

	*withheld = false;
	if (!jtrue(view, "exists") || !has_str(roster, mh))
		return changed(r, KZ_WE_REFUSED,
		    "the initiating member is "
		    "no longer in the room's audience");
	if ((e = audience(snap, view, withheld, r)) != 0)
		return e;
	if (idx_build(&x.res, kz_json_get(view, "res"), "id") != 0 ||
	    idx_build(&x.links, kz_json_get(view, "links"), "rid") != 0 ||
	    idx_build(&x.items, kz_json_get(snap, "items"), "id") != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	if ((e = verify_items(snap, view, &x, *withheld, r)) != 0 ||
	    (e = verify_links(snap, view, &x, r)) != 0)
		goto out;
	if (!within(kz_json_get(snap, "items"), NULL, b))
		e = changed(r, KZ_WE_REFUSED,
		    "the projection is over the "
		    "configured bounds");
out:
	idx_free(&x.res);
	idx_free(&x.links);
	idx_free(&x.items);
	return e;
}

/*
 * A snapshot whose shape or digests do not hold proves nothing (the
 * fail-closed rule).
 */
int
kzp_snap_check(const cJSON *snap, struct kzp_res *r)
{
	static const char *const strs[] = {"snapshot", "room_hash",
	    "actor_hash", "turn", "roster_digest", "manifest_digest", NULL};
	const cJSON *it, *items = kz_json_get(snap, "items");
	char md[KZP_SHA_HEX + 1];
	int n = 0;

	for (int i = 0; strs[i] != NULL; i++)
		if (jstr(snap, strs[i]) == NULL)
			goto bad;
	if (!cJSON_IsArray(items) || jnum(snap, "audience_version") < 0 ||
	    jnum(snap, "admission_seq") < 0)
		goto bad;
	cJSON_ArrayForEach(it, items)
	{
		if (jstr(it, "id") == NULL || jstr(it, "path") == NULL ||
		    jstr(it, "src") == NULL ||
		    !kzp_sha_ok(jstr(it, "sha256")) ||
		    kzp_relpath_ok(jstr(it, "path")) != 0 ||
		    jnum(it, "size") < 0 || jnum(it, "ver") < 1)
			goto bad;
		n++;
	}
	kzp_manifest_digest(items, md);
	if (n != jnum(snap, "files") || !jeq(snap, "manifest_digest", md))
		goto bad;
	return 0;
bad:
	kzp_fail(r, KZ_WE_REFUSED, "the admission snapshot cannot be proven");
	return KZ_EDENIED;
}

/*
 * The projection a withheld selection leaves: the snapshot without its
 * selection items, its counts and manifest digest those of what remains.
 * The caller frees *out with cJSON_Delete.
 */
int
kzp_snap_withhold(const cJSON *snap, cJSON **out)
{
	cJSON *s = cJSON_Duplicate(snap, true), *items, *it, *next;
	char md[KZP_SHA_HEX + 1];
	int64_t bytes = 0;

	if (s == NULL || (items = kz_json_get(s, "items")) == NULL) {
		cJSON_Delete(s);
		return KZ_ENOMEM;
	}
	for (it = items->child; it != NULL; it = next) {
		next = it->next;
		if (jeq(it, "src", "selection"))
			cJSON_Delete(cJSON_DetachItemViaPointer(items, it));
		else
			bytes += jnum(it, "size");
	}
	kzp_manifest_digest(items, md);
	cJSON_ReplaceItemInObjectCaseSensitive(s, "selection",
	    cJSON_CreateString("withheld"));
	cJSON_ReplaceItemInObjectCaseSensitive(s, "files",
	    cJSON_CreateNumber(count(items)));
	cJSON_ReplaceItemInObjectCaseSensitive(s, "bytes",
	    cJSON_CreateNumber((double)bytes));
	cJSON_ReplaceItemInObjectCaseSensitive(s, "manifest_digest",
	    cJSON_CreateString(md));
	*out = s;
	return 0;
}
