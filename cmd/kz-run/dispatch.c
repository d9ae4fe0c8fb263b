/*
 * The main job: classify -> admit -> lease -> restore -> verify and
 * project -> run -> outputs -> save (save.c) -> release -> the save
 * committed, each step audited.
 * The reset is kz-lease's (it resets every released worker, and its reset
 * record names this run).  A denial at any step ends the attempt; nothing
 * is retried at a weaker boundary.
 *
 * Every call to the worker goes through lease.c, which keeps the lease
 * renewed while it waits.  Once the lease is lost nothing more goes to
 * the worker (no snapshot, no restore) and no release is sent that could
 * reset it: kz-lease retires the worker of an expired lease, and kz-run
 * fails closed (exit 3) with one line that says so.
 *
 * Audit records go out concurrently with the steps (audit.c), in two
 * batches that are each one append, made durable by one fsync in the
 * sink: lease and dispatch at the grant (waited for before the code
 * starts), the closing dispatch and release records after the release
 * answered.
 * Every record is waited for before kz-run exits; one the sink did not
 * acknowledge makes a run that would have exited 0 exit 3.
 *
 * This file keeps the sequence above and the steps around the run
 * (grants, admission, projection, the closing line); exec.c holds the
 * run step itself: the dispatch record, the run op, the code's output
 * and the result record.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_audit.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_log.h"
#include "run.h"
#include "banned.h"

#define GRANT_MAX 4096
#define BROKER_TOKEN_MAX 1024

/* The egress grant comes from "kz-egress grant", the broker token from
 * "kz-pkgbroker token" (exec, not linking): each is read from a pipe,
 * never passed in an argument vector or the environment. */
static int
mint(const char *const av[], char *grant, size_t glen)
{
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
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && grant[0] != '\0' ?
	    0 :
	    KZ_EUNAVAIL;
}

static int
egress_grant(const struct run_ctx *x, char *grant, size_t glen)
{
	const char *const av[] = {x->c->egress_bin, "grant", "--field-key",
	    x->c->key_file, "--run", x->rid, NULL};

	return mint(av, grant, glen);
}

/* The uid the leased worker's broker forward presents on the broker's
 * socket, as the worker says in its health answer; a worker that does
 * not say gets no token, and the run does not run. */
static int
broker_uid(const struct run_ctx *x, struct run_lease *l, int64_t *uid)
{
	cJSON *req = run_request("health", x->rid), *rep = NULL;
	char why[160] = "";
	int e = KZ_ENOMEM;

	if (req != NULL &&
	    (e = run_worker_call(x, l, req, x->c->io_timeout_ms, NULL, &rep,
	         why, sizeof(why))) == 0)
		e = cJSON_IsTrue(kz_json_get(rep, "ok")) ?
		    kz_json_int(rep, "broker_uid", 0, 2147483646, uid, why,
		        sizeof(why)) :
		    KZ_EUNAVAIL;
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return e;
}

/* The run's package-broker token: bound to the run and to the worker it
 * was leased (the uid its forward presents, kz-pkgbroker(8)), and living
 * as long as the run may (kz-pkgbroker clamps it to its
 * PKGBROKER_TOKEN_TTL_MAX). */
static int
broker_token(const struct run_ctx *x, struct run_lease *l, char *tok,
    size_t len)
{
	char ttl[24], uid[24];
	const char *const av[] = {x->c->pkgbroker_bin, "token", "--field-key",
	    x->c->key_file, "--run", x->rid, "--uid", uid, "--ttl", ttl, NULL};
	int64_t u;
	int e;

	if ((e = broker_uid(x, l, &u)) != 0)
		return e;
	snprintf(uid, sizeof(uid), "%lld", (long long)u);
	snprintf(ttl, sizeof(ttl), "%lld",
	    (long long)(x->c->timeout_ms / 1000 + 60));
	return mint(av, tok, len);
}

/* The room's projection, verified by kz-project right before the code
 * starts; or the caller's --file copies. */
