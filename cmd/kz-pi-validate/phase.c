/*
 * The three phases of an extension's validation, each in its own
 * disposable child: the package's Node tests, the preparation of a fresh
 * exact copy (dependencies reinstalled from the lock), and the Pi loaders.
 *
 * Under kz-sandbox each run sees the fresh copy read-only at /projection
 * and works in its own writable copy in the run's workspace, which goes
 * with the run: nothing a test writes reaches the host or the loader.  In
 * the operator's unshare mode the copy on the host is the child's, and is
 * removed by descriptor afterwards.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_json.h"
#include "kz_tree.h"
#include "pv.h"
#include "banned.h"

static bool
sandboxed(const struct pv_job *j)
{
	return j->c->iso == PV_ISO_SANDBOX;
}

static void
run_init(struct pv_job *j, struct pv_run *r, const char *cwd, char **argv,
    bool channel)
{
	static char home[PATH_MAX];

	memset(r, 0, sizeof(*r));
	snprintf(home, sizeof(home), "%s/home", j->run);
	r->iso = j->c->iso;
	r->sandbox_bin = j->c->sandbox_bin;
	r->sandbox_conf = j->c->sandbox_conf;
	r->uid = j->c->uid;
	r->gv_uid = j->c->gv_uid;
	r->cwd = cwd;
	r->argv = argv;
	r->home = home;
	r->run = j->run;
	r->modules = j->c->modules;
	r->channel = channel;
	r->npm = j->c->npm;
	r->npm_cache = j->c->npm_cache;
	r->result_max = j->c->result_max;
	r->deadline_ms = j->deadline;
}

/* kz-sandbox refused to start the run: say why, as it said it. */
static int
sandbox_refused(struct pv_job *j, const struct pv_outcome *o)
{
	char line[200];

	pv_err_line(o, line, sizeof(line));
	kz_why(j->why, sizeof(j->why), "the sandbox did not start: %s", line);
	return KZ_EXIT_UNAVAIL;
}

static bool
exited(const struct pv_outcome *o, int code)
{
	return WIFEXITED(o->status) && WEXITSTATUS(o->status) == code;
}

/*
 * The step found node or the loader script out of the sandbox's root view
 * (a KZ_PI_CHILD or KZ_PI_NODE the view does not show): nothing of the
 * package ran, and it is the validator's environment that failed, so
 * there is no verdict to sign.  Authored code cannot exit so: the step
 * maps the command's own 87 to 1.
 */
static bool
loader_unreachable(const struct pv_job *j, const struct pv_outcome *o)
{
	return sandboxed(j) && exited(o, PV_LOADER_EXIT) && o->rlen == 0;
}

static int
loader_unavailable(struct pv_job *j, const struct pv_outcome *o)
{
	char line[200];
	const char *p = line;

	pv_err_line(o, line, sizeof(line));
	if (strncmp(line, "kz-pi: ", 7) == 0)
		p += 7;
	kz_why(j->why, sizeof(j->why), "loader unavailable: %s", p);
	return KZ_EXIT_UNAVAIL;
}

/* The TAP summary of node --test: diagnostics, never the verdict. */
static void
tap_summary(cJSON *t, const char *tail)
{
	static const char *const keys[] = {"tests", "pass", "fail", "cancelled",
	    "skipped", "todo", NULL};
	char pat[32];

	for (int i = 0; keys[i] != NULL; i++) {
		const char *p;
		long v;

		snprintf(pat, sizeof(pat), "# %s ", keys[i]);
		if ((p = strstr(tail, pat)) == NULL)
			continue;
		v = strtol(p + strlen(pat), NULL, 10);
		cJSON_AddNumberToObject(t, keys[i], (double)v);
	}
}

