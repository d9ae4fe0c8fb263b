/*
 * One validation, start to receipt.  Returns the process exit code:
 * 0 pass, 1 refused or failed, 2 bad input, 3 sandbox or loader
 * unavailable, 4 internal.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kz_path.h"
#include "pv.h"
#include "banned.h"

struct job {
	const struct pv_conf *c;
	struct pv_profile prof;
	struct pv_tree tree;
	int filesfd;
	char cwd[3000], run[3200];
	int64_t deadline;
	cJSON *body, *reasons, *diags;
	bool failed;
	char why[512];
};

static void
reason(struct job *j, const char *what, const char *detail)
{
	char b[PV_DIAG_LEN];

	snprintf(b, sizeof(b), "%s%.200s", what, detail);
	cJSON_AddItemToArray(j->reasons, cJSON_CreateString(b));
	j->failed = true;
}

static void
diag(struct job *j, const char *s)
{
	char b[PV_DIAG_LEN];

	if (cJSON_GetArraySize(j->diags) >= PV_DIAG_MAX)
		return;
	snprintf(b, sizeof(b), "%s", s);
	if (!kz_utf8_valid(b, strlen(b)))
		return;
	cJSON_AddItemToArray(j->diags, cJSON_CreateString(b));
}

bool
pv_hex64(const char *s)
{
	if (s == NULL || strlen(s) != PV_DIGEST_HEX)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* Runs a trusted host binary (node --version) and keeps its first line. */
static int
host_line(char *const argv[], char *out, size_t olen)
{
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	int p[2], st;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) != 0)
		return KZ_ESYS;
	if ((pid = fork()) == 0) {
		dup2(p[1], 1);
		execve(argv[0], argv, env);
		_exit(127);
	}
	close(p[1]);
	n = pid > 0 ? read(p[0], out, olen - 1) : -1;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	if (pid < 0 || n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return KZ_EUNAVAIL;
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

/* What the pinned Pi package says its version is, read by the parent. */
static int
pi_version(const struct pv_conf *c, char *out, size_t olen)
{
	char p[PATH_MAX], buf[65536];
	cJSON *o = NULL;
	const char *v;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/@mariozechner/pi-coding-agent/package.json",
	    c->modules);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return KZ_EUNAVAIL;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n <= 0 || kz_json_parse_object(buf, (size_t)n, &o, NULL, 0) != 0)
		return KZ_EUNAVAIL;
	if (kz_json_str(o, "version", 64, &v, NULL, 0) != 0) {
		cJSON_Delete(o);
		return KZ_EUNAVAIL;
	}
	snprintf(out, olen, "%s", v);
	cJSON_Delete(o);
	return 0;
}

static int
runtime(struct job *j)
{
	char nodev[64], piv[64];
	char *argv[] = {(char *)j->c->node, "--version", NULL};
	cJSON *rt;

	if (access(j->c->node, X_OK) != 0 || host_line(argv, nodev,
	    sizeof(nodev)) != 0) {
		kz_why(j->why, sizeof(j->why), "node is not available");
		return 3;
	}
	if (access(j->c->child_js, R_OK) != 0 ||
	    pi_version(j->c, piv, sizeof(piv)) != 0 ||
	    strcmp(piv, j->c->pi_version) != 0) {
		kz_why(j->why, sizeof(j->why), "the pinned Pi loader %s is not "
		    "installed", j->c->pi_version);
		return 3;
	}
	if (j->c->iso == PV_ISO_SANDBOX && access(j->c->sandbox_bin, X_OK)) {
		kz_why(j->why, sizeof(j->why), "kz-sandbox is not available");
		return 3;
	}
	if ((rt = cJSON_AddObjectToObject(j->body, "runtime")) == NULL)
		return 4;
	cJSON_AddStringToObject(rt, "node", nodev);
	cJSON_AddStringToObject(rt, "pi", piv);
	cJSON_AddStringToObject(rt, "isolation", j->c->iso == PV_ISO_SANDBOX ?
	    "kz-sandbox" : "unshare");
	return 0;
}

static void
run_init(struct job *j, struct pv_run *r, const char *cwd, char **argv,
    bool channel)
{
	static char home[PATH_MAX];

	memset(r, 0, sizeof(*r));
	snprintf(home, sizeof(home), "%s/home", j->run);
	r->iso = j->c->iso;
	r->sandbox_bin = j->c->sandbox_bin;
	r->uid = j->c->uid;
	r->cwd = cwd;
	r->argv = argv;
	r->home = home;
	r->channel = channel;
	r->result_max = j->c->result_max;
	r->deadline_ms = j->deadline;
}