static int
project(struct run_ctx *x, const struct run_lease *l, const struct run_adm *a)
{
	struct run_refusal f;
	char why[256] = "";
	uint64_t bytes = 0;
	int64_t files = 0;
	cJSON *ev;
	int rc, e;

	if (x->o->room != NULL) {
		if ((rc = run_materialize(x, a, l->proj, &f)) != 0) {
			fprintf(stderr, "kz-run: projection: %s: %s\n", f.code,
			    f.reason);
			run_denied(x, "projection", f.stage, f.code, f.reason);
			return rc;
		}
		files = a->files;
		bytes = (uint64_t)a->bytes;
	} else if (x->o->nfiles > 0) {
		if (l->proj == NULL ||
		    (e = run_project(x->c, l->proj, x->o->files, x->o->nfiles,
		         x->manifest, &bytes, why, sizeof(why))) != 0) {
			fprintf(stderr, "kz-run: projection refused: %s\n",
			    l->proj ? why :
			              "the worker has no projection directory");
			run_denied(x, "projection", "copy", KZ_WE_REFUSED,
			    "the projection could not be made");
			return KZ_EXIT_REFUSED;
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

/*
 * The room's files admission left out (kz-project(8), the place rule: a
 * path another file of the projection holds, or over its bounds), on one
 * line, so the member is not left to wonder why a file is missing.
 */
static void
left_out(const cJSON *snap)
{
	const cJSON *l = kz_json_get(snap, "left_out"), *it;
	char line[512] = "";
	size_t n = 0, k = 0;

	if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) == 0)
		return;
	cJSON_ArrayForEach(it, l)
	{
		const char *id = cJSON_GetStringValue(kz_json_get(it, "id"));
		const char *why = cJSON_GetStringValue(
		    kz_json_get(it, "reason"));

		if (id == NULL || why == NULL ||
		    strlen(id) + strlen(why) + 8 >= sizeof(line) - n)
			continue;
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s (%s)",
		    k++ ? ", " : "", id, why);
	}
	fprintf(stderr,
	    "kz-run: admission left %d of the room's files out: %s%s\n",
	    cJSON_GetArraySize(l), line,
	    (int)k < cJSON_GetArraySize(l) ? ", ..." : "");
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
		run_denied(x, "admission", f.stage, f.code, f.reason);
		return rc;
	}
	snprintf(x->manifest, sizeof(x->manifest), "%s", a->manifest);
	x->audience = a->audience;
	left_out(a->snap);
	return 0;
}

/*
 * The lease was lost: the one line says when, relative to the code, and
 * the closing dispatch record of a run in flight says it was abandoned.
 */
static int
lease_lost(const struct run_ctx *x, struct run_lease *l, const struct exec *ex)
{
	cJSON *ev;

	fprintf(stderr,
	    "kz-run: the lease expired %s (%s); the worker was "
	    "retired and nothing more was sent to it%s\n",
	    !ex->sent   ? "before the run" :
	        ex->ran ? "after the run" :
	                  "during the run",
	    l->lost_why,
	    ex->sent && x->c->snapshot ? "; the workspace was not saved" : "");
	if ((ex->sent || ex->recorded) && !ex->ran &&
	    (ev = run_lease_ev(l)) != NULL) {
		cJSON_AddNumberToObject(ev, "duration_ms", (double)ex->ms);
		cJSON_AddStringToObject(ev, "egress",
		    *ex->grant ? "granted" : "none");
		cJSON_AddStringToObject(ev, "outcome", "lease_expired");
		cJSON_AddStringToObject(ev, "reason",
		    ex->sent ? "the run was abandoned: its lease could not be "
		               "kept" :
		               "the run never started: its lease could not be "
		               "kept");
		cJSON_Delete(l->result);
		l->result = ev;
	}
	return KZ_EXIT_UNAVAIL;
}

/* Which declared outputs were linked, for the closing line. */
static void
linked(const struct run_result *r, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (r->nout == 0)
		return;
	n = (size_t)snprintf(buf, len, "; outputs linked %zu of %zu", r->linked,
	    r->nout);
	for (size_t i = 0, k = 0; i < r->nout && n < len; i++)
		if (r->out[i].err == 0)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
			    k++ ? ", " : ": ", r->out[i].path);
}

/* The closing line (unless -q), and whether the workspace was saved
 * (always: the next run would otherwise find it missing unannounced). */
static void
status(const struct run_ctx *x, const struct run_lease *l,
    const struct exec *ex, int rc, const char *unsaved)
{
	char outs[600];

	linked(x->res, outs, sizeof(outs));
	if (ex->ran && !x->o->quiet)
		fprintf(stderr,
		    "kz-run: exit %d (worker %s, %lld ms)%s%s%s%s\n", rc,
		    l->worker, (long long)ex->ms, outs,
		    *unsaved ? "; the workspace was not saved: " : "", unsaved,
		    x->c->audit_sock[0] == '\0' ? "; audit off, nothing "
		                                  "recorded" :
		                                  "");
	else if (*unsaved)
		fprintf(stderr, "kz-run: the workspace was not saved: %s\n",
		    unsaved);
}

/*
 * Restore, project, run, save: the steps on the leased worker.  A run
 * that was never sent left the restored workspace as it was saved; one
 * that was sent is saved, or its older snapshot removed.
 */
