/*
 * Every op of kz-project, shared by the daemon and the one-shot commands:
 * parse and check the request, hash raw ids, call the model, the policy or
 * the projection, and audit the decisions (rule 14).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_audit.h"
#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

/* A capability is a dotted name shared with kz-run and the audit log
 * ("code.run"): lower case, digits, '.', '_' and '-'. */
static bool
cap_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 32 && s[0] != '.' && s[n - 1] != '.' &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int
bad(struct kzp_res *r, const char *why)
{
	kzp_fail(r, KZ_WE_BAD_REQUEST, "%s", why);
	return KZ_EINVAL;
}

/* A required raw id (opaque token) from the request. */
static int
req_id(const cJSON *req, const char *key, const char **out, struct kzp_res *r)
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
static int
req_hash(const struct kzp *p, const cJSON *req, const char *key,
    const char *kind, char out[KZ_IDHASH_HEX + 1], struct kzp_res *r)
{
	const char *id;
	int e;

	if ((e = req_id(req, key, &id, r)) != 0)
		return e;
	if (kzp_hash(p, kind, id, out) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "identifier hashing failed");
		return KZ_EINTERNAL;
	}
	return 0;
}

static int
mutate_simple(struct kzp *p, const char *script, int argc, const char **av,
    cJSON *out, struct kzp_res *r)
{
	long long v;
	int e;

	if ((e = kzp_mutate(p, script, argc, av, &v, r)) != 0)
		return e;
	cJSON_AddNumberToObject(out, "value", (double)v);
	return 0;
}

