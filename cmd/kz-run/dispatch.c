/*
 * The main job: classify -> admit -> lease -> restore -> verify and
 * project -> run -> outputs -> snapshot -> release, each step audited.
 * The reset is kz-lease's (it resets every released worker, and its reset
 * record names this run).  A denial at any step ends the attempt; nothing
 * is retried at a weaker boundary.
 *
 * Audit records go out concurrently with the steps (audit.c), in two
 * batches that each share one fsync in the sink: lease and dispatch at the
 * grant (only the dispatch record is waited for before the code starts),
 * the closing dispatch and release records after the release answered.
 * Every record is waited for before kz-run exits; one the sink did not
 * acknowledge makes a run that would have exited 0 exit 3.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_frame.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_log.h"
#include "run.h"
#include "banned.h"

#define GRANT_MAX 4096

struct lease {
	cJSON *rep;
	cJSON *result;	/* the closing dispatch record, sent with release's */
	const char *worker, *lid, *token, *endpoint, *proj, *snap;
	int64_t t0;
};

static cJSON *
request(const char *op, const char *rid)
{
	cJSON *r = cJSON_CreateObject();

	if (r != NULL) {
		cJSON_AddNumberToObject(r, "v", 1);
		cJSON_AddStringToObject(r, "op", op);
		cJSON_AddStringToObject(r, "id", rid);
	}
	return r;
}

