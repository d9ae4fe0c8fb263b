/*
 * The kz-project client.  kz-run never decides what crosses into a
 * sandbox: it asks kz-project to admit the turn before a worker is leased,
 * and to verify and materialize that admission right before the code
 * starts.  It keeps the snapshot only to hand it back and to record its
 * audience version and manifest digest in its own audit records.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_call.h"
#include "kz_evidence.h"
#include "kz_json.h"
#include "run.h"
#include "banned.h"

#define DIGEST_HEX 64

static void
add_ids(cJSON *req, const char *key, const char *const *ids, size_t n)
{
	cJSON *a;
	size_t i;

	if (n == 0 || (a = cJSON_AddArrayToObject(req, key)) == NULL)
		return;
	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(ids[i]));
}

/* The capability travels with the turn, so kz-project's records and
 * kz-run's name the same one. */
cJSON *
run_admit_req(const struct run_opts *o, const char *rid)
{
	cJSON *r = cJSON_CreateObject();

	if (r == NULL)
		return NULL;
	cJSON_AddNumberToObject(r, "v", 1);
	cJSON_AddStringToObject(r, "op", "admit");
	cJSON_AddStringToObject(r, "id", rid);
	cJSON_AddStringToObject(r, "room", o->room);
	cJSON_AddStringToObject(r, "member", o->member);
	cJSON_AddStringToObject(r, "turn", o->turn != NULL ? o->turn : rid);
	cJSON_AddStringToObject(r, "capability", o->cap);
	add_ids(r, "select", o->select, o->nselect);
	add_ids(r, "retrieved", o->retrieved, o->nretrieved);
	if (o->contract)
		cJSON_AddBoolToObject(r, "contract", true);
	return r;
}

static bool
hex64(const char *s)
{
	return s != NULL && strlen(s) == DIGEST_HEX &&
	    strspn(s, "0123456789abcdef") == DIGEST_HEX;
}

static int
count(const cJSON *o, const char *k, int64_t *v)
{
	const cJSON *n = kz_json_get(o, k);

	if (!cJSON_IsNumber(n) || n->valuedouble < 0 ||
	    n->valuedouble > 9007199254740991.0 ||
	    n->valuedouble != (double)(int64_t)n->valuedouble)
		return KZ_EPROTO;
	*v = (int64_t)n->valuedouble;
	return 0;
}

int
run_adm_take(cJSON *rep, struct run_adm *a)
{
	cJSON *s = kz_json_get(rep, "admission");
	const char *md;

	memset(a, 0, sizeof(*a));
	a->audience = -1;
	if (!cJSON_IsObject(s))
		return KZ_EPROTO;
	md = cJSON_GetStringValue(kz_json_get(s, "manifest_digest"));
	if (!hex64(md) || count(s, "audience_version", &a->audience) != 0 ||
	    count(s, "files", &a->files) != 0 ||
	    count(s, "bytes", &a->bytes) != 0 ||
	    !cJSON_IsArray(kz_json_get(s, "items"))) {
		a->audience = -1;
		return KZ_EPROTO;
	}
	snprintf(a->manifest, sizeof(a->manifest), "%s", md);
	a->snap = cJSON_DetachItemViaPointer(rep, s);
	return 0;
}

void
run_adm_release(struct run_adm *a)
{
	cJSON_Delete(a->snap);
	a->snap = NULL;
}

int
run_project_call(const struct run_conf *c, cJSON *req, cJSON **rep)
{
	char why[160];

	*rep = NULL;
	return kz_frame_call(c->project_sock, req, (int)c->io_timeout_ms, rep,
	    why, sizeof(why));
}

