/*
 * The one run op of a taken warm worker (warm.c), its reply mapped to
 * what a one-shot's run gives (exec.c's pr_exec_out), so that invoke.c
 * treats both paths alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_call.h"
#include "kz_json.h"
#include "pkgrun.h"
#include "banned.h"

/* The run op: the tool's argv and environment, the runner's timeout and
 * output bounds, and the grant when the invocation carries one. */
static cJSON *
run_req(const struct pr_conf *c, const struct pr_exec *x, const char *grant,
    const char *rid)
{
	cJSON *req = cJSON_CreateObject(), *a, *e;
	bool okk;

	if (req == NULL)
		return NULL;
	okk = cJSON_AddNumberToObject(req, "v", 1) &&
	    cJSON_AddStringToObject(req, "op", "run") &&
	    cJSON_AddStringToObject(req, "id", rid ? rid : "pkgrun") &&
	    (a = cJSON_AddArrayToObject(req, "argv")) != NULL &&
	    (e = cJSON_AddObjectToObject(req, "env")) != NULL &&
	    cJSON_AddNumberToObject(req, "timeout_ms",
	        (double)(c->timeout_s * 1000)) &&
	    cJSON_AddNumberToObject(req, "stdout_max", (double)c->result_max) &&
	    cJSON_AddNumberToObject(req, "stderr_max", (double)c->result_max) &&
	    (grant == NULL || cJSON_AddStringToObject(req, "grant", grant));
	for (int i = 0; okk && x->argv[i] != NULL; i++)
		okk = cJSON_AddItemToArray(a, cJSON_CreateString(x->argv[i]));
	for (int i = 0; okk && x->env[i] != NULL; i++) {
		const char *eq = strchr(x->env[i], '=');
		char name[64];

		if (eq == NULL || (size_t)(eq - x->env[i]) >= sizeof(name))
			okk = false;
		else {
			snprintf(name, sizeof(name), "%.*s",
			    (int)(eq - x->env[i]), x->env[i]);
			okk = cJSON_AddStringToObject(e, name, eq + 1) != NULL;
		}
	}
	if (!okk) {
		cJSON_Delete(req);
		return NULL;
	}
	return req;
}

/* A base64 field of the reply into a new buffer of at most max bytes. */
static int
b64_field(const cJSON *rep, const char *key, size_t max, char **out,
    size_t *len, bool *cut)
{
	const char *s = cJSON_GetStringValue(kz_json_get(rep, key));
	size_t cap, n = 0;

	*out = NULL, *len = 0;
	if (s == NULL)
		return KZ_EPROTO;
	cap = strlen(s) / 4 * 3 + 3;
	if ((*out = malloc(cap + 1)) == NULL)
		return KZ_ENOMEM;
	if (sodium_base642bin((unsigned char *)*out, cap, s, strlen(s), NULL,
	        &n, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(*out), *out = NULL;
		return KZ_EPROTO;
	}
	if (n > max)
		n = max, *cut = true;
	*len = n;
	return 0;
}

/*
 * The reply in pr_exec_out's terms.  The exit status comes as a JSON
 * number from kz-sandbox, apart from its own errors, so a tool cannot
 * pass for a setup failure here either; a limit is a stop, not a status.
 */
int
pr_worker_reply(const struct pr_conf *c, const cJSON *rep,
    struct pr_exec_out *o, char *why, size_t wlen)
{
	const cJSON *ec = kz_json_get(rep, "exit_code"),
	            *sg = kz_json_get(rep, "signal");
	bool cut = false;
	int r;

	o->exit_status = -1;
	if (!cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		/* isolation_denied and the like: nothing ran. */
		o->setup_failed = true;
		return 0;
	}
	if ((r = b64_field(rep, "stdout_b64", c->result_max, &o->out,
	         &o->outlen, &o->truncated)) != 0 ||
	    (r = b64_field(rep, "stderr_b64", c->result_max, &o->err,
	         &o->errlen, &cut)) != 0)
		goto bad;
	o->truncated = o->truncated ||
	    cJSON_IsTrue(kz_json_get(rep, "stdout_truncated"));
	if (cJSON_GetStringValue(kz_json_get(rep, "limit")) != NULL)
		return 0; /* stopped at a limit */
	if (cJSON_IsNumber(ec) && ec->valuedouble >= 0 &&
	    ec->valuedouble <= 255 && ec->valuedouble == (int)ec->valuedouble)
		o->exit_status = (int)ec->valuedouble;
	else if (cJSON_IsNumber(sg) && sg->valuedouble > 0 &&
	    sg->valuedouble < 65 && sg->valuedouble == (int)sg->valuedouble)
		o->sig = (int)sg->valuedouble;
	else {
		r = KZ_EPROTO;
		goto bad;
	}
	return 0;
bad:
	kz_why(why, wlen, "the warm sandbox's reply is not valid");
	free(o->out);
	free(o->err);
	o->out = o->err = NULL;
	o->outlen = o->errlen = 0;
	return r;
}

int
pr_worker_run(const struct pr_conf *c, struct pr_worker *w,
    const struct pr_exec *x, const char *grant, const char *rid,
    struct pr_exec_out *o, char *why, size_t wlen)
{
	cJSON *req, *rep = NULL;
	int r;

	memset(o, 0, sizeof(*o));
	if ((req = run_req(c, x, grant, rid)) == NULL) {
		kz_why(why, wlen, "cannot build the run request");
		return KZ_ENOMEM;
	}
	/* kz-sandbox enforces the timeout itself; this is the backstop. */
	r = kz_frame_call(pr_worker_sock(w), req,
	    (int)(c->timeout_s + 15) * 1000, &rep, NULL, 0);
	if (grant != NULL) {
		cJSON *g = kz_json_get(req, "grant");

		sodium_memzero(g->valuestring, strlen(g->valuestring));
	}
	cJSON_Delete(req);
	if (r != 0) {
		/* The run op was sent: the tool may have run, so this is
		 * never retried on the one-shot. */
		kz_why(why, wlen, "the warm sandbox did not answer the run");
		return KZ_EUNAVAIL;
	}
	r = pr_worker_reply(c, rep, o, why, wlen);
	cJSON_Delete(rep);
	return r;
}
