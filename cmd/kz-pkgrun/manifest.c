/*
 * The reviewed manifest and the closed collaboration policy.
 *
 * A manifest is strict JSON: {"name", "version"?, "tools": [...]}, each tool
 * {"name", "command": [rooted path inside the package, literal args...],
 * "class"?, "runs_code"?, "description"?}.  Any other field, a malformed
 * name or command, or a duplicate tool refuses the whole manifest at
 * admission: a reviewer signed off on exactly this text.  A tool whose class
 * is missing or not one of PR_CLASSES is kept but absent: it is never
 * listed and never callable, and asking for it gets the same answer as
 * asking for a tool that does not exist.  A tool that runs arbitrary code
 * (runs_code) may only be private_only; a manifest that says otherwise is
 * refused, so no review slip can make a shell shared-room safe.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_json.h"
#include "kz_path.h"
#include "pkgrun.h"
#include "banned.h"

static const struct {
	const char *name;
	bool shared, files;
} classes[] = {
#define PR_CLASS_ROW_(n, w, s, f) {w, s, f},
    PR_CLASSES(PR_CLASS_ROW_)
#undef PR_CLASS_ROW_
};

enum pr_class
pr_class_parse(const char *s)
{
	for (int i = 0; s != NULL && i < PR_CLASS_COUNT_; i++)
		if (strcmp(s, classes[i].name) == 0)
			return (enum pr_class)i;
	return PR_CLASS_NONE;
}

const char *
pr_class_name(enum pr_class c)
{
	return c >= 0 && c < PR_CLASS_COUNT_ ? classes[c].name : "none";
}

bool
pr_class_shared(enum pr_class c)
{
	return c >= 0 && c < PR_CLASS_COUNT_ && classes[c].shared;
}

bool
pr_class_files(enum pr_class c)
{
	return c >= 0 && c < PR_CLASS_COUNT_ && classes[c].files;
}

static bool
tool_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PR_TOOL_NAME_MAX || s[0] == '.' || s[0] == '-')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static int
parse_command(const cJSON *cmd, struct pr_tool *t, char *why, size_t wlen)
{
	const cJSON *a;
	int n = 0;

	if (!cJSON_IsArray(cmd) || cJSON_GetArraySize(cmd) < 1 ||
	    cJSON_GetArraySize(cmd) > PR_CMD_ARGS_MAX) {
		kz_why(why, wlen,
		    "tool %s: command must be an array of 1 to "
		    "%d strings",
		    t->name, PR_CMD_ARGS_MAX);
		return KZ_EINVAL;
	}
	cJSON_ArrayForEach(a, cmd)
	{
		if (!cJSON_IsString(a) || a->valuestring[0] == '\0' ||
		    strlen(a->valuestring) > PR_ARG_BYTES) {
			kz_why(why, wlen,
			    "tool %s: command[%d] is not a "
			    "non-empty string",
			    t->name, n);
			return KZ_EINVAL;
		}
		t->argv[n++] = a->valuestring;
	}
	t->argv[n] = NULL;
	t->argc = n;
	if (kz_path_check(t->argv[0], strlen(t->argv[0]), NULL, 0) != 0) {
		kz_why(why, wlen,
		    "tool %s: command[0] is not a rooted path "
		    "inside the package",
		    t->name);
		return KZ_EINVAL;
	}
	return 0;
}

static int
parse_tool(const cJSON *o, struct pr_tool *t, char *why, size_t wlen)
{
	static const char *const fields[] = {"name", "command", "class",
	    "runs_code", "description", NULL};
	const char *name, *cls, *desc;
	int r;

	memset(t, 0, sizeof(*t));
	if (!cJSON_IsObject(o)) {
		kz_why(why, wlen, "a tool is not an object");
		return KZ_EINVAL;
	}
	if ((r = kz_json_only(o, fields, why, wlen)) != 0 ||
	    (r = kz_json_str(o, "name", PR_TOOL_NAME_MAX, &name, why, wlen)) !=
	        0)
		return r;
	if (!tool_name_ok(name)) {
		kz_why(why, wlen, "a tool name must be 1-%d of [a-z0-9_.-]",
		    PR_TOOL_NAME_MAX);
		return KZ_EINVAL;
	}
	snprintf(t->name, sizeof(t->name), "%s", name);
	/* A class of the wrong type is as unknown as a misspelt one. */
	cls = cJSON_IsString(kz_json_get(o, "class")) ?
	    kz_json_get(o, "class")->valuestring :
	    NULL;
	t->cls = pr_class_parse(cls);
	if ((r = kz_json_bool_opt(o, "runs_code", false, &t->runs_code, why,
	         wlen)) != 0 ||
	    (r = kz_json_str_opt(o, "description", 256, "", &desc, why,
	         wlen)) != 0 ||
	    (r = parse_command(kz_json_get(o, "command"), t, why, wlen)) != 0)
		return r;
	if (t->runs_code && t->cls != PR_CLASS_PRIVATE_ONLY &&
	    t->cls != PR_CLASS_NONE) {
		kz_why(why, wlen,
		    "tool %s runs arbitrary code: its class can "
		    "only be private_only",
		    t->name);
		return KZ_EINVAL;
	}
	return 0;
}

