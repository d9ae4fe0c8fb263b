/*
 * The admission policy (admit.c) over hand-built views: one table row per
 * rule case, each with the outcome it must have.  No store involved.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_json.h"
#include "kzp.h"
#include "kz_check.h"
#include "banned.h"

#define SHA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define RES(id, owner, kind, size, ready, grants)                              \
	"{\"id\":\"" id "\",\"exists\":true,\"owner\":\"" owner "\","          \
	"\"kind\":\"" kind "\",\"revoked\":false,\"cur\":1,\"path\":\"" id     \
	".txt\",\"size\":" #size ",\"sha\":\"" SHA "\",\"ready\":" ready       \
	",\"grants\":" grants "}"
#define G_ROOM                                                                 \
	"[{\"via\":\"room\",\"by\":\"A\",\"shared\":true,\"member_in\":true}]"

/* A ready file of A's at PATH (readable by A through the room). */
#define RESP(id, path, size)                                                   \
	"{\"id\":\"" id "\",\"exists\":true,\"owner\":\"A\","                  \
	"\"kind\":\"document\",\"revoked\":false,\"cur\":1,\"path\":\"" path   \
	"\",\"size\":" #size ",\"sha\":\"" SHA "\",\"ready\":true,"            \
	"\"grants\":" G_ROOM "}"
#define LINK(id, by, seq)                                                      \
	"{\"rid\":\"" id "\",\"by\":\"" by "\",\"turn\":\"t0\",\"seq\":" #seq  \
	",\"shared\":true}"

static const struct kzp_bounds B = {4, 100, 150};

/* A private room of A with d1 linked, A's own d2, B's b1, A's library L1. */
static const char *V_PRIV =
    "{\"exists\":true,\"aver\":3,\"seq\":5,\"roster\":[\"A\"],"
    "\"links\":[{\"rid\":\"d1\",\"by\":\"A\",\"turn\":\"t0\",\"seq\":1,"
    "\"shared\":true}],\"sel\":[{\"rid\":\"L1\",\"owner\":\"A\"}],"
    "\"scope\":[],\"res\":[" RES("d1", "A", "document", 10, "true",
        G_ROOM) "," RES("d2", "A", "document", 10, "true", "[]") "," RES("b1",
        "B", "document", 10, "true", "[]") "," RES("p1", "A", "document", 10,
        "false", "[]") "," RES("L1", "A", "library", 10, "true", "[]") "]}";
/* The same room once B has joined. */
static const char *
    V_SHARED = "{\"exists\":true,\"aver\":4,\"seq\":5,\"roster\":[\"A\",\"B\"],"
               "\"links\":[],\"sel\":[{\"rid\":\"L1\",\"owner\":\"A\"}],"
               "\"scope\":[],\"res\":[" RES("d2", "A", "document", 10, "true",
                   "[]") "," RES("L1", "A", "library", 10, "true", "[]") "]}";
/* A private room with only a library selection that is not ready. */
static const char *V_PENDING =
    "{\"exists\":true,\"aver\":1,\"seq\":0,\"roster\":[\"A\"],"
    "\"links\":{},\"sel\":[{\"rid\":\"L1\",\"owner\":\"A\"}],\"scope\":{},"
    "\"res\":[" RES("L1", "A", "library", 10, "false", "[]") "]}";

/* A private room of A with only A's library selection L1, ready. */
static const char *V_SEL =
    "{\"exists\":true,\"aver\":1,\"seq\":0,\"roster\":[\"A\"],"
    "\"links\":[],\"sel\":[{\"rid\":\"L1\",\"owner\":\"A\"}],\"scope\":[],"
    "\"res\":[" RES("L1", "A", "library", 10, "true", "[]") "," RES("d2", "A",
        "document", 10, "true", "[]") "]}";
/* A private room of A with d1 linked and no selection. */
static const char *V_ROOM =
    "{\"exists\":true,\"aver\":1,\"seq\":5,\"roster\":[\"A\"],"
    "\"links\":[{\"rid\":\"d1\",\"by\":\"A\",\"turn\":\"t0\",\"seq\":1,"
    "\"shared\":true}],\"sel\":[],\"scope\":[],\"res\":[" RES("d1", "A",
        "document", 10, "true",
        G_ROOM) "," RES("d2", "A", "document", 10, "true", "[]") "]}";

