#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_frame.h"
#include "kz_srv.h"
#include "kz_store.h"
#include "lease.h"
#include "banned.h"

static const char *const known[] = {
    "KZ_SOCKET",
    "KZ_RUN_DIR",
    /* The store: address and credentials (kz_store.h). */
    KZ_STORE_CONF_KEYS,
    "LEASE_HOST",
    "KZ_AUDIT_SOCKET",
    "KZ_FIELD_KEY_FILE",
    KZ_SRV_PEER_KEYS,
    "KZ_FRAME_MAX",
    "KZ_DEPLOYMENT",
    "LEASE_CONTROLLER",
    "LEASE_CAPACITY",
    "LEASE_MEMBER_LIMIT",
    "LEASE_TTL_MS",
    "LEASE_STORE_TIMEOUT_MS",
    "LEASE_TICK_MS",
    "LEASE_RECONCILE_MS",
    "LEASE_CREATE_TIMEOUT_MS",
    "LEASE_RESET_GRACE_MS",
    "LEASE_RESET_CONCURRENCY",
    "RESET_IO_TIMEOUT_MS",
    "LEASE_WORKERS_DIR",
    "LEASE_WORKER_BIN",
    "LEASE_WORKER_ARGS",
    "LEASE_SNAPSHOT_DIR",
    "LEASE_SNAPSHOT_ACTOR_MAX",
    "LEASE_SNAPSHOT_TOTAL_MAX",
    "LEASE_SNAPSHOT_TTL_MS",
    "LEASE_EGRESS_SOCKET",
    "LEASE_BROKER_SOCKET",
    "LEASE_STOP_WORKERS",
    "LEASE_WORKER_IDS",
    "LEASE_FILES_SHARE",
    "KZ_AUDIT",
    /* The controller (kz-controller(7)). */
    "LEASE_CONTROLLER_TIMEOUT_MS",
    "LEASE_CONTROLLER_DELETE_TIMEOUT_MS",
    "LEASE_WORKER_RUNTIME",
    NULL,
};

struct ikey {
	const char *key;
	int64_t dflt, min, max;
	size_t off;
};

#define OFF(f) offsetof(struct lease_conf, f)
static const struct ikey ikeys[] = {
    {"LEASE_CAPACITY", 2, 1, 4096, OFF(capacity)},
    {"LEASE_MEMBER_LIMIT", 2, 1, 4096, OFF(member_limit)},
    {"LEASE_TTL_MS", 120000, 100, 86400000, OFF(ttl_ms)},
    {"LEASE_STORE_TIMEOUT_MS", 1000, 10, 60000, OFF(store_timeout_ms)},
    {"LEASE_TICK_MS", 200, 10, 60000, OFF(tick_ms)},
    {"LEASE_RECONCILE_MS", 2000, 50, 3600000, OFF(reconcile_ms)},
    {"LEASE_CREATE_TIMEOUT_MS", 15000, 100, 600000, OFF(create_timeout_ms)},
    {"LEASE_RESET_GRACE_MS", 60000, 100, 3600000, OFF(reset_grace_ms)},
    /* The agent's wipe and health calls, each (kz-reset's key). */
    {"RESET_IO_TIMEOUT_MS", 5000, 10, 600000, OFF(reset_io_timeout_ms)},
    {"LEASE_RESET_CONCURRENCY", 8, 1, 64, OFF(reset_threads)},
    /* 30 days; at most ten years. */
    {"LEASE_SNAPSHOT_TTL_MS", 2592000000LL, 1000, 315360000000LL,
        OFF(snap_ttl_ms)},
    {NULL, 0, 0, 0, 0},
};

static int
load_ints(struct lease_conf *c, const struct kz_conf *k, char *why, size_t wlen)
{
	const struct ikey *i;
	int e;

	for (i = ikeys; i->key != NULL; i++)
		if ((e = kz_conf_int(k, i->key, i->dflt, i->min, i->max,
		         (int64_t *)(void *)((char *)c + i->off), why, wlen)) !=
		    0)
			return e;
	return 0;
}

/*
 * The default controller: kz-ctl-local beside kz-lease, as installed, else
 * the first on PATH (a kz-lease copied alone, as some tests do).
 */
