/*
 * Shared-turn outputs (the shared-output rule).  A file the run declared
 * for a shared turn is read beneath its workspace through the rooted
 * resolver, validated for size, type and name, stored as a blob and linked
 * to exactly that room.  What the room sees is a durable reference and
 * bounded metadata; nothing else of the workspace is read.  A placeholder
 * for an output in progress names its call by a run-bound room reference,
 * never by the provider's call id, and carries no resource identity.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_cap.h"
#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

#define NAME_MAX_OUT 128
#define HEAD 512

struct type {
	const char *ext;
	const char *magic; /* NULL: text (no NUL byte, valid UTF-8) */
	size_t mlen;
};

static const struct type types[] = {
    {"png", "\x89PNG\r\n\x1a\n", 8},
    {"pdf", "%PDF-", 5},
    {"zip", "PK\x03\x04", 4},
    {"docx", "PK\x03\x04", 4},
    {"pptx", "PK\x03\x04", 4},
    {"xlsx", "PK\x03\x04", 4},
    {"jpg", "\xff\xd8\xff", 3},
    {"txt", NULL, 0},
    {"csv", NULL, 0},
    {"json", NULL, 0},
    {"md", NULL, 0},
    {"html", NULL, 0},
    {"svg", NULL, 0},
    {NULL, NULL, 0},
};

/* A name's type is text (no magic): it is checked whole, not by its head. */
static bool
is_text(const char *name)
{
	const char *dot = strrchr(name, '.');

	for (const struct type *t = types; dot != NULL && t->ext != NULL; t++)
		if (strcmp(t->ext, dot + 1) == 0)
			return t->magic == NULL;
	return false;
}

/*
 * A text output is text all through: valid UTF-8 with no NUL, read from
 * the stored copy (what the room will be given, which the caller can no
 * longer change), in pieces, a sequence cut by a piece's end carried to
 * the next.
 */
static int
text_whole(int fd, struct kzp_res *r)
{
	char b[65536 + 4];
	size_t have = 0, at;
	ssize_t n = 0;
	off_t off = 0;
	uint32_t cp;
	int k, e = 0;

	while (e == 0 &&
	    (n = pread(fd, b + have, sizeof(b) - 4 - have, off)) > 0) {
		off += n;
		have += (size_t)n;
		for (at = 0; at < have; at += (size_t)k)
			if ((k = kz_utf8_next(b + at, have - at, &cp)) <= 0 ||
			    cp == 0)
				break;
		if (at < have && k != -1)
			e = KZ_EDENIED;
		/* A sequence cut by the piece's end waits for the next. */
		memmove(b, b + at, have - at);
		have -= at;
	}
	if (n < 0 || have != 0)
		e = KZ_EDENIED;
	if (e != 0)
		kzp_fail(r, KZ_WE_REFUSED,
		    "the output content does not match its type");
	return e;
}

static bool
listed(const char *list, const char *ext)
{
	size_t n = strlen(ext);

	for (const char *s = list; s != NULL && *s != '\0';) {
		const char *c = strchr(s, ',');
		size_t len = c ? (size_t)(c - s) : strlen(s);

		if (len == n && strncmp(s, ext, n) == 0)
			return true;
		s = c ? c + 1 : NULL;
	}
	return false;
}

int
kzp_output_check(const char *name, const char *allowed,
    const unsigned char *head, size_t headlen, struct kzp_res *r)
{
	size_t n = strlen(name);
	const char *dot = strrchr(name, '.');
	const struct type *t;

	if (n == 0 || n > NAME_MAX_OUT || name[0] == '.' || dot == NULL ||
	    strspn(name,
	        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	        "0123456789._-") != n) {
		kzp_fail(r, KZ_WE_REFUSED, "the output name is not allowed");
		return KZ_EDENIED;
	}
	for (t = types; t->ext != NULL; t++)
		if (strcmp(t->ext, dot + 1) == 0)
			break;
	if (t->ext == NULL || !listed(allowed, t->ext)) {
		kzp_fail(r, KZ_WE_REFUSED, "the output type is not allowed");
		return KZ_EDENIED;
	}
	if (t->magic != NULL ?
	        headlen < t->mlen || memcmp(head, t->magic, t->mlen) != 0 :
	        memchr(head, '\0', headlen) != NULL) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the output content does not match its type");
		return KZ_EDENIED;
	}
	return 0;
}

