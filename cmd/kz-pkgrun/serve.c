/*
 * The daemon: invoke, list and status behind the framed server.  A tool
 * run takes seconds, so each invoke runs on a thread of its own and its
 * reply is handed back to the event loop through a pipe: one slow tool
 * never stalls another peer.  At most PR_INFLIGHT_MAX invocations run at
 * once, and at most PR_INFLIGHT_ACTOR of one actor, so one member's slow
 * tools cannot take every place; the next is answered busy.  Invocations run on
 * the pool's warm single-use workers while one is ready (warm.c), else on a
 * one-shot.  Each runs under an id of the range that no other invocation,
 * of this daemon or any other kz-pkgrun, holds (uidclaim.c); with none
 * free it is answered busy too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <event2/event.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_srv.h"
#include "kz_wire.h"
#include "kz_tree.h"
#include "pkgrun.h"
#include "banned.h"

#define PR_INFLIGHT_MAX 16
#define PR_INFLIGHT_ACTOR 4

struct job {
	struct kz_req *req;
	int place; /* in st.actor */
	const struct pr_conf *c;
	struct pr_pool *pool;
	struct pr_inv iv;
	struct pr_result res;
};

static struct {
	int pipe[2];
	int inflight;
	/* The actor of each invocation in flight ("" a free place). */
	char actor[PR_INFLIGHT_MAX][PR_IDENT_MAX + 1];
	unsigned long ok, refused;
	struct pr_pool *pool;
} st = {{-1, -1}, 0, {{0}}, 0, 0, NULL};

/* How many invocations of actor are in flight; *free a free place. */
static int
actor_inflight(const char *actor, int *free_at)
{
	int n = 0;

	*free_at = -1;
	for (int i = 0; i < PR_INFLIGHT_MAX; i++)
		if (st.actor[i][0] == '\0')
			*free_at = *free_at < 0 ? i : *free_at;
		else if (strcmp(st.actor[i], actor) == 0)
			n++;
	return n;
}

static const char *const invoke_fields[] = {"package", "tool", "actor",
    "conversation", "room", "workspace", "files", "args", "grant", NULL};
static const char *const list_fields[] = {"package", "shared", NULL};
static const char *const no_fields[] = {NULL};

/* A list of strings of at most max entries into out. */
static int
str_list(const cJSON *j, const char *key, const char **out, int max, int *n,
    char *why, size_t wlen)
{
	const cJSON *a = kz_json_get(j, key), *e;

	*n = 0;
	if (a == NULL)
		return 0;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > max) {
		kz_why(why, wlen, "%s must be an array of at most %d strings",
		    key, max);
		return KZ_EINVAL;
	}
	cJSON_ArrayForEach(e, a)
	{
		if (!cJSON_IsString(e)) {
			kz_why(why, wlen, "%s holds a non-string", key);
			return KZ_EINVAL;
		}
		out[(*n)++] = e->valuestring;
	}
	out[*n] = NULL;
	return 0;
}

static int
parse_inv(const cJSON *j, struct pr_inv *iv, char *why, size_t wlen)
{
	const size_t m = PR_IDENT_MAX;
	int r;

	memset(iv, 0, sizeof(*iv));
	if ((r = kz_json_str(j, "package", PR_HASH_HEX, &iv->package, why,
	         wlen)) != 0 ||
	    (r = kz_json_str(j, "tool", PR_TOOL_NAME_MAX, &iv->tool, why,
	         wlen)) != 0 ||
	    (r = kz_json_str(j, "actor", m, &iv->actor, why, wlen)) != 0 ||
	    (r = kz_json_str(j, "conversation", m, &iv->conversation, why,
	         wlen)) != 0 ||
	    (r = kz_json_str_opt(j, "room", m, NULL, &iv->room, why, wlen)) !=
	        0 ||
	    (r = kz_json_str_opt(j, "workspace", 4096, NULL, &iv->workspace,
	         why, wlen)) != 0 ||
	    (r = kz_json_str_opt(j, "grant", 4000, NULL, &iv->grant, why,
	         wlen)) != 0 ||
	    (r = str_list(j, "args", iv->args, PR_ARGS_MAX, &iv->nargs, why,
	         wlen)) != 0 ||
	    (r = str_list(j, "files", iv->files, PR_MEMBER_FILES_MAX,
	         &iv->nfiles, why, wlen)) != 0)
		return r;
	iv->rid = cJSON_GetStringValue(kz_json_get(j, "id"));
	return pr_inv_check(iv, why, wlen);
}

static void *
run_job(void *arg)
{
	struct job *jb = arg;

	kz_log_set_rid(jb->iv.rid);
	pr_invoke(jb->c, jb->pool, &jb->iv, &jb->res);
	/* A pointer is smaller than PIPE_BUF: the write is atomic. */
	if (write(st.pipe[1], &jb, sizeof(jb)) != sizeof(jb))
		abort(); /* the loop would never answer: die loudly */
	return NULL;
}

