/*
 * Configuration: every key of kz-project.conf, its default and its bound.
 * A value that cannot be read fails closed (exit 2), never a default.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_conf.h"
#include "kz_srv.h"
#include "kz_store.h"
#include "kzp.h"
#include "kzp_conf.h"
#include "banned.h"

const char *const kzp_conf_keys[] = {
    "KZ_SOCKET",
    "KZ_RUN_DIR",
    "KZ_FIELD_KEY_FILE",
    "KZ_AUDIT_SOCKET",
    /* The store: address and credentials (kz_store.h). */
    KZ_STORE_CONF_KEYS,
    "KZ_DEPLOYMENT",
    KZ_SRV_PEER_KEYS,
    "KZ_FRAME_MAX",
    "KZ_PROJECT_BLOB_DIR",
    "KZ_PROJECT_MAX_FILES",
    "KZ_PROJECT_MAX_FILE_BYTES",
    "KZ_PROJECT_MAX_TOTAL_BYTES",
    "KZ_PROJECT_OUTPUT_MAX_BYTES",
    "KZ_PROJECT_OUTPUT_TYPES",
    "KZ_PROJECT_SNAPSHOT_TTL",
    "KZ_PROJECT_BLOB_GRACE",
    "KZ_PROJECT_POINTER_DEFAULT",
    "KZ_AUDIT",
    NULL,
};

static int
dup_path(char **dst, const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 1;

	if ((*dst = malloc(n)) == NULL)
		return KZ_ENOMEM;
	snprintf(*dst, n, "%s%s", a, b);
	return 0;
}

int
kzp_conf_apply(struct kzp_cfg *c, struct kzp *p, char *why, size_t wlen)
{
	const struct kz_conf *k = c->conf;
	char run[PATH_MAX], sock[108];
	const char *ptr = kz_conf_str(k, "KZ_PROJECT_POINTER_DEFAULT",
	    "private");
	uint64_t mf, mt, om, fm;
	int64_t files, ttl, grace;
	int e;

	/* Every socket's default is the one rule of kaizen.conf(5). */
	if ((e = kz_run_dir(k, run, sizeof(run), why, wlen)) != 0 ||
	    (e = kz_store_conf(k, run, c->store_sock, sizeof(c->store_sock),
	         why, wlen)) != 0 ||
	    (e = kz_conf_sock(k, "KZ_SOCKET", run, "kz-project", sock,
	         sizeof(sock), why, wlen)) != 0 ||
	    (e = kz_conf_audit(k, run, c->audit_sock, sizeof(c->audit_sock),
	         why, wlen)) != 0)
		return e;
	if ((e = kz_conf_int(k, "KZ_PROJECT_MAX_FILES", 256, 1, 100000, &files,
	         why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "KZ_PROJECT_MAX_FILE_BYTES", 64ull << 20,
	         1ull << 40, &mf, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "KZ_PROJECT_MAX_TOTAL_BYTES", 256ull << 20,
	         1ull << 42, &mt, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "KZ_PROJECT_OUTPUT_MAX_BYTES", 32ull << 20,
	         1ull << 40, &om, why, wlen)) != 0 ||
	    (e = kz_conf_size(k, "KZ_FRAME_MAX", 1u << 20, 64u << 20, &fm, why,
	         wlen)) != 0 ||
	    (e = kz_conf_int(k, "KZ_PROJECT_SNAPSHOT_TTL", 3600, 1, 86400, &ttl,
	         why, wlen)) != 0 ||
	    (e = kz_conf_int(k, "KZ_PROJECT_BLOB_GRACE", 86400, 60, 31536000,
	         &grace, why, wlen)) != 0)
		return e;
	if (strcmp(ptr, "private") != 0 && strcmp(ptr, "shared") != 0) {
		kz_why(why, wlen,
		    "KZ_PROJECT_POINTER_DEFAULT must be private or shared");
		return KZ_ECONF;
	}
	p->b.max_files = files;
	p->b.max_file_bytes = (int64_t)mf;
	p->b.max_total_bytes = (int64_t)mt;
	p->out_max_bytes = (int64_t)om;
	p->snap_ttl = ttl;
	p->blob_grace = grace;
	p->pointer_shared = strcmp(ptr, "shared") == 0;
	c->frame_max = (size_t)fm;
	p->out_types = kz_conf_str(k, "KZ_PROJECT_OUTPUT_TYPES",
	    "txt,csv,json,md,png,jpg,pdf,docx,pptx,xlsx,zip");
	p->store_sock = c->store_sock;
	p->dep = kz_conf_str(k, "KZ_DEPLOYMENT", "default");
	p->audit_sock = c->audit_sock;
	if (kz_conf_str(k, "KZ_PROJECT_BLOB_DIR", NULL) != NULL)
		p->blobdir = kz_conf_str(k, "KZ_PROJECT_BLOB_DIR", NULL);
	else {
		if (dup_path(&c->blobdir, run, "/blobs") != 0)
			return KZ_ENOMEM;
		p->blobdir = c->blobdir;
	}
	if (dup_path(&c->keyfile, kz_conf_str(k, "KZ_FIELD_KEY_FILE", run),
	        kz_conf_str(k, "KZ_FIELD_KEY_FILE", NULL) ?
	            "" :
	            "/field.key") != 0 ||
	    dup_path(&c->sock, sock, "") != 0)
		return KZ_ENOMEM;
	return 0;
}

void
kzp_cfg_release(struct kzp_cfg *c)
{
	free(c->blobdir);
	free(c->keyfile);
	free(c->sock);
	kz_conf_free(c->conf);
	memset(c, 0, sizeof(*c));
}