/* kz-project's one-line reason, kept printable for stderr and audit. */
static void
refuse(struct run_refusal *f, const char *stage, const char *code,
    const char *reason)
{
	size_t i;

	f->stage = stage;
	snprintf(f->code, sizeof(f->code), "%s", code);
	snprintf(f->reason, sizeof(f->reason), "%s",
	    reason != NULL && *reason != '\0' ? reason :
	                                        "refused by kz-project");
	for (i = 0; f->reason[i] != '\0'; i++)
		if ((unsigned char)f->reason[i] < 0x20 ||
		    (unsigned char)f->reason[i] > 0x7e)
			f->reason[i] = '?';
	for (i = 0; f->code[i] != '\0'; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyz_", f->code[i]) == NULL)
			f->code[i] = '_';
}

/* One op; 0 with *rep when kz-project said ok, else an exit code. */
static int
call(const struct run_conf *c, const char *stage, cJSON *req, cJSON **rep,
    struct run_refusal *f)
{
	const char *code;

	if (req == NULL) {
		refuse(f, stage, KZ_WE_INTERNAL, "out of memory");
		return KZ_EXIT_INTERNAL;
	}
	if (run_project_call(c, req, rep) != 0) {
		fprintf(stderr, "kz-run: kz-project unreachable at %s\n",
		    c->project_sock);
		refuse(f, stage, KZ_WE_UNAVAILABLE,
		    "the projection service could not be reached");
		return KZ_EXIT_UNAVAIL;
	}
	if (cJSON_IsTrue(kz_json_get(*rep, "ok")))
		return 0;
	code = cJSON_GetStringValue(kz_json_get(*rep, "error"));
	refuse(f, stage, code != NULL ? code : KZ_WE_INTERNAL,
	    cJSON_GetStringValue(kz_json_get(*rep, "reason")));
	return kz_exit_for_wire(f->code);
}

static cJSON *
snap_req(const char *op, const char *rid, const cJSON *snap)
{
	cJSON *r = cJSON_CreateObject();

	if (r == NULL)
		return NULL;
	cJSON_AddNumberToObject(r, "v", 1);
	cJSON_AddStringToObject(r, "op", op);
	cJSON_AddStringToObject(r, "id", rid);
	cJSON_AddItemToObject(r, "snapshot", cJSON_Duplicate(snap, true));
	return r;
}

/*
 * A room's files reach the run as a projection, not as --file: they are
 * classified like any script before a worker is leased.  kz-project reads
 * each admitted blob, checks its digest against the snapshot (the bytes
 * the worker will be given) and classifies it with libkz's classifier;
 * nothing is copied to disk, so nothing has to be removed by a kz-run
 * that may be neither root nor kz-project's user.
 */
static int
classify_admitted(const struct run_ctx *x, const struct run_adm *a,
    struct run_refusal *f)
{
	cJSON *rep = NULL, *req;
	const char *v;
	int rc;

	if (a->files == 0)
		return 0;
	req = snap_req("classify", x->rid, a->snap);
	rc = call(x->c, "classify", req, &rep, f);
	cJSON_Delete(req);
	v = rc == 0 ? cJSON_GetStringValue(kz_json_get(rep, "verdict")) : NULL;
	if (rc == 0 && (v == NULL || strcmp(v, "ok") != 0)) {
		bool admin = v != NULL && strcmp(v, "host_administration") == 0;

		refuse(f, "classify",
		    admin ? "host_administration" : KZ_WE_INTERNAL,
		    admin ? "a projected file is host administration" :
		            "malformed classification verdict");
		rc = admin ? KZ_EXIT_REFUSED : KZ_EXIT_INTERNAL;
	}
	cJSON_Delete(rep);
	return rc;
}

int
run_admit(const struct run_ctx *x, struct run_adm *a, struct run_refusal *f)
{
	cJSON *req = run_admit_req(x->o, x->rid), *rep = NULL;
	int rc;

	memset(a, 0, sizeof(*a));
	a->audience = -1;
	if ((rc = call(x->c, "admit", req, &rep, f)) == 0 &&
	    run_adm_take(rep, a) != 0) {
		refuse(f, "admit", KZ_WE_INTERNAL,
		    "malformed admission snapshot");
		rc = KZ_EXIT_INTERNAL;
	}
	cJSON_Delete(req);
	cJSON_Delete(rep);
	if (rc == 0)
		rc = classify_admitted(x, a, f);
	return rc;
}

int
run_materialize(const struct run_ctx *x, const struct run_adm *a,
    const char *proj, struct run_refusal *f)
{
	char dest[PATH_MAX];
	cJSON *req, *rep = NULL;
	int rc;

	/* A leftover in the projection directory is a reset that did not
	 * hold. */
	if (proj == NULL || proj[0] != '/' || !kz_evidence_dir_empty(proj) ||
	    (size_t)snprintf(dest, sizeof(dest), "%s/%s", proj,
	        RUN_PROJECTION_SUBDIR) >= sizeof(dest)) {
		refuse(f, "materialize", KZ_WE_UNAVAILABLE,
		    "the worker has no empty projection directory");
		return KZ_EXIT_UNAVAIL;
	}
	req = snap_req("verify", x->rid, a->snap);
	rc = call(x->c, "verify", req, &rep, f);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	if (rc != 0)
		return rc;
	rep = NULL;
	if ((req = snap_req("materialize", x->rid, a->snap)) != NULL)
		cJSON_AddStringToObject(req, "dest", dest);
	rc = call(x->c, "materialize", req, &rep, f);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return rc;
}
