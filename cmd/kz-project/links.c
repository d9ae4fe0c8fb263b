/*
 * How an item reaches a chat or a project: an owner's link (with its
 * pointer, shared or private), its withdrawal, and the owner-scoped
 * selection of a private-library file in one chat.
 */
#include <stdio.h>
#include <string.h>

#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

/* The target of a link: exactly one of room (hashed) or project. */
static int
target(const struct kzp *p, const cJSON *req, const char **kind,
    char tg[KZ_IDHASH_HEX + 1], struct kzp_res *r)
{
	const char *pid;
	bool room = kz_json_get(req, "room") != NULL;
	bool proj = kz_json_get(req, "project") != NULL;

	if (room == proj)
		return kzp_bad(r, "give exactly one of 'room' or 'project'");
	if (room) {
		*kind = "room";
		return kzp_req_hash(p, req, "room", "conversation", tg, r);
	}
	*kind = "project";
	if (kzp_req_id(req, "project", &pid, r) != 0)
		return KZ_EINVAL;
	snprintf(tg, KZ_IDHASH_HEX + 1, "%s", pid);
	return 0;
}

int
kzp_op_link(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1], tg[KZ_IDHASH_HEX + 1], why[KZP_WHY];
	const char *rid, *kind, *turn, *av[9];
	struct kzp_bargs ba;
	bool shared;
	int e;

	if ((e = kzp_req_id(req, "resource", &rid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = target(p, req, &kind, tg, r)) != 0)
		return e;
	/*
	 * The link stores its pointer; policy changes never widen it (the
	 * project-grant rule).
	 */
	if (kz_json_bool_opt(req, "shared", p->pointer_shared, &shared, why,
	        sizeof(why)) != 0 ||
	    kz_json_str_opt(req, "turn", KZP_ID_MAX, "-", &turn, why,
	        sizeof(why)) != 0)
		return kzp_bad(r, "bad 'shared' or 'turn'");
	av[0] = rid;
	av[1] = mh;
	av[2] = kind;
	av[3] = tg;
	av[4] = turn;
	av[5] = shared ? "1" : "0";
	/* A room link takes its place there (the place rule). */
	kzp_bounds_args(p, &ba, av + 6);
	if ((e = kzp_mutate_as(p, "link", 9, av, "link_seq", out, r)) == 0)
		cJSON_AddBoolToObject(out, "shared", shared);
	return e;
}

int
kzp_op_withdraw(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1], tg[KZ_IDHASH_HEX + 1];
	const char *rid, *kind, *av[4];
	int e;

	if ((e = kzp_req_id(req, "resource", &rid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = target(p, req, &kind, tg, r)) != 0)
		return e;
	av[0] = rid;
	av[1] = mh;
	av[2] = kind;
	av[3] = tg;
	return kzp_mutate_as(p, "withdraw", 4, av, "value", out, r);
}

/* select ("1") and unselect ("0"). */
int
kzp_op_selection(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char rh[KZ_IDHASH_HEX + 1], mh[KZ_IDHASH_HEX + 1];
	const char *rid, *av[4] = {rh, mh, NULL, mode};
	int e;

	if ((e = kzp_req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = kzp_req_id(req, "resource", &rid, r)) != 0)
		return e;
	av[2] = rid;
	return kzp_mutate_as(p, "select", 4, av, "value", out, r);
}