struct acase {
	const char *name, *view, *mh, *sel, *retr;
	bool contract;
	const char *code; /* NULL: admitted */
	const char *ids; /* admitted ids, comma-separated, by path */
	const char *selection;
};

static const struct acase acases[] = {
    {"r1 room link", NULL, "A", NULL, NULL, false, NULL, "L1,d1", "included"},
    {"r2 own id", NULL, "A", "d2", NULL, false, NULL, "L1,d1,d2", "included"},
    {"r2 foreign id refuses", NULL, "A", "b1", NULL, false, "refused", NULL,
        NULL},
    {"r2 unknown id refuses", NULL, "A", "zz", NULL, false, "refused", NULL,
        NULL},
    {"r2 title refuses", NULL, "A", "a title", NULL, false, "bad_request", NULL,
        NULL},
    {"r2 outsider", NULL, "B", NULL, NULL, false, "refused", NULL, NULL},
    {"r3 retrieved private", NULL, "A", NULL, "d2", false, NULL, "L1,d1,d2",
        "included"},
    {"r3 retrieved not ready", NULL, "A", NULL, "p1", false, "refused", NULL,
        NULL},
    {"r3 retrieved shared", "S", "A", NULL, "d2", false, "refused", NULL, NULL},
    {"r4 library as selector", NULL, "A", "L1", NULL, false, "refused", NULL,
        NULL},
    {"r5 shared never gets it", "S", "A", NULL, NULL, true, NULL, "",
        "not_considered"},
    {"r6 withheld no contract", "P", "A", NULL, NULL, false, NULL, "",
        "withheld"},
    {"r6 withheld contract", "P", "A", NULL, NULL, true, "refused", NULL, NULL},
};

static void
run_acase(const struct acase *c)
{
	const char *vs = c->view == NULL ? V_PRIV :
	    c->view[0] == 'S'            ? V_SHARED :
	                                   V_PENDING;
	cJSON *view = cJSON_Parse(vs), *snap = NULL, *scope = NULL;
	cJSON *sel = cJSON_CreateArray(), *retr = cJSON_CreateArray();
	struct kzp_turn t = {.mh = c->mh,
	    .rh = "R",
	    .turn = "t1",
	    .capability = "code",
	    .select = sel,
	    .retrieved = retr,
	    .contract = c->contract};
	struct kzp_res r = {0};
	char ids[256] = "";
	const cJSON *it;
	int e;

	ck_assert_msg(view != NULL, "%s: view", c->name);
	if (c->sel)
		cJSON_AddItemToArray(sel, cJSON_CreateString(c->sel));
	if (c->retr)
		cJSON_AddItemToArray(retr, cJSON_CreateString(c->retr));
	e = kzp_admit_decide(view, &t, &B, &snap, &scope, &r);
	if (c->code != NULL) {
		ck_assert_msg(e != 0 && r.code && strcmp(r.code, c->code) == 0,
		    "%s: want %s got %s", c->name, c->code,
		    r.code ? r.code : "ok");
		goto out;
	}
	ck_assert_msg(e == 0, "%s: refused: %s", c->name, r.why);
	cJSON_ArrayForEach(it, kz_json_get(snap, "items"))
	{
		size_t n = strlen(ids);

		snprintf(ids + n, sizeof(ids) - n, "%s%s", n ? "," : "",
		    cJSON_GetStringValue(kz_json_get(it, "id")));
	}
	ck_assert_msg(strcmp(ids, c->ids) == 0, "%s: ids %s", c->name, ids);
	ck_assert_str_eq(cJSON_GetStringValue(kz_json_get(snap, "selection")),
	    c->selection);
	ck_assert_int_eq(kzp_snap_check(snap, &r), 0);
out:
	cJSON_Delete(view);
	cJSON_Delete(snap);
	cJSON_Delete(scope);
	cJSON_Delete(sel);
	cJSON_Delete(retr);
}

/*
 * The place rule at admission: a shared room of A and B whose links do not
 * fit together (as a lowered bound or links older than the rule can
 * leave).  Links are listed out of order: the room's order is their seq.
 */
