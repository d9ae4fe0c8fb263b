/*
 * The controller boundary (kz-controller(7)): kz-lease runs the
 * LEASE_CONTROLLER executable for each call, writes one request frame to
 * its stdin, reads one reply frame from its stdout, and waits for it to
 * exit, all within a deadline.  A controller that hangs, dies or answers
 * garbage is killed and its call is ambiguous: nothing it may have done
 * is assumed undone, and the next look at the inventory settles it.
 *
 * One process per call, not a long-lived coprocess: creates and deletes
 * happen only at retirement, and the inventory is read once a reconcile
 * period, so the fork and exec (about a millisecond) cost lease cycles
 * nothing measurable; in exchange a call can never see a previous call's
 * state or a half-read frame, several calls (the delete threads, the
 * loop) run at once without a lock, and a controller killed at its
 * deadline needs no restart.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_pool.h"
#include "kz_wire.h"
#include "lease.h"
#include "banned.h"

/* The only class kz-lease asks for today (kz-controller(7)). */
#define CTL_CLASS "default"
#define CTL_ENV_MAX 16

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;
static char **ctl_env;
static char *ctl_argv[2];
static atomic_bool faulted;

/*
 * The workers a controller listed, or was asked to create, whose absence
 * no delete has confirmed yet: one the controller stops listing is held
 * in the inventory (counted) and deleted, never dropped on its word.
 */
static struct {
	pthread_mutex_t mu;
	char id[LEASE_INV_MAX][65];
	size_t n;
	bool full;
} known = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void
known_add(const char *id)
{
	size_t i;

	pthread_mutex_lock(&known.mu);
	for (i = 0; i < known.n && strcmp(known.id[i], id) != 0; i++)
		;
	if (i == known.n && known.n < LEASE_INV_MAX)
		snprintf(known.id[known.n++], sizeof(known.id[0]), "%s", id);
	else if (i == known.n)
		known.full = true;
	pthread_mutex_unlock(&known.mu);
}

static void
known_del(const char *id)
{
	pthread_mutex_lock(&known.mu);
	for (size_t i = 0; i < known.n; i++)
		if (strcmp(known.id[i], id) == 0) {
			memcpy(known.id[i], known.id[--known.n],
			    sizeof(known.id[0]));
			break;
		}
	pthread_mutex_unlock(&known.mu);
}

/* ---- the environment ---- */

static const char *const forwarded[] = {"KZ_RUN_DIR", "KZ_FRAME_MAX",
    "KZ_PEER_UIDS", "KZ_PEER_GIDS", "LEASE_WORKERS_DIR", "LEASE_WORKER_BIN",
    "LEASE_WORKER_ARGS", "LEASE_EGRESS_SOCKET", "LEASE_BROKER_SOCKET",
    "LEASE_WORKER_IDS", "LEASE_FILES_SHARE", NULL};

static bool
is_forwarded(const char *e)
{
	for (int i = 0; forwarded[i] != NULL; i++) {
		size_t n = strlen(forwarded[i]);

		if (strncmp(e, forwarded[i], n) == 0 && e[n] == '=')
			return true;
	}
	return false;
}

static char *var(const char *key, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static char *
var(const char *key, const char *fmt, ...)
{
	char v[PATH_MAX + 1100], *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	if (asprintf(&s, "%s=%s", key, v) < 0)
		return NULL;
	return s;
}

/*
 * The controller gets kz-lease's environment with kz-lease's resolved
 * worker settings in place of whatever the environment said, so that it
 * sees what kz-lease's file and environment decided together.  Built at
 * the first call and kept (the configuration never changes).
 */
static int
env_build(const struct lease_conf *c)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char *v[CTL_ENV_MAX] = {0}, **env;
	int nv = 0;

	while (environ[n] != NULL)
		n++;
	if ((env = calloc(n + CTL_ENV_MAX + 1, sizeof(*env))) == NULL)
		return KZ_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!is_forwarded(environ[i]))
			env[k++] = environ[i];
	v[nv++] = var("KZ_RUN_DIR", "%s", c->run_dir);
	v[nv++] = var("KZ_FRAME_MAX", "%llu", (unsigned long long)c->frame_max);
	v[nv++] = kz_peer_policy_env(&c->peers, false);
	v[nv++] = kz_peer_policy_env(&c->peers, true);
	v[nv++] = var("LEASE_WORKERS_DIR", "%s", c->workers_dir);
	v[nv++] = var("LEASE_WORKER_BIN", "%s", c->worker_bin);
	v[nv++] = var("LEASE_WORKER_ARGS", "%s", c->worker_args);
	v[nv++] = var("LEASE_EGRESS_SOCKET", "%s", c->egress_sock);
	v[nv++] = var("LEASE_BROKER_SOCKET", "%s", c->broker_sock);
	v[nv++] = var("LEASE_WORKER_IDS", "%lld-%lld", (long long)c->ids_first,
	    (long long)c->ids_last);
	v[nv++] = var("LEASE_FILES_SHARE", "%lld", (long long)c->files_share);
	for (int i = 0; i < nv; i++)
		if (v[i] == NULL) {
			for (int j = 0; j < nv; j++)
				free(v[j]);
			free(env);
			return KZ_ENOMEM;
		}
	for (int i = 0; i < nv; i++)
		env[k++] = v[i];
	ctl_argv[0] = (char *)c->controller;
	ctl_env = env;
	return 0;
}