static int
ctl_default(char *out, size_t len, const char *bindir)
{
	char p[PATH_MAX + 16], path[4096], *dir, *save = NULL;
	const char *env = getenv("PATH");

	snprintf(p, sizeof(p), "%s/kz-ctl-local", bindir);
	if (access(p, X_OK) != 0 && env != NULL && strlen(env) < sizeof(path)) {
		snprintf(path, sizeof(path), "%s", env);
		for (dir = strtok_r(path, ":", &save); dir != NULL;
		     dir = strtok_r(NULL, ":", &save)) {
			snprintf(p, sizeof(p), "%s/kz-ctl-local", dir);
			if (dir[0] == '/' && access(p, X_OK) == 0)
				break;
		}
		if (dir == NULL)
			snprintf(p, sizeof(p), "%s/kz-ctl-local", bindir);
	}
	if (strlen(p) >= len)
		return KZ_ECONF;
	memcpy(out, p, strlen(p) + 1);
	return 0;
}

static int
load_paths(struct lease_conf *c, const struct kz_conf *k, const char *self,
    char *why, size_t wlen)
{
	char bindir[PATH_MAX], tmp[PATH_MAX];
	const char *rd = c->run_dir;
	int e = 0;

	snprintf(tmp, sizeof(tmp), "%s", self);
	snprintf(bindir, sizeof(bindir), "%s", dirname(tmp));
	/* Every socket's default is KZ_RUN_DIR/NAME.sock, the rule of
	 * kaizen.conf(5)'s DEFAULTS. */
	if (kz_run_dir(k, c->run_dir, sizeof(c->run_dir), why, wlen) != 0 ||
	    kz_conf_sock(k, "KZ_SOCKET", rd, "kz-lease", c->sock,
	        sizeof(c->sock), why, wlen) != 0 ||
	    kz_store_conf(k, rd, c->store_sock, sizeof(c->store_sock), why,
	        wlen) != 0 ||
	    kz_conf_audit(k, rd, c->audit_sock, sizeof(c->audit_sock), why,
	        wlen) != 0)
		return KZ_ECONF;
	e |= kz_conf_copy(k, "KZ_FIELD_KEY_FILE", rd, "field.key", c->key_file,
	    sizeof(c->key_file), why, wlen);
	e |= kz_conf_copy(k, "LEASE_WORKERS_DIR", rd, "workers", c->workers_dir,
	    sizeof(c->workers_dir), why, wlen);
	e |= kz_conf_copy(k, "LEASE_WORKER_BIN", bindir, "kz-sandbox",
	    c->worker_bin, sizeof(c->worker_bin), why, wlen);
	e |= kz_conf_copy(k, "LEASE_WORKER_ARGS", NULL, "", c->worker_args,
	    sizeof(c->worker_args), why, wlen);
	/* State that must survive a reboot: not under /run, unless the
	 * deployment has a run directory of its own (kz-supervise). */
	if (strcmp(kz_conf_origin(k, "KZ_RUN_DIR"), "default") != 0)
		e |= kz_conf_copy(k, "LEASE_SNAPSHOT_DIR", rd, "snapshots",
		    c->snap_dir, sizeof(c->snap_dir), why, wlen);
	else
		e |= kz_conf_copy(k, "LEASE_SNAPSHOT_DIR", NULL,
		    LEASE_SNAPSHOT_DIR_DEFAULT, c->snap_dir,
		    sizeof(c->snap_dir), why, wlen);
	e |= kz_conf_copy(k, "LEASE_EGRESS_SOCKET", NULL, "", c->egress_sock,
	    sizeof(c->egress_sock), why, wlen);
	e |= kz_conf_copy(k, "LEASE_BROKER_SOCKET", NULL, "", c->broker_sock,
	    sizeof(c->broker_sock), why, wlen);
	e |= kz_conf_copy(k, "KZ_DEPLOYMENT", NULL, "default", c->dep,
	    sizeof(c->dep), why, wlen);
	e |= kz_conf_copy(k, "LEASE_CONTROLLER", bindir, "kz-ctl-local",
	    c->controller, sizeof(c->controller), why, wlen);
	/* "local", the name it had while it was linked in, is the default. */
	if (strcmp(c->controller, "local") == 0 ||
	    strcmp(kz_conf_origin(k, "LEASE_CONTROLLER"), "default") == 0)
		e |= ctl_default(c->controller, sizeof(c->controller), bindir);
	return e ? KZ_ECONF : 0;
}

