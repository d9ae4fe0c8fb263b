#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "kz_conf.h"
#include "kz_frame.h"
#include "lease.h"
#include "banned.h"

static const char *const known[] = {
	"KZ_SOCKET", "KZ_RUN_DIR", "KZ_STORE_SOCKET", "KZ_AUDIT_SOCKET",
	"KZ_FIELD_KEY_FILE", "KZ_PEER_UIDS", "KZ_PEER_GIDS", "KZ_FRAME_MAX",
	"KZ_DEPLOYMENT", "LEASE_CONTROLLER", "LEASE_CAPACITY",
	"LEASE_MEMBER_LIMIT", "LEASE_TTL_MS", "LEASE_STORE_TIMEOUT_MS",
	"LEASE_TICK_MS", "LEASE_RECONCILE_MS", "LEASE_CREATE_TIMEOUT_MS",
	"LEASE_RESET_GRACE_MS", "LEASE_RESET_CONCURRENCY",
	"RESET_IO_TIMEOUT_MS", "LEASE_WORKERS_DIR", "LEASE_WORKER_BIN",
	"LEASE_WORKER_ARGS", "LEASE_SNAPSHOT_DIR", "LEASE_EGRESS_SOCKET",
	"LEASE_STOP_WORKERS", NULL,
};

static int
copy(char *dst, size_t len, const char *src, const char *what, char *why,
    size_t wlen)
{
	if ((size_t)snprintf(dst, len, "%s", src) >= len) {
		kz_why(why, wlen, "%s is too long", what);
		return KZ_ECONF;
	}
	return 0;
}

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
	{"LEASE_CREATE_TIMEOUT_MS", 15000, 100, 600000,
	    OFF(create_timeout_ms)},
	{"LEASE_RESET_GRACE_MS", 60000, 100, 3600000, OFF(reset_grace_ms)},
	/* The agent's wipe and health calls, each (kz-reset's key). */
	{"RESET_IO_TIMEOUT_MS", 5000, 10, 600000, OFF(reset_io_timeout_ms)},
	{"LEASE_RESET_CONCURRENCY", 8, 1, 64, OFF(reset_threads)},
	{NULL, 0, 0, 0, 0},
};

static int
load_ints(struct lease_conf *c, const struct kz_conf *k, char *why,
    size_t wlen)
{
	const struct ikey *i;
	int e;

	for (i = ikeys; i->key != NULL; i++)
		if ((e = kz_conf_int(k, i->key, i->dflt, i->min, i->max,
		    (int64_t *)(void *)((char *)c + i->off), why, wlen)) != 0)
			return e;
	return 0;
}

static int
load_paths(struct lease_conf *c, const struct kz_conf *k, const char *self,
    char *why, size_t wlen)
{
	char rd[PATH_MAX], dflt[PATH_MAX + 32], bindir[PATH_MAX], tmp[PATH_MAX];
	int e = 0;

	snprintf(rd, sizeof(rd), "%s", kz_conf_str(k, "KZ_RUN_DIR",
	    "/run/kaizen"));
	snprintf(tmp, sizeof(tmp), "%s", self);
	snprintf(bindir, sizeof(bindir), "%s", dirname(tmp));
	e |= copy(c->run_dir, sizeof(c->run_dir), rd, "KZ_RUN_DIR", why, wlen);
	snprintf(dflt, sizeof(dflt), "%s/kz-lease.sock", rd);
	e |= copy(c->sock, sizeof(c->sock), kz_conf_str(k, "KZ_SOCKET", dflt),
	    "KZ_SOCKET", why, wlen);
	snprintf(dflt, sizeof(dflt), "%s/store.sock", rd);
	e |= copy(c->store_sock, sizeof(c->store_sock),
	    kz_conf_str(k, "KZ_STORE_SOCKET", dflt), "KZ_STORE_SOCKET", why,
	    wlen);
	e |= copy(c->audit_sock, sizeof(c->audit_sock),
	    kz_conf_str(k, "KZ_AUDIT_SOCKET", ""), "KZ_AUDIT_SOCKET", why,
	    wlen);
	snprintf(dflt, sizeof(dflt), "%s/field.key", rd);
	e |= copy(c->key_file, sizeof(c->key_file),
	    kz_conf_str(k, "KZ_FIELD_KEY_FILE", dflt), "KZ_FIELD_KEY_FILE",
	    why, wlen);
	snprintf(dflt, sizeof(dflt), "%s/workers", rd);
	e |= copy(c->workers_dir, sizeof(c->workers_dir),
	    kz_conf_str(k, "LEASE_WORKERS_DIR", dflt), "LEASE_WORKERS_DIR",
	    why, wlen);
	snprintf(dflt, sizeof(dflt), "%s/kz-sandbox", bindir);
	e |= copy(c->worker_bin, sizeof(c->worker_bin),
	    kz_conf_str(k, "LEASE_WORKER_BIN", dflt), "LEASE_WORKER_BIN", why,
	    wlen);
	e |= copy(c->worker_args, sizeof(c->worker_args),
	    kz_conf_str(k, "LEASE_WORKER_ARGS", ""), "LEASE_WORKER_ARGS", why,
	    wlen);
	snprintf(dflt, sizeof(dflt), "%s/snapshots", rd);
	e |= copy(c->snap_dir, sizeof(c->snap_dir),
	    kz_conf_str(k, "LEASE_SNAPSHOT_DIR", dflt), "LEASE_SNAPSHOT_DIR",
	    why, wlen);
	e |= copy(c->egress_sock, sizeof(c->egress_sock),
	    kz_conf_str(k, "LEASE_EGRESS_SOCKET", ""), "LEASE_EGRESS_SOCKET",
	    why, wlen);
	e |= copy(c->dep, sizeof(c->dep), kz_conf_str(k, "KZ_DEPLOYMENT",
	    "default"), "KZ_DEPLOYMENT", why, wlen);
	e |= copy(c->controller, sizeof(c->controller),
	    kz_conf_str(k, "LEASE_CONTROLLER", "local"), "LEASE_CONTROLLER",
	    why, wlen);
	return e ? KZ_ECONF : 0;
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
	    (e = kz_conf_size(k, "KZ_FRAME_MAX", KZ_FRAME_MAX_DEFAULT,
	    KZ_FRAME_MAX_LIMIT, &c->frame_max, why, wlen)) != 0 ||
	    (e = kz_conf_bool(k, "LEASE_STOP_WORKERS", true, &c->stop_workers,
	    why, wlen)) != 0 ||
	    (e = kz_peer_policy_parse(kz_conf_str(k, "KZ_PEER_UIDS", ""),
	    kz_conf_str(k, "KZ_PEER_GIDS", ""), &c->peers, why, wlen)) != 0)
		goto out;
	if (strcmp(c->controller, "local") != 0) {
		kz_why(why, wlen, "LEASE_CONTROLLER: only 'local' is built in");
		e = KZ_ECONF;
	}
out:
	kz_conf_free(k);
	return e;
}
