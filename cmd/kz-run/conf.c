/* kz-run's configuration: file, then environment, over the defaults. */
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "kz_conf.h"
#include "run.h"
#include "banned.h"

static const char *const known[] = {
    "KZ_RUN_DIR",
    "KZ_LEASE_SOCKET",
    "KZ_PROJECT_SOCKET",
    "KZ_AUDIT_SOCKET",
    "KZ_FIELD_KEY_FILE",
    "KZ_STORE_SOCKET",
    "KZ_AUDIT",
    "RUN_EGRESS_BIN",
    "RUN_PKGBROKER_BIN",
    "RUN_TIMEOUT_MS",
    "RUN_LEASE_WAIT_MS",
    "RUN_IO_TIMEOUT_MS",
    "RUN_FILE_MAX",
    "RUN_FILES_TOTAL_MAX",
    "RUN_SNAPSHOT",
    "RUN_COMPRESS_CMD",
    NULL,
};

static int
paths(struct run_conf *c, const struct kz_conf *k, const char *self, char *why,
    size_t wlen)
{
	char bindir[PATH_MAX], tmp[PATH_MAX];
	const char *rd = c->run_dir;
	int e = 0;

	snprintf(tmp, sizeof(tmp), "%s", self);
	snprintf(bindir, sizeof(bindir), "%s", dirname(tmp));
	/* Every socket's default is the one rule of kaizen.conf(5). */
	if (kz_run_dir(k, c->run_dir, sizeof(c->run_dir), why, wlen) != 0 ||
	    kz_conf_sock(k, "KZ_LEASE_SOCKET", rd, "kz-lease", c->lease_sock,
	        sizeof(c->lease_sock), why, wlen) != 0 ||
	    kz_conf_sock(k, "KZ_PROJECT_SOCKET", rd, "kz-project",
	        c->project_sock, sizeof(c->project_sock), why, wlen) != 0 ||
	    kz_conf_audit(k, rd, c->audit_sock, sizeof(c->audit_sock), why,
	        wlen) != 0)
		return KZ_ECONF;
	e |= kz_conf_copy(k, "KZ_FIELD_KEY_FILE", rd, "field.key", c->key_file,
	    sizeof(c->key_file), why, wlen);
	e |= kz_conf_copy(k, "RUN_EGRESS_BIN", bindir, "kz-egress",
	    c->egress_bin, sizeof(c->egress_bin), why, wlen);
	e |= kz_conf_copy(k, "RUN_PKGBROKER_BIN", bindir, "kz-pkgbroker",
	    c->pkgbroker_bin, sizeof(c->pkgbroker_bin), why, wlen);
	/* Empty, the default, is no compression. */
	e |= kz_conf_copy(k, "RUN_COMPRESS_CMD", NULL, "", c->compress_cmd,
	    sizeof(c->compress_cmd), why, wlen);
	return e ? KZ_ECONF : 0;
}

int
run_conf_load(struct run_conf *c, const char *path, const char *self, char *why,
    size_t wlen)
{
	struct kz_conf *k = NULL;
	int e;

	memset(c, 0, sizeof(*c));
	if ((e = kz_conf_load(path, known, &k, why, wlen)) != 0)
		return e;
	if ((e = paths(c, k, self, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "RUN_TIMEOUT_MS", 60000, 1, 3600000,
	         &c->timeout_ms, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "RUN_LEASE_WAIT_MS", 30000, 0, 600000,
	         &c->lease_wait_ms, why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "RUN_IO_TIMEOUT_MS", 30000, 100, 600000,
	         &c->io_timeout_ms, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "RUN_FILE_MAX", 16 << 20, 1ULL << 32,
	         &c->file_max, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "RUN_FILES_TOTAL_MAX", 64 << 20, 1ULL << 34,
	         &c->total_max, why, wlen)) != 0 ||
	    (e = kz_conf_bool(k, "RUN_SNAPSHOT", true, &c->snapshot, why,
	         wlen)) != 0)
		goto out;
out:
	kz_conf_free(k);
	return e;
}
