/* lib/evidence.c (kz-reset and kz-lease's resets): cgroup.procs text, the
 * projection wipe (never following a symlink out of it), the list of
 * missing evidence and the audit record of an outcome, and the host-side
 * cgroup check against real v1 and v2 cgroups (root). */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include "kz_evidence.h"
#include "kz_json.h"
#include "kz_check.h"
#include "banned.h"

START_TEST(test_procs_only)
{
	ck_assert(kz_evidence_procs_only("123\n", 123));
	ck_assert(!kz_evidence_procs_only("", 123));
	ck_assert(!kz_evidence_procs_only("123\n456\n", 123));
	ck_assert(!kz_evidence_procs_only("456\n123\n", 123));
	ck_assert(!kz_evidence_procs_only("1234\n", 123));
	ck_assert(!kz_evidence_procs_only("123", 123));
}
END_TEST

static void
touch(const char *p)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert(fd >= 0);
	ck_assert(write(fd, "x", 1) == 1);
	close(fd);
}

START_TEST(test_projection_wipe)
{
	char d[64], p[160], out[160], cmd[160];
	struct stat sb;

	snprintf(d, sizeof(d), "/tmp/kz-reset-unit.XXXXXX");
	ck_assert(mkdtemp(d) != NULL);
	snprintf(out, sizeof(out), "%s/outside", d);
	ck_assert(mkdir(out, 0755) == 0);
	snprintf(p, sizeof(p), "%s/outside/keep", d);
	touch(p);
	snprintf(p, sizeof(p), "%s/proj", d);
	ck_assert(mkdir(p, 0755) == 0);
	ck_assert(kz_evidence_dir_empty(p));
	snprintf(p, sizeof(p), "%s/proj/f", d);
	touch(p);
	chmod(p, 0444);
	snprintf(p, sizeof(p), "%s/proj/sub", d);
	ck_assert(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/proj/sub/g", d);
	touch(p);
	/* Links to a directory and a file outside: removed, not followed. */
	snprintf(p, sizeof(p), "%s/proj/sub/dirlink", d);
	ck_assert(symlink(out, p) == 0);
	snprintf(p, sizeof(p), "%s/proj/filelink", d);
	snprintf(cmd, sizeof(cmd), "%s/outside/keep", d);
	ck_assert(symlink(cmd, p) == 0);
	snprintf(p, sizeof(p), "%s/proj", d);
	ck_assert(!kz_evidence_dir_empty(p)); /* only looks */
	ck_assert(kz_evidence_projection(p));
	ck_assert(kz_evidence_dir_empty(p));
	ck_assert(stat(cmd, &sb) == 0);
	/* A projection path that is itself a symlink is not evidence. */
	snprintf(p, sizeof(p), "%s/projlink", d);
	ck_assert(symlink(out, p) == 0);
	ck_assert(!kz_evidence_dir_empty(p));
	ck_assert(!kz_evidence_projection(p));
	ck_assert(stat(cmd, &sb) == 0);
	snprintf(p, sizeof(p), "%s/absent", d);
	ck_assert(!kz_evidence_projection(p));
	ck_assert(!kz_evidence_dir_empty(p));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d);
	ck_assert(system(cmd) == 0);
}
END_TEST

START_TEST(test_missing)
{
	cJSON *ev = cJSON_CreateObject(), *m;
	char buf[64];

	cJSON_AddBoolToObject(ev, "wipe_ok", true);
	cJSON_AddBoolToObject(ev, "health_id", false);
	cJSON_AddNumberToObject(ev, "count", 0);
	cJSON_AddBoolToObject(ev, "projection_empty", false);
	m = kz_evidence_missing(ev, buf, sizeof(buf));
	ck_assert_int_eq(cJSON_GetArraySize(m), 2);
	ck_assert_str_eq(buf, "health_id,projection_empty");
	ck_assert_str_eq(cJSON_GetArrayItem(m, 0)->valuestring, "health_id");
	ck_assert_str_eq(cJSON_GetArrayItem(m, 1)->valuestring,
	    "projection_empty");
	/* A buffer too small keeps what fits, terminated. */
	cJSON_Delete(m);
	m = kz_evidence_missing(ev, buf, 12);
	ck_assert_str_eq(buf, "health_id,p");
	cJSON_Delete(m);
	cJSON_Delete(ev);
}
END_TEST

