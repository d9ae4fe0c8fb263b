/*
 * kz-pi-validate project.c: the untrusted observation projected into the
 * receipt body: supported hooks, every unsupported registration, bounds on
 * names and lists, loader errors, and bounded diagnostics.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "pv.h"
#include "kz_check.h"
#include "banned.h"

static cJSON *body;
static struct pv_verdict v;

static void
setup(void)
{
	body = cJSON_CreateObject();
	memset(&v, 0, sizeof(v));
	v.reasons = cJSON_AddArrayToObject(body, "reasons");
	v.diags = cJSON_AddArrayToObject(body, "diagnostics");
}

static void
teardown(void)
{
	cJSON_Delete(body);
}

static void
project(enum pv_kind kind, const char *json)
{
	cJSON *obs = cJSON_Parse(json);

	ck_assert_ptr_nonnull(obs);
	pv_project(&v, body, kind, obs);
	cJSON_Delete(obs);
}

static char *
at(const char *a, const char *b, int i)
{
	static char out[512];
	const cJSON *x = kz_json_get(body, a);
	char *p;

	if (b != NULL)
		x = kz_json_get(x, b);
	if (i >= 0)
		x = cJSON_GetArrayItem(x, i);
	p = cJSON_PrintUnformatted(x);
	snprintf(out, sizeof(out), "%s", p ? p : "(null)");
	free(p);
	return out;
}

START_TEST(test_supported)
{
	project(PV_EXTENSION,
	    "{\"extensions\":[{\"path\":\"e.js\","
	    "\"tools\":[\"t\"],\"commands\":[\"c\"],\"handlers\":"
	    "[\"tool_call\",\"session_start\"],\"flags\":[],\"shortcuts\":[],"
	    "\"renderers\":[]}],\"providers\":[],\"errors\":[]}");
	ck_assert(!v.failed);
	ck_assert_str_eq(at("surface", "extensions", 0),
	    "{\"path\":\"e.js\","
	    "\"tools\":[\"t\"],\"commands\":[\"c\"],\"hooks\":[\"tool_call\","
	    "\"session_start\"]}");
	ck_assert_str_eq(at("unsupported", NULL, -1), "[]");
}
END_TEST

START_TEST(test_unsupported)
{
	project(PV_EXTENSION,
	    "{\"extensions\":[{\"path\":\"e.js\","
	    "\"tools\":[\"t\"],\"handlers\":[\"tool_call\",\"bogus\"],"
	    "\"flags\":[\"turbo\"],\"shortcuts\":[\"ctrl+k\"],"
	    "\"renderers\":[\"r\"]}],\"providers\":[\"shadow\"]}");
	ck_assert(v.failed);
	ck_assert_str_eq(at("surface", "extensions", 0),
	    "{\"path\":\"e.js\","
	    "\"tools\":[\"t\"],\"commands\":[],\"hooks\":[\"tool_call\"]}");
	ck_assert_str_eq(at("unsupported", NULL, -1),
	    "[{\"extension\":\"e.js\",\"kind\":\"handler\",\"name\":\"bogus\"},"
	    "{\"extension\":\"e.js\",\"kind\":\"flag\",\"name\":\"turbo\"},"
	    "{\"extension\":\"e.js\",\"kind\":\"shortcut\",\"name\":\"ctrl+k\"}"
	    ",{\"extension\":\"e.js\",\"kind\":\"renderer\",\"name\":\"r\"},"
	    "{\"extension\":\"*\",\"kind\":\"provider\",\"name\":\"shadow\"}]");
	ck_assert_str_eq(at("reasons", NULL, 0),
	    "\"the extension registers "
	    "what kz does not support\"");
}
END_TEST

/* Long names, non-strings and long lists are not copied into a receipt. */
START_TEST(test_bounds)
{
	char json[16384], name[200];
	size_t n;

	memset(name, 'a', 129);
	name[129] = '\0';
	n = (size_t)snprintf(json, sizeof(json),
	    "{\"extensions\":[{\"path\":\"%s\",\"tools\":[", name);
	for (int i = 0; i < 70; i++)
		n += (size_t)snprintf(json + n, sizeof(json) - n, "%s\"t%d\"",
		    i ? "," : "", i);
	snprintf(json + n, sizeof(json) - n,
	    "],\"commands\":[1,\"c\"],\"handlers\":[\"%s\"]}]}", name);
	project(PV_EXTENSION, json);
	ck_assert_int_eq(cJSON_GetArraySize(kz_json_get(
	                     cJSON_GetArrayItem(kz_json_get(kz_json_get(body,
	                                                        "surface"),
	                                            "extensions"),
	                         0),
	                     "tools")),
	    64);
	ck_assert_ptr_nonnull(
	    strstr(at("surface", "extensions", 0), "\"path\":\"?\""));
	ck_assert_ptr_nonnull(
	    strstr(at("surface", "extensions", 0), "\"commands\":[]"));
	/* an over-long handler name is neither a hook nor listed */
	ck_assert_str_eq(at("unsupported", NULL, -1), "[]");
	ck_assert_ptr_nonnull(strstr(at("diagnostics", NULL, -1), "truncated"));
}
END_TEST

START_TEST(test_errors_and_skills)
{
	project(PV_SKILL,
	    "{\"skills\":[],\"skill_diagnostics\":[\"warning: "
	    "x\"],\"errors\":[\"skill loader: boom\"]}");
	ck_assert(v.failed);
	ck_assert_str_eq(at("reasons", NULL, -1),
	    "[\"the Pi loader reported "
	    "an error\",\"the Pi skill loader found no skill\"]");
	ck_assert_str_eq(at("diagnostics", NULL, -1),
	    "[\"warning: x\",\"skill loader: boom\"]");
}
END_TEST

START_TEST(test_skills)
{
	project(PV_SKILL,
	    "{\"skills\":[{\"name\":\"hello\",\"file\":\"x\"},"
	    "{\"name\":7},{\"nope\":1}]}");
	ck_assert(!v.failed);
	ck_assert_str_eq(at("surface", "skills", -1), "[\"hello\"]");
}
END_TEST

/* Diagnostics: at most PV_DIAG_MAX, each cut at a character boundary. */
START_TEST(test_diag_bounds)
{
	char s[600];

	memset(s, 0, sizeof(s));
	for (size_t i = 0; i + 2 < 500; i += 2)
		memcpy(s + i, "\xc3\xa9", 2);
	for (int i = 0; i < 40; i++)
		pv_diag(&v, s);
	ck_assert_int_eq(cJSON_GetArraySize(v.diags), PV_DIAG_MAX);
	ck_assert_uint_lt(strlen(cJSON_GetArrayItem(v.diags, 0)->valuestring),
	    PV_DIAG_LEN);
	pv_diag(&v, "\xff");
	ck_assert(!v.failed);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pv_project");
	TCase *tc = tcase_create("project");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_supported);
	tcase_add_test(tc, test_unsupported);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_errors_and_skills);
	tcase_add_test(tc, test_skills);
	tcase_add_test(tc, test_diag_bounds);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
