/*
 * The run step of kz-run's job (dispatch.c): the dispatch record, held
 * by the audit sink before the code may start, the run op on the leased
 * worker, the code's output to the caller, and the closing dispatch
 * record or the denial of a run that was refused or failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "run.h"
#include "banned.h"

/* The code's output, decoded: a malloc'd buffer (NULL when empty). */
static unsigned char *
decode(const char *b64, size_t *len)
{
	size_t cap;
	unsigned char *b;

	*len = 0;
	if (b64 == NULL || *b64 == '\0')
		return NULL;
	cap = strlen(b64) / 4 * 3 + 3;
	if ((b = malloc(cap)) == NULL)
		return NULL;
	if (sodium_base642bin(b, cap, b64, strlen(b64), NULL, len, NULL,
	        sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(b);
		*len = 0;
		return NULL;
	}
	return b;
}

/*
 * Stream i of the code's output: written raw to the caller (kz-run's
 * own stdout or stderr) unless --json, and its last RUN_TAIL_MAX bytes
 * kept for the model projection.
 */
static void
output(const struct run_ctx *x, int i, const char *b64)
{
	struct run_result *r = x->res;
	size_t len, keep;
	unsigned char *b = decode(b64, &len);

	if (b == NULL)
		return;
	if (!x->o->json)
		(void)!kz_write_full(i + 1, b, len, kz_now_ms() + 30000);
	keep = len < RUN_TAIL_MAX ? len : RUN_TAIL_MAX;
	if ((r->tail[i] = malloc(keep + 1)) != NULL) {
		memcpy(r->tail[i], b + len - keep, keep);
		r->tail[i][keep] = '\0';
		r->tail_len[i] = keep;
	}
	free(b);
}

/* The worker refused or failed the run, or did not answer: unless that
 * was its lease ending, a denial. */
static int
run_failed(const struct run_ctx *x, struct run_lease *l, int e,
    const cJSON *rep)
{
	const char *code = e != 0 ? KZ_WE_UNAVAILABLE : run_str(rep, "error");

	if (l->lost || (e != 0 && run_lease_keep(x, l, true) != 0))
		return KZ_EXIT_UNAVAIL;
	fprintf(stderr, "kz-run: run: %s: %s\n", code ? code : KZ_WE_INTERNAL,
	    e != 0                     ? "the worker did not answer" :
	        run_str(rep, "reason") ? run_str(rep, "reason") :
	                                 "");
	run_denied(x, "isolation_denial", "run", code ? code : KZ_WE_INTERNAL,
	    "the worker refused or failed the run");
	return code && strcmp(code, KZ_WE_BAD_REQUEST) == 0 ? KZ_EXIT_USAGE :
	                                                      KZ_EXIT_UNAVAIL;
}

/* The code's output and the closing dispatch record. */
static int
run_done(const struct run_ctx *x, struct run_lease *l, struct exec *ex,
    const cJSON *rep)
{
	const cJSON *v;
	const char *limit = run_str(rep, "limit");
	int st = -1, sig = 0, rc;
	cJSON *ev;

	output(x, 0, run_str(rep, "stdout_b64"));
	output(x, 1, run_str(rep, "stderr_b64"));
	if (cJSON_IsNumber(v = kz_json_get(rep, "exit_code")))
		st = v->valueint;
	if (cJSON_IsNumber(v = kz_json_get(rep, "signal")))
		sig = v->valueint;
	x->res->ran = true;
	x->res->exit_status = st;
	x->res->signal = sig;
	snprintf(x->res->limit, sizeof(x->res->limit), "%s",
	    limit != NULL ? limit : "");
	rc = limit != NULL ? KZ_EXIT_REFUSED :
	    st >= 0        ? st :
	    sig > 0        ? 128 + sig :
	                     KZ_EXIT_INTERNAL;
	if ((ev = run_lease_ev(l)) != NULL) {
		cJSON_AddNumberToObject(ev, "exit_status", st);
		cJSON_AddNumberToObject(ev, "signal", sig);
		cJSON_AddNumberToObject(ev, "duration_ms", (double)ex->ms);
		cJSON_AddStringToObject(ev, "egress",
		    *ex->grant ? "granted" : "none");
		cJSON_AddStringToObject(ev, "packages",
		    *ex->broker_token ? "broker" : "none");
		cJSON_AddStringToObject(ev, "outcome",
		    limit ? limit : "exited");
		l->result = ev;
	}
	if (limit != NULL)
		fprintf(stderr, "kz-run: stopped by the %s limit\n", limit);
	ex->ran = true;
	return rc;
}

/* The dispatch record, sent: its run_audit ticket. */
int
run_dispatch_started(const struct run_ctx *x, const struct run_lease *l,
    const struct exec *ex)
{
	cJSON *ev = run_lease_ev(l);

	if (ev != NULL) {
		cJSON_AddStringToObject(ev, "egress",
		    *ex->grant ? "granted" : "none");
		cJSON_AddStringToObject(ev, "packages",
		    *ex->broker_token ? "broker" : "none");
		cJSON_AddStringToObject(ev, "outcome", "started");
	}
	return run_audit(x, "dispatch", ev);
}

/* Dispatch record, the run, its outputs and the result record. */
int
run_exec(const struct run_ctx *x, struct run_lease *l, struct exec *ex)
{
	cJSON *req = run_request("run", x->rid), *rep = NULL, *a;
	char why[160] = "";
	int64_t t0 = kz_now_ms();
	int i, e, rc = KZ_EXIT_INTERNAL;

	if (req == NULL)
		goto out;
	/* No record, no run: the audit sink must hold the dispatch first
	 * (the lease record, sent at the grant, shares its fsync). */
	if (run_audit_wait(x,
	        ex->recorded ? ex->ticket : run_dispatch_started(x, l, ex)) !=
	    0) {
		fprintf(stderr,
		    "kz-run: the audit sink %s did not record "
		    "the dispatch; nothing ran\n",
		    x->c->audit_sock);
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	a = cJSON_AddArrayToObject(req, "argv");
	for (i = 0; i < x->o->argc; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(x->o->argv[i]));
	if (*ex->grant)
		cJSON_AddStringToObject(req, "grant", ex->grant);
	if (*ex->broker_token)
		cJSON_AddStringToObject(req, "broker_token", ex->broker_token);
	e = run_worker_call(x, l, req, x->c->timeout_ms + 15000, &ex->sent,
	    &rep, why, sizeof(why));
	ex->ms = kz_now_ms() - t0;
	if (*ex->grant)
		cJSON_DeleteItemFromObjectCaseSensitive(req, "grant");
	cJSON_DeleteItemFromObjectCaseSensitive(req, "broker_token");
	if (e != 0 || !cJSON_IsTrue(kz_json_get(rep, "ok")))
		rc = run_failed(x, l, e, rep);
	else
		rc = run_done(x, l, ex, rep);
out:
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return rc;
}