static int
get(const cJSON *req, const char *k, size_t max, const char **out,
    struct kzp_res *r)
{
	char why[KZP_WHY];

	if (kz_json_str(req, k, max, out, why, sizeof(why)) != 0) {
		kzp_fail(r, KZ_WE_BAD_REQUEST, "field '%s' is required", k);
		return KZ_EINVAL;
	}
	return 0;
}

static int
hashed(const struct kzp *p, const cJSON *req, const char *k, const char *kind,
    char out[KZ_IDHASH_HEX + 1], struct kzp_res *r)
{
	const char *v;
	int e;

	if ((e = get(req, k, KZP_ID_MAX, &v, r)) != 0)
		return e;
	if (kzp_hash(p, kind, v, out) != 0) {
		kzp_fail(r, KZ_WE_BAD_REQUEST, "field '%s' must be an id", k);
		return KZ_EINVAL;
	}
	return 0;
}

/* What the stored copy of an output is checked against. */
struct want {
	const struct kzp *p;
	const char *name;
};

/*
 * The stored copy of an output, before it takes its name in the blob
 * store: a text type is text all through, a binary type begins with its
 * magic bytes.  A refused copy is never stored.
 */
static int
copy_ok(int fd, const void *arg, struct kzp_res *r)
{
	const struct want *w = arg;
	unsigned char head[HEAD];
	ssize_t n;

	if (is_text(w->name))
		return text_whole(fd, r);
	if ((n = pread(fd, head, sizeof(head), 0)) < 0) {
		kzp_fail(r, KZ_WE_REFUSED, "the output cannot be read");
		return KZ_ESYS;
	}
	return kzp_output_check(w->name, w->p->out_types, head, (size_t)n, r);
}

/* Reads, validates and stores the one declared file; nothing else. */
static int
store_output(struct kzp *p, const char *ws, const char *file, const char *name,
    char sha[KZP_SHA_HEX + 1], int64_t *size, struct kzp_res *r)
{
	const struct want w = {.p = p, .name = name};
	unsigned char head[HEAD];
	struct stat sb;
	ssize_t n;
	int dfd, fd = -1, e;

	if (ws[0] != '/' || kzp_relpath_ok(file) != 0) {
		kzp_fail(r, KZ_WE_BAD_REQUEST, "bad workspace or file");
		return KZ_EINVAL;
	}
	if ((dfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		kzp_fail(r, KZ_WE_REFUSED, "the workspace cannot be opened");
		return KZ_EDENIED;
	}
	e = kzp_open_beneath(dfd, file, &fd);
	close(dfd);
	if (e != 0) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the output is not a plain file inside the workspace");
		return KZ_EDENIED;
	}
	if ((e = kzp_callers(p, fd, r)) != 0)
		goto out;
	if (fstat(fd, &sb) != 0 || sb.st_size > p->out_max_bytes) {
		kzp_fail(r, KZ_WE_REFUSED, "the output is over the size bound");
		e = KZ_EDENIED;
		goto out;
	}
	if ((n = pread(fd, head, sizeof(head), 0)) < 0 ||
	    (e = kzp_output_check(name, p->out_types, head, (size_t)n, r)) !=
	        0) {
		e = e ? e : KZ_ESYS;
		if (r->code == NULL)
			kzp_fail(r, KZ_WE_REFUSED, "the output cannot be read");
		goto out;
	}
	/*
	 * The live file's head was only an early refusal: code still writing
	 * it may change it while it is copied.  What decides is the copy, what
	 * the room will be given and the caller cannot change.
	 */
	e = kzp_blob_put(p->blobdir, fd, p->out_max_bytes, copy_ok, &w, sha,
	    size, r);
out:
	close(fd);
	return e;
}