static const char *
str(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void
denied(const struct run_ctx *x, const char *kind, const char *stage,
    const char *error, const char *reason)
{
	cJSON *ev = cJSON_CreateObject();

	if (ev == NULL)
		return;
	/* The admission and projection kinds carry a decision, the
	 * isolation denial an error code (kz-audit's closed schema). */
	if (strcmp(kind, "isolation_denial") != 0)
		cJSON_AddStringToObject(ev, "decision", "denied");
	else
		cJSON_AddStringToObject(ev, "error", error);
	cJSON_AddStringToObject(ev, "stage", stage);
	cJSON_AddStringToObject(ev, "outcome", error);
	cJSON_AddStringToObject(ev, "reason", reason);
	(void)run_audit(x, kind, ev);
}

/* One lease call; a lost reply is retried once under the same op id, so
 * a lease granted meanwhile is answered, not granted twice. */
static int
lease_once(const struct run_ctx *x, const char *opid, cJSON **rep,
    char *why, size_t wlen)
{
	cJSON *req = request("lease", x->rid);
	int e, i;

	if (req == NULL)
		return KZ_ENOMEM;
	cJSON_AddStringToObject(req, "actor", x->o->actor);
	cJSON_AddStringToObject(req, "conversation", x->o->conv);
	cJSON_AddStringToObject(req, "capability", x->o->cap);
	cJSON_AddStringToObject(req, "op_id", opid);
	/* Kept with the lease: if it expires, its reset names this run. */
	cJSON_AddStringToObject(req, "run_id", x->rid);
	for (i = 0; i < 2; i++)
		if ((e = kz_frame_call(x->c->lease_sock, req,
		    (int)x->c->io_timeout_ms, rep, why, wlen)) !=
		    KZ_ETIMEDOUT && e != KZ_EEOF)
			break;
	cJSON_Delete(req);
	return e;
}

static int
get_lease(const struct run_ctx *x, struct lease *l)
{
	int64_t deadline = kz_now_ms() + x->c->lease_wait_ms, nap = 20000;
	unsigned char b[16];
	char opid[33], why[160] = "";
	const char *code, *reason;
	int e;

	for (;;) {
		randombytes_buf(b, sizeof(b));
		kz_hex(b, sizeof(b), opid);
		if ((e = lease_once(x, opid, &l->rep, why, sizeof(why))) !=
		    0) {
			/* The reason (no path in it) tells a caller outside
			 * the deployment's group from a daemon that is down. */
			fprintf(stderr, "kz-run: kz-lease unreachable%s%s\n",
			    why[0] ? ": " : "", why);
			denied(x, "admission", "lease", "unavailable",
			    "the lease service could not be reached");
			return RUN_EXIT_UNAVAIL;
		}
		if (cJSON_IsTrue(kz_json_get(l->rep, "ok")))
			break;
		code = str(l->rep, "error");
		reason = str(l->rep, "reason");
		/* No warm worker yet: released ones are being reset. */
		if (code != NULL && strcmp(code, "busy") == 0 &&
		    kz_now_ms() < deadline) {
			cJSON_Delete(l->rep);
			l->rep = NULL;
			usleep((useconds_t)nap);
			nap = nap < 200000 ? nap * 2 : nap;
			continue;
		}
		fprintf(stderr, "kz-run: lease: %s: %s\n", code ? code :
		    "internal", reason ? reason : "");
		denied(x, "admission", "lease", code ? code : "internal",
		    reason ? reason : "lease refused");
		return run_exit_for(code);
	}
	l->worker = str(l->rep, "worker");
	l->lid = str(l->rep, "lease_id");
	l->token = str(l->rep, "token");
	l->endpoint = str(l->rep, "endpoint");
	l->proj = str(l->rep, "projection");
	l->snap = str(l->rep, "snapshot");
	if (l->worker == NULL || l->lid == NULL || l->token == NULL ||
	    l->endpoint == NULL) {
		fprintf(stderr, "kz-run: lease: malformed reply\n");
		return RUN_EXIT_INTERNAL;
	}
	return 0;
}

static cJSON *
lease_ev(const struct lease *l)
{
	cJSON *ev = cJSON_CreateObject();

	if (ev != NULL) {
		cJSON_AddStringToObject(ev, "worker_id", l->worker);
		cJSON_AddStringToObject(ev, "lease_id", l->lid);
		cJSON_AddNumberToObject(ev, "token",
		    (double)run_token_n(l->token));
	}
	return ev;
}

/*
 * The closing dispatch record goes out here, after the release answered,
 * together with the release record: the two share one fsync in the sink
 * instead of two in a row (the release round trip is shorter than a sink
 * fsync).
 */
static void
release(const struct run_ctx *x, struct lease *l)
{
	cJSON *req = request("release", x->rid), *rep = NULL, *ev;
	char why[160] = "";
	bool ok = false;
	int e;

	if (req != NULL) {
		cJSON_AddStringToObject(req, "lease_id", l->lid);
		cJSON_AddStringToObject(req, "token", l->token);
		cJSON_AddStringToObject(req, "run_id", x->rid);
		e = kz_frame_call(x->c->lease_sock, req,
		    (int)x->c->io_timeout_ms, &rep, why, sizeof(why));
		ok = e == 0 && cJSON_IsTrue(kz_json_get(rep, "ok"));
	}
	if (!ok)
		fprintf(stderr, "kz-run: release failed; the lease will "
		    "expire and the worker will be retired\n");
	if (l->result != NULL)
		(void)run_audit(x, "dispatch", l->result);
	l->result = NULL;
	if ((ev = lease_ev(l)) != NULL) {
		cJSON_AddNumberToObject(ev, "duration_ms",
		    (double)(kz_now_ms() - l->t0));
		cJSON_AddStringToObject(ev, "outcome", ok ? "released" :
		    "failed");
		(void)run_audit(x, "release", ev);
	}
	cJSON_Delete(req);
	cJSON_Delete(rep);
}

/* A worker op with no payload of interest; 0 when it answered ok. */
static int
worker_op(const struct run_ctx *x, const struct lease *l, const char *op,
    const char *path, const char **code)
{
	cJSON *req = request(op, x->rid), *rep = NULL;
	char why[160];
	int e;

	if (req == NULL)
		return KZ_ENOMEM;
	cJSON_AddStringToObject(req, "path", path);
	e = kz_frame_call(l->endpoint, req, (int)x->c->io_timeout_ms, &rep,
	    why, sizeof(why));
	cJSON_Delete(req);
	if (e == 0 && !cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		if (code != NULL)
			*code = str(rep, "error") && strcmp(str(rep, "error"),
			    "refused") == 0 ? "refused" : "error";
		e = KZ_EDENIED;
	}
	cJSON_Delete(rep);
	return e;
}

/* The workspace of the previous lease under this workspace key. */
static void
restore(const struct run_ctx *x, const struct lease *l)
{
	if (!x->c->snapshot || l->snap == NULL || access(l->snap, F_OK) != 0)
		return;
	if (worker_op(x, l, "restore", l->snap, NULL) != 0)
		fprintf(stderr, "kz-run: the saved workspace could not be "
		    "restored; starting empty\n");
}

/* Saves the workspace (never /projection) under the workspace key. */
static void
snapshot(const struct run_ctx *x, const struct lease *l)
{
	char tmp[PATH_MAX + 64], dir[PATH_MAX];
	const char *code = NULL;

	if (!x->c->snapshot || l->snap == NULL)
		return;
	snprintf(dir, sizeof(dir), "%s", l->snap);
	(void)mkdir(dirname(dir), 0700);
	snprintf(tmp, sizeof(tmp), "%s.%s.new", l->snap, x->rid);
	if (worker_op(x, l, "snapshot", tmp, &code) == 0) {
		if (rename(tmp, l->snap) != 0)
			fprintf(stderr, "kz-run: the workspace could not be "
			    "saved\n");
	} else {
		/* An old snapshot must not come back in place of a
		 * workspace too big to save. */
		if (code != NULL && strcmp(code, "refused") == 0)
			(void)unlink(l->snap);
		fprintf(stderr, "kz-run: the workspace was not saved%s\n",
		    code && strcmp(code, "refused") == 0 ?
		    " (over the snapshot size limit)" : "");
	}
	(void)unlink(tmp);
}

/* The grant comes from "kz-egress grant" (exec, not linking): it is read
 * from a pipe, never passed in an argument vector or the environment. */
static int
egress_grant(const struct run_ctx *x, char *grant, size_t glen)
{
	const char *av[] = {x->c->egress_bin, "grant", "--field-key",
		x->c->key_file, "--run", x->rid, NULL};
	size_t t = 0;
	ssize_t n;
	int p[2], st, fd;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0 || (pid = fork()) < 0)
		return KZ_ESYS;
	if (pid == 0) {
		dup2(p[1], 1);
		if ((fd = open("/dev/null", O_WRONLY)) >= 0)
			dup2(fd, 2);
		execv(av[0], (char *const *)av);
		_exit(127);
	}
	close(p[1]);
	while (t < glen - 1 && (n = read(p[0], grant + t, glen - 1 - t)) > 0)
		t += (size_t)n;
	close(p[0]);
	grant[t] = '\0';
	grant[strcspn(grant, "\r\n")] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && grant[0] != '\0' ? 0 :
	    KZ_EUNAVAIL;
}