static int
op_member_create(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1];
	const char *av[1] = {mh};
	int e;

	if ((e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	cJSON_AddStringToObject(out, "member_hash", mh);
	return mutate_simple(p, "member_create", 1, av, out, r);
}

/* room-create, room-join, room-leave. */
static int
room_member(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char rh[KZ_IDHASH_HEX + 1], mh[KZ_IDHASH_HEX + 1];
	const char *av[3] = {rh, mh, mode};
	int e;

	if ((e = req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	cJSON_AddStringToObject(out, "room_hash", rh);
	if (mode == NULL)
		return mutate_simple(p, "room_create", 2, av, out, r);
	if ((e = mutate_simple(p, "room_member", 3, av, out, r)) == 0)
		cJSON_AddItemToObject(out, "audience_version",
		    cJSON_DetachItemFromObject(out, "value"));
	return e;
}

static int
op_room_create(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return room_member(p, q, o, r, NULL);
}

static int
op_room_join(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return room_member(p, q, o, r, "1");
}

static int
op_room_leave(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return room_member(p, q, o, r, "0");
}

static int
project_member(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1];
	const char *pid, *av[3] = {NULL, mh, mode};
	int e;

	if ((e = req_id(req, "project", &pid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	av[0] = pid;
	if (mode == NULL)
		return mutate_simple(p, "project_create", 2, av, out, r);
	return mutate_simple(p, "project_member", 3, av, out, r);
}

static int
op_project_create(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return project_member(p, q, o, r, NULL);
}

static int
op_project_join(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return project_member(p, q, o, r, "1");
}

static int
op_project_leave(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return project_member(p, q, o, r, "0");
}

static int
room_project(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char rh[KZ_IDHASH_HEX + 1], mh[KZ_IDHASH_HEX + 1];
	const char *pid, *av[4] = {rh, NULL, mh, mode};
	int e;

	if ((e = req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = req_id(req, "project", &pid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	av[1] = pid;
	if ((e = mutate_simple(p, "room_project", 4, av, out, r)) == 0)
		cJSON_AddItemToObject(out, "audience_version",
		    cJSON_DetachItemFromObject(out, "value"));
	return e;
}

static int
op_room_link_project(struct kzp *p, const cJSON *q, cJSON *o,
    struct kzp_res *r)
{
	return room_project(p, q, o, r, "1");
}

static int
op_room_unlink_project(struct kzp *p, const cJSON *q, cJSON *o,
    struct kzp_res *r)
{
	return room_project(p, q, o, r, "0");
}

static int
op_blob_put(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	char why[KZP_WHY], sha[KZP_SHA_HEX + 1];
	const char *file;
	int64_t size;
	int fd, e;

	if (kz_json_str(req, "file", 4096, &file, why, sizeof(why)) != 0)
		return bad(r, "field 'file' is required");
	if ((fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return bad(r, "the file cannot be opened");
	e = kzp_blob_put(p->blobdir, fd, p->b.max_file_bytes, sha, &size, r);
	close(fd);
	if (e != 0)
		return e;
	cJSON_AddStringToObject(out, "sha256", sha);
	cJSON_AddNumberToObject(out, "size", (double)size);
	return 0;
}

static int
op_resource_create(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r)
{
	static const char *const kinds[] = {"document", "artifact", "output",
	    "library", "prompt", NULL};
	char mh[KZ_IDHASH_HEX + 1], why[KZP_WHY];
	const char *rid, *kind, *conn, *obj, *av[5] = {NULL, mh, NULL};
	bool ok = false;
	int e;

	if ((e = req_id(req, "resource", &rid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	if (kz_json_str_opt(req, "kind", 16, "document", &kind, why,
	    sizeof(why)) != 0)
		return bad(r, "field 'kind' must be a string");
	for (int i = 0; kinds[i] != NULL; i++)
		ok |= strcmp(kind, kinds[i]) == 0;
	if (!ok)
		return bad(r, "unknown resource kind");
	/* Rule 12: an object key is resolved only through a connection. */
	if (kz_json_str_opt(req, "connection", KZP_ID_MAX, "", &conn, why,
	    sizeof(why)) != 0 || kz_json_str_opt(req, "object", KZP_PATH_MAX,
	    "", &obj, why, sizeof(why)) != 0)
		return bad(r, "bad 'connection' or 'object'");
	if ((*conn != '\0' && !kzp_id_ok(conn)) ||
	    (*conn == '\0') != (*obj == '\0') ||
	    (*obj != '\0' && kzp_relpath_ok(obj) != 0))
		return bad(r, "'connection' and 'object' come together: an id "
		    "and a relative object key");
	av[0] = rid;
	av[2] = kind;
	av[3] = conn;
	av[4] = obj;
	return mutate_simple(p, "res_create", *conn != '\0' ? 5 : 3, av, out,
	    r);
}

#define CONN_SERVES_MAX 64

/*
 * Rule 12: a platform-managed connection is created by the operator with
 * the members (or one project's members) it serves.  It is never derived
 * from a declared source and carries no credential: the embedded default
 * has no object-store client, so the connection is the authority check and
 * content still comes from the blob store by digest.
 */
static int
op_connection_create(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r)
{
	char why[KZP_WHY], mh[KZ_IDHASH_HEX + 1];
	const char *cid, *bucket, *pid, *av[4];
	const cJSON *sv = kz_json_get(req, "serves"), *c;
	cJSON *ms = cJSON_CreateArray();
	char *js = NULL;
	int e = 0, n = 0;

	if (ms == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	if ((e = req_id(req, "connection", &cid, r)) != 0)
		goto out;
	if (kz_json_str_opt(req, "bucket", 256, "", &bucket, why,
	    sizeof(why)) != 0 || kz_json_str_opt(req, "project", KZP_ID_MAX,
	    "", &pid, why, sizeof(why)) != 0 ||
	    (*pid != '\0' && !kzp_id_ok(pid)) ||
	    (sv != NULL && !cJSON_IsArray(sv))) {
		e = bad(r, "bad 'bucket', 'project' or 'serves'");
		goto out;
	}
	cJSON_ArrayForEach(c, sv) {
		if (!cJSON_IsString(c) || !kzp_id_ok(c->valuestring) ||
		    ++n > CONN_SERVES_MAX) {
			e = bad(r, "'serves' is a bounded list of member ids");
			goto out;
		}
		if (kzp_hash(p, "member", c->valuestring, mh) != 0) {
			kzp_fail(r, KZ_WE_INTERNAL, "identifier hashing failed");
			e = KZ_EINTERNAL;
			goto out;
		}
		cJSON_AddItemToArray(ms, cJSON_CreateString(mh));
	}
	if (n == 0 && *pid == '\0') {
		e = bad(r, "a connection serves named members or a project");
		goto out;
	}
	if ((js = kz_json_print(ms)) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	av[0] = cid;
	av[1] = bucket;
	av[2] = js;
	av[3] = pid;
	e = mutate_simple(p, "conn_create", 4, av, out, r);
out:
	free(js);
	cJSON_Delete(ms);
	return e;
}

static int
op_version_new(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1], why[KZP_WHY], size[24];
	const char *rid, *path, *sha, *av[6];
	bool pending;
	struct stat sb;
	int e, fd;

	if ((e = req_id(req, "resource", &rid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	if (kz_json_str(req, "path", KZP_PATH_MAX, &path, why, sizeof(why)) ||
	    kzp_relpath_ok(path) != 0)
		return bad(r, "field 'path' must be a relative path");
	if (kz_json_bool_opt(req, "pending", false, &pending, why,
	    sizeof(why)) != 0 || kz_json_str_opt(req, "blob", KZP_SHA_HEX, "",
	    &sha, why, sizeof(why)) != 0)
		return bad(r, "bad 'pending' or 'blob'");
	snprintf(size, sizeof(size), "0");
	if (!pending) {
		if (kzp_blob_open(p->blobdir, sha, &fd) != 0)
			return bad(r, "field 'blob' must name a stored blob");
		e = fstat(fd, &sb);
		close(fd);
		if (e != 0)
			return bad(r, "the blob cannot be read");
		snprintf(size, sizeof(size), "%lld", (long long)sb.st_size);
	}
	av[0] = rid;
	av[1] = mh;
	av[2] = path;
	av[3] = size;
	av[4] = pending ? "" : sha;
	av[5] = pending ? "0" : "1";
	if ((e = mutate_simple(p, "res_version", 6, av, out, r)) == 0)
		cJSON_AddItemToObject(out, "version",
		    cJSON_DetachItemFromObject(out, "value"));
	return e;
}

static int
op_resource_revoke(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1];
	const char *rid, *av[2] = {NULL, mh};
	int e;

	if ((e = req_id(req, "resource", &rid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	av[0] = rid;
	return mutate_simple(p, "res_revoke", 2, av, out, r);
}

/* The target of a link: exactly one of room (hashed) or project. */
static int
target(const struct kzp *p, const cJSON *req, const char **kind,
    char tg[KZ_IDHASH_HEX + 1], struct kzp_res *r)
{
	const char *pid;
	bool room = kz_json_get(req, "room") != NULL;
	bool proj = kz_json_get(req, "project") != NULL;

	if (room == proj)
		return bad(r, "give exactly one of 'room' or 'project'");
	if (room) {
		*kind = "room";
		return req_hash(p, req, "room", "conversation", tg, r);
	}
	*kind = "project";
	if (req_id(req, "project", &pid, r) != 0)
		return KZ_EINVAL;
	snprintf(tg, KZ_IDHASH_HEX + 1, "%s", pid);
	return 0;
}

static int
op_link(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1], tg[KZ_IDHASH_HEX + 1], why[KZP_WHY];
	const char *rid, *kind, *turn, *av[6];
	bool shared;
	int e;

	if ((e = req_id(req, "resource", &rid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = target(p, req, &kind, tg, r)) != 0)
		return e;
	/* Rule 11: the link stores its pointer; policy changes never widen it. */
	if (kz_json_bool_opt(req, "shared", p->pointer_shared, &shared, why,
	    sizeof(why)) != 0 || kz_json_str_opt(req, "turn", KZP_ID_MAX, "-",
	    &turn, why, sizeof(why)) != 0)
		return bad(r, "bad 'shared' or 'turn'");
	av[0] = rid;
	av[1] = mh;
	av[2] = kind;
	av[3] = tg;
	av[4] = turn;
	av[5] = shared ? "1" : "0";
	if ((e = mutate_simple(p, "link", 6, av, out, r)) == 0) {
		cJSON_AddItemToObject(out, "link_seq",
		    cJSON_DetachItemFromObject(out, "value"));
		cJSON_AddBoolToObject(out, "shared", shared);
	}
	return e;
}

static int
op_withdraw(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1], tg[KZ_IDHASH_HEX + 1];
	const char *rid, *kind, *av[4];
	int e;

	if ((e = req_id(req, "resource", &rid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = target(p, req, &kind, tg, r)) != 0)
		return e;
	av[0] = rid;
	av[1] = mh;
	av[2] = kind;
	av[3] = tg;
	return mutate_simple(p, "withdraw", 4, av, out, r);
}

static int
selection(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *on)
{
	char rh[KZ_IDHASH_HEX + 1], mh[KZ_IDHASH_HEX + 1];
	const char *rid, *av[4] = {rh, mh, NULL, on};
	int e;

	if ((e = req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = req_id(req, "resource", &rid, r)) != 0)
		return e;
	av[2] = rid;
	return mutate_simple(p, "select", 4, av, out, r);
}

static int
op_select(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return selection(p, q, o, r, "1");
}

static int
op_unselect(struct kzp *p, const cJSON *q, cJSON *o, struct kzp_res *r)
{
	return selection(p, q, o, r, "0");
}

/*
 * Rule 12: a declared object-store source is kept as an inert record.  It
 * is never consulted by can-read, resolve or admit, and no connection is
 * ever made from it; resolution goes only through a platform-managed
 * connection (connection-create) under the current member.
 */
static int
op_declare_source(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r)
{
	static const char *const keys[] = {"bucket", "key", "prefix",
	    "endpoint", "manifest", "url", "kind", NULL};
	char mh[KZ_IDHASH_HEX + 1], why[KZP_WHY];
	const char *pid, *name, *av[4];
	cJSON *rec = cJSON_CreateObject();
	char *js = NULL;
	int e;

	if ((e = req_id(req, "project", &pid, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = req_id(req, "name", &name, r)) != 0)
		goto out;
	for (int i = 0; keys[i] != NULL; i++) {
		const char *v;

		if (kz_json_str_opt(req, keys[i], 1024, NULL, &v, why,
		    sizeof(why)) != 0) {
			e = bad(r, "source fields are strings");
			goto out;
		}
		if (v != NULL)
			cJSON_AddStringToObject(rec, keys[i], v);
	}
	if ((js = kz_json_print(rec)) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		e = KZ_ENOMEM;
		goto out;
	}
	av[0] = pid;
	av[1] = mh;
	av[2] = name;
	av[3] = js;
	if ((e = mutate_simple(p, "declare_source", 4, av, out, r)) == 0)
		cJSON_AddBoolToObject(out, "grants_access", false);
out:
	free(js);
	cJSON_Delete(rec);
	return e;
}

/* Rule 11: one predicate for every kind of item. */
static int
op_can_read(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1], rh[KZ_IDHASH_HEX + 1];
	cJSON *f = NULL;
	bool yes = false;
	const cJSON *c;
	const char *rid;
	int e;

	if ((e = req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	if (kz_json_get(req, "room") != NULL) {
		/* A room is readable by its live audience. */
		if ((e = req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
		    (e = kzp_view(p, rh, mh, NULL, &f, r)) != 0)
			return e;
		cJSON_ArrayForEach(c, kz_json_get(f, "roster"))
			yes |= cJSON_IsString(c) &&
			    strcmp(c->valuestring, mh) == 0;
	} else {
		if ((e = req_id(req, "resource", &rid, r)) != 0 ||
		    (e = kzp_facts(p, rid, mh, &f, r)) != 0)
			return e;
		yes = kzp_can_read(f, mh);
	}
	cJSON_Delete(f);
	if (!yes) {
		kzp_fail(r, KZ_WE_REFUSED, "the member cannot read the item");
		return KZ_EDENIED;
	}
	cJSON_AddBoolToObject(out, "read", true);
	return 0;
}

/*
 * Rule 12: reading a connection-bound resource resolves through its
 * platform-managed connection under the current member: the connection must
 * serve the member now and the member must otherwise be able to read the
 * item.  A declared source is no resource and resolves nothing.  The reply
 * names the content by digest (the blob store holds the bytes); it carries
 * no object key, bucket or credential.
 */
static int
op_resolve(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1];
	cJSON *f = NULL;
	const char *rid, *why = NULL;
	int e;

	if ((e = req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = req_id(req, "resource", &rid, r)) != 0 ||
	    (e = kzp_facts(p, rid, mh, &f, r)) != 0)
		return e;
	if (!cJSON_IsString(kz_json_get(f, "conn")))
		why = "the item is not bound to a platform-managed connection";
	else if (!cJSON_IsTrue(kz_json_get(f, "conn_ok")))
		why = "the connection does not serve the member";
	else if (!kzp_can_read(f, mh))
		why = "the member cannot read the item";
	else if (!cJSON_IsTrue(kz_json_get(f, "ready")) ||
	    !cJSON_IsString(kz_json_get(f, "sha")))
		why = "the item has no ready version";
	if (why != NULL) {
		cJSON_Delete(f);
		kzp_fail(r, KZ_WE_REFUSED, "%s", why);
		return KZ_EDENIED;
	}
	cJSON_AddStringToObject(out, "connection",
	    cJSON_GetStringValue(kz_json_get(f, "conn")));
	cJSON_AddNumberToObject(out, "version",
	    cJSON_GetNumberValue(kz_json_get(f, "cur")));
	cJSON_AddStringToObject(out, "sha256",
	    cJSON_GetStringValue(kz_json_get(f, "sha")));
	cJSON_AddNumberToObject(out, "size",
	    cJSON_GetNumberValue(kz_json_get(f, "size")));
	cJSON_AddStringToObject(out, "content", "blob");
	cJSON_Delete(f);
	return 0;
}

/* Rule 14: every decision is audited; no filenames, bytes or keys. */
static int
audit(struct kzp *p, const char *kind, const cJSON *snap, const char *mh,
    const char *rh, const struct kzp_res *res, int64_t files, int64_t bytes)
{
	const char *md = cJSON_GetStringValue(kz_json_get(snap,
	    "manifest_digest"));
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
		cJSON_AddNumberToObject(ev, "audience_version", av->valuedouble);
	if (cap != NULL)
		cJSON_AddStringToObject(ev, "capability", cap);
	if (md != NULL)
		cJSON_AddStringToObject(ev, "manifest_digest", md);
	cJSON_AddNumberToObject(ev, "files", (double)files);
	cJSON_AddNumberToObject(ev, "bytes", (double)bytes);
	cJSON_AddStringToObject(ev, "decision", res->code == NULL ? "allow" :
	    "refuse");
	cJSON_AddStringToObject(ev, "outcome", res->code == NULL ? "ok" :
	    res->code);
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
	if (audit(p, kind, snap, mh, rh, r, files, bytes) != 0 && e == 0) {
		kzp_fail(r, KZ_WE_UNAVAILABLE, "the audit sink is unavailable");
		return KZ_EUNAVAIL;
	}
	return e;
}

static int
id_list(const cJSON *req, const char *key, const cJSON **out,
    struct kzp_res *r)
{
	const cJSON *v = kz_json_get(req, key);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > KZP_LIST_MAX)
		return bad(r, "id lists are arrays of at most 64 ids");
	*out = v;
	return 0;
}

static int
op_admit(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	char mh[KZ_IDHASH_HEX + 1] = "", rh[KZ_IDHASH_HEX + 1] = "";
	char why[KZP_WHY];
	struct kzp_turn t = {.mh = mh, .rh = rh};
	cJSON *view = NULL, *snap = NULL, *scope = NULL, *extra = NULL;
	int e, tries;

	if ((e = req_hash(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = id_list(req, "select", &t.select, r)) != 0 ||
	    (e = id_list(req, "retrieved", &t.retrieved, r)) != 0)
		goto out;
	if (kz_json_str_opt(req, "turn", KZP_ID_MAX, "-", &t.turn, why,
	    sizeof(why)) != 0 || kz_json_str_opt(req, "capability", 32,
	    "code.run", &t.capability, why, sizeof(why)) != 0 ||
	    kz_json_bool_opt(req, "contract", false, &t.contract, why,
	    sizeof(why)) != 0 || !kzp_id_ok(t.turn) ||
	    !cap_ok(t.capability)) {
		e = bad(r, "bad 'turn', 'capability' or 'contract'");
		goto out;
	}
	extra = cJSON_CreateArray();
	for (int i = 0; i < 2; i++) {
		const cJSON *c, *l = i == 0 ? t.select : t.retrieved;

		cJSON_ArrayForEach(c, l)
			if (cJSON_IsString(c) && kzp_id_ok(c->valuestring))
				cJSON_AddItemToArray(extra,
				    cJSON_CreateString(c->valuestring));
	}
	/* The commit fails if the room moved since the view: read again. */
	for (tries = 0; tries < 4; tries++) {
		cJSON_Delete(view);
		cJSON_Delete(snap);
		cJSON_Delete(scope);
		view = snap = scope = NULL;
		if ((e = kzp_view(p, rh, mh, extra, &view, r)) != 0 ||
		    (e = kzp_admit_decide(view, &t, &p->b, &snap, &scope,
		    r)) != 0)
			goto out;
		e = kzp_commit(p, view, snap, mh, scope, r);
		if (e == 0 || r->code == NULL || strcmp(r->code, KZP_CONFLICT))
			break;
	}
	if (e != 0 && r->code != NULL && strcmp(r->code, KZP_CONFLICT) == 0)
		kzp_fail(r, KZ_WE_REFUSED, "the room kept changing during "
		    "admission");
out:
	e = audited(p, "admission", snap != NULL ? snap : req, mh, rh, e, r,
	    snap ? (int64_t)cJSON_GetNumberValue(kz_json_get(snap, "files")) :
	    0, snap ? (int64_t)cJSON_GetNumberValue(kz_json_get(snap,
	    "bytes")) : 0);
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
 * Rules 7 and 13: the snapshot must be the one this service stored, its
 * digests must hold, and live state must still match it.
 */
static int
check_live(struct kzp *p, const cJSON *snap, struct kzp_res *r)
{
	const char *sid = cJSON_GetStringValue(kz_json_get(snap, "snapshot"));
	const char *mh = cJSON_GetStringValue(kz_json_get(snap, "actor_hash"));
	const char *rh = cJSON_GetStringValue(kz_json_get(snap, "room_hash"));
	cJSON *stored = NULL, *view = NULL, *ids = NULL;
	const cJSON *it;
	int e;

	if ((e = kzp_snap_check(snap, r)) != 0)
		return e;
	if ((ids = cJSON_CreateArray()) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	cJSON_ArrayForEach(it, kz_json_get(snap, "items"))
		cJSON_AddItemToArray(ids, cJSON_CreateString(
		    cJSON_GetStringValue(kz_json_get(it, "id"))));
	/* The stored snapshot and live state, in one atomic read. */
	if ((e = kzp_live(p, rh, mh, ids, sid, &view, &stored, r)) != 0)
		goto out;
	if (stored == NULL || !cJSON_Compare(stored, snap, true)) {
		kzp_fail(r, KZ_WE_REFUSED, "the admission snapshot cannot be "
		    "proven");
		e = KZ_EDENIED;
		goto out;
	}
	e = kzp_verify_decide(snap, view, &p->b, r);
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
		bad(r, "field 'snapshot' must be an admission snapshot");
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
	    strspn(v, "0123456789abcdef") == KZ_IDHASH_HEX ? v : NULL;
}

static int
op_verify(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	const cJSON *snap;
	int e;

	if ((snap = req_snap(req, r)) == NULL)
		return KZ_EINVAL;
	e = check_live(p, snap, r);
	e = audited(p, "verification", snap, snap_str(snap, "actor_hash"),
	    snap_str(snap, "room_hash"), e, r, 0, 0);
	if (e == 0)
		cJSON_AddStringToObject(out, "verdict", "go");
	return e;
}

static int
op_materialize(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r)
{
	const cJSON *snap;
	const char *dest;
	char why[KZP_WHY];
	int64_t files = 0, bytes = 0;
	int e;

	if ((snap = req_snap(req, r)) == NULL)
		return KZ_EINVAL;
	if (kz_json_str(req, "dest", 4000, &dest, why, sizeof(why)) != 0)
		return bad(r, "field 'dest' is required");
	/* Live state is re-read right before bytes load (rule 7). */
	if ((e = check_live(p, snap, r)) == 0)
		e = kzp_materialize(p, snap, dest, &files, &bytes, r);
	e = audited(p, "projection", snap, snap_str(snap, "actor_hash"),
	    snap_str(snap, "room_hash"), e, r, files, bytes);
	if (e == 0) {
		cJSON_AddNumberToObject(out, "files", (double)files);
		cJSON_AddNumberToObject(out, "bytes", (double)bytes);
	}
	return e;
}

/*
 * The admitted files, classified before a worker is leased (classify.c);
 * the snapshot must still hold, as for materialize.  kz-run refuses a
 * turn whose verdict is host_administration.
 */
static int
op_classify(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r)
{
	const cJSON *snap;
	bool admin = false;
	int e;

	if ((snap = req_snap(req, r)) == NULL)
		return KZ_EINVAL;
	if ((e = check_live(p, snap, r)) == 0 &&
	    (e = kzp_classify(p, snap, &admin, r)) == 0)
		cJSON_AddStringToObject(out, "verdict", admin ?
		    "host_administration" : "ok");
	return e;
}

int kzp_op_link_output(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r);
int kzp_op_placeholder(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r);

#define F(...) (const char *const[]){__VA_ARGS__, NULL}
const struct kzp_opdef kzp_ops[] = {
	{"member-create", F("member"), op_member_create},
	{"room-create", F("room", "member"), op_room_create},
	{"room-join", F("room", "member"), op_room_join},
	{"room-leave", F("room", "member"), op_room_leave},
	{"project-create", F("project", "member"), op_project_create},
	{"project-join", F("project", "member"), op_project_join},
	{"project-leave", F("project", "member"), op_project_leave},
	{"room-link-project", F("room", "project", "member"),
	    op_room_link_project},
	{"room-unlink-project", F("room", "project", "member"),
	    op_room_unlink_project},
	{"blob-put", F("file"), op_blob_put},
	{"connection-create", F("connection", "bucket", "serves", "project"),
	    op_connection_create},
	{"resource-create", F("resource", "member", "kind", "connection",
	    "object"), op_resource_create},
	{"version-new", F("resource", "member", "path", "blob", "pending"),
	    op_version_new},
	{"resource-revoke", F("resource", "member"), op_resource_revoke},
	{"link", F("resource", "member", "room", "project", "turn", "shared"),
	    op_link},
	{"withdraw", F("resource", "member", "room", "project"), op_withdraw},
	{"select", F("room", "member", "resource"), op_select},
	{"unselect", F("room", "member", "resource"), op_unselect},
	{"declare-source", F("project", "member", "name", "kind", "bucket",
	    "key", "prefix", "endpoint", "manifest", "url"),
	    op_declare_source},
	{"can-read", F("member", "resource", "room"), op_can_read},
	{"resolve", F("member", "resource"), op_resolve},
	{"admit", F("room", "member", "turn", "select", "retrieved",
	    "contract", "capability"), op_admit},
	{"verify", F("snapshot"), op_verify},
	{"classify", F("snapshot"), op_classify},
	{"materialize", F("snapshot", "dest"), op_materialize},
	{"link-output", F("room", "member", "turn", "workspace", "file",
	    "name"), kzp_op_link_output},
	{"placeholder", F("room", "run", "call", "name"), kzp_op_placeholder},
	{NULL, NULL, NULL},
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
		return bad(r, "unknown op");
	cJSON_ArrayForEach(c, req) {
		bool ok = false;

		for (size_t i = 0; i < 3; i++)
			ok |= strcmp(c->string, env[i]) == 0;
		for (int i = 0; d->fields[i] != NULL; i++)
			ok |= strcmp(c->string, d->fields[i]) == 0;
		if (!ok) {
			kz_why(why, sizeof(why), "unknown field '%.48s'",
			    c->string);
			return bad(r, why);
		}
	}
	if ((*out = cJSON_CreateObject()) == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	if ((e = d->fn(p, req, *out, r)) != 0) {
		cJSON_Delete(*out);
		*out = NULL;
		if (r->code == NULL)
			kzp_fail(r, KZ_WE_INTERNAL, "internal error");
	}
	return e;
}
