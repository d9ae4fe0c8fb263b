/*
 * The verdict (reasons, bounded diagnostics) and the projection of the
 * child's observation into the receipt body.  The observation is
 * untrusted: only short strings in bounded lists are copied, and every
 * registration kz does not support is listed and fails the validation.
 */
#include <stdio.h>
#include <string.h>

#include "kz_json.h"
#include "pv.h"
#include "banned.h"

#define NAME_MAX_LEN 128
#define LIST_MAX 64

void
pv_reason(struct pv_verdict *v, const char *what, const char *detail)
{
	char b[PV_DIAG_LEN];

	snprintf(b, sizeof(b), "%s%.200s", what, detail);
	if (kz_utf8_valid(b, strlen(b)))
		cJSON_AddItemToArray(v->reasons, cJSON_CreateString(b));
	v->failed = true;
}

void
pv_diag(struct pv_verdict *v, const char *s)
{
	char b[PV_DIAG_LEN];

	if (cJSON_GetArraySize(v->diags) >= PV_DIAG_MAX)
		return;
	snprintf(b, sizeof(b), "%s", s);
	/* A cut may split a character: drop its bytes, not the line. */
	for (size_t n = strlen(b), k = 0;
	     k < 4 && n > 0 && !kz_utf8_valid(b, n); k++)
		b[--n] = '\0';
	if (!kz_utf8_valid(b, strlen(b)))
		return;
	cJSON_AddItemToArray(v->diags, cJSON_CreateString(b));
}

static bool
short_str(const cJSON *e)
{
	return cJSON_IsString(e) && strlen(e->valuestring) <= NAME_MAX_LEN &&
	    kz_utf8_valid(e->valuestring, strlen(e->valuestring));
}

/* Copies a list of short strings from the untrusted observation. */
static cJSON *
bounded_list(struct pv_verdict *v, const cJSON *src)
{
	cJSON *a = cJSON_CreateArray(), *e;
	int n = 0;

	cJSON_ArrayForEach(e, src)
	{
		if (!short_str(e) || ++n > LIST_MAX) {
			pv_diag(v, "observation list truncated");
			break;
		}
		cJSON_AddItemToArray(a, cJSON_CreateString(e->valuestring));
	}
	return a;
}

static void
unsupported(struct pv_verdict *v, cJSON *un, const char *path, const char *kind,
    const cJSON *names)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, names)
	{
		cJSON *u;

		if (!short_str(e) || cJSON_GetArraySize(un) >= LIST_MAX)
			continue;
		if (strcmp(kind, "handler") == 0 &&
		    pv_event_supported(e->valuestring))
			continue;
		u = cJSON_CreateObject();
		cJSON_AddStringToObject(u, "extension", path);
		cJSON_AddStringToObject(u, "kind", kind);
		cJSON_AddStringToObject(u, "name", e->valuestring);
		cJSON_AddItemToArray(un, u);
		v->failed = true;
	}
}

static void
project_ext(struct pv_verdict *v, cJSON *exts, cJSON *un, const cJSON *x)
{
	static const char *const other[] = {"flags", "shortcuts", "renderers",
	    NULL};
	static const char *const kind[] = {"flag", "shortcut", "renderer"};
	const cJSON *p = kz_json_get(x, "path"), *e;
	const char *path = short_str(p) ? p->valuestring : "?";
	cJSON *o = cJSON_CreateObject(), *hooks = cJSON_CreateArray();

	cJSON_AddStringToObject(o, "path", path);
	cJSON_AddItemToObject(o, "tools",
	    bounded_list(v, kz_json_get(x, "tools")));
	cJSON_AddItemToObject(o, "commands",
	    bounded_list(v, kz_json_get(x, "commands")));
	cJSON_ArrayForEach(e, kz_json_get(x, "handlers")) if (short_str(e) &&
	    pv_event_supported(e->valuestring))
	    cJSON_AddItemToArray(hooks, cJSON_CreateString(e->valuestring));
	cJSON_AddItemToObject(o, "hooks", hooks);
	cJSON_AddItemToArray(exts, o);
	unsupported(v, un, path, "handler", kz_json_get(x, "handlers"));
	for (int i = 0; other[i] != NULL; i++)
		unsupported(v, un, path, kind[i], kz_json_get(x, other[i]));
}

static void
project_skills(cJSON *sk, const cJSON *obs)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, kz_json_get(obs, "skills"))
	{
		const cJSON *name = kz_json_get(e, "name");

		if (short_str(name) && cJSON_GetArraySize(sk) < LIST_MAX)
			cJSON_AddItemToArray(sk,
			    cJSON_CreateString(name->valuestring));
	}
}

void
pv_project(struct pv_verdict *v, cJSON *body, enum pv_kind kind,
    const cJSON *obs)
{
	cJSON *s = cJSON_AddObjectToObject(body, "surface");
	cJSON *un = cJSON_AddArrayToObject(body, "unsupported");
	cJSON *exts = cJSON_AddArrayToObject(s, "extensions");
	cJSON *sk = cJSON_AddArrayToObject(s, "skills");
	const cJSON *e;

	project_skills(sk, obs);
	cJSON_ArrayForEach(e,
	    kz_json_get(obs, "extensions")) if (cJSON_IsObject(e) &&
	    cJSON_GetArraySize(exts) < LIST_MAX) project_ext(v, exts, un, e);
	unsupported(v, un, "*", "provider", kz_json_get(obs, "providers"));
	if (cJSON_GetArraySize(un) > 0)
		pv_reason(v, "the extension registers what kz does not support",
		    "");
	cJSON_ArrayForEach(e,
	    kz_json_get(obs, "skill_diagnostics")) if (cJSON_IsString(e))
	    pv_diag(v, e->valuestring);
	cJSON_ArrayForEach(e, kz_json_get(obs, "errors")) if (cJSON_IsString(e))
	{
		pv_diag(v, e->valuestring);
		pv_reason(v, "the Pi loader reported an error", "");
	}
	if (kind == PV_SKILL && cJSON_GetArraySize(sk) == 0)
		pv_reason(v, "the Pi skill loader found no skill", "");
}