static void
put(int fd, const char *b64)
{
	size_t cap, len = 0;
	unsigned char *b;

	if (b64 == NULL || *b64 == '\0')
		return;
	cap = strlen(b64) / 4 * 3 + 3;
	if ((b = malloc(cap)) == NULL)
		return;
	if (sodium_base642bin(b, cap, b64, strlen(b64), NULL, &len, NULL,
	    sodium_base64_VARIANT_ORIGINAL) == 0)
		(void)!kz_write_full(fd, b, len, kz_now_ms() + 30000);
	free(b);
}

static int run_exec(const struct run_ctx *x, struct lease *l,
    const char *grant);

/* The room's projection, verified by kz-project right before the code
 * starts; or the caller's --file copies. */
static int
project(struct run_ctx *x, const struct lease *l, const struct run_adm *a)
{
	struct run_refusal f;
	char why[256] = "";
	uint64_t bytes = 0;
	int64_t files = 0;
	cJSON *ev;
	int rc, e;

	if (x->o->room != NULL) {
		if ((rc = run_materialize(x, a, l->proj, &f)) != 0) {
			fprintf(stderr, "kz-run: projection: %s: %s\n",
			    f.code, f.reason);
			denied(x, "projection", f.stage, f.code, f.reason);
			return rc;
		}
		files = a->files;
		bytes = (uint64_t)a->bytes;
	} else if (x->o->nfiles > 0) {
		if (l->proj == NULL || (e = run_project(x->c, l->proj,
		    x->o->files, x->o->nfiles, x->manifest, &bytes, why,
		    sizeof(why))) != 0) {
			fprintf(stderr, "kz-run: projection refused: %s\n",
			    l->proj ? why : "the worker has no projection "
			    "directory");
			denied(x, "projection", "copy", "refused",
			    "the projection could not be made");
			return RUN_EXIT_REFUSED;
		}
		files = (int64_t)x->o->nfiles;
	} else
		return 0;
	if ((ev = cJSON_CreateObject()) != NULL) {
		cJSON_AddNumberToObject(ev, "files", (double)files);
		cJSON_AddNumberToObject(ev, "bytes", (double)bytes);
		cJSON_AddStringToObject(ev, "decision", "projected");
		(void)run_audit(x, "projection", ev);
	}
	return 0;
}