static int
parse_tools(const cJSON *tools, struct pr_manifest *m, char *why, size_t wlen)
{
	const cJSON *o;
	int r;

	if (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) > PR_TOOLS_MAX) {
		kz_why(why, wlen, "tools must be an array of at most %d tools",
		    PR_TOOLS_MAX);
		return KZ_EINVAL;
	}
	cJSON_ArrayForEach(o, tools)
	{
		struct pr_tool *t = &m->tools[m->ntools];

		if ((r = parse_tool(o, t, why, wlen)) != 0)
			return r;
		for (int i = 0; i < m->ntools; i++)
			if (strcmp(m->tools[i].name, t->name) == 0) {
				kz_why(why, wlen, "tool %s is listed twice",
				    t->name);
				return KZ_EINVAL;
			}
		m->ntools++;
	}
	return 0;
}

int
pr_manifest_parse(const char *buf, size_t len, struct pr_manifest *m, char *why,
    size_t wlen)
{
	static const char *const fields[] = {"name", "version", "tools", NULL};
	const char *s;
	int r;

	memset(m, 0, sizeof(*m));
	if (len > PR_MANIFEST_MAX) {
		kz_why(why, wlen, "the manifest is larger than %d bytes",
		    PR_MANIFEST_MAX);
		return KZ_ETOOBIG;
	}
	if ((r = kz_json_parse_object(buf, len, &m->json, why, wlen)) != 0)
		return r;
	if ((r = kz_json_only(m->json, fields, why, wlen)) != 0 ||
	    (r = kz_json_str(m->json, "name", 64, &s, why, wlen)) != 0 ||
	    (r = kz_json_str_opt(m->json, "version", 64, "", &s, why, wlen)) !=
	        0 ||
	    (r = parse_tools(kz_json_get(m->json, "tools"), m, why, wlen)) != 0)
		pr_manifest_release(m);
	return r;
}

void
pr_manifest_release(struct pr_manifest *m)
{
	cJSON_Delete(m->json);
	memset(m, 0, sizeof(*m));
}

int
pr_manifest_check_tree(const struct pr_manifest *m, int pkgfd, char *why,
    size_t wlen)
{
	for (int i = 0; i < m->ntools; i++) {
		const struct pr_tool *t = &m->tools[i];
		struct stat st;
		int fd, r;

		if (t->cls == PR_CLASS_NONE)
			continue;
		r = kz_path_open(pkgfd, t->argv[0], strlen(t->argv[0]),
		    KZ_PATH_FILE, &fd, NULL, 0);
		if (r == 0 && (fstat(fd, &st) != 0 || !(st.st_mode & S_IXUSR)))
			r = KZ_EPATH_NOTREG;
		if (r == 0)
			close(fd);
		else {
			kz_why(why, wlen,
			    "tool %s: its command is not an "
			    "executable file of the package",
			    t->name);
			return KZ_EINVAL;
		}
	}
	return 0;
}

const struct pr_tool *
pr_manifest_tool(const struct pr_manifest *m, const char *name)
{
	for (int i = 0; i < m->ntools; i++)
		if (m->tools[i].cls != PR_CLASS_NONE &&
		    strcmp(m->tools[i].name, name) == 0)
			return &m->tools[i];
	return NULL;
}

int
pr_tool_allowed(const struct pr_tool *t, bool shared, int nfiles, char *why,
    size_t wlen)
{
	if (shared && (!pr_class_shared(t->cls) || t->runs_code)) {
		kz_why(why, wlen, "tool %s is not available in a shared room",
		    t->name);
		return KZ_EDENIED;
	}
	if (nfiles > 0 && !pr_class_files(t->cls)) {
		kz_why(why, wlen, "tool %s (%s) takes no member files", t->name,
		    pr_class_name(t->cls));
		return KZ_EDENIED;
	}
	return 0;
}
