/*
 * Audit records of a run.  Every record carries the raw actor and
 * conversation (the sink replaces them by keyed hashes before writing),
 * the capability, the run id, the manifest digest and, for a room's turn,
 * the admitted audience version, and nothing else
 * of the run: no output, no file names, no environment.
 */
#include <stdio.h>
#include <string.h>

#include "kz_audit.h"
#include "kz_conf.h"
#include "kz_log.h"
#include "run.h"
#include "banned.h"

int64_t
run_token_n(const char *token)
{
	const char *p = strchr(token, ':');
	int64_t v;

	return p != NULL && kz_parse_int(p + 1, 0, INT64_MAX / 2, &v) == 0 ?
	    v : 0;
}

int
run_audit(const struct run_ctx *x, const char *kind, cJSON *ev)
{
	char why[160] = "";
	int e;

	if (ev == NULL)
		return KZ_ENOMEM;
	if (x->c->audit_sock[0] == '\0') {
		cJSON_Delete(ev);
		return 0;
	}
	cJSON_AddStringToObject(ev, "actor", x->o->actor);
	cJSON_AddStringToObject(ev, "conversation", x->o->conv);
	/* The sink stores member_hash under the same keyed hash kz-project
	 * records as actor_hash: one member's turn can be followed across
	 * both services' records. */
	if (x->o->member != NULL)
		cJSON_AddStringToObject(ev, "member", x->o->member);
	cJSON_AddStringToObject(ev, "capability", x->o->cap);
	cJSON_AddStringToObject(ev, "rid", x->rid);
	if (x->manifest[0] != '\0')
		cJSON_AddStringToObject(ev, "manifest_digest", x->manifest);
	if (x->audience >= 0)
		cJSON_AddNumberToObject(ev, "audience_version",
		    (double)x->audience);
	e = kz_audit_send(x->c->audit_sock, kind, ev, KZ_AUDIT_TIMEOUT_MS,
	    why, sizeof(why));
	if (e != 0)
		kz_log(KZ_LOG_WARN, "audit.fail", e, why, "kind", kind, NULL);
	cJSON_Delete(ev);
	return e;
}