static const char *
    V_CLASH = "{\"exists\":true,\"aver\":2,\"seq\":20,\"roster\":[\"A\",\"B\"],"
              "\"links\":[" LINK("c9", "B", 11) "," LINK("c2", "A",
                  4) "," LINK("c1", "B", 3) "," LINK("c3", "B",
                  5) "," LINK("c4", "A", 6) "," LINK("c5", "B",
                  7) "," LINK("c6", "B", 8) "," LINK("c7", "B",
                  9) "," LINK("c8", "B",
                  10) "],\"sel\":[],\"scope\":[\"s1\"],"
                      "\"res\":[" RESP("c1", "a.txt", 10) "," RESP("c2",
                          "a.txt",
                          10) "," RESP("c3", "a.txt/x", 10) "," RESP("c4", "d",
                          10) "," RESP("c5", "d/e.txt", 10) "," RESP("c6",
                          "big.txt", 120) "," RESP("c7", "f.txt",
                          10) "," RESP("c8", "g.txt", 10) "," RESP("c9",
                          "h.txt", 10) "," RESP("q1", "a.txt/y",
                          10) "," RESP("q2", "a.txt/y", 10) "," RESP("s1",
                          "d/s.txt", 10) "," RESP("n1", "n.txt", 10) "]}";

/* A private room of A: a linked file at the path of A's selection. */
static const char
    *V_SELCLASH = "{\"exists\":true,\"aver\":1,\"seq\":2,\"roster\":[\"A\"],"
                  "\"links\":[" LINK("l1", "A",
                      1) "],\"sel\":[{\"rid\":\"L1\","
                         "\"owner\":\"A\"}],\"scope\":[],\"res\":[" RESP("l1",
                             "L1.txt", 10) "," RES("L1", "A", "library", 10,
                             "true", "[]") "]}";

static const struct pcase {
	const char *name, *sel1, *sel2;
	const char *code; /* NULL: admitted */
	const char *ids; /* admitted ids, by path */
	const char *left; /* id:reason, in line */
} pcases[] = {
    /* The scope (s1) comes before the room's links and makes "d" a
     * directory; then the links in their order: the first at a path
     * wins, a file at, beneath or above a taken path is left out, so are
     * those over a bound (one file over 100 bytes, a fifth file); the
     * rest goes. */
    {"room in line", NULL, NULL, NULL, "c1,c5,s1,c7",
        "c2:path_clash,c3:path_clash,c4:path_clash,c6:over_bounds,"
        "c8:over_bounds,c9:over_bounds"},
    /* An id asked for this turn comes first and takes its path. */
    {"requested first", "q1", NULL, NULL, "c3,q1,c5,s1",
        "c1:path_clash,c2:path_clash,c4:path_clash,c6:over_bounds,"
        "c7:over_bounds,c8:over_bounds,c9:over_bounds"},
    {"two requested clash", "q1", "q2", "refused", NULL, NULL},
};

static void
pcase_ids(const cJSON *snap, char *ids, size_t len, char *left, size_t llen)
{
	const cJSON *it;

	ids[0] = left[0] = '\0';
	cJSON_ArrayForEach(it, kz_json_get(snap, "items"))
	{
		size_t n = strlen(ids);

		snprintf(ids + n, len - n, "%s%s", n ? "," : "",
		    cJSON_GetStringValue(kz_json_get(it, "id")));
	}
	cJSON_ArrayForEach(it, kz_json_get(snap, "left_out"))
	{
		size_t n = strlen(left);

		snprintf(left + n, llen - n, "%s%s:%s", n ? "," : "",
		    cJSON_GetStringValue(kz_json_get(it, "id")),
		    cJSON_GetStringValue(kz_json_get(it, "reason")));
	}
}