static void
reply(struct job *jb)
{
	struct pr_result *res = &jb->res;
	char st_s[16];
	cJSON *o;

	snprintf(st_s, sizeof(st_s), "%d", res->exit_status);
	kz_log(KZ_LOG_INFO, "pkgrun.invoke", 0, res->wire ? res->why : "done",
	    "package", jb->iv.package, "tool", jb->iv.tool, "class", res->cls,
	    "error", res->wire, "exit_status", st_s, NULL);
	if (res->wire != NULL) {
		st.refused++;
		kz_req_err(jb->req, res->wire, res->why);
		return;
	}
	st.ok++;
	if ((o = cJSON_CreateObject()) == NULL ||
	    !cJSON_AddNumberToObject(o, "exit_status", res->exit_status) ||
	    !cJSON_AddStringToObject(o, "class", res->cls) ||
	    !cJSON_AddStringToObject(o, "result", res->out ? res->out : "") ||
	    !cJSON_AddBoolToObject(o, "truncated", res->truncated) ||
	    (res->err != NULL &&
	        !cJSON_AddStringToObject(o, "stderr", res->err))) {
		cJSON_Delete(o);
		kz_req_err(jb->req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	kz_req_ok(jb->req, o);
}

static void
on_done(evutil_socket_t fd, short ev, void *arg)
{
	struct job *jb;

	while (read(fd, &jb, sizeof(jb)) == sizeof(jb)) {
		reply(jb);
		if (jb->res.worker != NULL)
			pr_pool_release(jb->pool, jb->res.worker);
		pr_result_release(&jb->res);
		st.actor[jb->place][0] = '\0';
		free(jb);
		st.inflight--;
	}
}

static void
op_invoke(struct kz_req *req, void *arg)
{
	const struct pr_conf *c = arg;
	pthread_attr_t at;
	pthread_t th;
	struct job *jb;
	char why[256];

	if (st.inflight >= PR_INFLIGHT_MAX) {
		kz_req_err(req, KZ_WE_BUSY, "too many invocations at once");
		return;
	}
	if ((jb = calloc(1, sizeof(*jb))) == NULL) {
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	jb->req = req, jb->c = c, jb->pool = st.pool;
	if (parse_inv(kz_req_json(req), &jb->iv, why, sizeof(why)) != 0) {
		free(jb);
		st.refused++;
		kz_req_err(req, KZ_WE_BAD_REQUEST, why);
		return;
	}
	if (actor_inflight(jb->iv.actor, &jb->place) >= PR_INFLIGHT_ACTOR ||
	    jb->place < 0) {
		free(jb);
		st.refused++;
		kz_req_err(req, KZ_WE_BUSY,
		    "too many invocations of this actor at once");
		return;
	}
	if (pthread_attr_init(&at) != 0 ||
	    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) != 0 ||
	    pthread_create(&th, &at, run_job, jb) != 0) {
		free(jb);
		kz_req_err(req, KZ_WE_UNAVAILABLE, "cannot start the run");
		return;
	}
	pthread_attr_destroy(&at);
	snprintf(st.actor[jb->place], sizeof(st.actor[jb->place]), "%s",
	    jb->iv.actor);
	st.inflight++;
}

static void
op_list(struct kz_req *req, void *arg)
{
	const struct pr_conf *c = arg;
	const cJSON *j = kz_req_json(req);
	const char *hex;
	cJSON *a = NULL, *o;
	bool shared;
	char why[256] = "";
	int r;

	if (kz_json_str(j, "package", PR_HASH_HEX, &hex, why, sizeof(why)) ||
	    kz_json_bool_opt(j, "shared", false, &shared, why, sizeof(why))) {
		kz_req_err(req, KZ_WE_BAD_REQUEST, why);
		return;
	}
	if ((r = pr_list(c, hex, shared, &a, why, sizeof(why))) != 0) {
		kz_req_err(req,
		    r == KZ_ENOENT || r == KZ_EDENIED ? KZ_WE_REFUSED :
		        r == KZ_EINVAL                ? KZ_WE_BAD_REQUEST :
		                                        KZ_WE_UNAVAILABLE,
		    why);
		return;
	}
	if ((o = cJSON_CreateObject()) == NULL) {
		cJSON_Delete(a);
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	cJSON_AddItemToObject(o, "tools", a);
	kz_req_ok(req, o);
}

static void
op_status(struct kz_req *req, void *arg)
{
	cJSON *o = cJSON_CreateObject();

	if (o == NULL || !cJSON_AddNumberToObject(o, "inflight", st.inflight) ||
	    !cJSON_AddNumberToObject(o, "answered_ok", (double)st.ok) ||
	    !cJSON_AddNumberToObject(o, "answered_refused",
	        (double)st.refused) ||
	    pr_pool_status(st.pool, o) != 0) {
		cJSON_Delete(o);
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	kz_req_ok(req, o);
}

static const struct kz_op ops[] = {
    {"invoke", op_invoke, invoke_fields, 0},
    {"list", op_list, list_fields, 0},
    {"status", op_status, no_fields, 0},
    {NULL, NULL, NULL, 0},
};

static void
on_signal(evutil_socket_t fd, short ev, void *arg)
{
	event_base_loopbreak(arg);
}

static int
loop(const struct pr_conf *c, struct event_base *base)
{
	struct kz_srv_conf sc = {0};
	struct event *evs[3] = {NULL, NULL, NULL};
	struct kz_srv *srv = NULL;
	char why[200], warm[24];
	int rc = KZ_EXIT_INTERNAL;

	sc.sock_path = c->sock;
	sc.frame_max = c->frame_max;
	sc.io_timeout_ms = (int)c->io_timeout_ms;
	sc.idle_timeout_ms = 60000;
	sc.peers = c->peers;
	sc.operators = c->operators;
	sc.ops = ops;
	sc.arg = (void *)c;
	if (kz_srv_new(base, &sc, &srv, why, sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "pkgrun.listen", KZ_ESYS, why, NULL);
		return KZ_EXIT_UNAVAIL;
	}
	evs[0] = event_new(base, st.pipe[0], EV_READ | EV_PERSIST, on_done,
	    NULL);
	evs[1] = evsignal_new(base, SIGTERM, on_signal, base);
	evs[2] = evsignal_new(base, SIGINT, on_signal, base);
	for (int i = 0; i < 3; i++)
		if (evs[i] == NULL || event_add(evs[i], NULL) != 0)
			goto out;
	snprintf(warm, sizeof(warm), "%lld", (long long)c->warm);
	kz_log(KZ_LOG_INFO, "pkgrun.start", 0, "serving", "socket", c->sock,
	    "audit", c->audit_sock[0] ? c->audit_sock : "off", "warm", warm,
	    NULL);
	if (kz_notify_ready("serving") != 0)
		kz_log(KZ_LOG_WARN, "pkgrun.notify", KZ_ESYS,
		    "cannot tell the service manager it is ready", NULL);
	rc = event_base_dispatch(base) < 0 ? KZ_EXIT_INTERNAL : KZ_EXIT_OK;
out:
	for (int i = 0; i < 3; i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
	kz_srv_free(srv);
	return rc;
}

/*
 * Projections a crashed runner left behind: any inv-* directory (and its
 * grant file) older than the longest an invocation can take.  Younger
 * ones may belong to a one-shot invoke running beside the daemon.
 */
static void
sweep(const struct pr_conf *c)
{
	time_t cutoff = time(NULL) - (time_t)c->timeout_s - 120;
	struct dirent *de;
	struct stat sb;
	DIR *d;

	if ((d = opendir(c->state_dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "inv-", 4) != 0 ||
		    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) !=
		        0 ||
		    sb.st_mtime > cutoff)
			continue;
		if (kz_tree_remove(dirfd(d), de->d_name) == 0)
			kz_log(KZ_LOG_INFO, "pkgrun.sweep", 0,
			    "removed a stale projection", NULL);
		else
			kz_log(KZ_LOG_WARN, "pkgrun.sweep", KZ_ESYS,
			    "a stale projection could not be removed", NULL);
	}
	closedir(d);
}

int
pr_serve(const struct pr_conf *c)
{
	struct event_base *base;
	int rc;

	sweep(c);
	pr_pool_sweep(c);

	if (pipe2(st.pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		return KZ_EXIT_INTERNAL;
	/* The writer blocks, so no finished run's reply is ever lost. */
	if (fcntl(st.pipe[1], F_SETFL, 0) != 0 ||
	    (base = event_base_new()) == NULL)
		return KZ_EXIT_INTERNAL;
	/* The pool's thread starts the warm workers while the loop
	 * serves: an invocation before they are ready is a one-shot. */
	if (pr_pool_new(c, &st.pool) != 0) {
		event_base_free(base);
		return KZ_EXIT_INTERNAL;
	}
	rc = loop(c, base);
	event_base_free(base);
	/* A job still running holds the pool: stop its workers, keep its
	 * memory (the process is about to exit). */
	if (st.inflight > 0)
		pr_pool_stop(st.pool);
	else
		pr_pool_free(st.pool);
	kz_log(KZ_LOG_INFO, "pkgrun.stop", 0, "stopped", NULL);
	return rc;
}
