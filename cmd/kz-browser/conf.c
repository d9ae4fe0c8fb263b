/* kz-browser's configuration: file, then environment, over the defaults. */
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "kz_conf.h"
#include "kz_srv.h"
#include "kzb.h"
#include "banned.h"

const char *const kzb_conf_keys[] = {
    "KZ_SOCKET",
    "KZ_RUN_DIR",
    "KZ_LEASE_SOCKET",
    "KZ_AUDIT_SOCKET",
    "KZ_AUDIT",
    "KZ_FIELD_KEY_FILE",
    KZ_SRV_PEER_KEYS,
    "BROWSER_ENABLED",
    "BROWSER_IDLE",
    "BROWSER_SESSIONS_MAX",
    "BROWSER_NAV_TIMEOUT_MS",
    "BROWSER_OP_TIMEOUT_MS",
    "BROWSER_IO_TIMEOUT_MS",
    "BROWSER_EGRESS_BIN",
    "BROWSER_EGRESS_CONFIG",
    "SANDBOX_EGRESS_TURN",
    "BROWSER_TURN_SECRET_FILE",
    "BROWSER_TURN_TTL",
    NULL,
};

static int
paths(struct kzb_conf *c, const struct kz_conf *k, const char *self, char *why,
    size_t wlen)
{
	char bindir[PATH_MAX], tmp[PATH_MAX];
	const char *rd = c->run_dir;
	int e = 0;

	snprintf(tmp, sizeof(tmp), "%s", self);
	snprintf(bindir, sizeof(bindir), "%s", dirname(tmp));
	/* Every socket's default is the one rule of kaizen.conf(5). */
	if (kz_run_dir(k, c->run_dir, sizeof(c->run_dir), why, wlen) != 0 ||
	    kz_conf_sock(k, "KZ_SOCKET", rd, "kz-browser", c->sock,
	        sizeof(c->sock), why, wlen) != 0 ||
	    kz_conf_sock(k, "KZ_LEASE_SOCKET", rd, "kz-lease", c->lease_sock,
	        sizeof(c->lease_sock), why, wlen) != 0 ||
	    kz_conf_audit(k, rd, c->audit_sock, sizeof(c->audit_sock), why,
	        wlen) != 0)
		return KZ_ECONF;
	e |= kz_conf_copy(k, "KZ_FIELD_KEY_FILE", rd, "field.key", c->key_file,
	    sizeof(c->key_file), why, wlen);
	e |= kz_conf_copy(k, "BROWSER_EGRESS_BIN", bindir, "kz-egress",
	    c->egress_bin, sizeof(c->egress_bin), why, wlen);
	e |= kz_conf_copy(k, "BROWSER_EGRESS_CONFIG", NULL, "", c->egress_conf,
	    sizeof(c->egress_conf), why, wlen);
	return e ? KZ_ECONF : 0;
}

int
kzb_conf_load(struct kzb_conf *c, const char *path, const char *self, char *why,
    size_t wlen)
{
	struct kz_conf *k = NULL;
	int e;

	memset(c, 0, sizeof(*c));
	if ((e = kz_conf_load(path, kzb_conf_keys, &k, why, wlen)) != 0)
		return e;
	/* Off unless the operator turns browser sessions on: the viewer's
	 * and the renderer's weak points are the deployment's to accept
	 * (kz-browser(8)). */
	if ((e = paths(c, k, self, why, wlen)) != 0 ||
	    (e = kz_conf_bool(k, "BROWSER_ENABLED", false, &c->enabled, why,
	         wlen)) != 0 ||
	    (e = kz_conf_int(k, "BROWSER_IDLE", 900, 1, 86400, &c->idle_s, why,
	         wlen)) != 0 ||
	    (e = kz_conf_int(k, "BROWSER_SESSIONS_MAX", 16, 1, 4096,
	         &c->sessions_max, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "BROWSER_NAV_TIMEOUT_MS", 20000, 100, 600000,
	         &c->nav_timeout_ms, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "BROWSER_OP_TIMEOUT_MS", 5000, 100, 600000,
	         &c->op_timeout_ms, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "BROWSER_IO_TIMEOUT_MS", 10000, 100, 600000,
	         &c->io_timeout_ms, why, wlen)) != 0 ||
	    (e = kz_srv_peers_load(k, &c->peers, &c->operators, why, wlen)) !=
	        0 ||
	    (e = kzb_turn_conf(c, k, why, wlen)) != 0)
		goto out;
out:
	kz_conf_free(k);
	return e;
}
