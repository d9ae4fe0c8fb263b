/*
 * The verification: whether an admitted snapshot still holds against live
 * state right before bytes load (the freshness, sole-audience,
 * withheld-selection and manifest-change rules), whether a snapshot's
 * shape and digests hold at all, and the projection a withheld selection
 * leaves.  Pure over cJSON views, like admit.c, so every rule is
 * unit-tested without a store.
 */
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "kzp.h"
#include "view.h"
#include "banned.h"

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
	struct idx out; /* the files the snapshot left out, by id */
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
		if (!kzp_can_read(f, mh) || !kzp_ready(f))
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
			    "an admitted file changed after admission");
		if ((strcmp(src, "room") == 0 &&
		        kzp_idx_find(&x->links, "rid", id) == NULL) ||
		    (strcmp(src, "selection") == 0 && !selected(view, id)))
			return changed(r, KZ_WE_MANIFEST_CHANGED,
			    "an admitted file was removed from the room");
	}
	return 0;
}

/*
 * The manifest-change rule, the live side: only this run's own later links
 * are tolerated.  "Own" needs a turn on both sides: a link made with no
 * turn ("-", the default) belongs to no run, so it never passes as the
 * running turn's file, even when the run itself was admitted with none.
 * A link the admission left out (the place rule) was considered and is
 * not projected, so it changes nothing the run loads.
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
		if (kzp_idx_find(&x->items, "id", rid) != NULL ||
		    kzp_idx_find(&x->out, "id", rid) != NULL)
			continue;
		f = facts_of(&x->res, rid);
		if (!kzp_can_read(f, mh) || !kzp_ready(f))
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
	    (!sel || kzp_roster_alone(roster, mh)))
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
	struct vix x = {{NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}};
	int e;

	*withheld = false;
	if (!jtrue(view, "exists") || !has_str(roster, mh))
		return changed(r, KZ_WE_REFUSED,
		    "the initiating member is "
		    "no longer in the room's audience");
	if ((e = audience(snap, view, withheld, r)) != 0)
		return e;
	if (kzp_idx_build(&x.res, kz_json_get(view, "res"), "id") != 0 ||
	    kzp_idx_build(&x.links, kz_json_get(view, "links"), "rid") != 0 ||
	    kzp_idx_build(&x.items, kz_json_get(snap, "items"), "id") != 0 ||
	    kzp_idx_build(&x.out, kz_json_get(snap, "left_out"), "id") != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	if ((e = verify_items(snap, view, &x, *withheld, r)) != 0 ||
	    (e = verify_links(snap, view, &x, r)) != 0)
		goto out;
	if (!kzp_within(kz_json_get(snap, "items"), NULL, b))
		e = changed(r, KZ_WE_REFUSED,
		    "the projection is over the configured bounds");
out:
	kzp_idx_free(&x.res);
	kzp_idx_free(&x.links);
	kzp_idx_free(&x.items);
	kzp_idx_free(&x.out);
	return e;
}

/* The place rule on a manifest: every path can be written. */
static bool
placeable(const cJSON *items, int n)
{
	const char **paths = calloc((size_t)n + 1, sizeof(*paths));
	const cJSON *it;
	bool ok;
	int i = 0;

	if (paths == NULL)
		return false;
	cJSON_ArrayForEach(it, items) paths[i++] = jstr(it, "path");
	ok = kzp_paths_disjoint(paths, (size_t)n);
	free(paths);
	return ok;
}

/*
 * A snapshot whose shape or digests do not hold proves nothing (the
 * fail-closed rule), nor does one whose files cannot all be written.
 */
int
kzp_snap_check(const cJSON *snap, struct kzp_res *r)
{
	static const char *const strs[] = {"snapshot", "room_hash",
	    "actor_hash", "turn", "roster_digest", "manifest_digest", NULL};
	const cJSON *it, *items = kz_json_get(snap, "items");
	const cJSON *out = kz_json_get(snap, "left_out");
	char md[KZP_SHA_HEX + 1];
	int n = 0;

	for (int i = 0; strs[i] != NULL; i++)
		if (jstr(snap, strs[i]) == NULL)
			goto bad;
	if (!cJSON_IsArray(items) || jnum(snap, "audience_version") < 0 ||
	    jnum(snap, "admission_seq") < 0 ||
	    (out != NULL && !cJSON_IsArray(out)))
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
	if (n != jnum(snap, "files") || !jeq(snap, "manifest_digest", md) ||
	    !placeable(items, n))
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
