/*
 * The ops of one turn: admit (the policy decides on one view of the room
 * and the snapshot is committed), verify, classify and materialize (each
 * proves the snapshot against live state first), and the audit record
 * every one of those decisions leaves.
 */
#include <stdint.h>
#include <string.h>

#include "kz_audit.h"
#include "kz_cap.h"
#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

/*
 * The audit rule: every decision is audited; no filenames, bytes or keys.
 */
int
kzp_audit(struct kzp *p, const char *kind, const char *stage, const cJSON *snap,
    const char *mh, const char *rh, const struct kzp_res *res, int64_t files,
    int64_t bytes)
{
	const char *md = cJSON_GetStringValue(
	    kz_json_get(snap, "manifest_digest"));
	const char *cap = cJSON_GetStringValue(kz_json_get(snap, "capability"));
	const cJSON *av = kz_json_get(snap, "audience_version");
	cJSON *ev;
	char why[KZP_WHY];
	int e;

	if (p->audit_sock == NULL || *p->audit_sock == '\0')
		return 0;
	if ((ev = cJSON_CreateObject()) == NULL)
		return KZ_ENOMEM;
	if (mh != NULL && *mh != '\0')
		cJSON_AddStringToObject(ev, "actor_hash", mh);
	if (rh != NULL && *rh != '\0') {
		cJSON_AddStringToObject(ev, "conversation_hash", rh);
		cJSON_AddStringToObject(ev, "room_hash", rh);
	}
	if (cJSON_IsNumber(av))
		cJSON_AddNumberToObject(ev, "audience_version",
		    av->valuedouble);
	/* Only a name of the closed set: a raw one is the caller's string. */
	if (cap != NULL && kz_cap_find(cap) != NULL)
		cJSON_AddStringToObject(ev, "capability", cap);
	if (md != NULL)
		cJSON_AddStringToObject(ev, "manifest_digest", md);
	cJSON_AddNumberToObject(ev, "files", (double)files);
	cJSON_AddNumberToObject(ev, "bytes", (double)bytes);
	if (stage != NULL)
		cJSON_AddStringToObject(ev, "stage", stage);
	cJSON_AddStringToObject(ev, "decision",
	    res->code == NULL ? "allow" : "refuse");
	cJSON_AddStringToObject(ev, "outcome",
	    res->code == NULL ? "ok" : res->code);
	if (res->code != NULL)
		cJSON_AddStringToObject(ev, "reason", res->why);
	e = kz_audit_send(p->audit_sock, kind, ev, KZ_AUDIT_TIMEOUT_MS, why,
	    sizeof(why));
	cJSON_Delete(ev);
	return e;
}

/* An allowed decision that cannot be audited is not allowed. */
static int
audited(struct kzp *p, const char *kind, const cJSON *snap, const char *mh,
    const char *rh, int e, struct kzp_res *r, int64_t files, int64_t bytes)
{
	if (kzp_audit(p, kind, NULL, snap, mh, rh, r, files, bytes) != 0 &&
	    e == 0) {
		kzp_fail(r, KZ_WE_UNAVAILABLE, "the audit sink is unavailable");
		return KZ_EUNAVAIL;
	}
	return e;
}

/*
 * The capability rule: a run names one capability of the closed set
 * (kz_cap.h).  A name outside it allows nothing and is refused before any
 * view is read, audited as an isolation denial.  The denial carries the
 * correlation hashes and never the name itself: a raw capability the set
 * does not know is the caller's string, not a fact of the deployment.
 */
static int
cap_refuse(struct kzp *p, const char *mh, const char *rh, struct kzp_res *r)
{
	cJSON *ev = cJSON_CreateObject();
	char why[KZP_WHY];
	int e;

	kzp_fail(r, KZ_WE_ISOLATION_DENIED,
	    "the run names a capability outside the closed set");
	if (p->audit_sock == NULL || *p->audit_sock == '\0') {
		cJSON_Delete(ev);
		return KZ_EDENIED;
	}
	if (ev == NULL)
		return KZ_EDENIED;
	cJSON_AddStringToObject(ev, "actor_hash", mh);
	cJSON_AddStringToObject(ev, "conversation_hash", rh);
	cJSON_AddStringToObject(ev, "boundary", "capability");
	cJSON_AddStringToObject(ev, "stage", "admission");
	cJSON_AddStringToObject(ev, "error", r->code);
	cJSON_AddStringToObject(ev, "outcome", r->code);
	cJSON_AddStringToObject(ev, "reason", r->why);
	e = kz_audit_send(p->audit_sock, "isolation_denial", ev,
	    KZ_AUDIT_TIMEOUT_MS, why, sizeof(why));
	cJSON_Delete(ev);
	/* A denial stays a denial; an unaudited one is also unavailable. */
	if (e != 0) {
		kzp_fail(r, KZ_WE_UNAVAILABLE, "the audit sink is unavailable");
		return KZ_EUNAVAIL;
	}
	return KZ_EDENIED;
}