/* kz-project admits the turn before any worker is leased. */
static int
admit(struct run_ctx *x, struct run_adm *a)
{
	struct run_refusal f;
	int rc;

	if (x->o->room == NULL)
		return 0;
	if ((rc = run_admit(x, a, &f)) != 0) {
		fprintf(stderr, "kz-run: admission: %s: %s\n", f.code,
		    f.reason);
		denied(x, "admission", f.stage, f.code, f.reason);
		return rc;
	}
	snprintf(x->manifest, sizeof(x->manifest), "%s", a->manifest);
	x->audience = a->audience;
	return 0;
}

int
run_dispatch(const struct run_conf *c, const struct run_opts *o)
{
	struct run_ctx x = {.c = c, .o = o, .audience = -1};
	struct run_adm adm = {.audience = -1};
	struct lease l = {0};
	char why[256] = "", grant[GRANT_MAX] = "";
	unsigned char b[16];
	cJSON *ev;
	int e, rc;

	randombytes_buf(b, sizeof(b));
	kz_hex(b, sizeof(b), x.rid);
	kz_log_set_rid(x.rid);
	run_manifest_empty(x.manifest);
	x.aq = run_aq_new();
	if ((e = run_classify(c, o, why, sizeof(why))) != 0) {
		fprintf(stderr, "kz-run: refused: %s\n", why);
		denied(&x, "isolation_denial", "classify", e == 1 ?
		    "host_administration" : "unavailable", e == 1 ?
		    "a script requires host administration" :
		    "the script classifier could not run");
		rc = e == 1 ? RUN_EXIT_REFUSED : RUN_EXIT_UNAVAIL;
		goto out;
	}
	if ((rc = admit(&x, &adm)) != 0)
		goto out;
	if (o->egress && egress_grant(&x, grant, sizeof(grant)) != 0) {
		fprintf(stderr, "kz-run: no egress grant could be made\n");
		denied(&x, "isolation_denial", "egress", "unavailable",
		    "no egress grant could be made");
		rc = RUN_EXIT_UNAVAIL;
		goto out;
	}
	l.t0 = kz_now_ms();
	if ((rc = get_lease(&x, &l)) != 0)
		goto out;
	if ((ev = lease_ev(&l)) != NULL) {
		cJSON_AddNumberToObject(ev, "wait_ms",
		    (double)(kz_now_ms() - l.t0));
		cJSON_AddBoolToObject(ev, "warm", true);
		(void)run_audit(&x, "lease", ev);
	}
	restore(&x, &l);
	if ((rc = project(&x, &l, &adm)) != 0)
		goto release;
	rc = run_exec(&x, &l, grant);
	snapshot(&x, &l);
release:
	release(&x, &l);
out:
	if (l.result != NULL)
		(void)run_audit(&x, "dispatch", l.result);
	if (run_audit_wait(&x, RUN_AUDIT_ALL) != 0) {
		fprintf(stderr, "kz-run: the audit sink did not acknowledge "
		    "every record of this run\n");
		if (rc == 0)
			rc = RUN_EXIT_UNAVAIL;
	}
	run_aq_free(x.aq);
	sodium_memzero(grant, sizeof(grant));
	cJSON_Delete(l.rep);
	run_adm_release(&adm);
	return rc;
}

