/*
 * The two diagnostic projections of a run, printed as one JSON object on
 * stdout by --json (kz-run(1), JSON OUTPUT):
 *
 *   model    what the model may read to repair its own failed attempt:
 *            the last RUN_TAIL_MAX bytes of stdout and of stderr, the
 *            exit status, the signal and the limit that stopped it.  The
 *            optional compressor (RUN_COMPRESS_CMD) may shorten the two
 *            tails, and only them, once every other filter is done; when
 *            it fails the tails stay as they were.
 *   members  what the room's members may see: a status (succeeded,
 *            failed, timed_out, refused) and, for a refusal, its one
 *            line; never a byte of output.
 *
 * Declared outputs come back as the durable reference kz-project linked
 * and bounded metadata, never their bytes; their placeholders name the
 * call only by kz-project's run-bound room reference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "kz_json.h"
#include "kz_path.h"
#include "run.h"
#include "banned.h"

/* Bytes that are not valid UTF-8 (or NUL) become '?', so the tail is a
 * JSON string; a character the tail cut in half is dropped. */
static void
utf8_clean(char *s, size_t len)
{
	size_t i = 0, n, k;
	unsigned char c;

	while (i < len && ((unsigned char)s[i] & 0xc0) == 0x80)
		s[i++] = '?';
	while (i < len) {
		c = (unsigned char)s[i];
		n = c < 0x80                        ? 1 :
		    (c & 0xe0) == 0xc0 && c >= 0xc2 ? 2 :
		    (c & 0xf0) == 0xe0              ? 3 :
		    (c & 0xf8) == 0xf0 && c <= 0xf4 ? 4 :
		                                      0;
		for (k = 1; n > 1 && k < n; k++)
			if (i + k >= len ||
			    ((unsigned char)s[i + k] & 0xc0) != 0x80)
				n = 0;
		if (n == 0 || c == 0) {
			s[i++] = '?';
			continue;
		}
		i += n;
	}
}

/* One tail, compressed when a compressor is configured and succeeds. */
static void
tail(const struct run_ctx *x, cJSON *m, int i, const char *key,
    const char *ckey)
{
	struct run_result *r = x->res;
	char *t = r->tail[i], *out = NULL;
	size_t len = r->tail_len[i], olen = 0;
	bool done = false;

	if (t == NULL) {
		cJSON_AddStringToObject(m, key, "");
		cJSON_AddBoolToObject(m, ckey, false);
		return;
	}
	utf8_clean(t, len);
	if (x->c->compress_cmd[0] != '\0' &&
	    run_compress(x->c, t, len, &out, &olen) == 0 && out != NULL &&
	    olen < len) {
		out[olen] = '\0';
		utf8_clean(out, olen);
		cJSON_AddStringToObject(m, key, out);
		done = true;
	}
	if (!done)
		cJSON_AddStringToObject(m, key, t);
	cJSON_AddBoolToObject(m, ckey, done);
	free(out);
}

static void
model(const struct run_ctx *x, cJSON *j)
{
	const struct run_result *r = x->res;
	cJSON *m = cJSON_AddObjectToObject(j, "model");

	if (m == NULL)
		return;
	tail(x, m, 0, "stdout_tail", "stdout_compressed");
	tail(x, m, 1, "stderr_tail", "stderr_compressed");
	cJSON_AddNumberToObject(m, "tail_max", RUN_TAIL_MAX);
	if (r->ran) {
		cJSON_AddNumberToObject(m, "exit_status", r->exit_status);
		cJSON_AddNumberToObject(m, "signal", r->signal);
	} else {
		cJSON_AddNullToObject(m, "exit_status");
		cJSON_AddNullToObject(m, "signal");
	}
	if (r->limit[0] != '\0')
		cJSON_AddStringToObject(m, "limit", r->limit);
	else
		cJSON_AddNullToObject(m, "limit");
}

static void
members(const struct run_ctx *x, cJSON *j, int rc)
{
	const struct run_result *r = x->res;
	cJSON *m = cJSON_AddObjectToObject(j, "members");
	const char *st;

	if (m == NULL)
		return;
	st = !r->ran                         ? "refused" :
	    strcmp(r->limit, "timeout") == 0 ? "timed_out" :
	    rc == 0 && r->limit[0] == '\0'   ? "succeeded" :
	                                       "failed";
	cJSON_AddStringToObject(m, "status", st);
	if (!r->ran)
		cJSON_AddStringToObject(m, "reason",
		    r->refusal[0] != '\0' ? r->refusal :
		                            "the run could not be dispatched");
}