static int
on_worker(struct run_ctx *x, struct run_lease *l, const struct run_adm *a,
    struct exec *ex, char *unsaved, size_t ulen)
{
	int rc;

	/* With nothing to project nothing can refuse the run from here on
	 * but the lease: the dispatch record goes out now, beside the lease
	 * record (one fdatasync in the sink for both), and is made durable
	 * while the workspace is restored. */
	if (x->o->room == NULL && x->o->nfiles == 0) {
		ex->ticket = run_dispatch_started(x, l, ex);
		ex->recorded = true;
	}
	run_audit_flush(x);
	run_restore(x, l);
	if (run_lease_keep(x, l, false) != 0)
		return lease_lost(x, l, ex);
	if ((rc = project(x, l, a)) != 0)
		return rc;
	rc = run_exec(x, l, ex);
	if (ex->sent && x->c->snapshot && !l->lost)
		(void)run_save(x, l, unsaved, ulen);
	/* Outputs only of code that ran to its end and answered. */
	if (ex->ran && !l->lost)
		run_outputs(x, l, a->snap);
	if (l->lost) {
		if (ex->sent)
			run_unsave(x, l);
		return lease_lost(x, l, ex);
	}
	ex->report = true;
	return rc;
}

/*
 * Once the release was answered: a pending save is put in place only if
 * kz-lease took the release, which proves the lease held past the end of
 * the save; one that cannot be proven so is removed with the older
 * snapshot.  A run whose workspace was to be saved fails closed when the
 * release was not taken (its lease may have been taken away, its worker
 * retired mid-save), whether or not the worker finished writing.  Then
 * the closing line.
 */
static int
closing(const struct run_ctx *x, struct run_lease *l, const struct exec *ex,
    int rc, bool released, char *unsaved, size_t ulen)
{
	(void)run_save_commit(l, released, unsaved, ulen);
	if (!released && ex->sent && x->c->snapshot && l->snap != NULL)
		rc = KZ_EXIT_UNAVAIL;
	if (ex->report)
		status(x, l, ex, rc, unsaved);
	return rc;
}

/*
 * Audit is part of the boundary: a sink that cannot be reached gets
 * nothing dispatched (no admission, no lease), and the explicit opt-out
 * is said on every run.  The ping goes out here and its answer is read
 * once the lease is granted (audit_confirm), so the two round trips
 * overlap; a sink that does not answer then has its lease given back
 * unused: the code never reaches the worker.
 */
static void
unreachable(const struct run_conf *c, const char *why)
{
	fprintf(stderr,
	    "kz-run: audit sink %s unreachable (%s); nothing was dispatched\n",
	    c->audit_sock, why);
}

static int
audit_ready(const struct run_conf *c, int *ping)
{
	char why[160] = "";

	*ping = -1;
	if (c->audit_sock[0] == '\0') {
		fprintf(stderr,
		    "kz-run: audit is off (KZ_AUDIT = off): nothing "
		    "of this run is recorded\n");
		return 0;
	}
	if (kz_audit_ping_send(c->audit_sock, KZ_AUDIT_TIMEOUT_MS, ping, why,
	        sizeof(why)) != 0) {
		unreachable(c, why);
		return KZ_EXIT_UNAVAIL;
	}
	return 0;
}

/* The ping's answer (none with audit off); *ping is closed either way. */
static int
audit_confirm(const struct run_conf *c, int *ping)
{
	char why[160] = "";
	int e;

	if (*ping < 0)
		return 0;
	e = kz_audit_ping_wait(*ping, KZ_AUDIT_TIMEOUT_MS, why, sizeof(why));
	*ping = -1;
	if (e != 0) {
		unreachable(c, why);
		return KZ_EXIT_UNAVAIL;
	}
	return 0;
}