static int
env_get(const struct lease_conf *c)
{
	int e = 0;

	pthread_mutex_lock(&env_mu);
	if (ctl_env == NULL)
		e = env_build(c);
	pthread_mutex_unlock(&env_mu);
	return e;
}

bool
ctl_fault_take(void)
{
	return atomic_exchange(&faulted, false);
}

/* ---- one call ---- */

/* The child: the pipes as stdin and stdout, nothing else of kz-lease's
 * (stderr stays: the controller's log lines join kz-lease's). */
static void
exec_ctl(int in, int out)
{
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0)
		_exit(127);
	close_range(3, ~0U, 0);
	execve(ctl_argv[0], ctl_argv, ctl_env);
	_exit(127);
}

/* Waits for the controller's exit until deadline, then kills it. */
static void
reap(int pidfd, int64_t deadline)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int64_t left = deadline - kz_now_ms();
	siginfo_t si;

	if (left < 0 || poll(&p, 1, (int)left) <= 0)
		(void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
	/* kz-lease's SIGCHLD handler may have reaped it first: ECHILD. */
	while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
	close(pidfd);
}

static int
spawn(int *in, int *out, int *pidfd)
{
	int a[2] = {-1, -1}, b[2] = {-1, -1};
	pid_t pid;

	if (pipe2(a, O_CLOEXEC) != 0 || pipe2(b, O_CLOEXEC) != 0)
		goto fail;
	if ((pid = fork()) < 0)
		goto fail;
	if (pid == 0)
		exec_ctl(a[0], b[1]);
	close(a[0]);
	close(b[1]);
	/* Before the request is written the child cannot have answered;
	 * only a failed exec can be gone (and reaped) already. */
	if ((*pidfd = pidfd_open(pid, 0)) < 0) {
		close(a[1]);
		close(b[0]);
		return KZ_EUNAVAIL;
	}
	*in = a[1];
	*out = b[0];
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (a[i] >= 0)
			close(a[i]);
		if (b[i] >= 0)
			close(b[i]);
	}
	return KZ_ESYS;
}

/*
 * One request, one reply, within timeout_ms.  0: an answer, ok or not
 * (*rep, its "ok" checked by the caller).  Anything else: no usable
 * answer, the controller was killed, and the call is ambiguous.
 */
static int
ctl_call(const struct lease_conf *c, cJSON *req, int64_t timeout_ms,
    cJSON **rep, char *why, size_t wlen)
{
	int64_t deadline = kz_now_ms() + timeout_ms;
	int in, out, pidfd, e;

	*rep = NULL;
	cJSON_AddNumberToObject(req, "v", 1);
	if (access(c->controller, X_OK) != 0) {
		kz_why(why, wlen, "controller %.200s is not an executable",
		    c->controller);
		e = KZ_EUNAVAIL;
		goto out;
	}
	if ((e = env_get(c)) != 0 || (e = spawn(&in, &out, &pidfd)) != 0) {
		kz_why(why, wlen, "controller %.200s could not be started",
		    c->controller);
		goto out;
	}
	e = kz_frame_write(in, req, c->frame_max, (int)timeout_ms);
	close(in);
	if (e == 0) {
		int64_t left = deadline - kz_now_ms();

		e = left <= 0 ?
		    KZ_ETIMEDOUT :
		    kz_frame_read(out, c->frame_max, (int)left, rep, why, wlen);
	}
	close(out);
	reap(pidfd, e == 0 ? deadline : 0);
	if (e != 0)
		kz_why(why, wlen, "controller gave no answer (%s)",
		    kz_strerror(e));
out:
	if (e != 0) {
		atomic_store(&faulted, true);
		kz_log(KZ_LOG_WARN, "controller.fault", e, why, "op",
		    cJSON_GetStringValue(kz_json_get(req, "op")), NULL);
	}
	cJSON_Delete(req);
	return e;
}