static int
id_list(const cJSON *req, const char *key, const cJSON **out, struct kzp_res *r)
{
	const cJSON *v = kz_json_get(req, key);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > KZP_LIST_MAX)
		return kzp_bad(r, "id lists are arrays of at most 64 ids");
	*out = v;
	return 0;
}

int
kzp_op_admit(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1] = "", rh[KZ_IDHASH_HEX + 1] = "";
	char why[KZP_WHY];
	struct kzp_turn t = {.mh = mh, .rh = rh};
	cJSON *view = NULL, *snap = NULL, *scope = NULL, *extra = NULL;
	int e, tries;

	if ((e = kzp_req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = id_list(req, "select", &t.select, r)) != 0 ||
	    (e = id_list(req, "retrieved", &t.retrieved, r)) != 0)
		goto out;
	if (kz_json_str_opt(req, "turn", KZP_ID_MAX, "-", &t.turn, why,
	        sizeof(why)) != 0 ||
	    kz_json_str_opt(req, "capability", 32, "code.run", &t.capability,
	        why, sizeof(why)) != 0 ||
	    kz_json_bool_opt(req, "contract", false, &t.contract, why,
	        sizeof(why)) != 0 ||
	    !kzp_id_ok(t.turn)) {
		e = kzp_bad(r, "bad 'turn', 'capability' or 'contract'");
		goto out;
	}
	if (kz_cap_find(t.capability) == NULL) {
		return cap_refuse(p, mh, rh, r);
	}
	extra = cJSON_CreateArray();
	for (int i = 0; i < 2; i++) {
		const cJSON *c, *l = i == 0 ? t.select : t.retrieved;

		cJSON_ArrayForEach(c, l) if (cJSON_IsString(c) &&
		    kzp_id_ok(c->valuestring)) cJSON_AddItemToArray(extra,
		    cJSON_CreateString(c->valuestring));
	}
	/* The commit fails if the room moved since the view: read again. */
	for (tries = 0; tries < 4; tries++) {
		cJSON_Delete(view);
		cJSON_Delete(snap);
		cJSON_Delete(scope);
		view = snap = scope = NULL;
		if ((e = kzp_view(p, rh, mh, extra, &view, r)) != 0 ||
		    (e = kzp_admit_decide(view, &t, &p->b, &snap, &scope, r)) !=
		        0)
			goto out;
		e = kzp_commit(p, view, snap, mh, scope, r);
		if (e == 0 || r->code == NULL || strcmp(r->code, KZP_CONFLICT))
			break;
	}
	if (e != 0 && r->code != NULL && strcmp(r->code, KZP_CONFLICT) == 0)
		kzp_fail(r, KZ_WE_REFUSED,
		    "the room kept changing during admission");
out:
	e = audited(p, "admission", snap != NULL ? snap : req, mh, rh, e, r,
	    snap ? (int64_t)cJSON_GetNumberValue(kz_json_get(snap, "files")) :
	           0,
	    snap ? (int64_t)cJSON_GetNumberValue(kz_json_get(snap, "bytes")) :
	           0);
	if (e == 0)
		cJSON_AddItemToObject(out, "admission", snap);
	else
		cJSON_Delete(snap);
	cJSON_Delete(view);
	cJSON_Delete(scope);
	cJSON_Delete(extra);
	return e;
}

/*
 * The freshness and fail-closed rules: the snapshot must be the one this
 * service stored, its digests must hold, and live state must still match
 * it.
 */
static int
check_live(struct kzp *p, const cJSON *snap, bool *withheld, struct kzp_res *r)
{
	const char *sid = cJSON_GetStringValue(kz_json_get(snap, "snapshot"));
	const char *mh = cJSON_GetStringValue(kz_json_get(snap, "actor_hash"));
	const char *rh = cJSON_GetStringValue(kz_json_get(snap, "room_hash"));
	cJSON *stored = NULL, *view = NULL, *ids = NULL;
	const cJSON *it;
	int e;

	*withheld = false;
	if ((e = kzp_snap_check(snap, r)) != 0)
		return e;
	if ((ids = cJSON_CreateArray()) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	cJSON_ArrayForEach(it,
	    kz_json_get(snap, "items")) cJSON_AddItemToArray(ids,
	    cJSON_CreateString(cJSON_GetStringValue(kz_json_get(it, "id"))));
	/* The stored snapshot and live state, in one atomic read. */
	if ((e = kzp_live(p, rh, mh, ids, sid, &view, &stored, r)) != 0)
		goto out;
	if (stored == NULL || !cJSON_Compare(stored, snap, true)) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the admission snapshot cannot be proven");
		e = KZ_EDENIED;
		goto out;
	}
	e = kzp_verify_decide(snap, view, &p->b, withheld, r);
out:
	cJSON_Delete(stored);
	cJSON_Delete(view);
	cJSON_Delete(ids);
	return e;
}