/*
 * LEASE_HOST: this host's name in a pool that kz-lease processes on
 * several hosts share (kz-lease(8), SEVERAL HOSTS); every pool script
 * gets it (kz_store_scope).
 */
static int
load_host(const struct kz_conf *k, char *why, size_t wlen)
{
	if (kz_store_scope_set(kz_conf_str(k, "LEASE_HOST", "")) != 0) {
		kz_why(why, wlen,
		    "LEASE_HOST: letters, digits, '.', '-', '_', at most "
		    "%d",
		    KZ_STORE_SCOPE_MAX);
		return KZ_ECONF;
	}
	return 0;
}

static int
load_snap_bounds(struct lease_conf *c, const struct kz_conf *k, char *why,
    size_t wlen)
{
	int e;

	if ((e = kz_conf_size(k, "LEASE_SNAPSHOT_ACTOR_MAX", 1ULL << 30,
	         1ULL << 50, &c->snap_actor_max, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "LEASE_SNAPSHOT_TOTAL_MAX", 20ULL << 30,
	         1ULL << 50, &c->snap_total_max, why, wlen)) != 0)
		return e;
	if (c->snap_actor_max == 0 || c->snap_total_max == 0) {
		kz_why(why, wlen,
		    "LEASE_SNAPSHOT_ACTOR_MAX and "
		    "LEASE_SNAPSHOT_TOTAL_MAX must be at least 1");
		return KZ_ECONF;
	}
	return 0;
}

/*
 * The controller: an executable, given by absolute path (kz-controller(7)),
 * each call's deadline, and the runtime every create asks for, passed
 * through for the controller to accept or refuse.
 */
static int
load_controller(struct lease_conf *c, const struct kz_conf *k, char *why,
    size_t wlen)
{
	const char *rt = kz_conf_str(k, "LEASE_WORKER_RUNTIME", "native");
	int e;

	if ((e = kz_conf_int(k, "LEASE_CONTROLLER_TIMEOUT_MS", 2000, 10, 60000,
	         &c->ctl_timeout_ms, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "LEASE_CONTROLLER_DELETE_TIMEOUT_MS", 15000, 10,
	         600000, &c->ctl_delete_timeout_ms, why, wlen)) != 0)
		return e;
	/* Whether it can be run is the first call's business: a client
	 * of kz-lease reads this file too, and may not reach it. */
	if (c->controller[0] != '/') {
		kz_why(why, wlen,
		    "LEASE_CONTROLLER: %.200s is not an absolute path",
		    c->controller);
		return KZ_ECONF;
	}
	if (*rt == '\0' || strlen(rt) >= sizeof(c->worker_runtime) ||
	    strspn(rt, "abcdefghijklmnopqrstuvwxyz0123456789-_") !=
	        strlen(rt)) {
		kz_why(why, wlen,
		    "LEASE_WORKER_RUNTIME: a short lower-case name");
		return KZ_ECONF;
	}
	snprintf(c->worker_runtime, sizeof(c->worker_runtime), "%s", rt);
	return 0;
}

int
lease_conf_load(struct lease_conf *c, const char *path, const char *self,
    char *why, size_t wlen)
{
	struct kz_conf *k = NULL;
	int e;

	memset(c, 0, sizeof(*c));
	if ((e = kz_conf_load(path, known, &k, why, wlen)) != 0)
		return e;
	if ((e = load_paths(c, k, self, why, wlen)) != 0 ||
	    (e = load_ints(c, k, why, wlen)) != 0 ||
	    (e = kz_conf_ids(k, "LEASE_WORKER_IDS", KZ_WORKER_IDS_DEFAULT,
	         &c->ids_first, &c->ids_last, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "LEASE_FILES_SHARE", 50, 0, 100,
	         &c->files_share, why, wlen)) != 0 ||
	    (e = load_host(k, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "KZ_FRAME_MAX", KZ_FRAME_MAX_DEFAULT,
	         KZ_FRAME_MAX_LIMIT, &c->frame_max, why, wlen)) != 0 ||
	    (e = kz_conf_bool(k, "LEASE_STOP_WORKERS", true, &c->stop_workers,
	         why, wlen)) != 0 ||
	    (e = load_snap_bounds(c, k, why, wlen)) != 0 ||
	    (e = kz_srv_peers_load(k, &c->peers, &c->operators, why, wlen)) !=
	        0)
		goto out;
	e = load_controller(c, k, why, wlen);
out:
	kz_conf_free(k);
	return e;
}