/* The record carries the outcome, the integer token and the run id, and
 * nothing of the host-side output ("worker", the raw token). */
START_TEST(test_record)
{
	cJSON *out = cJSON_CreateObject(), *r;

	cJSON_AddStringToObject(out, "worker", "w1");
	cJSON_AddItemToObject(out, "evidence", cJSON_CreateObject());
	cJSON_AddItemToObject(out, "missing", cJSON_CreateArray());
	cJSON_AddStringToObject(out, "result", "warm");
	r = kz_evidence_record(out, "w1", "0123abcd:42", "00ff", 7);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(kz_json_get(r, "worker_id")->valuestring, "w1");
	ck_assert_int_eq(kz_json_get(r, "token")->valueint, 42);
	ck_assert_str_eq(kz_json_get(r, "rid")->valuestring, "00ff");
	ck_assert_str_eq(kz_json_get(r, "result")->valuestring, "warm");
	ck_assert_int_eq(kz_json_get(r, "duration_ms")->valueint, 7);
	ck_assert_ptr_null(kz_json_get(r, "worker"));
	cJSON_Delete(r);
	r = kz_evidence_record(out, "w1", "bad", NULL, 0);
	ck_assert_ptr_null(kz_json_get(r, "rid"));
	ck_assert_int_eq(kz_json_get(r, "token")->valueint, 0);
	cJSON_Delete(r);
	cJSON_Delete(out);
}
END_TEST

/*
 * The one decision kz-lease and kz-reset share: publish only when clean
 * with a generation, retire otherwise, and the script's refusal of the
 * token is a stale token whatever the evidence said.
 */
START_TEST(test_decision)
{
	struct kz_reset r;
	const char *arg = NULL;
	cJSON *stale = cJSON_Parse("{\"err\":\"stale_token\"}");
	cJSON *done = cJSON_Parse("{\"worker\":\"w1\"}");

	memset(&r, 0, sizeof(r));
	r.out = cJSON_CreateObject();
	r.clean = true;
	snprintf(r.gen, sizeof(r.gen), "7");
	ck_assert_int_eq(kz_reset_script(&r, &arg), KZ_POOL_PUBLISH);
	ck_assert_str_eq(arg, "7");
	ck_assert_str_eq(kz_reset_outcome(&r, done), "warm");
	ck_assert_str_eq(r.kind, "reset");
	ck_assert_str_eq(kz_json_get(r.out, "result")->valuestring, "warm");
	kz_reset_release(&r);
	r.out = cJSON_CreateObject();
	ck_assert_str_eq(kz_reset_outcome(&r, stale), "stale_token");
	ck_assert_str_eq(r.kind, "retire");
	kz_reset_release(&r);
	r.clean = false;
	snprintf(r.miss, sizeof(r.miss), "agent_ipc_empty");
	ck_assert_int_eq(kz_reset_script(&r, &arg), KZ_POOL_RETIRE);
	ck_assert_str_eq(arg, "agent_ipc_empty");
	ck_assert_str_eq(kz_reset_outcome(&r, done), "retired");
	ck_assert_str_eq(r.kind, "retire");
	r.miss[0] = '\0';
	ck_assert_int_eq(kz_reset_script(&r, &arg), KZ_POOL_RETIRE);
	ck_assert_str_eq(arg, "no_generation");
	kz_reset_release(&r);
	kz_reset_release(&r); /* twice is harmless */
	cJSON_Delete(stale);
	cJSON_Delete(done);
}
END_TEST

/* A worker that does not answer proves nothing: every item is recorded,
 * false, and the decision retires it. */
