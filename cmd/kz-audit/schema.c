/*
 * The closed event schema.  Every kind lists the fields it may carry, each
 * with a type and a bound; anything else is refused, naming the field and
 * never echoing the value.  The table here is the one kz-audit(8) documents.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kz_json.h"
#include "audit.h"
#include "banned.h"

enum ftype {
	F_TOKEN, /* [A-Za-z0-9._:@+=-], 1..max bytes */
	F_HEX, /* lowercase hex, exactly max digits */
	F_HOST, /* host name or address literal */
	F_TEXT, /* one line of printable text, 1..max */
	F_INT, /* integer in [min, max] */
	F_BOOL,
	F_TOKEN_OR_INT, /* a version: token or non-negative integer */
	F_EVIDENCE, /* flat object: name -> bool or integer */
	F_LIST, /* array of tokens */
	F_RAWID, /* raw identifier: stored only as <name>_hash */
};

struct field {
	const char *name;
	enum ftype type;
	int64_t min, max; /* integers; max is the length for strings */
};

#define INT_MAXJ AUD_INT_MAX /* 2^53 - 1: exact in JSON */
/*
 * A *_hash naming who or what (actor, conversation, member, session, run,
 * room, project) is the keyed identifier hash every binary computes with
 * kz_key_idhash: KZ_IDHASH_HEX lowercase hex digits, never a raw id.
 * package_hash is kz-pkgrun's SHA-256 of the package's content (its
 * PR_HASH_HEX): 64 digits.
 */
#define PKG_HASH_HEX 64
/* clang-format would lay these initializers out as blocks. */
/* clang-format off */
#define TOK(n, len) {n, F_TOKEN, 0, len}
#define HEX(n) {n, F_HEX, 0, KZ_IDHASH_HEX}
#define INT(n, lo, hi) {n, F_INT, lo, hi}
/* clang-format on */
#define EVIDENCE_MAX 32
#define LIST_MAX 32
#define FIELD_NAME_MAX 48
#define RAWID_MAX 256

/* Fields any kind may carry: who, which conversation, under what. */
static const struct field correlation[] = {HEX("actor_hash"),
    HEX("conversation_hash"), HEX("member_hash"), HEX("session_hash"),
    {"audience_version", F_TOKEN_OR_INT, 0, 64}, TOK("capability", 64),
    TOK("manifest_digest", 128), TOK("rid", 128), TOK("outcome", 32),
    {"reason", F_TEXT, 0, 256}, {"actor", F_RAWID, 0, RAWID_MAX},
    {"conversation", F_RAWID, 0, RAWID_MAX}, {"member", F_RAWID, 0, RAWID_MAX},
    {"session", F_RAWID, 0, RAWID_MAX}, {NULL, 0, 0, 0}};

static const struct field f_dispatch[] = {TOK("worker_id", 64),
    TOK("lease_id", 64), INT("token", 0, INT_MAXJ), INT("exit_status", -1, 255),
    INT("signal", 0, 128), INT("duration_ms", 0, INT_MAXJ), TOK("egress", 16),
    TOK("packages", 16), {NULL, 0, 0, 0}};
static const struct field f_denial[] = {TOK("worker_id", 64),
    TOK("boundary", 32), TOK("stage", 32), TOK("error", 64), {NULL, 0, 0, 0}};
static const struct field f_lease[] = {TOK("worker_id", 64),
    TOK("lease_id", 64), INT("token", 0, INT_MAXJ), TOK("pool", 64),
    INT("wait_ms", 0, INT_MAXJ), {"warm", F_BOOL, 0, 0}, {NULL, 0, 0, 0}};
static const struct field f_release[] = {TOK("worker_id", 64),
    TOK("lease_id", 64), INT("token", 0, INT_MAXJ),
    INT("duration_ms", 0, INT_MAXJ), {NULL, 0, 0, 0}};
static const struct field f_reset[] = {TOK("worker_id", 64),
    INT("token", 0, INT_MAXJ), {"evidence", F_EVIDENCE, 0, EVIDENCE_MAX},
    {"missing", F_LIST, 0, LIST_MAX}, INT("duration_ms", 0, INT_MAXJ),
    TOK("result", 32), TOK("replacement_id", 64), {NULL, 0, 0, 0}};
static const struct field f_egress[] = {{"host", F_HOST, 0, 253},
    INT("port", 0, 65535), HEX("run_hash"), TOK("rule", 64), {NULL, 0, 0, 0}};
static const struct field f_reload[] = {TOK("mode", 32), {"ok", F_BOOL, 0, 0},
    INT("generation", 0, INT_MAXJ), {NULL, 0, 0, 0}};
