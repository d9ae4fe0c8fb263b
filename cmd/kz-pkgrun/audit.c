/*
 * Audit records of kind "package" (kz-audit(8)): which package (its
 * content hash), which tool and class, in a shared room or not, how many
 * member files, the outcome, and the actor and conversation, which the
 * sink stores only as keyed hashes (the runner holds no key to hash them
 * itself).  Never an argument, a file name, file bytes or output.
 */
#include <stdio.h>
#include <string.h>

#include "kz_audit.h"
#include "kz_log.h"
#include "pkgrun.h"
#include "banned.h"

static int
send(const struct pr_conf *c, cJSON *ev)
{
	char why[160] = "";
	int r;

	if (ev == NULL)
		return KZ_ENOMEM;
	r = kz_audit_send(c->audit_sock, "package", ev, KZ_AUDIT_TIMEOUT_MS,
	    why, sizeof(why));
	cJSON_Delete(ev);
	if (r != 0)
		kz_log(KZ_LOG_WARN, "pkgrun.audit", r, why, NULL);
	return r;
}

/* The reason, when it is one of ours: no path ever reaches it. */
static void
add_reason(cJSON *ev, const char *why)
{
	if (why[0] != '\0' && strchr(why, '/') == NULL)
		cJSON_AddStringToObject(ev, "reason", why);
}

int
pr_audit(const struct pr_conf *c, const struct pr_inv *iv,
    const struct pr_result *res, const char *outcome, const char *stage)
{
	cJSON *ev;

	if (c->audit_sock[0] == '\0')
		return 0;
	if ((ev = cJSON_CreateObject()) == NULL)
		return KZ_ENOMEM;
	cJSON_AddStringToObject(ev, "action", "invoke");
	cJSON_AddStringToObject(ev, "outcome", outcome);
	cJSON_AddStringToObject(ev, "stage", stage);
	/* Only what passed the request's grammar is named. */
	if (res->wire == NULL || strcmp(res->wire, "bad_request") != 0) {
		cJSON_AddStringToObject(ev, "package_hash", iv->package);
		cJSON_AddStringToObject(ev, "tool", iv->tool);
		cJSON_AddStringToObject(ev, "actor", iv->actor);
		cJSON_AddStringToObject(ev, "conversation", iv->conversation);
	}
	cJSON_AddStringToObject(ev, "class", res->cls ? res->cls : "none");
	cJSON_AddBoolToObject(ev, "shared", iv->room != NULL);
	cJSON_AddNumberToObject(ev, "files", iv->nfiles);
	if (iv->rid != NULL)
		cJSON_AddStringToObject(ev, "rid", iv->rid);
	if (strcmp(stage, "done") == 0) {
		cJSON_AddNumberToObject(ev, "exit_status", res->exit_status);
		if (res->sig > 0)
			cJSON_AddNumberToObject(ev, "signal", res->sig);
		cJSON_AddNumberToObject(ev, "duration_ms", (double)res->ms);
	}
	if (res->wire != NULL) {
		cJSON_AddStringToObject(ev, "error", res->wire);
		add_reason(ev, res->why);
	}
	return send(c, ev);
}

int
pr_audit_admit(const struct pr_conf *c, const char *hex, const char *outcome,
    const char *reason, char *why, size_t wlen)
{
	cJSON *ev;
	int r;

	if (c->audit_sock[0] == '\0')
		return 0;
	if ((ev = cJSON_CreateObject()) == NULL)
		return KZ_ENOMEM;
	cJSON_AddStringToObject(ev, "action", "admit");
	cJSON_AddStringToObject(ev, "outcome", outcome);
	if (hex != NULL && pr_hash_hex_ok(hex))
		cJSON_AddStringToObject(ev, "package_hash", hex);
	if (reason != NULL)
		add_reason(ev, reason);
	if ((r = send(c, ev)) != 0)
		kz_why(why, wlen, "the audit sink is unavailable");
	return r;
}
