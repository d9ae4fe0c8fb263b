/*
 * The model in the store: rooms, projects, members, resources, versions,
 * links, selections and admission snapshots (layout in lua/lib.lua).
 * Every mutation is one Lua script; reads that a decision rests on are one
 * script too, so a decision never mixes two states of the store.  Each
 * script is a file of lua/ embedded at build time ($(B)/lua/kzp_lua.h,
 * made by the Makefile) after lib/lua/kz.lua and lua/lib.lua.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kzp.h"
#include "kz_lua.h"
#include "kzp_lua.h"
#include "banned.h"

#define ARGS_MAX 60

/* The helpers every script starts with; facts and view add their own. */
#define LIB KZ_LUA_KZ KZP_LUA_LIB
#define VIEW LIB KZP_LUA_FACTS_FN KZP_LUA_VIEW_FN
/* The scripts that place a file in a room (the place rule). */
#define PLACE LIB KZP_LUA_PLACE_FN

static struct kz_script scripts[] = {
    {"member_create", LIB KZP_LUA_MEMBER_CREATE, ""},
    {"room_create", LIB KZP_LUA_ROOM_CREATE, ""},
    {"room_member", LIB KZP_LUA_ROOM_MEMBER, ""},
    {"project_create", LIB KZP_LUA_PROJECT_CREATE, ""},
    {"project_member", LIB KZP_LUA_PROJECT_MEMBER, ""},
    {"room_project", LIB KZP_LUA_ROOM_PROJECT, ""},
    {"res_create", LIB KZP_LUA_RES_CREATE, ""},
    {"res_version", PLACE KZP_LUA_RES_VERSION, ""},
    {"res_revoke", LIB KZP_LUA_RES_REVOKE, ""},
    {"link", PLACE KZP_LUA_LINK, ""},
    {"output", PLACE KZP_LUA_OUTPUT, ""},
    {"withdraw", LIB KZP_LUA_WITHDRAW, ""},
    {"select", LIB KZP_LUA_SELECT, ""},
    {"declare_source", LIB KZP_LUA_DECLARE_SOURCE, ""},
    {"conn_create", LIB KZP_LUA_CONN_CREATE, ""},
    {"facts", LIB KZP_LUA_FACTS_FN KZP_LUA_FACTS, ""},
    {"view", VIEW KZP_LUA_VIEW, ""},
    {"live", VIEW KZP_LUA_LIVE, ""},
    {"commit", LIB KZP_LUA_COMMIT, ""},
    {"refs", LIB KZP_LUA_REFS, ""},
    {NULL, NULL, ""},
};