static const struct field f_project[] = {HEX("room_hash"), HEX("project_hash"),
    INT("files", 0, INT_MAXJ), INT("bytes", 0, INT_MAXJ), TOK("decision", 32),
    TOK("stage", 32), {NULL, 0, 0, 0}};
static const struct field f_validation[] = {TOK("artifact_digest", 128),
    TOK("contract_digest", 128), TOK("profile", 64), TOK("result", 32),
    TOK("receipt_digest", 128), INT("duration_ms", 0, INT_MAXJ),
    {NULL, 0, 0, 0}};
/* A declared shared-turn output, linked or refused: the durable
 * reference and its size, never the file's name, path or bytes. */
static const struct field f_output[] = {TOK("decision", 32), TOK("error", 64),
    TOK("resource", 64), INT("bytes", 0, INT_MAXJ),
    INT("link_seq", 0, INT_MAXJ), {NULL, 0, 0, 0}};
/* kz-pkgrun: a package admitted to the cache, or one tool invocation: the
 * package's content hash, the tool and its class, never its arguments,
 * member files or output. */
static const struct field f_package[] = {TOK("action", 16),
    {"package_hash", F_HEX, 0, PKG_HASH_HEX}, TOK("tool", 64), TOK("class", 32),
    {"shared", F_BOOL, 0, 0}, INT("files", 0, INT_MAXJ),
    INT("exit_status", -1, 255), INT("signal", 0, 128),
    INT("duration_ms", 0, INT_MAXJ), TOK("stage", 32), TOK("error", 64),
    {NULL, 0, 0, 0}};
/* kz-pkgbroker: a refused package request, with the registry, the host
 * the client asked for and the package; never the token, path or query. */
static const struct field f_pkg[] = {TOK("registry", 16),
    {"host", F_HOST, 0, 253}, {"package", F_TEXT, 0, 214}, HEX("run_hash"),
    TOK("error", 64), INT("bytes", 0, INT_MAXJ), {NULL, 0, 0, 0}};

/* A browser session's lifecycle, its page stopped or closed for keeping
 * its scripts busy, and the agent's approved actions (kz-browser(8)):
 * the worker and lease, the opening host, the action's name; never a
 * URL's path, the page's content or member input. */
static const struct field f_browser[] = {TOK("worker_id", 64),
    TOK("lease_id", 64), {"host", F_HOST, 0, 253}, TOK("action", 32),
    INT("duration_ms", 0, INT_MAXJ), {NULL, 0, 0, 0}};

struct kind {
	const char *name;
	const struct field *fields;
};

static const struct kind kinds[] = {{"dispatch", f_dispatch},
    {"isolation_denial", f_denial}, {"lease", f_lease}, {"release", f_release},
    {"reset", f_reset}, {"retire", f_reset}, {"egress_refusal", f_egress},
    {"egress_reload", f_reload}, {"projection", f_project},
    {"admission", f_project}, {"verification", f_project},
    {"validation", f_validation}, {"output", f_output}, {"package", f_package},
    {"pkg_refusal", f_pkg}, /* kz-pkgbroker */
    {"browser_open", f_browser}, {"browser_close", f_browser},
    {"browser_reaped", f_browser}, {"browser_failed", f_browser},
    {"browser_action", f_browser}, {"browser_page", f_browser}, {NULL, NULL}};

const char *const aud_kinds[] = {"dispatch", "isolation_denial", "lease",
    "release", "reset", "retire", "egress_refusal", "egress_reload",
    "projection", "admission", "verification", "validation", "output",
    "package", "pkg_refusal", "browser_open", "browser_close", "browser_reaped",
    "browser_failed", "browser_action", "browser_page", NULL};

static const char *const refusal_names[AUD_R_COUNT_] = {"unknown_kind",
    "unknown_field", "wrong_type", "nested", "multiline", "length", "path",
    "charset", "range", "conflict", "invisible"};

const char *
aud_refusal_name(enum aud_refusal r)
{
	return (unsigned)r < AUD_R_COUNT_ ? refusal_names[r] : "?";
}

static const struct kind *
find_kind(const char *name)
{
	for (const struct kind *k = kinds; k->name != NULL; k++)
		if (strcmp(k->name, name) == 0)
			return k;
	return NULL;
}

bool
aud_kind_known(const char *kind)
{
	return kind != NULL && find_kind(kind) != NULL;
}