static const char *
base(const char *p)
{
	return strrchr(p, '/') != NULL ? strrchr(p, '/') + 1 : p;
}

/* kz-project's placeholder for one output: the ref, or NULL. */
static cJSON *
placeholder(const struct run_ctx *x, const struct run_output *o)
{
	cJSON *req = run_request("placeholder", x->rid), *rep = NULL, *p;
	const char *ref;

	if (req == NULL)
		return NULL;
	cJSON_AddStringToObject(req, "room", x->o->room);
	cJSON_AddStringToObject(req, "run", x->rid);
	cJSON_AddStringToObject(req, "call",
	    x->o->call != NULL ? x->o->call : x->rid);
	cJSON_AddStringToObject(req, "name", base(o->path));
	p = NULL;
	if (run_project_call(x->c, req, &rep) == 0 &&
	    cJSON_IsTrue(kz_json_get(rep, "ok")) &&
	    (ref = run_str(rep, "ref")) != NULL &&
	    (p = cJSON_CreateObject()) != NULL) {
		cJSON_AddStringToObject(p, "name", base(o->path));
		cJSON_AddStringToObject(p, "ref", ref);
		cJSON_AddStringToObject(p, "state",
		    o->err == 0 ? "linked" : "refused");
	}
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return p;
}

static void
outputs(const struct run_ctx *x, cJSON *j)
{
	const struct run_result *r = x->res;
	cJSON *a = cJSON_AddArrayToObject(j, "outputs");
	cJSON *ph = cJSON_AddArrayToObject(j, "placeholders"), *e, *p;

	/* Declared, but the code never ran to its end: none was read. */
	for (size_t i = r->nout; a != NULL && i < x->o->noutputs; i++) {
		if ((e = cJSON_CreateObject()) == NULL)
			continue;
		cJSON_AddStringToObject(e, "path",
		    kz_path_check(x->o->outputs[i], strlen(x->o->outputs[i]),
		        NULL, 0) == 0 ?
		        x->o->outputs[i] :
		        "(not a rooted path)");
		cJSON_AddBoolToObject(e, "linked", false);
		cJSON_AddStringToObject(e, "error", KZ_WE_REFUSED);
		cJSON_AddStringToObject(e, "reason",
		    "the run did not complete: nothing was read");
		cJSON_AddItemToArray(a, e);
	}
	for (size_t i = 0; a != NULL && ph != NULL && i < r->nout; i++) {
		const struct run_output *o = &r->out[i];
		bool shown = kz_path_check(o->path, strlen(o->path), NULL, 0) ==
		    0;

		if ((e = cJSON_CreateObject()) == NULL)
			continue;
		cJSON_AddStringToObject(e, "path",
		    shown ? o->path : "(not a rooted path)");
		cJSON_AddBoolToObject(e, "linked", o->err == 0);
		if (o->err == 0) {
			cJSON_AddStringToObject(e, "resource", o->resource);
			cJSON_AddNumberToObject(e, "size", (double)o->size);
		} else {
			cJSON_AddStringToObject(e, "error", o->code);
			cJSON_AddStringToObject(e, "reason", o->reason);
		}
		cJSON_AddItemToArray(a, e);
		if (shown && (p = placeholder(x, o)) != NULL)
			cJSON_AddItemToArray(ph, p);
	}
}

void
run_json(const struct run_ctx *x, int rc)
{
	cJSON *j = cJSON_CreateObject();
	char *s;

	if (j == NULL)
		return;
	cJSON_AddNumberToObject(j, "v", 1);
	cJSON_AddStringToObject(j, "rid", x->rid);
	cJSON_AddNumberToObject(j, "exit", rc);
	cJSON_AddStringToObject(j, "audit",
	    x->res->audit != NULL ? x->res->audit : "incomplete");
	model(x, j);
	members(x, j, rc);
	outputs(x, j);
	if ((s = cJSON_PrintUnformatted(j)) != NULL) {
		printf("%s\n", s);
		fflush(stdout);
		free(s);
	}
	cJSON_Delete(j);
}