START_TEST(place_table)
{
	const struct pcase *c = &pcases[_i];
	cJSON *view = cJSON_Parse(V_CLASH), *snap = NULL, *scope = NULL;
	cJSON *sel = cJSON_CreateArray();
	struct kzp_turn t = {.mh = "A",
	    .rh = "R",
	    .turn = "t1",
	    .capability = "code",
	    .select = sel};
	struct kzp_res r = {0};
	char ids[256], left[512];
	bool withheld;
	int e;

	ck_assert_ptr_nonnull(view);
	if (c->sel1)
		cJSON_AddItemToArray(sel, cJSON_CreateString(c->sel1));
	if (c->sel2)
		cJSON_AddItemToArray(sel, cJSON_CreateString(c->sel2));
	e = kzp_admit_decide(view, &t, &B, &snap, &scope, &r);
	if (c->code != NULL) {
		ck_assert_msg(e != 0 && r.code && strcmp(r.code, c->code) == 0,
		    "%s: want %s got %s", c->name, c->code,
		    r.code ? r.code : "ok");
		goto out;
	}
	ck_assert_msg(e == 0, "%s: refused: %s", c->name, r.why);
	pcase_ids(snap, ids, sizeof(ids), left, sizeof(left));
	if (c->ids != NULL) {
		ck_assert_msg(strcmp(ids, c->ids) == 0, "%s: ids %s", c->name,
		    ids);
		ck_assert_msg(strcmp(left, c->left) == 0, "%s: left %s",
		    c->name, left);
	}
	/* Every admitted path can be written, and the snapshot proves. */
	ck_assert_int_eq(kzp_snap_check(snap, &r), 0);
	/* The links it left out change nothing at the load... */
	ck_assert_int_eq(kzp_verify_decide(snap, view, &B, &withheld, &r), 0);
	/* ...but a new one still does (the manifest-change rule). */
	cJSON_AddItemToArray(kz_json_get(view, "links"),
	    cJSON_Parse(LINK("n1", "B", 21)));
	ck_assert_int_ne(kzp_verify_decide(snap, view, &B, &withheld, &r), 0);
	ck_assert_str_eq(r.code, "manifest_changed");
out:
	cJSON_Delete(view);
	cJSON_Delete(snap);
	cJSON_Delete(scope);
	cJSON_Delete(sel);
}
END_TEST

/* A selection that would clash with the room's files is withheld. */
START_TEST(selection_clash)
{
	cJSON *view = cJSON_Parse(V_SELCLASH), *snap = NULL, *scope = NULL;
	struct kzp_turn t = {.mh = "A",
	    .rh = "R",
	    .turn = "t1",
	    .capability = "code",
	    .contract = true};
	struct kzp_res r = {0};
	char ids[64], left[64];

	ck_assert_int_eq(kzp_admit_decide(view, &t, &B, &snap, &scope, &r), 0);
	pcase_ids(snap, ids, sizeof(ids), left, sizeof(left));
	ck_assert_str_eq(ids, "l1");
	ck_assert_str_eq(left, "");
	ck_assert_str_eq(cJSON_GetStringValue(kz_json_get(snap, "selection")),
	    "withheld");
	cJSON_Delete(view);
	cJSON_Delete(snap);
	cJSON_Delete(scope);
}
END_TEST

START_TEST(admit_table)
{
	run_acase(&acases[_i]);
}
END_TEST

/*
 * Admits on view base (turn, contract), then verifies against base with
 * from replaced by to and turn_links added to the live links.
 */
static const char *
verify_on(const char *base, const char *turn, bool contract, const char *from,
    const char *to, const char *turn_links)
{
	static char code[64];
	char *live = malloc(strlen(base) + 512);
	const char *p = strstr(base, from);
	cJSON *view = cJSON_Parse(base), *snap = NULL, *scope = NULL, *lv;
	struct kzp_turn t = {.mh = "A",
	    .rh = "R",
	    .turn = turn,
	    .capability = "code",
	    .contract = contract};
	struct kzp_res r = {0};
	bool withheld;

	ck_assert_int_eq(kzp_admit_decide(view, &t, &B, &snap, &scope, &r), 0);
	ck_assert_ptr_nonnull(p);
	snprintf(live, strlen(base) + 512, "%.*s%s%s", (int)(p - base), base,
	    to, p + strlen(from));
	lv = cJSON_Parse(live);
	ck_assert_ptr_nonnull(lv);
	if (turn_links != NULL)
		cJSON_AddItemToArray(kz_json_get(lv, "links"),
		    cJSON_Parse(turn_links));
	snprintf(code, sizeof(code), "%s",
	    kzp_verify_decide(snap, lv, &B, &withheld, &r) == 0 ?
	        (withheld ? "go-withheld" : "go") :
	        r.code);
	cJSON_Delete(lv);
	cJSON_Delete(view);
	cJSON_Delete(snap);
	cJSON_Delete(scope);
	free(live);
	return code;
}

static const char *
verify_with(const char *from, const char *to, const char *turn_links)
{
	return verify_on(V_PRIV, "t1", false, from, to, turn_links);
}