void
kzp_fail(struct kzp_res *r, const char *code, const char *fmt, ...)
{
	va_list ap;

	r->code = code;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

void
kzp_bounds_args(const struct kzp *p, struct kzp_bargs *ba, const char **av)
{
	snprintf(ba->s[0], sizeof(ba->s[0]), "%lld", (long long)p->b.max_files);
	snprintf(ba->s[1], sizeof(ba->s[1]), "%lld",
	    (long long)p->b.max_file_bytes);
	snprintf(ba->s[2], sizeof(ba->s[2]), "%lld",
	    (long long)p->b.max_total_bytes);
	for (int i = 0; i < 3; i++)
		av[i] = ba->s[i];
}

bool
kzp_id_ok(const char *s)
{
	size_t n = strlen(s);

	/* Ids are opaque tokens: no title, no path, no separator. */
	return n > 0 && n <= KZP_ID_MAX &&
	    strspn(s,
	        "abcdefghijklmnopqrstuvwxyz"
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int
kzp_hash(const struct kzp *p, const char *kind, const char *id,
    char out[KZ_IDHASH_HEX + 1])
{
	if (!kzp_id_ok(id))
		return KZ_EINVAL;
	return kz_key_idhash(&p->idkey, kind, id, out);
}

int
kzp_connect(struct kzp *p, struct kzp_res *r)
{
	char why[KZP_WHY];

	if (p->st != NULL)
		return 0;
	if (kz_store_open(p->store_sock, p->dep, KZ_STORE_TIMEOUT_MS, &p->st,
	        why, sizeof(why)) != 0) {
		/* The reply names no path; the operator's line does. */
		if (p->oneshot)
			fprintf(stderr,
			    "kz-project: store unreachable at %s: %s\n",
			    p->store_sock, why);
		else
			kz_log(KZ_LOG_WARN, "store.fail", KZ_EUNAVAIL, why,
			    "socket", p->store_sock, NULL);
		kzp_fail(r, KZ_WE_STORE_UNAVAILABLE, "store unavailable");
		return KZ_EUNAVAIL;
	}
	return 0;
}

static struct kz_script *
script(const char *name)
{
	for (struct kz_script *s = scripts; s->name != NULL; s++)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

/* Maps a store failure: the script's outcome is unknown. */
static int
eval_fail(struct kzp *p, int e, struct kzp_res *r)
{
	if (e == KZ_EUNAVAIL) {
		/* Drop the connection: the next request reconnects. */
		kz_store_free(p->st);
		p->st = NULL;
		kzp_fail(r, KZ_WE_STORE_UNAVAILABLE, "store unavailable");
		return KZ_EUNAVAIL;
	}
	kzp_fail(r, KZ_WE_INTERNAL, "store script failed");
	return KZ_EINTERNAL;
}

/*
 * A script's refusal (the convention of lib/lua/kz.lua) as the op's: one
 * of the codes kz-project's scripts give, kept as its constant.
 */
static int
refusal(const cJSON *res, struct kzp_res *r)
{
	static const char *const codes[] = {KZ_WE_REFUSED, KZ_WE_NOT_OWNER,
	    KZ_WE_BAD_REQUEST, KZP_CONFLICT, NULL};
	const char *code, *reason;

	if ((code = kz_store_refusal(res, &reason)) == NULL)
		return 0;
	for (int i = 0; codes[i] != NULL; i++) {
		if (strcmp(code, codes[i]) == 0) {
			kzp_fail(r, codes[i], "%s", reason);
			return KZ_EDENIED;
		}
	}
	kzp_fail(r, KZ_WE_INTERNAL, "store script failed");
	return KZ_EINTERNAL;
}

/* Parses a script's JSON string reply; a refusal becomes r's. */
static int
parse_reply(const redisReply *rep, cJSON **out, struct kzp_res *r)
{
	int e;

	if (rep->type != REDIS_REPLY_STRING ||
	    (*out = cJSON_ParseWithLength(rep->str, rep->len)) == NULL) {
		*out = NULL;
		kzp_fail(r, KZ_WE_INTERNAL, "store view unreadable");
		return KZ_EINTERNAL;
	}
	if ((e = refusal(*out, r)) != 0) {
		cJSON_Delete(*out);
		*out = NULL;
	}
	return e;
}

static int
eval(struct kzp *p, const char *name, int argc, const char **argv,
    redisReply **rep, struct kzp_res *r)
{
	const char *av[ARGS_MAX + 5];
	struct kz_script *sc = script(name);
	char why[KZP_WHY] = "";
	int e;

	if (sc == NULL || argc > ARGS_MAX) {
		kzp_fail(r, KZ_WE_INTERNAL, "bad script call");
		return KZ_EINTERNAL;
	}
	if ((e = kzp_connect(p, r)) != 0)
		return e;
	av[0] = "EVAL";
	av[1] = sc->src;
	av[2] = "1";
	av[3] = kz_store_prefix(p->st);
	av[4] = kz_store_prefix(p->st);
	memcpy(av + 5, argv, (size_t)argc * sizeof(*argv));
	/*
	 * A one-shot process runs a script once or twice: EVAL carries it in
	 * the one round trip, where SCRIPT LOAD then EVALSHA would take two
	 * (the server caches the script either way).  The daemon sends the
	 * digest only.
	 */
	if (p->oneshot)
		e = kz_store_cmd(p->st, argc + 5, av, rep, why, sizeof(why));
	else
		e = kz_store_eval(p->st, sc, 1, argc + 2, av + 3, rep, why,
		    sizeof(why));
	return e == 0 ? 0 : eval_fail(p, e, r);
}

int
kzp_refs_page(struct kzp *p, char cur[32], int (*add)(void *, const char *),
    void *arg, struct kzp_res *r)
{
	const char *av[1] = {cur};
	redisReply *rep;
	int e = 0;

	if ((e = eval(p, "refs", 1, av, &rep, r)) != 0)
		return e;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[0]->len >= 32) {
		freeReplyObject(rep);
		kzp_fail(r, KZ_WE_INTERNAL, "store page unreadable");
		return KZ_EINTERNAL;
	}
	for (size_t i = 1; e == 0 && i < rep->elements; i++)
		if (rep->element[i]->type == REDIS_REPLY_STRING)
			e = add(arg, rep->element[i]->str);
	snprintf(cur, 32, "%s", rep->element[0]->str);
	freeReplyObject(rep);
	if (e != 0)
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
	return e;
}

/* A mutation answers an integer, or a refusal. */
int
kzp_mutate(struct kzp *p, const char *name, int argc, const char **argv,
    long long *val, struct kzp_res *r)
{
	redisReply *rep;
	cJSON *res = NULL;
	int e;

	if ((e = eval(p, name, argc, argv, &rep, r)) != 0)
		return e;
	if (rep->type == REDIS_REPLY_STRING)
		e = parse_reply(rep, &res, r);
	if (e == 0 && val != NULL)
		*val = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
	cJSON_Delete(res);
	freeReplyObject(rep);
	return e;
}

/* Runs a script that returns one JSON string and parses it. */
static int
eval_json(struct kzp *p, const char *name, int argc, const char **argv,
    cJSON **out, struct kzp_res *r)
{
	redisReply *rep;
	int e;

	if ((e = eval(p, name, argc, argv, &rep, r)) != 0)
		return e;
	e = parse_reply(rep, out, r);
	freeReplyObject(rep);
	return e;
}

/* One JSON argument: a manifest may name more ids than EVAL args. */
static char *
rids_json(const cJSON *rids, struct kzp_res *r)
{
	char *js = rids != NULL ? kz_json_print(rids) : strdup("[]");

	if (js == NULL)
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
	return js;
}

int
kzp_view(struct kzp *p, const char *rh, const char *mh, const cJSON *rids,
    cJSON **out, struct kzp_res *r)
{
	const char *av[3] = {rh, mh, NULL};
	char *js;
	int e;

	if ((js = rids_json(rids, r)) == NULL)
		return KZ_ENOMEM;
	av[2] = js;
	e = eval_json(p, "view", 3, av, out, r);
	free(js);
	return e;
}

static int
parse_str(const redisReply *e, cJSON **out)
{
	*out = NULL;
	if (e->type != REDIS_REPLY_STRING)
		return -1;
	*out = cJSON_ParseWithLength(e->str, e->len);
	return *out != NULL ? 0 : -1;
}

int
kzp_live(struct kzp *p, const char *rh, const char *mh, const cJSON *rids,
    const char *sid, cJSON **view, cJSON **stored, struct kzp_res *r)
{
	const char *av[4] = {rh, mh, NULL, sid};
	redisReply *rep = NULL;
	char *js;
	int e;

	*view = *stored = NULL;
	/* Snapshot ids are what admit makes: 32 lowercase hex digits. */
	if (strlen(sid) != 32 || strspn(sid, "0123456789abcdef") != 32) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the admission snapshot cannot be proven");
		return KZ_EDENIED;
	}
	if ((js = rids_json(rids, r)) == NULL)
		return KZ_ENOMEM;
	av[2] = js;
	e = eval(p, "live", 4, av, &rep, r);
	free(js);
	if (e != 0)
		return e;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    parse_str(rep->element[0], view) != 0 ||
	    (rep->elements > 1 && rep->element[1]->type != REDIS_REPLY_NIL &&
	        parse_str(rep->element[1], stored) != 0)) {
		cJSON_Delete(*view);
		cJSON_Delete(*stored);
		*view = *stored = NULL;
		kzp_fail(r, KZ_WE_INTERNAL, "store view unreadable");
		e = KZ_EINTERNAL;
	}
	freeReplyObject(rep);
	return e;
}

int
kzp_facts(struct kzp *p, const char *rid, const char *mh, cJSON **out,
    struct kzp_res *r)
{
	const char *av[2] = {rid, mh};

	return eval_json(p, "facts", 2, av, out, r);
}

static const char *
jstr(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

int
kzp_commit(struct kzp *p, const cJSON *view, const cJSON *snap, const char *mh,
    const cJSON *scope_add, struct kzp_res *r)
{
	const char *av[8];
	char aver[24], seq[24], ttl[24];
	char *js, *sc;
	int e;

	snprintf(aver, sizeof(aver), "%lld",
	    (long long)cJSON_GetNumberValue(kz_json_get(view, "aver")));
	snprintf(seq, sizeof(seq), "%lld",
	    (long long)cJSON_GetNumberValue(kz_json_get(view, "seq")));
	snprintf(ttl, sizeof(ttl), "%lld", (long long)p->snap_ttl);
	js = kz_json_print(snap);
	sc = kz_json_print(scope_add);
	if (js == NULL || sc == NULL) {
		free(js);
		free(sc);
		kzp_fail(r, KZ_WE_INTERNAL, "out of memory");
		return KZ_ENOMEM;
	}
	av[0] = jstr(snap, "room_hash");
	av[1] = aver;
	av[2] = seq;
	av[3] = jstr(snap, "snapshot");
	av[4] = js;
	av[5] = ttl;
	av[6] = mh;
	av[7] = sc;
	e = kzp_mutate(p, "commit", 8, av, NULL, r);
	free(js);
	free(sc);
	return e;
}