/* The TAP summary of node --test: diagnostics, never the verdict. */
static void
tap_summary(cJSON *t, const char *tail)
{
	static const char *const keys[] = {"tests", "pass", "fail",
		"cancelled", "skipped", "todo", NULL};
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

static int
phase_tests(struct job *j)
{
	static char tpath[PV_MAX_RES][PATH_MAX + 8192];
	char dir[PATH_MAX], *argv[PV_MAX_RES + 4];
	struct pv_outcome o;
	struct pv_run r;
	cJSON *t, *sum;
	int n = 0, rc;

	snprintf(dir, sizeof(dir), "%s/test", j->run);
	if (pv_materialize(j->filesfd, &j->tree, AT_FDCWD, dir, j->c->uid,
	    j->why, sizeof(j->why)) != 0)
		return 4;
	argv[n++] = (char *)j->c->node;
	argv[n++] = "--test";
	for (size_t i = 0; i < j->prof.ntests; i++) {
		/* Absolute, as the child sees them: cwd differs per mode. */
		snprintf(tpath[i], sizeof(tpath[i]), "%s/%s", j->c->iso ==
		    PV_ISO_SANDBOX ? PV_SANDBOX_ROOT : dir, j->prof.tests[i]);
		argv[n++] = tpath[i];
	}
	argv[n] = NULL;
	run_init(j, &r, dir, argv, false);
	if (pv_child_run(&r, &o, j->why, sizeof(j->why)) != 0)
		return 4;
	rc = o.sandbox_failed ? 3 : 0;
	t = cJSON_AddObjectToObject(j->body, "tests");
	cJSON_AddStringToObject(t, "status", o.timed_out ? "timeout" :
	    WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0 ? "pass" :
	    "fail");
	cJSON_AddNumberToObject(t, "files", (double)j->prof.ntests);
	sum = cJSON_AddObjectToObject(t, "diagnostic_summary");
	tap_summary(sum, o.out_tail);
	if (o.timed_out)
		reason(j, "extension tests missed the deadline", "");
	else if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
		reason(j, "extension tests failed", "");
	pv_outcome_release(&o);
	/* The test tree is discarded whatever the tests did to it. */
	if (pv_remove_tree(dir) != 0 && rc == 0)
		rc = 4;
	return rc;
}

/*
 * A fresh exact copy for the loader, dependencies reinstalled from the
 * package's lock (no scripts, no network), then proven equal to the
 * artifact.  Failure here keeps the test evidence and fails validation.
 */
static int
phase_prepare(struct job *j, const char *dir)
{
	char *argv[] = {"/usr/bin/npm", "ci", "--offline", "--ignore-scripts",
		"--no-audit", "--no-fund", NULL};
	cJSON *p = cJSON_AddObjectToObject(j->body, "preparation");
	struct pv_tree again;
	struct pv_outcome o;
	struct pv_run r;
	int dfd, rc = 0;

	if (pv_materialize(j->filesfd, &j->tree, AT_FDCWD, dir, j->c->uid,
	    j->why, sizeof(j->why)) != 0) {
		reason(j, "preparation: ", j->why);
		goto out;
	}
	if (j->prof.lock != NULL) {
		run_init(j, &r, dir, argv, false);
		if (pv_child_run(&r, &o, j->why, sizeof(j->why)) != 0)
			return 4;
		if (o.sandbox_failed)
			rc = 3;
		else if (o.timed_out)
			reason(j, "preparation: dependency reinstall missed the "
			    "deadline", "");
		else if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
			reason(j, "preparation: dependency reinstall from the "
			    "lock failed", "");
		pv_outcome_release(&o);
	}
	/* The reinstalled tree is ours again: the loader's child only reads. */
	if (pv_chown_tree(dir, geteuid()) != 0)
		return 4;
	if (!j->failed && rc == 0) {
		if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			return 4;
		if (pv_tree_scan(dfd, true, &again, j->why,
		    sizeof(j->why)) != 0 ||
		    strcmp(again.digest, j->tree.digest) != 0)
			reason(j, "preparation: the fresh copy differs from the "
			    "artifact", "");
		pv_tree_release(&again);
		close(dfd);
	}
out:
	cJSON_AddStringToObject(p, "status", j->failed ? "fail" : "pass");
	cJSON_AddBoolToObject(p, "dependencies", j->prof.lock != NULL);
	return rc;
}

/* Copies a list of short strings from the untrusted observation. */
static cJSON *
bounded_list(struct job *j, const cJSON *src)
{
	cJSON *a = cJSON_CreateArray(), *e;
	int n = 0;

	cJSON_ArrayForEach(e, src) {
		if (!cJSON_IsString(e) || strlen(e->valuestring) > 128 ||
		    ++n > 64) {
			diag(j, "observation list truncated");
			break;
		}
		cJSON_AddItemToArray(a, cJSON_CreateString(e->valuestring));
	}
	return a;
}

static void
unsupported(struct job *j, cJSON *un, const char *path, const char *kind,
    const cJSON *names)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, names) {
		cJSON *u;

		if (!cJSON_IsString(e) || strlen(e->valuestring) > 128 ||
		    cJSON_GetArraySize(un) >= 64)
			continue;
		if (strcmp(kind, "handler") == 0 &&
		    pv_event_supported(e->valuestring))
			continue;
		u = cJSON_CreateObject();
		cJSON_AddStringToObject(u, "extension", path);
		cJSON_AddStringToObject(u, "kind", kind);
		cJSON_AddStringToObject(u, "name", e->valuestring);
		cJSON_AddItemToArray(un, u);
		j->failed = true;
	}
}