int
run_dispatch(const struct run_conf *c, const struct run_opts *o)
{
	struct run_result res = {.exit_status = -1};
	struct run_ctx x = {.c = c, .o = o, .res = &res, .audience = -1};
	struct run_adm adm = {.audience = -1};
	struct run_lease l = {0};
	char why[256] = "", grant[GRANT_MAX] = "", tok[BROKER_TOKEN_MAX] = "";
	char unsaved[200] = "";
	struct exec ex = {.grant = grant, .broker_token = tok};
	unsigned char b[16];
	cJSON *ev;
	int e, rc, ping = -1;

	randombytes_buf(b, sizeof(b));
	kz_hex(b, sizeof(b), x.rid);
	kz_log_set_rid(x.rid);
	run_manifest_empty(x.manifest);
	x.aq = run_aq_new();
	res.audit = c->audit_sock[0] == '\0' ? "off" : "complete";
	if ((rc = audit_ready(c, &ping)) != 0) {
		res.audit = "incomplete";
		goto out;
	}
	/* Before anything is admitted or leased: a run that asks for more
	 * than its capability allows is refused whole. */
	if (run_cap_check(o, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-run: refused: %s\n", why);
		run_denied(&x, "isolation_denial", "capability",
		    KZ_WE_ISOLATION_DENIED,
		    "the run asks for more than its capability allows");
		rc = KZ_EXIT_REFUSED;
		goto out;
	}
	if ((e = run_classify(c, o, why, sizeof(why))) != 0) {
		fprintf(stderr, "kz-run: refused: %s\n", why);
		run_denied(&x, "isolation_denial", "classify",
		    e == 1 ? "host_administration" : KZ_WE_UNAVAILABLE,
		    e == 1 ? "a script requires host administration" :
		             "the script classifier could not run");
		rc = e == 1 ? KZ_EXIT_REFUSED : KZ_EXIT_UNAVAIL;
		goto out;
	}
	if ((rc = admit(&x, &adm)) != 0)
		goto out;
	if (o->egress && egress_grant(&x, grant, sizeof(grant)) != 0) {
		fprintf(stderr, "kz-run: no egress grant could be made\n");
		run_denied(&x, "isolation_denial", "egress", KZ_WE_UNAVAILABLE,
		    "no egress grant could be made");
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	l.t0 = kz_now_ms();
	rc = run_lease_get(&x, &l);
	if (audit_confirm(c, &ping) != 0) {
		/* Granted or not, nothing more may be recorded: the lease
		 * goes back unused, and no record says it was held. */
		if (rc == 0)
			(void)run_lease_drop(&x, &l);
		run_aq_free(x.aq);
		x.aq = NULL;
		res.audit = "incomplete";
		rc = KZ_EXIT_UNAVAIL;
		goto quiet;
	}
	if (rc != 0)
		goto out;
	/* The lease record waits for the dispatch record (on_worker), to go
	 * out with it as one append. */
	run_audit_hold(&x);
	if ((ev = run_lease_ev(&l)) != NULL) {
		cJSON_AddNumberToObject(ev, "wait_ms",
		    (double)(kz_now_ms() - l.t0));
		cJSON_AddBoolToObject(ev, "warm", true);
		(void)run_audit(&x, "lease", ev);
	}
	if (o->egress && !l.egress) {
		/* A grant the worker cannot use would be recorded as egress
		 * granted for a run with no network: refuse instead. */
		fprintf(stderr,
		    "kz-run: refused: --egress: worker %s has no "
		    "egress path (its kz-lease has no LEASE_EGRESS_SOCKET)\n",
		    l.worker);
		run_denied(&x, "isolation_denial", "egress", KZ_WE_UNAVAILABLE,
		    "the leased worker has no egress path");
		rc = KZ_EXIT_UNAVAIL;
	} else if (l.broker && broker_token(&x, &l, tok, sizeof(tok)) != 0) {
		/* The pool has a package broker: every run gets its own
		 * token, or does not run. */
		fprintf(stderr,
		    "kz-run: no package-broker token could be made (%s)\n",
		    c->pkgbroker_bin);
		run_denied(&x, "isolation_denial", "packages",
		    KZ_WE_UNAVAILABLE, "no package-broker token could be made");
		rc = KZ_EXIT_UNAVAIL;
	} else
		rc = on_worker(&x, &l, &adm, &ex, unsaved, sizeof(unsaved));
	rc = closing(&x, &l, &ex, rc, run_lease_release(&x, &l), unsaved,
	    sizeof(unsaved));
out:
	if (l.result != NULL)
		(void)run_audit(&x, "dispatch", l.result);
	if (run_audit_wait(&x, RUN_AUDIT_ALL) != 0) {
		fprintf(stderr,
		    "kz-run: the audit sink %s did not "
		    "acknowledge every record of this run\n",
		    c->audit_sock);
		/* The code's own exit status is kept; --json says it. */
		res.audit = "incomplete";
		if (rc == 0)
			rc = KZ_EXIT_UNAVAIL;
	}
	run_aq_free(x.aq);
quiet:
	if (ping >= 0)
		close(ping);
	if (o->json)
		run_json(&x, rc);
	run_result_release(&res);
	sodium_memzero(grant, sizeof(grant));
	sodium_memzero(tok, sizeof(tok));
	cJSON_Delete(l.rep);
	run_adm_release(&adm);
	return rc;
}
