/*
 * The op table of kz-project, shared by the daemon (serve.c) and the
 * one-shot commands (main.c), the dispatch that checks a request's fields,
 * and the request readers every op uses.  The ops themselves live by
 * concern: members.c (rooms, projects, membership), resources.c (blobs,
 * resources, versions), links.c (links, withdrawal, selection), sources.c
 * (connections, declared sources, can-read, resolve), turn.c (admit,
 * verify, classify, materialize and their audit) and outputs.c (shared-turn
 * outputs, placeholders).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "kz_srv.h"
#include "kzp.h"
#include "banned.h"

int
kzp_bad(struct kzp_res *r, const char *why)
{
	kzp_fail(r, KZ_WE_BAD_REQUEST, "%s", why);
	return KZ_EINVAL;
}

/* A required raw id (opaque token) from the request. */
int
kzp_req_id(const cJSON *req, const char *key, const char **out,
    struct kzp_res *r)
{
	char why[KZP_WHY];

	if (kz_json_str(req, key, KZP_ID_MAX, out, why, sizeof(why)) != 0 ||
	    !kzp_id_ok(*out)) {
		kzp_fail(r, KZ_WE_BAD_REQUEST, "field '%s' must be an id", key);
		return KZ_EINVAL;
	}
	return 0;
}

/* A required raw id, hashed under kind (members and rooms are hashed). */
int
kzp_req_hash(const struct kzp *p, const cJSON *req, const char *key,
    const char *kind, char out[KZ_IDHASH_HEX + 1], struct kzp_res *r)
{
	const char *id;
	int e;

	if ((e = kzp_req_id(req, key, &id, r)) != 0)
		return e;
	if (kzp_hash(p, kind, id, out) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "identifier hashing failed");
		return KZ_EINTERNAL;
	}
	return 0;
}

int
kzp_mutate_as(struct kzp *p, const char *script, int argc, const char **av,
    const char *key, cJSON *out, struct kzp_res *r)
{
	long long v;
	int e;

	if ((e = kzp_mutate(p, script, argc, av, &v, r)) != 0)
		return e;
	cJSON_AddNumberToObject(out, key, (double)v);
	return 0;
}

int
kzp_mutate_json(struct kzp *p, const char *script, int argc, const char **av,
    int i, const cJSON *v, const char *key, cJSON *out, struct kzp_res *r)
{
	char *js;
	int e;

	if ((js = kz_json_print(v)) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	av[i] = js;
	e = kzp_mutate_as(p, script, argc, av, key, out, r);
	free(js);
	return e;
}

/*
 * One op a line: its name, its fields, its handler and the mode that
 * handler is given (which op of a family), and its flags.  Two are an
 * operator's: connection-create (a platform-managed connection is the
 * operator's to make, sources.c, and the backend never makes one) and
 * blob-collect (it removes stored bytes, collect.c).
 */
#define F(...)                                                                 \
	(const char *const[])                                                  \
	{                                                                      \
		__VA_ARGS__, NULL                                              \
	}
const struct kzp_opdef kzp_ops[] = {
    {"member-create", F("member"), kzp_op_member_create, NULL, 0},
    {"room-create", F("room", "member"), kzp_op_room_member, NULL, 0},
    {"room-join", F("room", "member"), kzp_op_room_member, "1", 0},
    {"room-leave", F("room", "member"), kzp_op_room_member, "0", 0},
    {"project-create", F("project", "member"), kzp_op_project_member, NULL, 0},
    {"project-join", F("project", "member"), kzp_op_project_member, "1", 0},
    {"project-leave", F("project", "member"), kzp_op_project_member, "0", 0},
    {"room-link-project", F("room", "project", "member"), kzp_op_room_project,
        "1", 0},
    {"room-unlink-project", F("room", "project", "member"), kzp_op_room_project,
        "0", 0},
    {"blob-put", F("file"), kzp_op_blob_put, NULL, 0},
    {"blob-collect", F("dry"), kzp_op_blob_collect, NULL, KZ_OP_OPERATOR},
    {"connection-create", F("connection", "bucket", "serves", "project"),
        kzp_op_connection_create, NULL, KZ_OP_OPERATOR},
    {"resource-create", F("resource", "member", "kind", "connection", "object"),
        kzp_op_resource_create, NULL, 0},
    {"version-new", F("resource", "member", "path", "blob", "pending"),
        kzp_op_version_new, NULL, 0},
    {"resource-revoke", F("resource", "member"), kzp_op_resource_revoke, NULL,
        0},
    {"link", F("resource", "member", "room", "project", "turn", "shared"),
        kzp_op_link, NULL, 0},
    {"withdraw", F("resource", "member", "room", "project"), kzp_op_withdraw,
        NULL, 0},
    {"select", F("room", "member", "resource"), kzp_op_selection, "1", 0},
    {"unselect", F("room", "member", "resource"), kzp_op_selection, "0", 0},
    {"declare-source",
        F("project", "member", "name", "kind", "bucket", "key", "prefix",
            "endpoint", "manifest", "url"),
        kzp_op_declare_source, NULL, 0},
    {"can-read", F("member", "resource", "room"), kzp_op_can_read, NULL, 0},
    {"resolve", F("member", "resource"), kzp_op_resolve, NULL, 0},
    {"admit",
        F("room", "member", "turn", "select", "retrieved", "contract",
            "capability"),
        kzp_op_admit, NULL, 0},
    {"verify", F("snapshot"), kzp_op_verify, NULL, 0},
    {"classify", F("snapshot"), kzp_op_classify, NULL, 0},
    {"materialize", F("snapshot", "dest"), kzp_op_materialize, NULL, 0},
    {"link-output",
        F("room", "member", "turn", "workspace", "file", "name", "snapshot"),
        kzp_op_link_output, NULL, 0},
    {"placeholder", F("room", "run", "call", "name"), kzp_op_placeholder, NULL,
        0},
    {NULL, NULL, NULL, NULL, 0},
};

const struct kzp_opdef *
kzp_op_find(const char *op)
{
	for (const struct kzp_opdef *d = kzp_ops; d->op != NULL; d++)
		if (strcmp(d->op, op) == 0)
			return d;
	return NULL;
}

int
kzp_run(struct kzp *p, const char *op, const cJSON *req, cJSON **out,
    struct kzp_res *r)
{
	const struct kzp_opdef *d = kzp_op_find(op);
	char why[KZP_WHY];
	static const char *const env[] = {"v", "op", "id"};
	const cJSON *c;
	int e;

	r->code = NULL;
	r->why[0] = '\0';
	*out = NULL;
	if (d == NULL)
		return kzp_bad(r, "unknown op");
	cJSON_ArrayForEach(c, req)
	{
		bool ok = false;

		for (size_t i = 0; i < 3; i++)
			ok |= strcmp(c->string, env[i]) == 0;
		for (int i = 0; d->fields[i] != NULL; i++)
			ok |= strcmp(c->string, d->fields[i]) == 0;
		if (!ok) {
			kz_why(why, sizeof(why), "unknown field '%.48s'",
			    c->string);
			return kzp_bad(r, why);
		}
	}
	if ((*out = cJSON_CreateObject()) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	if ((e = d->fn(p, req, *out, r, d->mode)) != 0) {
		cJSON_Delete(*out);
		*out = NULL;
		if (r->code == NULL)
			kzp_fail(r, KZ_WE_INTERNAL, "internal error");
	}
	return e;
}
