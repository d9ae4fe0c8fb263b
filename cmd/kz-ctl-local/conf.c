/*
 * kz-ctl-local has no file of its own: kz-lease, which reads the
 * deployment's settings, hands its controller the resolved worker keys in
 * the environment (kz-controller(7), ENVIRONMENT).  The defaults are
 * kz-lease's, so that an operator running kz-ctl-local by hand sees the
 * inventory kz-lease would.
 */
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "kz_conf.h"
#include "kz_frame.h"
#include "kz_srv.h"
#include "ctl.h"
#include "banned.h"

static const char *const known[] = {
    "KZ_RUN_DIR",
    KZ_SRV_PEER_KEYS,
    "KZ_FRAME_MAX",
    "LEASE_WORKERS_DIR",
    "LEASE_WORKER_BIN",
    "LEASE_WORKER_ARGS",
    "LEASE_EGRESS_SOCKET",
    "LEASE_BROKER_SOCKET",
    "LEASE_WORKER_IDS",
    "LEASE_FILES_SHARE",
    "LEASE_HOST_DIR",
    NULL,
};

int
ctl_conf_load(struct ctl_conf *c, const char *self, char *why, size_t wlen)
{
	struct kz_peer_policy operators;
	struct kz_conf *k = NULL;
	char bindir[PATH_MAX], tmp[PATH_MAX], rd[PATH_MAX];
	int e = 0;

	memset(c, 0, sizeof(*c));
	snprintf(tmp, sizeof(tmp), "%s", self);
	snprintf(bindir, sizeof(bindir), "%s", dirname(tmp));
	if ((e = kz_conf_load(NULL, known, &k, why, wlen)) != 0)
		return e;
	if ((e = kz_run_dir(k, rd, sizeof(rd), why, wlen)) != 0)
		goto out;
	e |= kz_conf_copy(k, "LEASE_WORKERS_DIR", rd, "workers", c->workers_dir,
	    sizeof(c->workers_dir), why, wlen);
	e |= kz_conf_copy(k, "LEASE_WORKER_BIN", bindir, "kz-sandbox",
	    c->worker_bin, sizeof(c->worker_bin), why, wlen);
	e |= kz_conf_copy(k, "LEASE_WORKER_ARGS", NULL, "", c->worker_args,
	    sizeof(c->worker_args), why, wlen);
	e |= kz_conf_copy(k, "LEASE_EGRESS_SOCKET", NULL, "", c->egress_sock,
	    sizeof(c->egress_sock), why, wlen);
	e |= kz_conf_copy(k, "LEASE_BROKER_SOCKET", NULL, "", c->broker_sock,
	    sizeof(c->broker_sock), why, wlen);
	/* The host's, not the deployment's: every deployment of the host
	 * must name the same one (host.c), so kz-lease's file has no say. */
	e |= kz_conf_copy(k, "LEASE_HOST_DIR", NULL, CTL_HOST_DIR, c->host_dir,
	    sizeof(c->host_dir), why, wlen);
	if (e != 0) {
		e = KZ_ECONF;
		goto out;
	}
	if (c->host_dir[0] != '/') {
		kz_why(why, wlen, "LEASE_HOST_DIR: not an absolute path");
		e = KZ_ECONF;
		goto out;
	}
	if ((e = kz_conf_ids(k, "LEASE_WORKER_IDS", KZ_WORKER_IDS_DEFAULT,
	         &c->ids_first, &c->ids_last, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "LEASE_FILES_SHARE", 50, 0, 100,
	         &c->files_share, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "KZ_FRAME_MAX", KZ_FRAME_MAX_DEFAULT,
	         KZ_FRAME_MAX_LIMIT, &c->frame_max, why, wlen)) != 0 ||
	    (e = kz_srv_peers_load(k, &c->peers, &operators, why, wlen)) != 0)
		goto out;
out:
	kz_conf_free(k);
	return e;
}
