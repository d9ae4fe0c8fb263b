/*
 * Configuration: one table maps each key to its command-line option, its
 * type, bounds and default, so the file, the environment and the options
 * all go through the same parser and the same checks.
 */
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kz_conf.h"
#include "sbx.h"
#include "sbx_gvisor.h"
#include "sbx_view.h"
#include "banned.h"

enum ktype { K_STR, K_SIZE, K_INT, K_BOOL };

struct key {
	const char *key;
	const char *opt; /* NULL: config/env only */
	enum ktype t;
	size_t off;
	size_t cap; /* K_STR buffer size */
	int64_t min, max; /* K_INT bounds; K_SIZE max in max */
	const char *dflt;
	const char *help;
};

#define S(f) offsetof(struct sbx_conf, f), sizeof(((struct sbx_conf *)0)->f)
#define N(f) offsetof(struct sbx_conf, f), 0
#define G(x) ((int64_t)(x) << 30)

static const struct key keys[] = {
    {"SANDBOX_ROOT", "root", K_STR, S(root), 0, 0, "/",
        "/: the allowlisted host view; else a dedicated image root"},
    {"SANDBOX_WORKSPACE_SIZE", "workspace-size", K_SIZE, N(ws_size), 1 << 20,
        G(64), "256M", "size of the /workspace tmpfs"},
    {"SANDBOX_TMP_SIZE", "tmp-size", K_SIZE, N(tmp_size), 1 << 20, G(16), "64M",
        "size of the /tmp tmpfs"},
    {"SANDBOX_SHM_SIZE", "shm-size", K_SIZE, N(shm_size), 1 << 20, G(16), "64M",
        "size of the /dev/shm tmpfs"},
    {"SANDBOX_UID", "uid", K_INT, N(uid), 1, 2147483646, "2100000000",
        "uid the code runs as (never 0 or nobody)"},
    {"SANDBOX_GID", "gid", K_INT, N(gid), 1, 2147483646, "2100000000",
        "gid the code runs as (never 0 or nogroup)"},
    {"SANDBOX_MEMORY", "memory", K_SIZE, N(memory), 8 << 20, G(1024), "512M",
        "memory limit of a run (cgroup)"},
    {"SANDBOX_PIDS", "pids", K_INT, N(pids), 4, 65536, "128",
        "process/thread limit of a run (cgroup)"},
    {"SANDBOX_CPU", "cpu", K_INT, N(cpu_milli), 10, 1024000, "1000",
        "CPU bandwidth of a run in millicores (cgroup)"},
    {"SANDBOX_NOFILE", "nofile", K_INT, N(nofile), 16, 1048576, "1024",
        "RLIMIT_NOFILE of a run"},
    {"SANDBOX_FSIZE", "fsize", K_SIZE, N(fsize), 1 << 20, G(1024), "256M",
        "RLIMIT_FSIZE of a run"},
    {"SANDBOX_SIGPENDING", "sigpending", K_INT, N(sigpending), 16, 1048576,
        "256", "RLIMIT_SIGPENDING of a run (queued signals, POSIX timers)"},
    {"SANDBOX_MSGQUEUE", "msgqueue", K_SIZE, N(msgqueue), 0, G(1), "800K",
        "RLIMIT_MSGQUEUE of a run (POSIX message queue bytes)"},
    {"SANDBOX_IO_READ_BPS", "io-read-bps", K_SIZE, N(io_rbps), 0, G(1024),
        "100M", "read bandwidth of a run from the root's disk (0: none)"},
    {"SANDBOX_IO_WRITE_BPS", "io-write-bps", K_SIZE, N(io_wbps), 0, G(1024),
        "100M", "write bandwidth of a run to that disk (0: none)"},
    {"SANDBOX_LEASES_MAX", "leases-max", K_INT, N(leases_max), 1, 1048576,
        "4096", "leases a served worker takes before a reset retires it"},
    {"SANDBOX_CLEAN_MEMORY", "clean-memory", K_SIZE, N(clean_memory), 64 << 10,
        G(1), "4M", "memory a reset must bring the run cgroup back under"},
    {"SANDBOX_TIMEOUT", "timeout", K_INT, N(timeout_s), 1, 86400, "60",
        "wall-clock limit of a run in seconds"},
    {"SANDBOX_STDOUT_MAX", "stdout-max", K_SIZE, N(stdout_max), 1024, G(1) / 4,
        "1M", "bytes of stdout kept"},
    {"SANDBOX_STDERR_MAX", "stderr-max", K_SIZE, N(stderr_max), 1024, G(1) / 4,
        "1M", "bytes of stderr kept"},
    {"SANDBOX_SNAPSHOT_MAX", "snapshot-max", K_SIZE, N(snapshot_max), 1 << 20,
        G(1), "64M", "bound of a workspace snapshot"},
    {"SANDBOX_ARCHIVER", NULL, K_STR, S(archiver), 0, 0, "", NULL},
    {"SANDBOX_GVISOR_COMPAT", NULL, K_STR, S(gv_compat), 0, 0, "", NULL},
    {"SANDBOX_GVISOR_LOADER", NULL, K_STR, S(gv_loader), 0, 0, "", NULL},
    {"SANDBOX_PROJECTION_DIR", "projection", K_STR, S(projection), 0, 0, "",
        "host directory mounted read-only at /projection"},
    {"SANDBOX_EGRESS_SOCKET", "egress-socket", K_STR, S(egress_sock), 0, 0, "",
        "kz-egress socket; empty: no network"},
    {"SANDBOX_RELAY_PORT", "relay-port", K_INT, N(relay_port), 1, 65535, "3128",
        "loopback port of the egress relay"},
    {"SANDBOX_BROKER_SOCKET", "broker-socket", K_STR, S(broker_sock), 0, 0, "",
        "kz-pkgbroker socket; empty: no package broker"},
    {"SANDBOX_BROKER_PORT", "broker-port", K_INT, N(broker_port), 1, 65535,
        "4873", "loopback port of the package-broker forward"},
    {"SANDBOX_USERNS", "userns", K_BOOL, N(userns), 0, 0, "off",
        "run the code in its own user namespace (on or off)"},
    {"SANDBOX_USERNS_HOST_UID", "userns-host-uid", K_INT, N(userns_uid), 1,
        2147483646, "2100000000",
        "host uid the sandbox uid maps to (--userns on)"},
    {"SANDBOX_USERNS_HOST_GID", "userns-host-gid", K_INT, N(userns_gid), 1,
        2147483646, "2100000000",
        "host gid the sandbox gid maps to (--userns on)"},
    {"SANDBOX_CGROUP_PARENT", "cgroup-parent", K_STR, S(cg_parent), 0, 0,
        "kz-sandbox", "cgroup under which workers are created"},
    {"SANDBOX_CGROUP_ROOT", "cgroup-root", K_STR, S(cg_root), 0, 0,
        "/sys/fs/cgroup", "where the cgroup hierarchies are mounted"},
    {"SANDBOX_CGROUP_VERSION", "cgroup-version", K_STR, S(cg_version), 0, 0,
        "auto", "auto, v1 or v2 (auto: v2 when it offers the controllers)"},
    {"SANDBOX_STATE_DIR", "state-dir", K_STR, S(state_dir), 0, 0,
        "/run/kz-sandbox", "host directory for the workers' root views"},
    {"SANDBOX_MASK", "mask", K_STR, S(masks), 0, 0, "",
        "comma-separated directories of the view hidden by an empty mount"},
    {"SANDBOX_EXTRA_RO", "extra-ro", K_STR, S(extra_ro), 0, 0, "",
        "comma-separated host directories shown read-only at their path"},
    {"SANDBOX_HOSTNAME", NULL, K_STR, S(hostname), 0, 0, "sandbox", NULL},
    {"SANDBOX_RUNTIME", "runtime", K_STR, S(runtime), 0, 0, "native",
        "native, or gvisor: the code runs in runsc's user-space kernel"},
    {"SANDBOX_GVISOR_PLATFORM", "gvisor-platform", K_STR, S(gv_platform), 0, 0,
        "ptrace", "runsc's platform under gvisor (ptrace, kvm, systrap)"},
    {"SANDBOX_RUNSC", "runsc", K_STR, S(runsc), 0, 0, "/usr/bin/runsc",
        "the runsc executable under gvisor (an absolute path)"},
    {"SANDBOX_GVISOR_PREBOOT", "gvisor-preboot", K_BOOL, N(gv_preboot), 0, 0,
        "on",
        "under gvisor, boot the next lease's sandbox once the reset is "
        "proven (on or off)"},
    {"SANDBOX_GVISOR_UID", "gvisor-uid", K_INT, N(gv_uid), 0, 2147483646, "0",
        "under gvisor, the worker's second host uid runsc and its gofer run "
        "as (0: root)"},
    {"SANDBOX_GVISOR_GID", "gvisor-gid", K_INT, N(gv_gid), 0, 2147483646, "0",
        "under gvisor, runsc's host gid (0: root)"},
    {"SANDBOX_BROWSER_BIN", "browser-bin", K_STR, S(browser_bin), 0, 0,
        "/usr/lib/chromium/chromium",
        NULL}, /* the pinned distro Chromium; never another */
    {"SANDBOX_BROWSER_MEMORY", NULL, K_SIZE, N(browser_memory), 64 << 20, G(64),
        "1G", NULL},
    {"SANDBOX_BROWSER_PIDS", NULL, K_INT, N(browser_pids), 16, 65536, "512",
        NULL},
    {"SANDBOX_BROWSER_CPU", NULL, K_INT, N(browser_cpu_milli), 10, 1024000,
        "1000", NULL},
    {"SANDBOX_BROWSER_TMP_SIZE", NULL, K_SIZE, N(browser_tmp), 16 << 20, G(16),
        "256M", NULL},
    {"SANDBOX_BROWSER_PRESTART", "browser-prestart", K_BOOL,
        N(browser_prestart), 0, 0, "no",
        "keep one Chromium started ahead of the next session (yes or no)"},
    {"KZ_SOCKET", "socket", K_STR, S(sock), 0, 0, "", "serve socket"},
    {"KZ_RUN_DIR", NULL, K_STR, S(run_dir), 0, 0, "", NULL},
    {"KZ_PEER_UIDS", NULL, K_STR, S(peer_uids), 0, 0, "", NULL},
    {"KZ_PEER_GIDS", NULL, K_STR, S(peer_gids), 0, 0, "", NULL},
    {"KZ_FRAME_MAX", NULL, K_SIZE, N(frame_max), 1024, 64 << 20, "8M", NULL},
    {"KZ_IO_TIMEOUT_MS", NULL, K_INT, N(io_timeout_ms), 10, 600000, "5000",
        NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL},
};