static bool
snap_is(const cJSON *snap, const char *k, const char *want)
{
	const char *v = cJSON_GetStringValue(kz_json_get(snap, k));

	return v != NULL && strcmp(v, want) == 0;
}

/*
 * The capability and shared-output rules: an output is linked only for a
 * run this service admitted, to exactly the room, member and turn of that
 * admission, and only while its capability allows outputs (code.run.private
 * does not).  The snapshot must be the stored one and the member still in
 * the room's live audience; a turn-less admission ("-") links nothing.
 */
static int
output_allowed(struct kzp *p, const cJSON *snap, const char *rh, const char *mh,
    const char *turn, struct kzp_res *r)
{
	const char *sid = cJSON_GetStringValue(kz_json_get(snap, "snapshot"));
	const char *cap = cJSON_GetStringValue(kz_json_get(snap, "capability"));
	cJSON *view = NULL, *stored = NULL, *none = cJSON_CreateArray();
	const cJSON *c;
	bool in = false;
	int e;

	if (none == NULL) {
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	if ((e = kzp_snap_check(snap, r)) != 0 ||
	    (e = kzp_live(p, rh, mh, none, sid, &view, &stored, r)) != 0)
		goto out;
	e = KZ_EDENIED;
	if (stored == NULL || !cJSON_Compare(stored, snap, true) ||
	    !snap_is(snap, "room_hash", rh) ||
	    !snap_is(snap, "actor_hash", mh) || !snap_is(snap, "turn", turn) ||
	    strcmp(turn, "-") == 0) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the output is not this room's, member's and turn's "
		    "admitted run");
		goto out;
	}
	if (!kz_cap_allows(cap, KZ_CAP_OUTPUTS)) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the run's capability links no output to the room");
		goto out;
	}
	cJSON_ArrayForEach(c, kz_json_get(view, "roster"))
	    in |= cJSON_IsString(c) && strcmp(c->valuestring, mh) == 0;
	if (!in) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the member is no longer in the room's audience");
		goto out;
	}
	e = 0;
out:
	cJSON_Delete(view);
	cJSON_Delete(stored);
	cJSON_Delete(none);
	return e;
}

/* The output decision in r, audited: one not recorded is not allowed. */
static int
audit_output(struct kzp *p, const cJSON *snap, const char *mh, const char *rh,
    int e, int64_t size, struct kzp_res *r)
{
	if (kzp_audit(p, "projection", "output", snap, mh, rh, r,
	        e == 0 ? 1 : 0, e == 0 ? size : 0) != 0 &&
	    e == 0) {
		kzp_fail(r, KZ_WE_UNAVAILABLE, "the audit sink is unavailable");
		return KZ_EUNAVAIL;
	}
	return e;
}

/* What the output script is given (lua/output.lua). */
struct outrec {
	char rid[40];
	const char *mh, *rh, *turn, *name;
	char sha[KZP_SHA_HEX + 1];
	int64_t size;
};

/*
 * The place rule for an output: its resource, version and link are made
 * in one script once it takes its place in the room (dry: checked only,
 * nothing written), so a refused output leaves nothing behind.
 */
static int
place_output(struct kzp *p, const struct outrec *o, bool dry, long long *seq,
    struct kzp_res *r)
{
	const char *av[12];
	struct kzp_bargs ba;
	char sz[24];

	snprintf(sz, sizeof(sz), "%lld", (long long)o->size);
	av[0] = o->rid, av[1] = o->mh, av[2] = o->rh, av[3] = o->turn;
	av[4] = o->name, av[5] = sz, av[6] = o->sha;
	kzp_bounds_args(p, &ba, av + 7);
	av[10] = dry ? "1" : "0";
	return kzp_mutate(p, "output", 11, av, seq, r);
}

/*
 * One shared-turn output: proven against the run's admission, read once
 * beneath the workspace, placed in the room, and audited before it is
 * linked, so an output whose decision cannot be recorded is never linked.
 * The place is checked again as the link is made; an output that lost its
 * place in between is refused, and that refusal is audited too.  The
 * reply is the durable reference and bounded metadata; never bytes or the
 * path.
 */