static void
project_ext(struct job *j, cJSON *exts, cJSON *un, const cJSON *x)
{
	static const char *const other[] = {"flags", "shortcuts", "renderers",
		NULL};
	static const char *const kind[] = {"flag", "shortcut", "renderer"};
	const cJSON *p = kz_json_get(x, "path"), *e;
	const char *path = cJSON_IsString(p) && strlen(p->valuestring) < 256 ?
	    p->valuestring : "?";
	cJSON *o = cJSON_CreateObject(), *hooks = cJSON_CreateArray();

	cJSON_AddStringToObject(o, "path", path);
	cJSON_AddItemToObject(o, "tools", bounded_list(j,
	    kz_json_get(x, "tools")));
	cJSON_AddItemToObject(o, "commands", bounded_list(j,
	    kz_json_get(x, "commands")));
	cJSON_ArrayForEach(e, kz_json_get(x, "handlers"))
		if (cJSON_IsString(e) && pv_event_supported(e->valuestring))
			cJSON_AddItemToArray(hooks,
			    cJSON_CreateString(e->valuestring));
	cJSON_AddItemToObject(o, "hooks", hooks);
	cJSON_AddItemToArray(exts, o);
	unsupported(j, un, path, "handler", kz_json_get(x, "handlers"));
	for (int i = 0; other[i] != NULL; i++)
		unsupported(j, un, path, kind[i], kz_json_get(x, other[i]));
}

static void
project(struct job *j, const cJSON *obs)
{
	cJSON *s = cJSON_AddObjectToObject(j->body, "surface");
	cJSON *un = cJSON_AddArrayToObject(j->body, "unsupported");
	cJSON *exts = cJSON_AddArrayToObject(s, "extensions");
	cJSON *sk = cJSON_AddArrayToObject(s, "skills");
	const cJSON *e;
	int nun;

	cJSON_ArrayForEach(e, kz_json_get(obs, "skills"))
		if (cJSON_IsString(kz_json_get(e, "name")) &&
		    cJSON_GetArraySize(sk) < 64 &&
		    strlen(kz_json_get(e, "name")->valuestring) <= 128)
			cJSON_AddItemToArray(sk, cJSON_CreateString(
			    kz_json_get(e, "name")->valuestring));
	cJSON_ArrayForEach(e, kz_json_get(obs, "extensions"))
		if (cJSON_IsObject(e) && cJSON_GetArraySize(exts) < 64)
			project_ext(j, exts, un, e);
	unsupported(j, un, "*", "provider", kz_json_get(obs, "providers"));
	nun = cJSON_GetArraySize(un);
	if (nun > 0)
		reason(j, "the extension registers what kz does not support",
		    "");
	cJSON_ArrayForEach(e, kz_json_get(obs, "skill_diagnostics"))
		if (cJSON_IsString(e))
			diag(j, e->valuestring);
	cJSON_ArrayForEach(e, kz_json_get(obs, "errors"))
		if (cJSON_IsString(e)) {
			diag(j, e->valuestring);
			reason(j, "the Pi loader reported an error", "");
		}
	if (j->prof.kind == PV_SKILL && cJSON_GetArraySize(sk) == 0)
		reason(j, "the Pi skill loader found no skill", "");
}

