/*
 * One invocation, end to end: check the request, find the package and the
 * tool, apply the collaboration policy, audit (an invocation that cannot
 * be audited does not run), stage a fresh read-only projection (the
 * package, copied out of the cache and proven to hash to its name, and the
 * member files, each opened beneath the workspace through a rooted path),
 * run the tool in the sandbox (a one-shot, or one of serve's warm
 * single-use workers: warm.c), and return its sanitized result.
 *
 * This file keeps the invocation's sequence: the checks, the policy, the
 * audit records, the staging of the projection and the listing;
 * invoke_run.c holds the run step: the tool's environment, command and
 * grant, the run, and its sanitized result.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_path.h"
#include "kz_wire.h"
#include "kz_tree.h"
#include "pkgrun.h"
#include "invoke_int.h"
#include "banned.h"

void
pr_set_result(struct pr_result *res, enum kz_exit code, const char *wire,
    const char *why)
{
	res->code = code;
	res->wire = wire;
	if (why != NULL && why != res->why)
		snprintf(res->why, sizeof(res->why), "%s", why);
}

/* Copies member file rel from wsfd into filesfd, its room taken first. */
static int
copy_member(const struct pr_conf *c, int wsfd, int filesfd, const char *rel,
    uint64_t *left, char *why, size_t wlen)
{
	struct pr_space sp = {0, 0};
	const char *base;
	char buf[65536];
	int in = -1, out = -1, pfd = -1, r;
	struct stat st;
	ssize_t n;

	if ((r = kz_path_open(wsfd, rel, strlen(rel), KZ_PATH_FILE, &in, NULL,
	         0)) != 0)
		return r;
	if (fstat(in, &st) != 0) {
		r = KZ_ESYS;
		goto out;
	}
	/* The file's pages, and its directories' inodes at most. */
	if ((uint64_t)st.st_size > *left) {
		kz_why(why, wlen, "member files exceed the size limit");
		r = KZ_ETOOBIG;
		goto out;
	}
	if ((r = pr_space_take(filesfd, c->free_min,
	         pr_space_file((uint64_t)st.st_size), KZ_PATH_DEPTH_MAX, &sp,
	         why, wlen)) != 0)
		goto out;
	if ((r = kz_path_mkparent(filesfd, rel, 0755, (uid_t)-1, (gid_t)-1,
	         &pfd, &base, NULL)) != 0)
		goto out;
	if ((out = openat(pfd, base,
	         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)) <
	    0) {
		r = errno == EEXIST ? KZ_EINVAL : KZ_ESYS;
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if ((uint64_t)n > *left) {
			kz_why(why, wlen, "member files exceed the size limit");
			r = KZ_ETOOBIG;
			goto out;
		}
		*left -= (uint64_t)n;
		if (kz_write_full(out, buf, (size_t)n, -1) != 0) {
			r = KZ_ESYS;
			goto out;
		}
	}
	r = n < 0 ? KZ_ESYS : 0;
out:
	pr_space_give(&sp);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (pfd >= 0)
		close(pfd);
	return r;
}

static void
stage_members(const struct pr_conf *c, const struct pr_inv *iv, int filesfd,
    struct pr_result *res)
{
	uint64_t left = c->files_max;
	int rootfd = -1, wsfd = -1, r = 0;
	char why[128] = "", ws[3 * KZ_PATH_MAX];
	size_t wn;

	if (iv->nfiles == 0)
		return;
	if (c->workspaces[0] == '\0' ||
	    (rootfd = open(c->workspaces, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) <
	        0) {
		pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
		    "member workspaces are not available");
		return;
	}
	/* The workspace is the initiating actor's own, in this conversation:
	 * derived from the invocation's identity, never named by the
	 * caller, so no path of the request can reach another actor's or
	 * another conversation's files.  pr_inv_check has made sure both
	 * are single segments. */
	wn = (size_t)snprintf(ws, sizeof(ws), "%s/%s%s%s", iv->conversation,
	    iv->actor, iv->workspace != NULL ? "/" : "",
	    iv->workspace != NULL ? iv->workspace : "");
	if (wn >= sizeof(ws))
		r = KZ_EPATH_LEN;
	else
		r = kz_path_open(rootfd, ws, wn, KZ_PATH_DIR, &wsfd, NULL, 0);
	if (r != 0)
		snprintf(res->why, sizeof(res->why), "workspace: %s",
		    r == KZ_EPATH_NOENT ? "the actor has no workspace here" :
		                          kz_strerror(r));
	for (int i = 0; r == 0 && i < iv->nfiles; i++)
		if ((r = copy_member(c, wsfd, filesfd, iv->files[i], &left, why,
		         sizeof(why))) != 0)
			snprintf(res->why, sizeof(res->why), "file %d: %s",
			    i + 1,
			    why[0]             ? why :
			        r == KZ_EINVAL ? "listed twice" :
			                         kz_strerror(r));
	if (r == KZ_ESYS)
		pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE, NULL);
	else if (r == KZ_EUNAVAIL)
		pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_BUSY, NULL);
	else if (r == KZ_EINVAL)
		pr_set_result(res, KZ_EXIT_USAGE, KZ_WE_BAD_REQUEST, NULL);
	else if (r != 0)
		pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_REFUSED, NULL);
	if (wsfd >= 0)
		close(wsfd);
	close(rootfd);
}

