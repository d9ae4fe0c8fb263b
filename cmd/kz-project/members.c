/*
 * Who belongs where: members, rooms (chats) and projects, and the links
 * between a room and a project.  Raw member and room ids are hashed here;
 * every change of a room's audience bumps its audience version in the same
 * script (lua/lib.lua), and the ops that change one answer it.
 */
#include <stdio.h>
#include <string.h>

#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

int
kzp_op_member_create(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1];
	const char *av[1] = {mh};
	int e;

	if ((e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	cJSON_AddStringToObject(out, "member_hash", mh);
	return kzp_mutate_as(p, "member_create", 1, av, "value", out, r);
}

/* room-create (mode NULL), room-join ("1") and room-leave ("0"). */
int
kzp_op_room_member(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char rh[KZ_IDHASH_HEX + 1], mh[KZ_IDHASH_HEX + 1];
	const char *av[3] = {rh, mh, mode};
	int e;

	if ((e = kzp_req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	cJSON_AddStringToObject(out, "room_hash", rh);
	if (mode == NULL)
		return kzp_mutate_as(p, "room_create", 2, av, "value", out, r);
	return kzp_mutate_as(p, "room_member", 3, av, "audience_version", out,
	    r);
}

/* project-create (mode NULL), project-join ("1") and project-leave ("0"). */
int
kzp_op_project_member(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1];
	const char *pid, *av[3] = {NULL, mh, mode};
	int e;

	if ((e = kzp_req_id(req, "project", &pid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	av[0] = pid;
	if (mode == NULL)
		return kzp_mutate_as(p, "project_create", 2, av, "value", out,
		    r);
	return kzp_mutate_as(p, "project_member", 3, av, "value", out, r);
}

/* room-link-project ("1") and room-unlink-project ("0"). */
int
kzp_op_room_project(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char rh[KZ_IDHASH_HEX + 1], mh[KZ_IDHASH_HEX + 1];
	const char *pid, *av[4] = {rh, NULL, mh, mode};
	int e;

	if ((e = kzp_req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = kzp_req_id(req, "project", &pid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	av[1] = pid;
	return kzp_mutate_as(p, "room_project", 4, av, "audience_version", out,
	    r);
}