static void
tests_record(struct pv_job *j, const struct pv_outcome *o)
{
	cJSON *t = cJSON_AddObjectToObject(j->body, "tests");
	bool pass = !o->timed_out && exited(o, 0);

	cJSON_AddStringToObject(t, "status",
	    o->timed_out ? "timeout" :
	        pass     ? "pass" :
	                   "fail");
	cJSON_AddNumberToObject(t, "files", (double)j->prof.ntests);
	tap_summary(cJSON_AddObjectToObject(t, "diagnostic_summary"),
	    o->out_tail);
	if (o->timed_out)
		pv_reason(&j->v, "extension tests missed the deadline", "");
	else if (sandboxed(j) && exited(o, PV_PREP_EXIT))
		pv_reason(&j->v,
		    "extension tests: the disposable copy could not be made",
		    "");
	else if (!pass)
		pv_reason(&j->v, "extension tests failed", "");
	if (!pass && o->err_bytes > 0) {
		char line[200];

		pv_err_line(o, line, sizeof(line));
		pv_diag(&j->v, line);
	}
}

int
pv_phase_tests(struct pv_job *j)
{
	static char tpath[PV_MAX_RES][PATH_MAX + 8192];
	char dir[PATH_MAX], *argv[PV_MAX_RES + 4];
	uid_t owner = sandboxed(j) ? geteuid() : j->c->uid;
	struct pv_outcome o;
	struct pv_run r;
	int n = 0, rc = 0;

	snprintf(dir, sizeof(dir), "%s/test", j->run);
	if (pv_materialize(j->filesfd, &j->tree, AT_FDCWD, dir, owner, j->why,
	        sizeof(j->why)) != 0)
		return KZ_EXIT_INTERNAL;
	argv[n++] = (char *)j->c->node;
	argv[n++] = "--test";
	for (size_t i = 0; i < j->prof.ntests; i++) {
		/* Absolute, as the child sees them: cwd differs per mode. */
		snprintf(tpath[i], sizeof(tpath[i]), "%s/%s",
		    sandboxed(j) ? PV_SANDBOX_PKG : dir, j->prof.tests[i]);
		argv[n++] = tpath[i];
	}
	argv[n] = NULL;
	run_init(j, &r, dir, argv, false);
	/* The tests get the dependencies if the offline cache has them. */
	r.deps = j->prof.lock != NULL && j->c->npm_cache != NULL ? PV_DEPS_TRY :
	                                                           PV_DEPS_NONE;
	if (pv_child_run(&r, &o, j->why, sizeof(j->why)) != 0)
		return KZ_EXIT_INTERNAL;
	if (o.sandbox_failed)
		rc = sandbox_refused(j, &o);
	else if (loader_unreachable(j, &o))
		rc = loader_unavailable(j, &o);
	else
		tests_record(j, &o);
	pv_outcome_release(&o);
	/* The test tree is discarded whatever the tests did to it. */
	if (kz_tree_remove(AT_FDCWD, dir) != 0 && rc == 0) {
		kz_why(j->why, sizeof(j->why),
		    "the test tree could not be removed");
		rc = KZ_EXIT_INTERNAL;
	}
	return rc;
}

/* The unshare mode's reinstall: npm in the child, in the host copy. */
static int
unshare_reinstall(struct pv_job *j, const char *dir)
{
	char cache[PATH_MAX];
	char *argv[] = {(char *)j->c->npm, "ci", "--offline",
	    "--ignore-scripts", "--no-audit", "--no-fund",
	    "--no-update-notifier", "--cache", cache, NULL};
	struct pv_outcome o;
	struct pv_run r;

	snprintf(cache, sizeof(cache), "%s", j->c->npm_cache);
	run_init(j, &r, dir, argv, false);
	if (pv_child_run(&r, &o, j->why, sizeof(j->why)) != 0)
		return KZ_EXIT_INTERNAL;
	if (o.timed_out)
		pv_reason(&j->v,
		    "preparation: dependency reinstall missed the deadline",
		    "");
	else if (!exited(&o, 0))
		pv_reason(&j->v,
		    "preparation: dependency reinstall from the lock failed",
		    "");
	pv_outcome_release(&o);
	/* The reinstalled tree is ours again: the loader's child only reads. */
	return pv_chown_tree(dir, geteuid()) == 0 ? KZ_EXIT_OK :
	                                            KZ_EXIT_INTERNAL;
}