/* Dispatch record, the run, its outputs and the result record. */
static int
run_exec(const struct run_ctx *x, struct lease *l, const char *grant)
{
	cJSON *req = request("run", x->rid), *rep = NULL, *ev, *a;
	const cJSON *v;
	const char *code, *limit;
	char why[160] = "";
	int64_t t0 = kz_now_ms();
	int i, e, rc = RUN_EXIT_INTERNAL, st = -1, sig = 0;

	if (req == NULL || (ev = lease_ev(l)) == NULL)
		goto out;
	cJSON_AddStringToObject(ev, "egress", *grant ? "granted" : "none");
	cJSON_AddStringToObject(ev, "outcome", "started");
	/* No record, no run: the audit sink must hold the dispatch first
	 * (the lease record, sent just before, shares its fsync). */
	if (run_audit_wait(x, run_audit(x, "dispatch", ev)) != 0) {
		fprintf(stderr, "kz-run: the audit sink did not record the "
		    "dispatch; nothing ran\n");
		rc = RUN_EXIT_UNAVAIL;
		goto out;
	}
	a = cJSON_AddArrayToObject(req, "argv");
	for (i = 0; i < x->o->argc; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(x->o->argv[i]));
	if (*grant)
		cJSON_AddStringToObject(req, "grant", grant);
	e = kz_frame_call(l->endpoint, req, (int)(x->c->timeout_ms + 15000),
	    &rep, why, sizeof(why));
	if (*grant)
		cJSON_DeleteItemFromObjectCaseSensitive(req, "grant");
	if (e != 0 || !cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		code = e != 0 ? "unavailable" : str(rep, "error");
		fprintf(stderr, "kz-run: run: %s: %s\n", code ? code :
		    "internal", e != 0 ? "the worker did not answer" :
		    str(rep, "reason") ? str(rep, "reason") : "");
		denied(x, "isolation_denial", "run", code ? code : "internal",
		    "the worker refused or failed the run");
		rc = code && strcmp(code, "bad_request") == 0 ?
		    RUN_EXIT_USAGE : RUN_EXIT_UNAVAIL;
		goto out;
	}
	put(1, str(rep, "stdout_b64"));
	put(2, str(rep, "stderr_b64"));
	if (cJSON_IsNumber(v = kz_json_get(rep, "exit_code")))
		st = v->valueint;
	if (cJSON_IsNumber(v = kz_json_get(rep, "signal")))
		sig = v->valueint;
	limit = str(rep, "limit");
	rc = limit != NULL ? RUN_EXIT_REFUSED : st >= 0 ? st : sig > 0 ?
	    128 + sig : RUN_EXIT_INTERNAL;
	if ((ev = lease_ev(l)) != NULL) {
		cJSON_AddNumberToObject(ev, "exit_status", st);
		cJSON_AddNumberToObject(ev, "signal", sig);
		cJSON_AddNumberToObject(ev, "duration_ms",
		    (double)(kz_now_ms() - t0));
		cJSON_AddStringToObject(ev, "egress", *grant ? "granted" :
		    "none");
		cJSON_AddStringToObject(ev, "outcome", limit ? limit :
		    "exited");
		l->result = ev;
	}
	if (limit != NULL)
		fprintf(stderr, "kz-run: stopped by the %s limit\n", limit);
	if (!x->o->quiet)
		fprintf(stderr, "kz-run: exit %d (worker %s, %lld ms)\n", rc,
		    l->worker, (long long)(kz_now_ms() - t0));
out:
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return rc;
}