static const struct field *
find_field(const struct field *list, const char *name)
{
	for (const struct field *f = list; f->name != NULL; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

/* Appends the names of fields not yet in names (bounded by cap). */
static void
add_names(const char **names, size_t *n, size_t cap, const struct field *fs)
{
	for (const struct field *f = fs; f->name; f++) {
		bool dup = false;

		for (size_t j = 0; j < *n && !dup; j++)
			dup = strcmp(names[j], f->name) == 0;
		if (!dup && *n + 1 < cap)
			names[(*n)++] = f->name;
	}
}

/* Every field name any kind may carry, once: walked straight from the
 * tables, so a new kind needs no bound raised here. */
const char *const *
aud_field_names(void)
{
	static const char *names[128];
	const size_t cap = sizeof(names) / sizeof(names[0]);
	size_t n = 0;

	if (names[0] != NULL)
		return names;
	add_names(names, &n, cap, correlation);
	for (const struct kind *k = kinds; k->name != NULL; k++)
		add_names(names, &n, cap, k->fields);
	names[n] = NULL;
	return names;
}

static bool
is_token_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || strchr("._:@+=-", c) != NULL;
}

static bool
is_host_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || strchr(".-_:[]", c) != NULL;
}

/*
 * Whether s holds a character a terminal acts on (kz_cp_acts): 1, also
 * for a sequence that is not well formed (the JSON parser has refused
 * those already); or one a reader is not shown (kz_cp_invisible): 2, its
 * class in *what.  Both are refused in every string of an event, so that
 * query can print records as they are and an operator reads what is
 * stored: an invisible character makes two values that read the same
 * differ ("al<U+200B>ice"), and a raw id holding one hashes to an
 * identifier nobody searching by the name as read would find.
 */
static int
bad_char(const char *s, const char **what)
{
	size_t len = strlen(s);
	uint32_t cp;
	int n;

	for (size_t i = 0; i < len; i += (size_t)n) {
		if ((n = kz_utf8_next(s + i, len - i, &cp)) <= 0 ||
		    kz_cp_acts(cp))
			return 1;
		if ((*what = kz_cp_invisible(cp)) != NULL)
			return 2;
	}
	return 0;
}

/*
 * A host path, home path or URL anywhere in a value: "/x" at the start or
 * after a separator, "~", "file:" or any "scheme://".  Free text such as a
 * reason may say "a/b" but never name where something lives on a host.
 */
static bool
looks_like_path(const char *s)
{
	if (strncasecmp(s, "file:", 5) == 0 || strstr(s, "://") != NULL ||
	    strchr(s, '\\') != NULL)
		return true;
	for (const char *p = s; *p; p++) {
		bool start = p == s || strchr(" \t=:,;(\"'[<{", p[-1]);

		if (start &&
		    (*p == '/' ||
		        (*p == '~' &&
		            (p[1] == '/' || p[1] == '\0' ||
		                (p[1] >= 'a' && p[1] <= 'z')))))
			return true;
	}
	return false;
}

static int refuse(struct aud_refusal_info *ri, enum aud_refusal r,
    const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
refuse(struct aud_refusal_info *ri, enum aud_refusal r, const char *field,
    const char *fmt, ...)
{
	va_list ap;

	ri->reason = r;
	ri->field = field;
	va_start(ap, fmt);
	vsnprintf(ri->why, sizeof(ri->why), fmt, ap);
	va_end(ap);
	return KZ_EDENIED;
}

static int
check_string(const struct field *f, const char *s, struct aud_refusal_info *ri)
{
	size_t len = strlen(s);
	const char *what = NULL;
	int bad = bad_char(s, &what);

	if (bad == 1)
		return refuse(ri, AUD_R_MULTILINE, f->name,
		    "field '%s' has a line break, control or bidirectional "
		    "formatting character",
		    f->name);
	if (bad == 2)
		return refuse(ri, AUD_R_INVISIBLE, f->name,
		    "field '%s' has an invisible character (%s)", f->name,
		    what);
	if (len == 0 || len > (size_t)f->max)
		return refuse(ri, AUD_R_LENGTH, f->name,
		    "field '%s' is empty or over its length bound", f->name);
	if (f->type == F_RAWID)
		return 0; /* hashed, never stored */
	if (looks_like_path(s))
		return refuse(ri, AUD_R_PATH, f->name,
		    "field '%s' holds a path or URL", f->name);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool ok = true;

		if (f->type == F_HEX)
			ok = (*p >= '0' && *p <= '9') ||
			    (*p >= 'a' && *p <= 'f');
		else if (f->type == F_HOST)
			ok = is_host_char(*p);
		else if (f->type != F_TEXT)
			ok = is_token_char(*p);
		if (!ok)
			return refuse(ri, AUD_R_CHARSET, f->name,
			    "field '%s' has a character outside its alphabet",
			    f->name);
	}
	if (f->type == F_HEX && len != (size_t)f->max)
		return refuse(ri, AUD_R_LENGTH, f->name,
		    "field '%s' is not a hash of %d hex digits", f->name,
		    (int)f->max);
	return 0;
}