static int
spec_json(struct job *j, const char *dir, char **out)
{
	char pi[PATH_MAX], agent[PATH_MAX];
	cJSON *s = cJSON_CreateObject(), *a;
	bool sbx = j->c->iso == PV_ISO_SANDBOX;

	snprintf(pi, sizeof(pi), "%s/@mariozechner/pi-coding-agent/dist/"
	    "index.js", j->c->modules);
	/* Under kz-sandbox only its /tmp is writable. */
	if (sbx)
		snprintf(agent, sizeof(agent), "/tmp/agent");
	else
		snprintf(agent, sizeof(agent), "%s/home/agent", j->run);
	cJSON_AddStringToObject(s, "mode", j->prof.kind == PV_SKILL ?
	    "skill" : "extension");
	cJSON_AddStringToObject(s, "pi", pi);
	cJSON_AddStringToObject(s, "root", sbx ? PV_SANDBOX_ROOT : dir);
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

static int
phase_load(struct job *j, const char *dir)
{
	char *spec = NULL, *argv[5];
	struct pv_outcome o;
	struct pv_run r;
	cJSON *obs = NULL;
	char w[160];
	int rc = 0;

	if (spec_json(j, dir, &spec) != 0)
		return 4;
	argv[0] = (char *)j->c->node;
	argv[1] = (char *)j->c->child_js;
	argv[2] = spec;
	argv[3] = NULL;
	run_init(j, &r, dir, argv, true);
	if (pv_child_run(&r, &o, j->why, sizeof(j->why)) != 0) {
		free(spec);
		return 4;
	}
	free(spec);
	if (o.sandbox_failed) {
		kz_why(j->why, sizeof(j->why), "the sandbox did not start");
		rc = 3;
	} else if (pv_observation(&o, &obs, w, sizeof(w)) != 0) {
		reason(j, "observation rejected: ", w);
	} else if (cJSON_IsTrue(kz_json_get(obs, "loader_unavailable"))) {
		kz_why(j->why, sizeof(j->why), "the Pi loader did not load");
		rc = 3;
	} else {
		if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
			reason(j, "loader child exited abnormally", "");
		project(j, obs);
	}
	/* stderr is the child's diagnostics: a bounded tail, never parsed. */
	if (j->failed && o.err_bytes > 0) {
		size_t n = strlen(o.err_tail);

		diag(j, o.err_tail + (n > 200 ? n - 200 : 0));
	}
	cJSON_AddNumberToObject(j->body, "child_stdout_bytes",
	    (double)o.out_bytes);
	cJSON_AddNumberToObject(j->body, "child_stderr_bytes",
	    (double)o.err_bytes);
	cJSON_Delete(obs);
	pv_outcome_release(&o);
	return rc;
}

static int
job_open(struct job *j, const char *profile, const char *files,
    const char *contract)
{
	int r;

	if (!pv_hex64(contract)) {
		kz_why(j->why, sizeof(j->why), "contract digest must be 64 "
		    "lowercase hex characters");
		return 2;
	}
	if ((r = pv_workspace_check(j->cwd, sizeof(j->cwd), j->why,
	    sizeof(j->why))) != 0)
		return 2;
	if (pv_profile_load(profile, j->c->deadline_max, &j->prof, j->why,
	    sizeof(j->why)) != 0)
		return 2;
	j->deadline = pv_now_ms() + j->prof.deadline_ms;
	if ((j->filesfd = open(files, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) <
	    0) {
		kz_why(j->why, sizeof(j->why), "cannot open the files directory");
		return 2;
	}
	/* Resources first: nothing is read before every one resolves. */
	if (pv_resources_check(j->filesfd, &j->prof, j->why,
	    sizeof(j->why)) != 0)
		return 1;
	if (pv_tree_scan(j->filesfd, false, &j->tree, j->why, sizeof(j->why)) != 0)
		return 1;
	for (size_t i = 0; i < j->tree.n; i++)
		if (strncmp(j->tree.paths[i], "node_modules/", 13) == 0) {
			kz_why(j->why, sizeof(j->why), "dependencies come from "
			    "the lock, not from the files");
			return 1;
		}
	return 0;
}

static int
job_body(struct job *j, const char *contract)
{
	char tag[] = "kz-pi-validate 0.1.0";

	if ((j->body = cJSON_CreateObject()) == NULL)
		return 4;
	cJSON_AddNumberToObject(j->body, "v", 1);
	cJSON_AddStringToObject(j->body, "validator", tag);
	cJSON_AddStringToObject(j->body, "kind", j->prof.kind == PV_SKILL ?
	    "skill" : "extension");
	cJSON_AddStringToObject(j->body, "artifact_sha256", j->tree.digest);
	cJSON_AddStringToObject(j->body, "contract_digest", contract);
	cJSON_AddNumberToObject(j->body, "files", (double)j->tree.n);
	cJSON_AddNumberToObject(j->body, "bytes", (double)j->tree.total);
	cJSON_AddNumberToObject(j->body, "validated_at", (double)time(NULL));
	j->reasons = cJSON_AddArrayToObject(j->body, "reasons");
	j->diags = cJSON_AddArrayToObject(j->body, "diagnostics");
	if (j->reasons == NULL || j->diags == NULL)
		return 4;
	return 0;
}

static int
write_receipt(struct job *j, const char *out)
{
	char *text = NULL;
	size_t len;
	int fd, rc = 0;

	cJSON_AddStringToObject(j->body, "result", j->failed ? "fail" : "pass");
	if (pv_receipt_sign(j->body, j->c->keyfile, &text, j->why,
	    sizeof(j->why)) != 0)
		return 3;
	len = strlen(text);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	    0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len ||
	    write(fd, "\n", 1) != 1) {
		kz_why(j->why, sizeof(j->why), "cannot write the receipt");
		rc = 2;
	}
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}

static int
job_run(struct job *j)
{
	char home[PATH_MAX + 8], load[PATH_MAX + 8];
	int rc;

	if ((rc = runtime(j)) != 0)
		return rc;
	if (pv_static_read(j->filesfd, &j->prof, cJSON_AddObjectToObject(
	    j->body, "static"), j->why, sizeof(j->why)) != 0) {
		reason(j, "static resource: ", j->why);
		return 0;
	}
	snprintf(j->run, sizeof(j->run), "%s/pv.XXXXXX", j->cwd);
	if (mkdtemp(j->run) == NULL || chmod(j->run, 0755) != 0) {
		j->run[0] = '\0';
		return 4;
	}
	snprintf(home, sizeof(home), "%s/home", j->run);
	if (mkdir(home, 0700) != 0 || chown(home, j->c->uid, j->c->uid) != 0)
		return 4;
	if (j->prof.kind == PV_EXTENSION) {
		if ((rc = phase_tests(j)) != 0 || j->failed)
			return rc;
	}
	snprintf(load, sizeof(load), "%s/load", j->run);
	if ((rc = phase_prepare(j, load)) != 0 || j->failed)
		return rc;
	return phase_load(j, load);
}

int
pv_validate(const struct pv_conf *c, const char *profile, const char *files,
    const char *contract, const char *out)
{
	struct job j;
	int rc;

	memset(&j, 0, sizeof(j));
	j.c = c;
	j.filesfd = -1;
	if ((rc = job_open(&j, profile, files, contract)) != 0)
		goto out;
	if ((rc = job_body(&j, contract)) != 0)
		goto out;
	if ((rc = job_run(&j)) != 0)
		goto out;
	if ((rc = write_receipt(&j, out)) == 0)
		rc = j.failed ? 1 : 0;
	if (j.failed && cJSON_GetArraySize(j.reasons) > 0)
		kz_why(j.why, sizeof(j.why), "%s",
		    cJSON_GetArrayItem(j.reasons, 0)->valuestring);
out:
	if (j.run[0] != '\0' && pv_remove_tree(j.run) != 0)
		kz_log(KZ_LOG_WARN, "pi.cleanup", KZ_ESYS,
		    "could not remove the run directory", NULL);
	if (rc != 0)
		kz_log(rc == 1 ? KZ_LOG_INFO : KZ_LOG_ERROR, rc == 1 ?
		    "pi.refuse" : "pi.fail", 0, j.why, "artifact",
		    j.tree.digest[0] ? j.tree.digest : NULL, NULL);
	else
		kz_log(KZ_LOG_INFO, "pi.pass", 0, "validation passed",
		    "artifact", j.tree.digest, NULL);
	if (rc != 0)
		fprintf(stderr, "kz-pi-validate: %s\n", j.why);
	if (j.filesfd >= 0)
		close(j.filesfd);
	cJSON_Delete(j.body);
	pv_tree_release(&j.tree);
	pv_profile_release(&j.prof);
	return rc;
}
