/*
 * Object-store items and who may read an item: platform-managed
 * connections (created by the operator), declared sources (inert records
 * that grant nothing), resolution through a connection, and can-read.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

#define CONN_SERVES_MAX 64

/*
 * The declared-source rule: a platform-managed connection is created by the
 * operator with the members (or one project's members) it serves.  It is
 * never derived from a declared source and carries no credential: the
 * embedded default has no object-store client, so the connection is the
 * authority check and content still comes from the blob store by digest.
 */
int
kzp_op_connection_create(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char why[KZP_WHY], mh[KZ_IDHASH_HEX + 1];
	const char *cid, *bucket, *pid;
	const cJSON *sv = kz_json_get(req, "serves"), *c;
	cJSON *ms = cJSON_CreateArray();
	int e = 0, n = 0;

	if (ms == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	if ((e = kzp_req_id(req, "connection", &cid, r)) != 0)
		goto out;
	if (kz_json_str_opt(req, "bucket", 256, "", &bucket, why,
	        sizeof(why)) != 0 ||
	    kz_json_str_opt(req, "project", KZP_ID_MAX, "", &pid, why,
	        sizeof(why)) != 0 ||
	    (*pid != '\0' && !kzp_id_ok(pid)) ||
	    (sv != NULL && !cJSON_IsArray(sv))) {
		e = kzp_bad(r, "bad 'bucket', 'project' or 'serves'");
		goto out;
	}
	cJSON_ArrayForEach(c, sv)
	{
		if (!cJSON_IsString(c) || !kzp_id_ok(c->valuestring) ||
		    ++n > CONN_SERVES_MAX) {
			e = kzp_bad(r,
			    "'serves' is a bounded list of member ids");
			goto out;
		}
		if (kzp_hash(p, "member", c->valuestring, mh) != 0) {
			kzp_fail(r, KZ_WE_INTERNAL,
			    "identifier hashing failed");
			e = KZ_EINTERNAL;
			goto out;
		}
		cJSON_AddItemToArray(ms, cJSON_CreateString(mh));
	}
	if (n == 0 && *pid == '\0') {
		e = kzp_bad(r,
		    "a connection serves named members or a project");
		goto out;
	}
	e = kzp_mutate_json(p, "conn_create", 4,
	    (const char *[]){cid, bucket, NULL, pid}, 2, ms, "value", out, r);
out:
	cJSON_Delete(ms);
	return e;
}

/*
 * Object-store credentials never enter Project content: a signed URL
 * (S3, GCS, Azure SAS) carries them in its query.  The names below are
 * matched case-insensitively; Azure's "sig" is a credential only beside
 * its "se" (expiry) or "sv" (version), since a bare "sig" is a common
 * parameter of no consequence.
 */
static const char *const cred_params[] = {"x-amz-credential", "x-amz-signature",
    "x-amz-security-token", "signature", "awsaccesskeyid", "x-goog-signature",
    "x-goog-credential", NULL};

#define PARAM_MAX 64

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The next query parameter's name at *q, percent-decoded; *q moves on. */
static bool
next_param(const char **q, char name[PARAM_MAX])
{
	const char *s = *q;
	size_t n = 0;

	if (*s == '\0')
		return false;
	for (; *s != '\0' && *s != '=' && *s != '&' && *s != ';'; s++) {
		int c = (unsigned char)*s, hi, lo;

		if (c == '%' && (hi = hexval(s[1])) >= 0 &&
		    (lo = hexval(s[2])) >= 0) {
			c = hi << 4 | lo;
			s += 2;
		}
		if (n + 1 < PARAM_MAX)
			name[n++] = (char)tolower(c);
	}
	name[n] = '\0';
	s += strcspn(s, "&;");
	*q = *s != '\0' ? s + 1 : s;
	return true;
}

/* The credential parameter v carries, or NULL: its name, never its value. */
static const char *
credential_in(const char *v)
{
	const char *q = strchr(v, '?'), *found = NULL;
	char name[PARAM_MAX];
	bool sig = false, sas = false;

	if (q == NULL)
		return NULL;
	q++;
	while (found == NULL && next_param(&q, name)) {
		for (int i = 0; cred_params[i] != NULL; i++)
			if (strcmp(name, cred_params[i]) == 0)
				found = cred_params[i];
		sig |= strcmp(name, "sig") == 0;
		sas |= strcmp(name, "se") == 0 || strcmp(name, "sv") == 0;
	}
	return found != NULL ? found : sig && sas ? "sig" : NULL;
}

/*
 * The declared-source rule: a declared object-store source is kept as an
 * inert record.  It is never consulted by can-read, resolve or admit, and
 * no connection is ever made from it; resolution goes only through a
 * platform-managed connection (connection-create) under the current member.
 */
int
kzp_op_declare_source(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	static const char *const keys[] = {"bucket", "key", "prefix",
	    "endpoint", "manifest", "url", "kind", NULL};
	char mh[KZ_IDHASH_HEX + 1], why[KZP_WHY];
	const char *pid, *name;
	cJSON *rec = cJSON_CreateObject();
	int e;

	if ((e = kzp_req_id(req, "project", &pid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = kzp_req_id(req, "name", &name, r)) != 0)
		goto out;
	for (int i = 0; keys[i] != NULL; i++) {
		const char *v, *cred;

		if (kz_json_str_opt(req, keys[i], 1024, NULL, &v, why,
		        sizeof(why)) != 0) {
			e = kzp_bad(r, "source fields are strings");
			goto out;
		}
		if (v != NULL && (cred = credential_in(v)) != NULL) {
			kzp_fail(r, KZ_WE_REFUSED,
			    "field '%s' carries an object-store credential "
			    "(query parameter '%s'): declare the source "
			    "without it",
			    keys[i], cred);
			e = KZ_EDENIED;
			goto out;
		}
		if (v != NULL)
			cJSON_AddStringToObject(rec, keys[i], v);
	}
	if ((e = kzp_mutate_json(p, "declare_source", 4,
	         (const char *[]){pid, mh, name, NULL}, 3, rec, "value", out,
	         r)) == 0)
		cJSON_AddBoolToObject(out, "grants_access", false);
out:
	cJSON_Delete(rec);
	return e;
}

/* One predicate for every kind of item (the project-grant rule). */
int
kzp_op_can_read(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1], rh[KZ_IDHASH_HEX + 1];
	cJSON *f = NULL;
	bool yes = false;
	const cJSON *c;
	const char *rid;
	int e;

	if ((e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	if (kz_json_get(req, "room") != NULL) {
		/* A room is readable by its live audience. */
		if ((e = kzp_req_hash(p, req, "room", "conversation", rh, r)) !=
		        0 ||
		    (e = kzp_view(p, rh, mh, NULL, &f, r)) != 0)
			return e;
		cJSON_ArrayForEach(c, kz_json_get(f, "roster"))
		    yes |= cJSON_IsString(c) && strcmp(c->valuestring, mh) == 0;
	} else {
		if ((e = kzp_req_id(req, "resource", &rid, r)) != 0 ||
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
 * The declared-source rule: reading a connection-bound resource resolves
 * through its platform-managed connection under the current member: the
 * connection must serve the member now and the member must otherwise be
 * able to read the item.  A declared source is no resource and resolves
 * nothing.  The reply names the content by digest (the blob store holds the
 * bytes); it carries no object key, bucket or credential.
 */
int
kzp_op_resolve(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1];
	cJSON *f = NULL;
	const char *rid, *why = NULL;
	int e;

	if ((e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0 ||
	    (e = kzp_req_id(req, "resource", &rid, r)) != 0 ||
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