START_TEST(verify_rules)
{
	ck_assert_str_eq(verify_with("\"aver\":3", "\"aver\":3", NULL), "go");
	/* The withheld-selection rule: the room's own file still goes. */
	ck_assert_str_eq(verify_with("\"aver\":3", "\"aver\":4", NULL),
	    "go-withheld");
	ck_assert_str_eq(verify_with("\"roster\":[\"A\"]",
	                     "\"roster\":[\"A\",\"C\"]", NULL),
	    "go-withheld");
	/* ...and is still verified against live state. */
	ck_assert_str_eq(verify_with("\"aver\":3,\"seq\":5,\"roster\":[\"A\"],"
	                             "\"links\":[{\"rid\":\"d1\"",
	                     "\"aver\":4,\"seq\":5,\"roster\":[\"A\",\"C\"],"
	                     "\"links\":[{\"rid\":\"x1\"",
	                     NULL),
	    "manifest_changed");
	/* The selection alone: none without the contract, refused with it. */
	ck_assert_str_eq(verify_on(V_SEL, "t1", false, "\"aver\":1",
	                     "\"aver\":2", NULL),
	    "go-withheld");
	ck_assert_str_eq(verify_on(V_SEL, "t1", true, "\"aver\":1",
	                     "\"aver\":2", NULL),
	    "resource_audience_changed");
	ck_assert_str_eq(verify_on(V_SEL, "t1", true, "\"aver\":1",
	                     "\"aver\":1", NULL),
	    "go");
	/* No selection: the snapshot holds only for the audience it lists. */
	ck_assert_str_eq(verify_on(V_ROOM, "t1", false, "\"aver\":1",
	                     "\"aver\":2", NULL),
	    "resource_audience_changed");
	/* A link with no turn is never a turn-less run's own file. */
	ck_assert_str_eq(verify_on(V_ROOM, "-", false, "\"aver\":1",
	                     "\"aver\":1",
	                     "{\"rid\":\"d2\",\"by\":\"A\",\"turn\":\"-\","
	                     "\"seq\":7,\"shared\":true}"),
	    "manifest_changed");
	ck_assert_str_eq(verify_with("\"cur\":1", "\"cur\":2", NULL),
	    "manifest_changed");
	/* This run's own later link is tolerated; others are not. */
	ck_assert_str_eq(verify_with("\"aver\":3", "\"aver\":3",
	                     "{\"rid\":\"d2\",\"by\":\"A\",\"turn\":\"t1\","
	                     "\"seq\":7,\"shared\":true}"),
	    "go");
	ck_assert_str_eq(verify_with("\"aver\":3", "\"aver\":3",
	                     "{\"rid\":\"d2\",\"by\":\"A\",\"turn\":\"t0\","
	                     "\"seq\":7,\"shared\":true}"),
	    "manifest_changed");
	ck_assert_str_eq(verify_with("\"aver\":3", "\"aver\":3",
	                     "{\"rid\":\"d2\",\"by\":\"A\",\"turn\":\"t1\","
	                     "\"seq\":5,\"shared\":true}"),
	    "manifest_changed");
	ck_assert_str_eq(verify_with("\"revoked\":false,\"cur\":1,\"path\":"
	                             "\"L1",
	                     "\"revoked\":true,\"cur\":1,\"path\":\"L1", NULL),
	    "manifest_changed");
}
END_TEST

START_TEST(can_read_predicate)
{
	static const struct {
		const char *facts, *mh;
		bool want;
	} rows[] = {
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\"}", "A",
	        true},
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\"}", "B",
	        false},
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\","
	     "\"grants\":[{\"shared\":true,\"member_in\":true}]}",
	        "B", true},
	    /* A private pointer grants nothing, even to members. */
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\","
	     "\"grants\":[{\"shared\":false,\"member_in\":true}]}",
	        "B", false},
	    /* A reader who left (or another project) gets nothing. */
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\","
	     "\"grants\":[{\"shared\":true,\"member_in\":false}]}",
	        "B", false},
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"library\","
	     "\"grants\":[{\"shared\":true,\"member_in\":true}]}",
	        "B", false},
	    {"{\"exists\":true,\"owner\":\"A\",\"revoked\":true}", "A", false},
	    {"{\"exists\":false}", "A", false},
	    /* A connection-bound item resolves only through a connection
	     * serving this member, owner included (the declared-source
	     * rule). */
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\","
	     "\"conn\":\"c1\",\"conn_ok\":false}",
	        "A", false},
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\","
	     "\"conn\":\"c1\",\"conn_ok\":true,"
	     "\"grants\":[{\"shared\":true,\"member_in\":true}]}",
	        "B", true},
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\","
	     "\"conn\":\"c1\",\"conn_ok\":false,"
	     "\"grants\":[{\"shared\":true,\"member_in\":true}]}",
	        "B", false},
	    /* Served, but with no grant: the connection is no grant. */
	    {"{\"exists\":true,\"owner\":\"A\",\"kind\":\"document\","
	     "\"conn\":\"c1\",\"conn_ok\":true}",
	        "B", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cJSON *f = cJSON_Parse(rows[i].facts);

		ck_assert_msg(kzp_can_read(f, rows[i].mh) == rows[i].want,
		    "row %zu", i);
		cJSON_Delete(f);
	}
}
END_TEST