/* The staging directory: STATE/inv-XXXX/{pkg,files}, 0755 root. */
static int
stage_open(const struct pr_conf *c, int *sfd, char *name, size_t len,
    int *pkgfd, int *filesfd)
{
	int r;

	*sfd = *pkgfd = *filesfd = -1;
	if (mkdir(c->state_dir, 0755) != 0 && errno != EEXIST)
		return KZ_ESYS;
	if ((*sfd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return KZ_ESYS;
	if ((r = pr_mkdir_fresh(*sfd, "inv", 0755, name, len)) != 0)
		return r;
	if (mkdirat(*sfd, "sandbox", 0755) != 0 && errno != EEXIST)
		return KZ_ESYS;
	for (int i = 0; i < 2; i++) {
		char p[128];
		int *fd = i == 0 ? pkgfd : filesfd;

		snprintf(p, sizeof(p), "%s/%s", name,
		    i == 0 ? PR_PKG_DIR : PR_FILES_DIR);
		if (mkdirat(*sfd, p, 0755) != 0 ||
		    (*fd = openat(*sfd, p,
		         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			return KZ_ESYS;
	}
	return 0;
}

/* The package's manifest, from an entry the caller has open. */
static int
load_manifest(const struct pr_conf *c, const char *hex, int *efd, char **man,
    size_t *mlen, struct pr_manifest *m, struct pr_result *res)
{
	int r;

	if ((r = pr_cache_open(c, hex, efd, man, mlen, res->why,
	         sizeof(res->why))) != 0) {
		if (r == KZ_ENOENT || r == KZ_EDENIED)
			pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_REFUSED,
			    NULL);
		else if (r == KZ_EINVAL)
			pr_set_result(res, KZ_EXIT_USAGE, KZ_WE_BAD_REQUEST,
			    NULL);
		else
			pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
			    NULL);
		return r;
	}
	if ((r = pr_manifest_parse(*man, *mlen, m, res->why,
	         sizeof(res->why))) != 0) {
		pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
		    "the cache entry's manifest is not valid");
		return r;
	}
	return 0;
}

/* A record on its way to the sink while the invocation goes on: the
 * dispatch record while the projection is staged (the sink's fdatasync
 * and the copy overlap, and the tool still starts only once the record is
 * acknowledged: pending_wait before run_tool), the outcome record while
 * the staging directory is removed. */
struct pending {
	const struct pr_conf *c;
	const struct pr_inv *iv;
	struct pr_result res; /* a copy: the invocation's changes as it runs */
	const char *outcome, *stage;
	pthread_t thr;
	bool running;
	int r;
};

static void *
pending_send(void *arg)
{
	struct pending *p = arg;

	p->r = pr_audit(p->c, p->iv, &p->res, p->outcome, p->stage);
	return NULL;
}

static void
pending_start(struct pending *p, const struct pr_conf *c,
    const struct pr_inv *iv, const struct pr_result *res, const char *outcome,
    const char *stage)
{
	p->c = c, p->iv = iv, p->res = *res;
	p->res.out = p->res.err = NULL;
	p->outcome = outcome, p->stage = stage;
	p->running = pthread_create(&p->thr, NULL, pending_send, p) == 0;
	if (!p->running)
		p->r = pr_audit(c, iv, res, outcome, stage);
}

/* 0 once the dispatch record is written; idempotent. */
static int
pending_wait(struct pending *p)
{
	if (p->running) {
		pthread_join(p->thr, NULL);
		p->running = false;
	}
	return p->r;
}

/* pending_wait as a one-shot's gate: the sandbox is made meanwhile. */
static int
pending_gate(void *p)
{
	return pending_wait(p);
}

/* A taken warm worker's projection, made empty with pkg/ and files/
 * before the worker started. */
static int
stage_worker(struct pr_worker *w, int *pkgfd, int *filesfd)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", pr_worker_projection(w), PR_PKG_DIR);
	if ((*pkgfd = open(p,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return KZ_ESYS;
	snprintf(p, sizeof(p), "%s/%s", pr_worker_projection(w), PR_FILES_DIR);
	if ((*filesfd = open(p,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return KZ_ESYS;
	return 0;
}

/*
 * A warm worker for this invocation, or NULL: the one-shot, under an id
 * of the range it holds the claim on (*slot, *claim; uidclaim.c).  The
 * daemon gives out its ids lowest first; a one-shot of its own picks one
 * from a random start and waits for one up to PKGRUN_TIMEOUT, the longest
 * another one-shot holds its id.  No id free: KZ_EUNAVAIL, never a shared
 * one.  Every way a warm worker can fail before the run is a one-shot,
 * logged, never a refusal: the boundary is the same.
 */
static int
take_worker(const struct pr_conf *c, struct pr_pool *pool,
    const struct pr_inv *iv, int *slot, int *claim, struct pr_worker **w)
{
	char why[128] = "";

	*slot = -1, *claim = -1;
	if (pool == NULL)
		return pr_uid_pick(c, c->timeout_s * 1000, slot, claim);
	if ((*w = pr_pool_take(pool, iv->grant != NULL, why, sizeof(why))) !=
	    NULL)
		return 0;
	pr_pool_note_oneshot(pool, c->warm > 0);
	if (c->warm > 0)
		kz_log(KZ_LOG_WARN, "pkgrun.oneshot", KZ_EUNAVAIL, why, NULL);
	return (*slot = pr_pool_slot_take(pool)) < 0 ? KZ_EUNAVAIL : 0;
}

/* A one-shot's staging directory, removed once the tool is done. */
struct staged {
	int sfd;
	char name[64];
};

static void
staged_remove(struct staged *st)
{
	if (st->sfd >= 0 && st->name[0] != '\0')
		if (kz_tree_remove(st->sfd, st->name) != 0)
			kz_log(KZ_LOG_WARN, "pkgrun.cleanup", KZ_ESYS,
			    "a staging directory could not be removed", NULL);
	if (st->sfd >= 0)
		close(st->sfd);
	st->sfd = -1;
	st->name[0] = '\0';
}

/* Stages and runs; res says how it went.  A one-shot's staging directory
 * is left in *st for the caller to remove. */
static void
stage_and_run(const struct pr_conf *c, struct pr_pool *pool,
    const struct pr_inv *iv, const struct pr_tool *t, int efd, const char *man,
    size_t mlen, struct pending *pend, struct staged *st, struct pr_result *res)
{
	char *name = st->name, staging[PATH_MAX + 80], id[80] = "";
	struct pr_worker *w = NULL;
	int pkgfd = -1, filesfd = -1, slot, claim, r;

	if ((r = take_worker(c, pool, iv, &slot, &claim, &w)) != 0) {
		/* Every id is some other tenant's: never share one. */
		if (pool != NULL)
			pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_BUSY,
			    "no free tool uid");
		else
			pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
			    r == KZ_EUNAVAIL ? "no free tool uid" :
			                       "cannot claim a tool uid");
		goto out;
	}
	if (w != NULL) {
		r = stage_worker(w, &pkgfd, &filesfd);
		snprintf(staging, sizeof(staging), "%s",
		    pr_worker_projection(w));
	} else
		r = stage_open(c, &st->sfd, name, sizeof(st->name), &pkgfd,
		    &filesfd);
	if (r != 0) {
		pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
		    "cannot make the invocation's directory");
		goto out;
	}
	if ((r = pr_cache_stage(c, efd, iv->package, man, mlen, pkgfd, res->why,
	         sizeof(res->why))) != 0) {
		if (r == KZ_EUNAVAIL)
			/* No room for it now: another time there may be. */
			pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_BUSY, NULL);
		else
			pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
			    r == KZ_ECRYPTO ?
			        "the cached package does not match its "
			        "hash: it does not run" :
			        "cannot copy the package");
		if (pending_wait(pend) == 0)
			(void)pr_audit(c, iv, res, "failed", "verify");
		goto out;
	}
	stage_members(c, iv, filesfd, res);
	if (res->wire != NULL || fchmod(pkgfd, 0555) != 0)
		goto out;
	if (w == NULL) {
		snprintf(staging, sizeof(staging), "%s/%s", c->state_dir, name);
		snprintf(id, sizeof(id), "pkgrun-%s", name + 4);
	}
	/* A warm worker is made already: its run op waits for the record.
	 * A one-shot's sandbox is made while the sink writes it. */
	if (w == NULL)
		pr_run_tool(c, iv, t, staging, id, slot, w, pending_gate, pend,
		    res);
	else if (pending_wait(pend) == 0)
		pr_run_tool(c, iv, t, staging, id, slot, w, NULL, NULL, res);
out:
	(void)pending_wait(pend);
	if (pkgfd >= 0)
		close(pkgfd);
	if (filesfd >= 0)
		close(filesfd);
	/* The worker is never used again; its directory, with what was
	 * staged, goes with it when the caller gives it back. */
	if (w != NULL)
		res->worker = w;
	else if (pool != NULL)
		pr_pool_slot_put(pool, slot);
	pr_uid_release(&claim);
}

void
pr_invoke(const struct pr_conf *c, struct pr_pool *pool,
    const struct pr_inv *iv, struct pr_result *res)
{
	const struct pr_tool *t;
	struct pr_manifest m;
	struct pending pend, done;
	struct staged st = {.sfd = -1};
	int64_t t0 = kz_now_ms();
	char *man = NULL;
	size_t mlen = 0;
	int efd = -1;

	memset(res, 0, sizeof(*res));
	memset(&m, 0, sizeof(m));
	res->exit_status = -1;
	res->cls = "none";
	if (pr_inv_check(iv, res->why, sizeof(res->why)) != 0) {
		pr_set_result(res, KZ_EXIT_USAGE, KZ_WE_BAD_REQUEST, NULL);
		goto out;
	}
	if (load_manifest(c, iv->package, &efd, &man, &mlen, &m, res) != 0)
		goto refused;
	/* Absent and nonexistent tools get the same answer. */
	if ((t = pr_manifest_tool(&m, iv->tool)) == NULL) {
		pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_REFUSED,
		    "no such tool in the package");
		goto refused;
	}
	res->cls = pr_class_name(t->cls);
	if (pr_tool_allowed(t, iv->room != NULL, iv->nfiles, res->why,
	        sizeof(res->why)) != 0) {
		pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_REFUSED, NULL);
		goto refused;
	}
	memset(&pend, 0, sizeof(pend));
	pending_start(&pend, c, iv, res, "started", "dispatch");
	stage_and_run(c, pool, iv, t, efd, man, mlen, &pend, &st, res);
	if (pend.r != 0) {
		/* Whatever staging said, nothing ran: the audit decides. */
		pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
		    "the audit sink is unavailable: nothing ran");
		goto out;
	}
	res->ms = kz_now_ms() - t0;
	/* The outcome record's fdatasync and the removal overlap. */
	memset(&done, 0, sizeof(done));
	pending_start(&done, c, iv, res, res->wire ? "failed" : "ok", "done");
	staged_remove(&st);
	if (pending_wait(&done) != 0)
		kz_log(KZ_LOG_WARN, "pkgrun.audit", KZ_EUNAVAIL,
		    "the invocation's outcome was not audited", NULL);
	goto out;