/* The fresh copy must be the artifact, byte for byte, path for path. */
static void
prove_copy(struct pv_job *j, const char *dir)
{
	struct pv_tree again;
	int dfd;

	memset(&again, 0, sizeof(again));
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    pv_tree_scan(dfd, true, &again, j->why, sizeof(j->why)) != 0 ||
	    strcmp(again.digest, j->tree.digest) != 0)
		pv_reason(&j->v,
		    "preparation: the fresh copy differs from the artifact",
		    "");
	pv_tree_release(&again);
	if (dfd >= 0)
		close(dfd);
}

/*
 * A fresh exact copy for the loader, proven equal to the artifact.
 * Under kz-sandbox the dependencies are reinstalled by the load run's
 * first step (see pv_phase_load); here in the unshare mode.  A failure
 * keeps the test evidence and fails the validation.
 */
int
pv_phase_prepare(struct pv_job *j, const char *dir)
{
	uid_t owner = sandboxed(j) || j->prof.lock == NULL ? geteuid() :
	                                                     j->c->uid;
	cJSON *p = cJSON_AddObjectToObject(j->body, "preparation");
	int rc = 0;

	if (j->prof.lock != NULL && j->c->npm_cache == NULL)
		pv_reason(&j->v,
		    "preparation: the profile names a lock and no "
		    "offline npm cache is configured",
		    "");
	else if (pv_materialize(j->filesfd, &j->tree, AT_FDCWD, dir, owner,
	             j->why, sizeof(j->why)) != 0)
		pv_reason(&j->v, "preparation: ", j->why);
	else if (!sandboxed(j) && j->prof.lock != NULL)
		rc = unshare_reinstall(j, dir);
	if (rc == 0 && !j->v.failed)
		prove_copy(j, dir);
	cJSON_AddStringToObject(p, "status", j->v.failed ? "fail" : "pass");
	cJSON_AddBoolToObject(p, "dependencies", j->prof.lock != NULL);
	return rc;
}

static int
spec_json(struct pv_job *j, const char *dir, char **out)
{
	char pi[PATH_MAX], agent[PATH_MAX];
	cJSON *s = cJSON_CreateObject(), *a;

	snprintf(pi, sizeof(pi),
	    "%s/@mariozechner/pi-coding-agent/dist/index.js", j->c->modules);
	/* Under kz-sandbox only its /workspace and /tmp are writable. */
	if (sandboxed(j))
		snprintf(agent, sizeof(agent), "/tmp/agent");
	else
		snprintf(agent, sizeof(agent), "%s/home/agent", j->run);
	cJSON_AddStringToObject(s, "mode",
	    j->prof.kind == PV_SKILL ? "skill" : "extension");
	cJSON_AddStringToObject(s, "pi", pi);
	cJSON_AddStringToObject(s, "root", sandboxed(j) ? PV_SANDBOX_PKG : dir);
	cJSON_AddStringToObject(s, "agent_dir", agent);
	a = cJSON_AddArrayToObject(s, "skills");
	for (size_t i = 0; i < j->prof.nskills; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(j->prof.skills[i]));
	a = cJSON_AddArrayToObject(s, "extensions");
	for (size_t i = 0; i < j->prof.nexts; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(j->prof.exts[i]));
	*out = kz_json_print(s);
	cJSON_Delete(s);
	return *out ? 0 : KZ_ENOMEM;
}

/* The load run's first step failed: that is a preparation failure. */
static void
prep_failed(struct pv_job *j, const struct pv_outcome *o)
{
	cJSON *p = kz_json_get(j->body, "preparation");
	char line[200];

	if (p != NULL)
		cJSON_ReplaceItemInObjectCaseSensitive(p, "status",
		    cJSON_CreateString("fail"));
	pv_err_line(o, line, sizeof(line));
	pv_reason(&j->v, "preparation: ", line);
}