static bool
is_int(const cJSON *v, int64_t min, int64_t max)
{
	double d = v->valuedouble;

	return cJSON_IsNumber(v) && d >= (double)min && d <= (double)max &&
	    d == (double)(int64_t)d;
}

static bool
name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > FIELD_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		        *s == '_'))
			return false;
	return true;
}

static int
check_evidence(const struct field *f, const cJSON *v,
    struct aud_refusal_info *ri)
{
	int n = 0;

	if (!cJSON_IsObject(v))
		return refuse(ri, AUD_R_TYPE, f->name,
		    "field '%s' must be an object of booleans and integers",
		    f->name);
	for (const cJSON *c = v->child; c != NULL; c = c->next) {
		if (++n > f->max)
			return refuse(ri, AUD_R_LENGTH, f->name,
			    "field '%s' has too many members", f->name);
		if (!name_ok(c->string))
			return refuse(ri, AUD_R_CHARSET, f->name,
			    "field '%s' has a member with an invalid name",
			    f->name);
		if (cJSON_IsObject(c) || cJSON_IsArray(c))
			return refuse(ri, AUD_R_NESTED, f->name,
			    "field '%s' must be flat", f->name);
		if (!cJSON_IsBool(c) && !is_int(c, -INT_MAXJ, INT_MAXJ))
			return refuse(ri, AUD_R_TYPE, f->name,
			    "field '%s' members must be booleans or integers",
			    f->name);
	}
	return 0;
}

static int
check_list(const struct field *f, const cJSON *v, struct aud_refusal_info *ri)
{
	static const struct field item = {NULL, F_TOKEN, 0, 64};
	struct field it = item;
	int n = 0, r;

	if (!cJSON_IsArray(v))
		return refuse(ri, AUD_R_TYPE, f->name,
		    "field '%s' must be an array of names", f->name);
	it.name = f->name;
	for (const cJSON *c = v->child; c != NULL; c = c->next) {
		if (++n > f->max)
			return refuse(ri, AUD_R_LENGTH, f->name,
			    "field '%s' has too many items", f->name);
		if (cJSON_IsObject(c) || cJSON_IsArray(c))
			return refuse(ri, AUD_R_NESTED, f->name,
			    "field '%s' must be flat", f->name);
		if (!cJSON_IsString(c))
			return refuse(ri, AUD_R_TYPE, f->name,
			    "field '%s' items must be strings", f->name);
		if ((r = check_string(&it, c->valuestring, ri)) != 0)
			return r;
	}
	return 0;
}

static int
check_value(const struct field *f, const cJSON *v, struct aud_refusal_info *ri)
{
	if (f->type == F_EVIDENCE)
		return check_evidence(f, v, ri);
	if (f->type == F_LIST)
		return check_list(f, v, ri);
	if (cJSON_IsObject(v) || cJSON_IsArray(v))
		return refuse(ri, AUD_R_NESTED, f->name,
		    "field '%s' must not be an object or array", f->name);
	switch (f->type) {
	case F_INT:
		if (!cJSON_IsNumber(v))
			break;
		if (!is_int(v, f->min, f->max))
			return refuse(ri, AUD_R_RANGE, f->name,
			    "field '%s' is not an integer in range", f->name);
		return 0;
	case F_BOOL:
		return cJSON_IsBool(v) ?
		    0 :
		    refuse(ri, AUD_R_TYPE, f->name,
		        "field '%s' must be a boolean", f->name);
	case F_TOKEN_OR_INT:
		if (cJSON_IsNumber(v))
			return is_int(v, 0, INT_MAXJ) ?
			    0 :
			    refuse(ri, AUD_R_RANGE, f->name,
			        "field '%s' is not an integer in range",
			        f->name);
		/* FALLTHROUGH */
	default:
		if (cJSON_IsString(v))
			return check_string(f, v->valuestring, ri);
		break;
	}
	return refuse(ri, AUD_R_TYPE, f->name, "field '%s' has the wrong type",
	    f->name);
}