/* Keys every kz binary's config may carry that this one does not use. */
static const char *const ignored[] = {"KZ_FIELD_KEY_FILE", "KZ_AUDIT_SOCKET",
    "KZ_AUDIT", "KZ_STORE_SOCKET", "KZ_LOG_LEVEL", NULL};

static int
set(struct sbx_conf *c, const struct key *k, const char *v, char *why,
    size_t wlen)
{
	char *base = (char *)c;
	uint64_t u;
	int64_t i;

	switch (k->t) {
	case K_STR:
		if (strlen(v) >= k->cap) {
			kz_why(why, wlen, "%s is too long", k->key);
			return KZ_ETOOBIG;
		}
		memcpy(base + k->off, v, strlen(v) + 1);
		return 0;
	case K_SIZE:
		if (kz_parse_size(v, (uint64_t)k->max, &u) != 0 ||
		    u < (uint64_t)k->min) {
			kz_why(why, wlen,
			    "%s must be a size between %lld and %lld bytes",
			    k->key, (long long)k->min, (long long)k->max);
			return KZ_ERANGE;
		}
		memcpy(base + k->off, &u, sizeof(u));
		return 0;
	case K_BOOL:
		if (strcmp(v, "on") == 0 || strcmp(v, "yes") == 0 ||
		    strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
			i = 1;
		else if (strcmp(v, "off") == 0 || strcmp(v, "no") == 0 ||
		    strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
			i = 0;
		else {
			kz_why(why, wlen, "%s must be on or off", k->key);
			return KZ_EINVAL;
		}
		memcpy(base + k->off, &i, sizeof(i));
		return 0;
	case K_INT:
		if (kz_parse_int(v, k->min, k->max, &i) != 0) {
			kz_why(why, wlen,
			    "%s must be an integer in [%lld, %lld]", k->key,
			    (long long)k->min, (long long)k->max);
			return KZ_ERANGE;
		}
		memcpy(base + k->off, &i, sizeof(i));
		return 0;
	}
	return KZ_EINTERNAL;
}

void
sbx_conf_defaults(struct sbx_conf *c)
{
	memset(c, 0, sizeof(*c));
	for (const struct key *k = keys; k->key != NULL; k++)
		if (set(c, k, k->dflt, NULL, 0) != 0)
			__builtin_trap(); /* a bad default is a bug */
}

int
sbx_conf_load(struct sbx_conf *c, const char *path, char *why, size_t wlen)
{
	const char *known[sizeof(keys) / sizeof(keys[0]) + 8];
	struct kz_conf *kc = NULL;
	size_t n = 0;
	int r;

	for (const struct key *k = keys; k->key != NULL; k++)
		known[n++] = k->key;
	for (const char *const *p = ignored; *p != NULL; p++)
		known[n++] = *p;
	known[n] = NULL;
	if ((r = kz_conf_load(path, known, &kc, why, wlen)) != 0)
		return r;
	for (const struct key *k = keys; k->key != NULL; k++) {
		const char *v = kz_conf_str(kc, k->key, NULL);

		if (v != NULL && (r = set(c, k, v, why, wlen)) != 0)
			break;
	}
	kz_conf_free(kc);
	return r;
}

int
sbx_conf_opt(struct sbx_conf *c, const char *opt, const char *val, char *why,
    size_t wlen)
{
	for (const struct key *k = keys; k->key != NULL; k++)
		if (k->opt != NULL && strcmp(k->opt, opt) == 0)
			return set(c, k, val, why, wlen);
	return KZ_ENOENT;
}

bool
sbx_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > SBX_ID_MAX || id[0] == '.' || id[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = id[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		        (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
		        ch == '.'))
			return false;
	}
	return true;
}

static bool
abs_path_ok(const char *p)
{
	return p[0] == '/' && strstr(p, "/../") == NULL &&
	    strstr(p, "/./") == NULL && strcmp(p + strlen(p) - 1, ".") != 0;
}

/*
 * The host's nobody and nogroup: the overflow id 65534 and whatever the
 * host's databases name so.  Code that ran as them would share per-uid
 * kernel limits with every other holder of the id.  The nobody group is
 * nogroup where the host has one (Debian), else nobody (Fedora): asking
 * for a "nobody" group on a host that has none falls through every NSS
 * module (systemd's userdb among them), half a millisecond on every
 * start for an answer 65534 already covers.
 */
static bool
is_nobody(int64_t uid, int64_t gid)
{
	const struct passwd *pw;
	const struct group *gr;

	if (uid == 65534 || gid == 65534)
		return true;
	if ((pw = getpwnam("nobody")) != NULL && (int64_t)pw->pw_uid == uid)
		return true;
	if ((gr = getgrnam("nogroup")) == NULL)
		gr = getgrnam("nobody");
	return gr != NULL && (int64_t)gr->gr_gid == gid;
}

/*
 * runsc's host ids (ns.c): both or neither, never the sandbox's own (runsc's
 * root and nobody would be one host id, and its root's capabilities the
 * code's uid's), nor nobody's (shared with every nobody process).
 */
static int
gvisor_ids_check(const struct sbx_conf *c, char *why, size_t wlen)
{
	if ((c->gv_uid == 0) != (c->gv_gid == 0)) {
		kz_why(why, wlen,
		    "SANDBOX_GVISOR_UID and SANDBOX_GVISOR_GID are set "
		    "together");
		return KZ_ECONF;
	}
	if (c->gv_uid == 0)
		return 0;
	if (c->gv_uid == c->uid || c->gv_gid == c->gid ||
	    is_nobody(c->gv_uid, c->gv_gid)) {
		kz_why(why, wlen,
		    "SANDBOX_GVISOR_UID and SANDBOX_GVISOR_GID are neither "
		    "the sandbox's ids nor nobody's");
		return KZ_ECONF;
	}
	return 0;
}

/* The runtime keys; a runtime that cannot apply part of the policy is
 * refused here, before anything starts. */
static int
gvisor_check(const struct sbx_conf *c, char *why, size_t wlen)
{
	static const char *const plat[] = {"ptrace", "kvm", "systrap", NULL};
	bool ok = false;

	if (strcmp(c->runtime, "native") != 0 && !sbx_gvisor(c)) {
		kz_why(why, wlen, "SANDBOX_RUNTIME must be native or gvisor");
		return KZ_ECONF;
	}
	for (int i = 0; plat[i] != NULL; i++)
		ok = ok || strcmp(c->gv_platform, plat[i]) == 0;
	if (!ok) {
		kz_why(why, wlen,
		    "SANDBOX_GVISOR_PLATFORM must be ptrace, kvm or systrap");
		return KZ_ECONF;
	}
	if (!abs_path_ok(c->runsc)) {
		kz_why(why, wlen,
		    "SANDBOX_RUNSC must be an absolute path without dot "
		    "segments");
		return KZ_ECONF;
	}
	/* gVisor has user namespaces of its own, and the one around runsc
	 * is mapped for runsc (ns.c), not for SANDBOX_USERNS_HOST_UID. */
	if (sbx_gvisor(c) && c->userns) {
		kz_why(why, wlen,
		    "gvisor: SANDBOX_USERNS=on cannot be applied under "
		    "SANDBOX_RUNTIME=gvisor");
		return KZ_ECONF;
	}
	return gvisor_ids_check(c, why, wlen);
}

int
sbx_conf_check(const struct sbx_conf *c, char *why, size_t wlen)
{
	int r;

	if (c->uid == 0 || c->gid == 0) {
		kz_why(why, wlen, "the code never runs as uid or gid 0");
		return KZ_ECONF;
	}
	/* In a user namespace the host ids are the mapped ones. */
	if (c->userns ? is_nobody(c->userns_uid, c->userns_gid) :
	                is_nobody(c->uid, c->gid)) {
		kz_why(why, wlen,
		    "the code never runs as the host's nobody or nogroup (%s)",
		    c->userns ? "SANDBOX_USERNS_HOST_UID, "
		                "SANDBOX_USERNS_HOST_GID" :
		                "SANDBOX_UID, SANDBOX_GID");
		return KZ_ECONF;
	}
	if (!abs_path_ok(c->root) || !abs_path_ok(c->state_dir) ||
	    (c->projection[0] != '\0' && !abs_path_ok(c->projection))) {
		kz_why(why, wlen,
		    "SANDBOX_ROOT, SANDBOX_STATE_DIR and "
		    "SANDBOX_PROJECTION_DIR must be absolute paths without "
		    "dot segments");
		return KZ_ECONF;
	}
	if ((c->archiver[0] != '\0' && !abs_path_ok(c->archiver)) ||
	    (c->gv_compat[0] != '\0' && !abs_path_ok(c->gv_compat)) ||
	    (c->gv_loader[0] != '\0' && !abs_path_ok(c->gv_loader))) {
		kz_why(why, wlen,
		    "SANDBOX_ARCHIVER, SANDBOX_GVISOR_COMPAT and "
		    "SANDBOX_GVISOR_LOADER must be absolute paths without dot "
		    "segments");
		return KZ_ECONF;
	}
	if (!abs_path_ok(c->cg_root)) {
		kz_why(why, wlen,
		    "SANDBOX_CGROUP_ROOT must be an absolute "
		    "path without dot segments");
		return KZ_ECONF;
	}
	if (strcmp(c->cg_version, "auto") != 0 &&
	    strcmp(c->cg_version, "v1") != 0 &&
	    strcmp(c->cg_version, "v2") != 0) {
		kz_why(why, wlen,
		    "SANDBOX_CGROUP_VERSION must be auto, v1 or v2");
		return KZ_ECONF;
	}
	if (!sbx_id_valid(c->cg_parent)) {
		kz_why(why, wlen,
		    "SANDBOX_CGROUP_PARENT must be one name of [A-Za-z0-9._-]");
		return KZ_ECONF;
	}
	if (c->id[0] != '\0' && !sbx_id_valid(c->id)) {
		kz_why(why, wlen,
		    "the worker id must be 1-63 characters of [A-Za-z0-9._-]");
		return KZ_ECONF;
	}
	if ((r = gvisor_check(c, why, wlen)) != 0)
		return r;
	return sbx_view_check(c, why, wlen);
}

void
sbx_conf_usage(void *fp)
{
	for (const struct key *k = keys; k->key != NULL; k++)
		if (k->opt != NULL && k->help != NULL)
			fprintf(fp, "  --%-16s %s (%s, default \"%s\")\n",
			    k->opt, k->help, k->key, k->dflt);
}