static cJSON *
ctl_req(const char *op, const char *id)
{
	cJSON *r = cJSON_CreateObject();

	if (r == NULL)
		return NULL;
	cJSON_AddStringToObject(r, "op", op);
	if (id != NULL)
		cJSON_AddStringToObject(r, "id", id);
	return r;
}

/* An answer's refusal: KZ_EDENIED for "refused", else KZ_EUNAVAIL. */
static int
refusal(const cJSON *rep, char *why, size_t wlen)
{
	const char *code = cJSON_GetStringValue(kz_json_get(rep, "error"));
	const char *msg = cJSON_GetStringValue(kz_json_get(rep, "message"));

	kz_why(why, wlen, "controller: %.160s",
	    msg != NULL ? msg : "refused without a reason");
	return code != NULL && strcmp(code, KZ_WE_REFUSED) == 0 ? KZ_EDENIED :
	                                                          KZ_EUNAVAIL;
}

/* ---- the operations ---- */

/* An endpoint kz-lease will connect to and hand to a lessee: an absolute
 * Unix socket path, printable. */
static bool
endpoint_ok(const char *ep)
{
	if (ep[0] != '/' || strlen(ep) >= 108)
		return false;
	for (const char *p = ep; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

int
ctl_create(const struct lease_conf *c, const char *id, char *endpoint,
    size_t elen, char *why, size_t wlen)
{
	cJSON *req = ctl_req("create", id), *rep = NULL;
	const char *ep;
	int e;

	if (req == NULL)
		return KZ_ENOMEM;
	cJSON_AddStringToObject(req, "class", CTL_CLASS);
	cJSON_AddStringToObject(req, "runtime", c->worker_runtime);
	/* Known before the call: whatever the answer, it may exist. */
	known_add(id);
	if ((e = ctl_call(c, req, c->ctl_timeout_ms, &rep, why, wlen)) != 0)
		return e;
	if (!cJSON_IsTrue(kz_json_get(rep, "ok")))
		e = refusal(rep, why, wlen);
	else if (kz_json_str(rep, "endpoint", 107, &ep, NULL, 0) != 0 ||
	    !endpoint_ok(ep) || strlen(ep) >= elen) {
		kz_why(why, wlen, "controller: create answered no endpoint");
		atomic_store(&faulted, true);
		e = KZ_EPROTO;
	} else
		snprintf(endpoint, elen, "%s", ep);
	/* A refusal promises nothing was left behind. */
	if (e == KZ_EDENIED)
		known_del(id);
	cJSON_Delete(rep);
	return e;
}

/*
 * Whether id was probed less than PROBE_EVERY_MS ago (the loop thread
 * only): a start is polled every tick, its controller far less often.
 */
#define PROBE_EVERY_MS 500
#define PROBE_SLOTS 8

static bool
probed_lately(const char *id)
{
	static struct {
		char id[KZ_POOL_ID_MAX + 1];
		int64_t at;
	} slot[PROBE_SLOTS];
	static unsigned next;
	int64_t now = kz_now_ms();

	for (int i = 0; i < PROBE_SLOTS; i++)
		if (strcmp(slot[i].id, id) == 0) {
			if (now - slot[i].at < PROBE_EVERY_MS)
				return true;
			slot[i].at = now;
			return false;
		}
	snprintf(slot[next].id, sizeof(slot[0].id), "%s", id);
	slot[next].at = now;
	next = (next + 1) % PROBE_SLOTS;
	return false;
}

int
ctl_gone(const struct lease_conf *c, const char *id, char *why, size_t wlen)
{
	cJSON *req, *rep = NULL;
	const char *st, *w;
	int r = 0;

	if (probed_lately(id))
		return 0;
	req = ctl_req("probe", id);
	if (req == NULL ||
	    ctl_call(c, req, c->ctl_timeout_ms, &rep, why, wlen) != 0)
		return 0;
	/* probe is optional: a controller without it answers an error,
	 * and the create deadline does the job alone. */
	if (cJSON_IsTrue(kz_json_get(rep, "ok")) &&
	    (st = cJSON_GetStringValue(kz_json_get(rep, "state"))) != NULL &&
	    strcmp(st, "exited") == 0) {
		w = cJSON_GetStringValue(kz_json_get(rep, "why"));
		kz_why(why, wlen, "%.200s",
		    w != NULL && *w ? w : "the worker exited without a word");
		for (char *p = why; *p != '\0'; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
		r = 1;
	}
	cJSON_Delete(rep);
	return r;
}

int
ctl_delete(const struct lease_conf *c, const char *id, char *why, size_t wlen)
{
	cJSON *req = ctl_req("delete", id), *rep = NULL;
	int e;

	if (req == NULL)
		return KZ_ENOMEM;
	if ((e = ctl_call(c, req, c->ctl_delete_timeout_ms, &rep, why, wlen)) !=
	    0)
		return e;
	if (!cJSON_IsTrue(kz_json_get(rep, "ok")))
		e = refusal(rep, why, wlen) == KZ_EDENIED ? KZ_EDENIED :
		                                            KZ_ESTATE;
	else if (!cJSON_IsTrue(kz_json_get(rep, "absent"))) {
		kz_why(why, wlen, "controller: delete did not confirm absence");
		e = KZ_ESTATE;
	} else
		known_del(id);
	cJSON_Delete(rep);
	return e;
}

/* The controller's list into inv; KZ_EPROTO when any entry is not a
 * plain worker id or repeats one (a controller that says that is not
 * believed in part). */
static int
take_list(const cJSON *a, struct ctl_inv *inv, char *why, size_t wlen)
{
	const cJSON *x;

	inv->n = 0;
	cJSON_ArrayForEach(x, a)
	{
		const char *id = cJSON_GetStringValue(x);

		if (id == NULL || !kz_pool_id_ok(id) ||
		    strlen(id) >= sizeof(inv->id[0]) ||
		    inv->n == LEASE_INV_MAX) {
			kz_why(why, wlen,
			    "controller: list is not an inventory");
			return KZ_EPROTO;
		}
		for (size_t i = 0; i < inv->n; i++)
			if (strcmp(inv->id[i], id) == 0) {
				kz_why(why, wlen, "controller: list repeats %s",
				    id);
				return KZ_EPROTO;
			}
		inv->held[inv->n] = false;
		snprintf(inv->id[inv->n++], sizeof(inv->id[0]), "%s", id);
	}
	return 0;
}

static bool
listed(const struct ctl_inv *inv, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(inv->id[i], id) == 0)
			return true;
	return false;
}

/*
 * Every listed worker becomes known; every known worker the list lacks is
 * added back, held, until a delete confirms it absent.
 */
static int
merge_known(struct ctl_inv *inv, char *why, size_t wlen)
{
	size_t n = inv->n;
	int e = 0;

	for (size_t i = 0; i < n; i++)
		known_add(inv->id[i]);
	pthread_mutex_lock(&known.mu);
	for (size_t i = 0; i < known.n; i++) {
		if (listed(inv, n, known.id[i]))
			continue;
		if (inv->n == LEASE_INV_MAX) {
			e = KZ_ETOOBIG;
			break;
		}
		inv->held[inv->n] = true;
		memcpy(inv->id[inv->n++], known.id[i], sizeof(inv->id[0]));
	}
	if (known.full)
		e = KZ_ETOOBIG;
	pthread_mutex_unlock(&known.mu);
	if (e != 0)
		kz_why(why, wlen, "more workers than kz-lease can count");
	return e;
}

int
ctl_list(const struct lease_conf *c, struct ctl_inv *inv, char *why,
    size_t wlen)
{
	cJSON *req = ctl_req("list", NULL), *rep = NULL;
	const cJSON *a;
	int e;

	inv->n = 0;
	if (req == NULL)
		return KZ_ENOMEM;
	if ((e = ctl_call(c, req, c->ctl_timeout_ms, &rep, why, wlen)) != 0)
		return e;
	if (!cJSON_IsTrue(kz_json_get(rep, "ok")))
		e = refusal(rep, why, wlen);
	else if (!cJSON_IsArray(a = kz_json_get(rep, "workers"))) {
		kz_why(why, wlen, "controller: list answered no workers");
		e = KZ_EPROTO;
	} else
		e = take_list(a, inv, why, wlen);
	if (e == KZ_EPROTO)
		atomic_store(&faulted, true);
	if (e == 0)
		e = merge_known(inv, why, wlen);
	if (e != 0)
		inv->n = 0;
	cJSON_Delete(rep);
	return e;
}

/*
 * Stops every worker of the inventory (kz-lease's exit with
 * LEASE_STOP_WORKERS), confirming each deletion.  Their store records are
 * found absent by the next reconcile.
 */
void
ctl_stop_all(const struct lease_conf *c)
{
	static struct ctl_inv inv;
	char why[LEASE_FAIL_MAX];

	if (ctl_list(c, &inv, why, sizeof(why)) != 0) {
		kz_log(KZ_LOG_WARN, "inventory.fail", KZ_EUNAVAIL, why, NULL);
		return;
	}
	for (size_t i = 0; i < inv.n; i++)
		if (ctl_delete(c, inv.id[i], why, sizeof(why)) != 0)
			kz_log(KZ_LOG_WARN, "worker.delete", KZ_ESTATE, why,
			    "worker", inv.id[i], NULL);
}