int
kzp_op_link_output(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char rh[KZ_IDHASH_HEX + 1], mh[KZ_IDHASH_HEX + 1], why[KZP_WHY];
	struct outrec o = {.mh = mh, .rh = rh};
	unsigned char rnd[12];
	const char *ws, *file;
	const cJSON *snap = kz_json_get(req, "snapshot");
	long long v = 0;
	int e;

	if ((e = hashed(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = hashed(p, req, "member", "member", mh, r)) != 0 ||
	    (e = get(req, "turn", KZP_ID_MAX, &o.turn, r)) != 0 ||
	    (e = get(req, "workspace", 4000, &ws, r)) != 0 ||
	    (e = get(req, "file", KZP_PATH_MAX, &file, r)) != 0)
		return e;
	if (kz_json_str_opt(req, "name", NAME_MAX_OUT, NULL, &o.name, why,
	        sizeof(why)) != 0 ||
	    !kzp_id_ok(o.turn) || !cJSON_IsObject(snap)) {
		kzp_fail(r, KZ_WE_BAD_REQUEST,
		    "bad 'name', 'turn' or 'snapshot'");
		return KZ_EINVAL;
	}
	if (o.name == NULL)
		o.name = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	randombytes_buf(rnd, sizeof(rnd));
	memcpy(o.rid, "out-", 4);
	kz_hex(rnd, sizeof(rnd), o.rid + 4);
	if ((e = output_allowed(p, snap, rh, mh, o.turn, r)) == 0 &&
	    (e = store_output(p, ws, file, o.name, o.sha, &o.size, r)) == 0)
		e = place_output(p, &o, true, NULL, r);
	/* Bad input is the caller's; a decision, either way, is audited. */
	if (e != KZ_EINVAL || r->code == NULL ||
	    strcmp(r->code, KZ_WE_BAD_REQUEST) != 0)
		e = audit_output(p, snap, mh, rh, e, o.size, r);
	if (e != 0)
		return e;
	if ((e = place_output(p, &o, false, &v, r)) != 0) {
		if (r->code != NULL && strcmp(r->code, KZ_WE_REFUSED) == 0)
			e = audit_output(p, snap, mh, rh, e, o.size, r);
		return e;
	}
	cJSON_AddStringToObject(out, "resource", o.rid);
	cJSON_AddNumberToObject(out, "version", 1);
	cJSON_AddStringToObject(out, "name", o.name);
	cJSON_AddNumberToObject(out, "size", (double)o.size);
	cJSON_AddStringToObject(out, "sha256", o.sha);
	cJSON_AddNumberToObject(out, "link_seq", (double)v);
	return 0;
}

int
kzp_op_placeholder(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char rh[KZ_IDHASH_HEX + 1], ref[KZ_IDHASH_HEX + 1], run[200];
	const char *rn, *call, *name;
	int e;

	if ((e = hashed(p, req, "room", "conversation", rh, r)) != 0 ||
	    (e = get(req, "run", KZP_ID_MAX, &rn, r)) != 0 ||
	    (e = get(req, "call", 256, &call, r)) != 0 ||
	    (e = get(req, "name", NAME_MAX_OUT, &name, r)) != 0)
		return e;
	if (!kzp_id_ok(rn) ||
	    strspn(name,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(name)) {
		kzp_fail(r, KZ_WE_BAD_REQUEST, "bad 'run' or 'name'");
		return KZ_EINVAL;
	}
	/* Bound to this room and run; the provider's id cannot be recovered. */
	snprintf(run, sizeof(run), "%s:%s", rh, rn);
	if (kz_key_idhash2(&p->idkey, "callref", run, call, ref) != 0) {
		kzp_fail(r, KZ_WE_INTERNAL, "hashing failed");
		return KZ_EINTERNAL;
	}
	cJSON_AddStringToObject(out, "name", name);
	cJSON_AddStringToObject(out, "ref", ref);
	cJSON_AddStringToObject(out, "state", "in_progress");
	return 0;
}