static int
load_result(struct pv_job *j, const struct pv_outcome *o)
{
	cJSON *obs = NULL;
	char w[160];

	if (o->sandbox_failed)
		return sandbox_refused(j, o);
	if (loader_unreachable(j, o))
		return loader_unavailable(j, o);
	if (sandboxed(j) && exited(o, PV_PREP_EXIT) && o->rlen == 0) {
		prep_failed(j, o);
		return 0;
	}
	if (pv_observation(o, &obs, w, sizeof(w)) != 0) {
		pv_reason(&j->v, "observation rejected: ", w);
		return 0;
	}
	if (cJSON_IsTrue(kz_json_get(obs, "loader_unavailable"))) {
		kz_why(j->why, sizeof(j->why),
		    "loader unavailable: the Pi loader did not load");
		cJSON_Delete(obs);
		return KZ_EXIT_UNAVAIL;
	}
	if (!exited(o, 0))
		pv_reason(&j->v, "loader child exited abnormally", "");
	pv_project(&j->v, j->body, j->prof.kind, obs);
	cJSON_Delete(obs);
	return 0;
}

int
pv_phase_load(struct pv_job *j, const char *dir)
{
	char *spec = NULL, *argv[13], wr[PATH_MAX + 64], rd[3][PATH_MAX + 64];
	struct pv_outcome o;
	struct pv_run r;
	int rc;

	if (spec_json(j, dir, &spec) != 0)
		return KZ_EXIT_INTERNAL;
	/* The loader child's report leaves through what authored code runs
	 * beside: its JavaScript intrinsics are frozen, and Node's
	 * permission model withholds what would reach beneath them (internal
	 * bindings, the inspector, native addons, child processes, workers)
	 * and every write but its home and the result channel. */
	snprintf(wr, sizeof(wr), "--allow-fs-write=%s/*",
	    sandboxed(j) ? "/tmp" : j->run);
	snprintf(rd[0], sizeof(rd[0]), "--allow-fs-read=%s/*", j->c->modules);
	snprintf(rd[1], sizeof(rd[1]), "--allow-fs-read=%s", j->c->child_js);
	snprintf(rd[2], sizeof(rd[2]), "--allow-fs-read=%s/*",
	    sandboxed(j) ? PV_SANDBOX_PKG : j->run);
	argv[0] = (char *)j->c->node;
	argv[1] = "--frozen-intrinsics";
	/* The flag's name since Node 22.13; 20 knows only the first. */
	argv[2] = j->node_major > 22 ||
	        (j->node_major == 22 && j->node_minor >= 13) ?
	    "--permission" :
	    "--experimental-permission";
	argv[3] = rd[0];
	argv[4] = rd[1];
	argv[5] = rd[2];
	argv[6] = "--allow-fs-read=/tmp/*";
	argv[7] = wr;
	argv[8] = "--allow-fs-write=/proc/self/fd/*";
	/* The experimental features' warnings would only crowd the
	 * diagnostics; before Node 20.11 all warnings go. */
	argv[9] = j->node_major > 20 || j->node_minor >= 11 ?
	    "--disable-warning=ExperimentalWarning" :
	    "--no-warnings";
	argv[10] = (char *)j->c->child_js;
	argv[11] = spec;
	argv[12] = NULL;
	run_init(j, &r, dir, argv, true);
	r.loader = j->c->child_js;
	r.deps = j->prof.lock != NULL ? PV_DEPS_STRICT : PV_DEPS_NONE;
	rc = pv_child_run(&r, &o, j->why, sizeof(j->why));
	free(spec);
	if (rc != 0)
		return KZ_EXIT_INTERNAL;
	rc = load_result(j, &o);
	/* stderr is the child's diagnostics: a bounded tail, never parsed. */
	if (j->v.failed && o.err_bytes > 0) {
		size_t n = strlen(o.err_tail);

		pv_diag(&j->v, o.err_tail + (n > 200 ? n - 200 : 0));
	}
	cJSON_AddNumberToObject(j->body, "child_stdout_bytes",
	    (double)o.out_bytes);
	cJSON_AddNumberToObject(j->body, "child_stderr_bytes",
	    (double)o.err_bytes);
	pv_outcome_release(&o);
	return rc;
}
