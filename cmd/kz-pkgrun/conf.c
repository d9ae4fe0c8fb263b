/*
 * kz-pkgrun's configuration: file, then environment, over the defaults.
 * The runner holds no key: KZ_FIELD_KEY_FILE is not one of its settings,
 * and a config that names it is refused like any unknown key.
 */
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "kz_conf.h"
#include "kz_srv.h"
#include "pkgrun.h"
#include "banned.h"

static const char *const known[] = {
    "KZ_RUN_DIR",
    "KZ_AUDIT",
    "KZ_AUDIT_SOCKET",
    "KZ_SOCKET",
    "KZ_FRAME_MAX",
    "KZ_IO_TIMEOUT_MS",
    "KZ_LOG_LEVEL",
    KZ_SRV_PEER_KEYS,
    "PKGRUN_CACHE",
    "PKGRUN_STATE_DIR",
    "PKGRUN_WORKSPACE_ROOT",
    "PKGRUN_SANDBOX_BIN",
    "PKGRUN_SANDBOX_CONFIG",
    "PKGRUN_EGRESS_SOCKET",
    "PKGRUN_UID",
    "PKGRUN_GID",
    "PKGRUN_UID_COUNT",
    "PKGRUN_MEMORY",
    "PKGRUN_PIDS",
    "PKGRUN_CPU",
    "PKGRUN_TIMEOUT",
    "PKGRUN_RESULT_MAX",
    "PKGRUN_FILES_MAX",
    "PKGRUN_PACKAGE_MAX",
    "PKGRUN_ENTRIES_MAX",
    "PKGRUN_WARM",
    "PKGRUN_STAGING_FREE_MIN",
    NULL,
};

static int
paths(struct pr_conf *c, const struct kz_conf *k, const char *self, char *why,
    size_t wlen)
{
	char bindir[PATH_MAX], tmp[PATH_MAX], dflt[PATH_MAX + 32];
	int e = 0;

	snprintf(tmp, sizeof(tmp), "%s", self);
	snprintf(bindir, sizeof(bindir), "%s", dirname(tmp));
	if (kz_run_dir(k, c->run_dir, sizeof(c->run_dir), why, wlen) != 0 ||
	    kz_conf_audit(k, c->run_dir, c->audit_sock, sizeof(c->audit_sock),
	        why, wlen) != 0)
		return KZ_ECONF;
	snprintf(dflt, sizeof(dflt), "%s/kz-pkgrun", c->run_dir);
	e |= kz_conf_copy(k, "PKGRUN_CACHE", NULL, "/var/lib/kaizen/pkgrun",
	    c->cache, sizeof(c->cache), why, wlen);
	e |= kz_conf_copy(k, "PKGRUN_STATE_DIR", NULL, dflt, c->state_dir,
	    sizeof(c->state_dir), why, wlen);
	e |= kz_conf_copy(k, "PKGRUN_WORKSPACE_ROOT", NULL, "", c->workspaces,
	    sizeof(c->workspaces), why, wlen);
	e |= kz_conf_copy(k, "PKGRUN_SANDBOX_BIN", bindir, "kz-sandbox",
	    c->sandbox_bin, sizeof(c->sandbox_bin), why, wlen);
	e |= kz_conf_copy(k, "PKGRUN_SANDBOX_CONFIG", NULL, "", c->sandbox_conf,
	    sizeof(c->sandbox_conf), why, wlen);
	e |= kz_conf_copy(k, "PKGRUN_EGRESS_SOCKET", NULL, "", c->egress_sock,
	    sizeof(c->egress_sock), why, wlen);
	e |= kz_conf_sock(k, "KZ_SOCKET", c->run_dir, "kz-pkgrun", c->sock,
	    sizeof(c->sock), why, wlen);
	if (e != 0)
		return KZ_ECONF;
	if (c->cache[0] != '/' || c->state_dir[0] != '/' ||
	    (c->workspaces[0] != '\0' && c->workspaces[0] != '/')) {
		kz_why(why, wlen,
		    "PKGRUN_CACHE, PKGRUN_STATE_DIR and "
		    "PKGRUN_WORKSPACE_ROOT must be absolute");
		return KZ_ECONF;
	}
	return 0;
}

static int
numbers(struct pr_conf *c, const struct kz_conf *k, char *why, size_t wlen)
{
	const int64_t id_max = 2147483646;
	int e;

	if ((e = kz_conf_int(k, "PKGRUN_UID", 2100200000, 1, id_max, &c->uid,
	         why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "PKGRUN_GID", 2100200000, 1, id_max, &c->gid,
	         why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "PKGRUN_UID_COUNT", 16, 1, 65536, &c->uid_count,
	         why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "PKGRUN_MEMORY", 256 << 20, 1ULL << 40,
	         &c->memory, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "PKGRUN_PIDS", 64, 4, 65536, &c->pids, why,
	         wlen)) != 0 ||
	    (e = kz_conf_int(k, "PKGRUN_CPU", 1000, 10, 1024000, &c->cpu_milli,
	         why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "PKGRUN_TIMEOUT", 30, 1, 3600, &c->timeout_s,
	         why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "PKGRUN_RESULT_MAX", 64 << 10, 16 << 20,
	         &c->result_max, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "PKGRUN_FILES_MAX", 16 << 20, 1ULL << 32,
	         &c->files_max, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "PKGRUN_PACKAGE_MAX", 256 << 20, 1ULL << 36,
	         &c->package_max, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "PKGRUN_ENTRIES_MAX", 20000, 1, 1000000,
	         &c->entries_max, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "PKGRUN_WARM", 2, 0, PR_WARM_MAX, &c->warm, why,
	         wlen)) != 0 ||
	    (e = kz_conf_size(k, "PKGRUN_STAGING_FREE_MIN", 64 << 20,
	         1ULL << 40, &c->free_min, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "KZ_FRAME_MAX", 1 << 20, 64 << 20,
	         &c->frame_max, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "KZ_IO_TIMEOUT_MS", 5000, 10, 600000,
	         &c->io_timeout_ms, why, wlen)) != 0)
		return e;
	if (c->uid + c->uid_count - 1 > id_max ||
	    c->gid + c->uid_count - 1 > id_max) {
		kz_why(why, wlen,
		    "PKGRUN_UID or PKGRUN_GID plus "
		    "PKGRUN_UID_COUNT is past the last id");
		return KZ_ECONF;
	}
	if (c->result_max < 1024) {
		kz_why(why, wlen, "PKGRUN_RESULT_MAX must be at least 1K");
		return KZ_ECONF;
	}
	return 0;
}

int
pr_conf_load(struct pr_conf *c, const char *path, const char *self, char *why,
    size_t wlen)
{
	struct kz_conf *k = NULL;
	int e;

	memset(c, 0, sizeof(*c));
	if ((e = kz_conf_load(path, known, &k, why, wlen)) != 0)
		return e;
	if ((e = paths(c, k, self, why, wlen)) == 0 &&
	    (e = numbers(c, k, why, wlen)) == 0)
		e = kz_srv_peers_load(k, &c->peers, &c->operators, why, wlen);
	kz_conf_free(k);
	return e;
}