START_TEST(test_silent_worker)
{
	struct kz_reset r;
	const char *arg;
	int n = 0;

	kz_reset_prove(&r, "/nonexistent", "w1", "/nonexistent/sock", 100);
	ck_assert_ptr_nonnull(r.out);
	ck_assert(!r.clean);
	for (const cJSON *x = kz_json_get(r.out, "evidence")->child; x != NULL;
	     x = x->next)
		n += cJSON_IsFalse(x);
	ck_assert_int_ge(n, 16);
	ck_assert_ptr_nonnull(strstr(r.miss, "agent_namespaces_new"));
	ck_assert_int_eq(kz_reset_script(&r, &arg), KZ_POOL_RETIRE);
	kz_reset_release(&r);
}
END_TEST

/* ---- the host-side cgroup check, on real cgroups ---- */

/* A child that waits to be killed. */
static pid_t
idler(void)
{
	pid_t p = fork();

	ck_assert(p >= 0);
	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

static void
reap(pid_t p)
{
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

/* Writes pid into dir/file; false when the kernel refused it. */
static bool
put(const char *dir, const char *file, pid_t pid)
{
	char p[PATH_MAX], v[32];
	int fd, n;
	bool ok;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	snprintf(v, sizeof(v), "%d", (int)pid);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
		return false;
	n = (int)strlen(v);
	ok = write(fd, v, (size_t)n) == n;
	close(fd);
	return ok;
}

static bool
is_cgroup2(const char *dir)
{
	struct statfs sf;

	return statfs(dir, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* v2: the agent alone in <id>/agent, nothing in <id> or anywhere under
 * <id>/run.  Here the hybrid host's cgroup2 mount offers no controller,
 * which this check needs none of. */
START_TEST(test_cgroup_v2)
{
	const char *roots[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};
	char top[256], w[320], leaf[400], run[400], deep[480], rootprocs[256],
	    sess[400], init[400];
	const char *root = NULL, *id = "wev2test";
	pid_t a, b;

	for (size_t i = 0; i < 2 && root == NULL; i++)
		if (is_cgroup2(roots[i]))
			root = roots[i];
	if (root == NULL || geteuid() != 0) {
		fprintf(stderr,
		    "# skip test_cgroup_v2: no cgroup2 or not root\n");
		return;
	}
	snprintf(top, sizeof(top), "%s/kzt-ev-%d", root, (int)getpid());
	snprintf(w, sizeof(w), "%s/%s", top, id);
	snprintf(leaf, sizeof(leaf), "%s/agent", w);
	snprintf(run, sizeof(run), "%s/run", w);
	snprintf(deep, sizeof(deep), "%s/run/deep", w);
	snprintf(sess, sizeof(sess), "%s/browser-1", w);
	snprintf(init, sizeof(init), "%s/init", w);
	snprintf(rootprocs, sizeof(rootprocs), "%s", root);
	ck_assert(mkdir(top, 0755) == 0);
	ck_assert(mkdir(w, 0755) == 0);
	ck_assert(mkdir(leaf, 0755) == 0);
	ck_assert(mkdir(run, 0755) == 0);
	ck_assert(mkdir(deep, 0755) == 0);
	ck_assert(mkdir(sess, 0755) == 0);
	ck_assert(mkdir(init, 0755) == 0);
	a = idler();
	b = idler();
	ck_assert(put(leaf, "cgroup.procs", a));
	ck_assert(kz_evidence_cgroup(a, id));
	/* Another worker's id, or a process that is not the agent. */
	ck_assert(!kz_evidence_cgroup(a, "wother"));
	ck_assert(!kz_evidence_cgroup(b, id));
	/* A process left in run, in a cgroup beneath it, beside the agent,
	 * or in <id> itself. */
	ck_assert(put(run, "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(deep, "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(leaf, "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(w, "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	/* In a browser session's cgroup, or any other child but init. */
	ck_assert(put(sess, "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	/* The next tenant's init is expected. */
	ck_assert(put(init, "cgroup.procs", b));
	ck_assert(kz_evidence_cgroup(a, id));
	/* Gone from the tree: clean again. */
	ck_assert(put(rootprocs, "cgroup.procs", b));
	ck_assert(kz_evidence_cgroup(a, id));
	/* Without a run cgroup, nothing is proven. */
	ck_assert(rmdir(deep) == 0 && rmdir(run) == 0);
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(mkdir(run, 0755) == 0 && mkdir(deep, 0755) == 0);
	/* An agent that is not in a leaf named agent. */
	ck_assert(put(w, "cgroup.procs", a));
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(rootprocs, "cgroup.procs", a));
	reap(a);
	reap(b);
	ck_assert(rmdir(deep) == 0 && rmdir(run) == 0 && rmdir(leaf) == 0 &&
	    rmdir(sess) == 0 && rmdir(init) == 0 && rmdir(w) == 0 &&
	    rmdir(top) == 0);
}
END_TEST

/* v1: the agent alone in <id> of the memory and pids hierarchies, their
 * run children empty; a worker in one of them only is no layout
 * kz-sandbox makes. */
START_TEST(test_cgroup_v1)
{
	static const char *const ctl[] = {"memory", "pids"};
	char top[2][128], w[2][192], run[2][256], sess[2][256], base[2][64];
	const char *id = "wev1test";
	pid_t a, b;

	snprintf(base[0], sizeof(base[0]), "/sys/fs/cgroup/memory");
	if (geteuid() != 0 ||
	    access("/sys/fs/cgroup/memory/tasks", F_OK) != 0 ||
	    access("/sys/fs/cgroup/pids/tasks", F_OK) != 0) {
		fprintf(stderr,
		    "# skip test_cgroup_v1: no v1 memory and pids\n");
		return;
	}
	for (int i = 0; i < 2; i++) {
		snprintf(base[i], sizeof(base[i]), "/sys/fs/cgroup/%s", ctl[i]);
		snprintf(top[i], sizeof(top[i]), "%s/kzt-ev-%d", base[i],
		    (int)getpid());
		snprintf(w[i], sizeof(w[i]), "%s/%s", top[i], id);
		snprintf(run[i], sizeof(run[i]), "%s/run", w[i]);
		snprintf(sess[i], sizeof(sess[i]), "%s/browser-1", w[i]);
		ck_assert(mkdir(top[i], 0755) == 0);
		ck_assert(mkdir(w[i], 0755) == 0);
		ck_assert(mkdir(run[i], 0755) == 0);
		ck_assert(mkdir(sess[i], 0755) == 0);
	}
	a = idler();
	b = idler();
	ck_assert(put(w[0], "cgroup.procs", a));
	/* In memory only. */
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(w[1], "cgroup.procs", a));
	ck_assert(kz_evidence_cgroup(a, id));
	ck_assert(!kz_evidence_cgroup(a, "wother"));
	ck_assert(put(run[1], "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(base[1], "cgroup.procs", b));
	ck_assert(put(w[0], "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(base[0], "cgroup.procs", b));
	ck_assert(kz_evidence_cgroup(a, id));
	ck_assert(put(sess[0], "cgroup.procs", b));
	ck_assert(!kz_evidence_cgroup(a, id));
	ck_assert(put(base[0], "cgroup.procs", b));
	ck_assert(kz_evidence_cgroup(a, id));
	for (int i = 0; i < 2; i++)
		ck_assert(put(base[i], "cgroup.procs", a));
	reap(a);
	reap(b);
	for (int i = 0; i < 2; i++)
		ck_assert(rmdir(run[i]) == 0 && rmdir(sess[i]) == 0 &&
		    rmdir(w[i]) == 0 && rmdir(top[i]) == 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("reset-evidence");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_procs_only);
	tcase_add_test(tc, test_projection_wipe);
	tcase_add_test(tc, test_missing);
	tcase_add_test(tc, test_record);
	tcase_add_test(tc, test_decision);
	tcase_add_test(tc, test_silent_worker);
	tcase_add_test(tc, test_cgroup_v2);
	tcase_add_test(tc, test_cgroup_v1);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