/* Adds name_hash = H(name, raw) to clean; refuses a second copy. */
static int
add_idhash(cJSON *clean, const struct field *f, const char *raw,
    const struct kz_key *idkey, struct aud_refusal_info *ri)
{
	char hname[FIELD_NAME_MAX + 8], h[KZ_IDHASH_HEX + 1];
	int r;

	snprintf(hname, sizeof(hname), "%s_hash", f->name);
	if (kz_json_get(clean, hname) != NULL)
		return refuse(ri, AUD_R_CONFLICT, f->name,
		    "field '%s' given both raw and hashed", f->name);
	if ((r = kz_key_idhash(idkey, f->name, raw, h)) != 0)
		return r;
	return cJSON_AddStringToObject(clean, hname, h) ? 0 : KZ_ENOMEM;
}

static int
unknown_field(const char *name, struct aud_refusal_info *ri)
{
	/* The name is echoed only when it cannot itself carry a secret. */
	if (name_ok(name))
		return refuse(ri, AUD_R_FIELD, "(unknown)",
		    "field '%s' is not in the schema of this kind", name);
	return refuse(ri, AUD_R_FIELD, "(unknown)",
	    "a field with an invalid name%s is not in the schema", "");
}

static int
check_fields(const struct kind *k, const cJSON *event,
    const struct kz_key *idkey, cJSON *clean, struct aud_refusal_info *ri)
{
	int n = 0, r;

	for (const cJSON *c = event->child; c != NULL; c = c->next) {
		const struct field *f = find_field(k->fields, c->string);

		if (f == NULL)
			f = find_field(correlation, c->string);
		if (f == NULL)
			return unknown_field(c->string, ri);
		if (++n > AUD_EVENT_MAX_FIELDS)
			return refuse(ri, AUD_R_LENGTH, "event",
			    "event has too many fields%s", "");
		if ((r = check_value(f, c, ri)) != 0)
			return r;
		if (f->type == F_RAWID)
			continue; /* hashed below, after all checks */
		if (kz_json_get(clean, f->name) != NULL)
			return refuse(ri, AUD_R_CONFLICT, f->name,
			    "field '%s' given both raw and hashed", f->name);
		if (!cJSON_AddItemToObject(clean, f->name,
		        cJSON_Duplicate(c, true)))
			return KZ_ENOMEM;
	}
	for (const cJSON *c = event->child; c != NULL; c = c->next) {
		const struct field *f = find_field(correlation, c->string);

		if (f != NULL && f->type == F_RAWID &&
		    (r = add_idhash(clean, f, c->valuestring, idkey, ri)) != 0)
			return r;
	}
	return 0;
}

int
aud_schema_check(const char *kind, const cJSON *event,
    const struct kz_key *idkey, cJSON **clean, struct aud_refusal_info *ri)
{
	const struct kind *k;
	cJSON *c = NULL;
	int r;

	memset(ri, 0, sizeof(*ri));
	if (kind == NULL || (k = find_kind(kind)) == NULL)
		return refuse(ri, AUD_R_KIND, "kind",
		    "field '%s' is not one of the audit event kinds", "kind");
	if (!cJSON_IsObject(event))
		return refuse(ri, AUD_R_TYPE, "event",
		    "field '%s' must be an object", "event");
	if ((c = cJSON_CreateObject()) == NULL)
		return KZ_ENOMEM;
	if ((r = check_fields(k, event, idkey, c, ri)) != 0)
		goto out;
	*clean = c;
	c = NULL;
out:
	cJSON_Delete(c);
	return r;
}

int
aud_input_split(const cJSON *line, const char **kind, cJSON **event, char *why,
    size_t wlen)
{
	const cJSON *k = kz_json_get(line, "kind");
	const cJSON *e = kz_json_get(line, "event");
	cJSON *ev;

	if (!cJSON_IsString(k) || strlen(k->valuestring) > AUD_KIND_MAX) {
		kz_why(why, wlen, "field 'kind' is missing or not a kind");
		return KZ_EMISSING;
	}
	if (e != NULL) {
		if (cJSON_GetArraySize(line) != 2) {
			kz_why(why, wlen,
			    "only 'kind' and 'event' may be "
			    "given with 'event'");
			return KZ_EUNKNOWN;
		}
		ev = cJSON_Duplicate(e, true);
	} else {
		/* Flat form: every member but kind is the event. */
		ev = cJSON_Duplicate(line, true);
		if (ev != NULL)
			cJSON_DeleteItemFromObjectCaseSensitive(ev, "kind");
	}
	if (ev == NULL)
		return KZ_ENOMEM;
	*kind = k->valuestring;
	*event = ev;
	return 0;
}