refused:
	res->ms = kz_now_ms() - t0;
	(void)pr_audit(c, iv, res, "refused", "policy");
out:
	staged_remove(&st);
	if (efd >= 0)
		close(efd);
	free(man);
	pr_manifest_release(&m);
}

void
pr_result_release(struct pr_result *res)
{
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
}

int
pr_list(const struct pr_conf *c, const char *hex, bool shared, cJSON **out,
    char *why, size_t wlen)
{
	struct pr_result res;
	struct pr_manifest m;
	cJSON *a = NULL;
	char *man = NULL;
	size_t mlen = 0;
	int efd = -1, r;

	memset(&res, 0, sizeof(res));
	memset(&m, 0, sizeof(m));
	if ((r = load_manifest(c, hex, &efd, &man, &mlen, &m, &res)) != 0 ||
	    (r = pr_cache_stage(c, efd, hex, man, mlen, -1, res.why,
	         sizeof(res.why))) != 0) {
		kz_why(why, wlen, "%s", res.why);
		goto out;
	}
	if ((a = cJSON_CreateArray()) == NULL) {
		r = KZ_ENOMEM;
		goto out;
	}
	for (int i = 0; i < m.ntools; i++) {
		const struct pr_tool *t = &m.tools[i];
		cJSON *o;

		if (t->cls == PR_CLASS_NONE ||
		    pr_tool_allowed(t, shared, 0, NULL, 0) != 0)
			continue;
		if ((o = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddItemToArray(a, o) ||
		    !cJSON_AddStringToObject(o, "name", t->name) ||
		    !cJSON_AddStringToObject(o, "class",
		        pr_class_name(t->cls))) {
			r = KZ_ENOMEM;
			goto out;
		}
	}
	*out = a, a = NULL;
out:
	cJSON_Delete(a);
	if (efd >= 0)
		close(efd);
	free(man);
	pr_manifest_release(&m);
	return r;
}