static const cJSON *
req_snap(const cJSON *req, struct kzp_res *r)
{
	const cJSON *s = kz_json_get(req, "snapshot");

	if (!cJSON_IsObject(s)) {
		kzp_bad(r, "field 'snapshot' must be an admission snapshot");
		return NULL;
	}
	return s;
}

static const char *
snap_str(const cJSON *s, const char *k)
{
	const char *v = cJSON_GetStringValue(kz_json_get(s, k));

	/* Only hex goes to audit from an unproven snapshot. */
	return v != NULL && strlen(v) == KZ_IDHASH_HEX &&
	        strspn(v, "0123456789abcdef") == KZ_IDHASH_HEX ?
	    v :
	    NULL;
}

int
kzp_op_verify(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	const cJSON *snap;
	bool withheld;
	int e;

	if ((snap = req_snap(req, r)) == NULL)
		return KZ_EINVAL;
	e = check_live(p, snap, &withheld, r);
	e = audited(p, "verification", snap, snap_str(snap, "actor_hash"),
	    snap_str(snap, "room_hash"), e, r, 0, 0);
	if (e == 0) {
		cJSON_AddStringToObject(out, "verdict", "go");
		if (withheld)
			cJSON_AddStringToObject(out, "selection", "withheld");
	}
	return e;
}

/*
 * The audit rule at the load: the allowed projection is audited once its
 * tree is proven and before it is delivered, so an audit sink that is down
 * leaves nothing behind (materialize.c removes the undelivered tree).
 */
struct gate {
	struct kzp *p;
	const cJSON *snap;
	bool called;
};

static int
audit_gate(void *arg, int64_t files, int64_t bytes, struct kzp_res *r)
{
	struct gate *g = arg;
	const cJSON *s = g->snap;

	g->called = true;
	if (kzp_audit(g->p, "projection", NULL, s, snap_str(s, "actor_hash"),
	        snap_str(s, "room_hash"), r, files, bytes) != 0) {
		kzp_fail(r, KZ_WE_UNAVAILABLE, "the audit sink is unavailable");
		return KZ_EUNAVAIL;
	}
	return 0;
}

int
kzp_op_materialize(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	const cJSON *snap;
	cJSON *eff = NULL;
	const char *dest;
	char why[KZP_WHY];
	int64_t files = 0, bytes = 0;
	struct gate g = {.p = p};
	bool withheld = false;
	int e;

	if ((snap = req_snap(req, r)) == NULL)
		return KZ_EINVAL;
	if (kz_json_str(req, "dest", 4000, &dest, why, sizeof(why)) != 0)
		return kzp_bad(r, "field 'dest' is required");
	g.snap = snap;
	/* Live state is re-read right before bytes load (the freshness
	 * rule); a withheld selection leaves the rest to project. */
	if ((e = check_live(p, snap, &withheld, r)) == 0 && withheld &&
	    (e = kzp_snap_withhold(snap, &eff)) != 0)
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
	if (e == 0)
		e = kzp_materialize(p, eff != NULL ? eff : snap, dest,
		    audit_gate, &g, &files, &bytes, r);
	/* A refusal before the gate, or a delivery that failed after it. */
	if (!g.called || (e != 0 && e != KZ_EUNAVAIL))
		e = audited(p, "projection", snap, snap_str(snap, "actor_hash"),
		    snap_str(snap, "room_hash"), e, r, files, bytes);
	if (e == 0) {
		cJSON_AddNumberToObject(out, "files", (double)files);
		cJSON_AddNumberToObject(out, "bytes", (double)bytes);
		if (withheld)
			cJSON_AddStringToObject(out, "selection", "withheld");
	}
	cJSON_Delete(eff);
	return e;
}

/*
 * The admitted files, classified before a worker is leased (classify.c);
 * the snapshot must still hold, as for materialize.  kz-run refuses a
 * turn whose verdict is host_administration.
 */
int
kzp_op_classify(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	const cJSON *snap;
	bool admin = false, withheld;
	int e;

	if ((snap = req_snap(req, r)) == NULL)
		return KZ_EINVAL;
	/* Every admitted file is classified, a withheld selection's too: a
	 * verdict over more than is loaded can only err closed. */
	if ((e = check_live(p, snap, &withheld, r)) == 0 &&
	    (e = kzp_classify(p, snap, &admin, r)) == 0)
		cJSON_AddStringToObject(out, "verdict",
		    admin ? "host_administration" : "ok");
	return e;
}
