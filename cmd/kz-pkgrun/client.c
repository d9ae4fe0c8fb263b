/*
 * invoke --socket: the invocation is sent to a running serve, which runs
 * it on a warm worker (or its one-shot), and its answer is printed as the
 * in-process one-shot prints its own: the result on stdout, stderr (a
 * private chat's) on stderr, one line of why on failure, the same exit
 * codes.  The client itself loads no package and starts no sandbox.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_call.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_wire.h"
#include "pkgrun.h"
#include "banned.h"

static bool
add_list(cJSON *o, const char *key, const char *const *v, int n)
{
	cJSON *a;

	if (n == 0)
		return true;
	if ((a = cJSON_AddArrayToObject(o, key)) == NULL)
		return false;
	for (int i = 0; i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i])))
			return false;
	return true;
}

static bool
add_opt(cJSON *o, const char *key, const char *v)
{
	return v == NULL || cJSON_AddStringToObject(o, key, v) != NULL;
}

static cJSON *
request(const struct pr_inv *iv)
{
	char rid[40];
	cJSON *o = cJSON_CreateObject();

	if (iv->rid == NULL) {
		unsigned char b[8];

		randombytes_buf(b, sizeof(b));
		sodium_bin2hex(rid, sizeof(rid), b, sizeof(b));
	}
	if (o == NULL || !cJSON_AddNumberToObject(o, "v", 1) ||
	    !cJSON_AddStringToObject(o, "op", "invoke") ||
	    !cJSON_AddStringToObject(o, "id", iv->rid ? iv->rid : rid) ||
	    !cJSON_AddStringToObject(o, "package", iv->package) ||
	    !cJSON_AddStringToObject(o, "tool", iv->tool) ||
	    !cJSON_AddStringToObject(o, "actor", iv->actor) ||
	    !cJSON_AddStringToObject(o, "conversation", iv->conversation) ||
	    !add_opt(o, "room", iv->room) ||
	    !add_opt(o, "workspace", iv->workspace) ||
	    !add_opt(o, "grant", iv->grant) ||
	    !add_list(o, "args", iv->args, iv->nargs) ||
	    !add_list(o, "files", iv->files, iv->nfiles)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int
fail(enum kz_exit code, const char *what)
{
	fprintf(stderr, "kz-pkgrun: %s\n", what);
	return code;
}

/* Prints one reply field, when it is there. */
static int
print(int fd, const cJSON *rep, const char *key)
{
	const char *s = cJSON_GetStringValue(kz_json_get(rep, key));

	return s == NULL ? 0 : kz_write_full(fd, s, strlen(s), -1);
}

int
pr_client_invoke(const struct pr_conf *c, const char *sock,
    const struct pr_inv *iv)
{
	cJSON *req, *rep = NULL;
	const cJSON *st;
	const char *err, *reason;
	char why[256] = "", line[300];
	int r, code;

	if ((req = request(iv)) == NULL)
		return fail(KZ_EXIT_INTERNAL, "out of memory");
	/* The daemon's own backstop is its timeout plus 15 s; wait past it
	 * so that its answer, not ours, says what happened. */
	r = kz_frame_call(sock, req, (int)(c->timeout_s + 30) * 1000, &rep, why,
	    sizeof(why));
	if (iv->grant != NULL) {
		cJSON *g = kz_json_get(req, "grant");

		sodium_memzero(g->valuestring, strlen(g->valuestring));
	}
	cJSON_Delete(req);
	if (r != 0) {
		snprintf(line, sizeof(line), "kz-pkgrun serve: %s", why);
		return fail(KZ_EXIT_UNAVAIL, line);
	}
	if (!cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		err = cJSON_GetStringValue(kz_json_get(rep, "error"));
		reason = cJSON_GetStringValue(kz_json_get(rep, "reason"));
		code = fail(kz_exit_for_wire(err),
		    reason != NULL ? reason : "refused without a reason");
		goto out;
	}
	st = kz_json_get(rep, "exit_status");
	if (print(1, rep, "result") != 0 || print(2, rep, "stderr") != 0)
		code = fail(KZ_EXIT_INTERNAL, "cannot write the result");
	else if (!cJSON_IsNumber(st))
		code = fail(KZ_EXIT_INTERNAL,
		    "the daemon's reply has no status");
	else if (st->valuedouble != 0) {
		snprintf(line, sizeof(line), "the tool exited with status %d",
		    (int)st->valuedouble);
		code = fail(KZ_EXIT_REFUSED, line);
	} else
		code = KZ_EXIT_OK;
out:
	cJSON_Delete(rep);
	return code;
}