START_TEST(output_types)
{
	static const struct {
		const char *name, *head;
		size_t len;
		bool ok;
	} rows[] = {
	    {"report.pdf", "%PDF-1.7", 8, true},
	    {"report.pdf", "hello", 5, false},
	    {"deck.pptx", "PK\x03\x04xx", 6, true},
	    {"notes.txt", "plain", 5, true},
	    {"notes.txt", "bin\0ary", 7, false},
	    {"run.sh", "#!/bin/sh", 9, false},
	    {".hidden.txt", "x", 1, false},
	    {"a/b.txt", "x", 1, false},
	    {"noext", "x", 1, false},
	};
	struct kzp_res r;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_msg((kzp_output_check(rows[i].name, "pdf,pptx,txt",
		                   (const unsigned char *)rows[i].head,
		                   rows[i].len, &r) == 0) == rows[i].ok,
		    "row %zu", i);
}
END_TEST

START_TEST(snapshot_tamper)
{
	cJSON *view = cJSON_Parse(V_PRIV), *snap = NULL, *scope = NULL;
	struct kzp_turn t = {.mh = "A",
	    .rh = "R",
	    .turn = "t1",
	    .capability = "code"};
	struct kzp_res r = {0};
	char md[KZP_SHA_HEX + 1];
	cJSON *it;

	ck_assert_int_eq(kzp_admit_decide(view, &t, &B, &snap, &scope, &r), 0);
	ck_assert_int_eq(kzp_snap_check(snap, &r), 0);
	it = cJSON_GetArrayItem(kz_json_get(snap, "items"), 0);
	cJSON_ReplaceItemInObject(it, "path", cJSON_CreateString("../x"));
	ck_assert_int_ne(kzp_snap_check(snap, &r), 0);
	cJSON_ReplaceItemInObject(it, "path", cJSON_CreateString("other"));
	ck_assert_int_ne(kzp_snap_check(snap, &r), 0);
	/* Digests that hold prove nothing when a path cannot be written. */
	cJSON_ReplaceItemInObject(it, "path", cJSON_CreateString("d1.txt/x"));
	kzp_manifest_digest(kz_json_get(snap, "items"), md);
	cJSON_ReplaceItemInObject(snap, "manifest_digest",
	    cJSON_CreateString(md));
	ck_assert_int_ne(kzp_snap_check(snap, &r), 0);
	cJSON_ReplaceItemInObject(it, "path", cJSON_CreateString("d0.txt"));
	kzp_manifest_digest(kz_json_get(snap, "items"), md);
	cJSON_ReplaceItemInObject(snap, "manifest_digest",
	    cJSON_CreateString(md));
	ck_assert_int_eq(kzp_snap_check(snap, &r), 0);
	cJSON_Delete(view);
	cJSON_Delete(snap);
	cJSON_Delete(scope);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-project admit");
	TCase *tc = tcase_create("policy");

	if (sodium_init() < 0)
		return 1;
	tcase_add_loop_test(tc, admit_table, 0,
	    sizeof(acases) / sizeof(acases[0]));
	tcase_add_loop_test(tc, place_table, 0,
	    sizeof(pcases) / sizeof(pcases[0]));
	tcase_add_test(tc, selection_clash);
	tcase_add_test(tc, verify_rules);
	tcase_add_test(tc, can_read_predicate);
	tcase_add_test(tc, output_types);
	tcase_add_test(tc, snapshot_tamper);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
