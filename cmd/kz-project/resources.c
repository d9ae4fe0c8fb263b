/*
 * Resources and their versions: content-addressed blobs, the items that
 * name them (documents, artifacts, outputs, library files, prompts), new
 * versions by the owner, and revocation.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_json.h"
#include "kzp.h"
#include "banned.h"

int
kzp_callers(const struct kzp *p, int fd, struct kzp_res *r)
{
	struct stat st;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		kzp_fail(r, KZ_WE_REFUSED, "not a regular file");
		return KZ_EDENIED;
	}
	if (p->served && p->caller != 0 && st.st_uid != p->caller) {
		kzp_fail(r, KZ_WE_REFUSED,
		    "the file is not the caller's (it must own what it names)");
		return KZ_EDENIED;
	}
	return 0;
}

int
kzp_op_blob_put(struct kzp *p, const cJSON *req, cJSON *out, struct kzp_res *r,
    const char *mode)
{
	char why[KZP_WHY], sha[KZP_SHA_HEX + 1], link[40];
	const char *file;
	int64_t size;
	int pfd, fd = -1, e;

	if (kz_json_str(req, "file", 4096, &file, why, sizeof(why)) != 0)
		return kzp_bad(r, "field 'file' is required");
	/*
	 * Opened as O_PATH first: a fifo, device or socket is never opened
	 * for I/O (a fifo's open would block the daemon for every caller).
	 * Only a regular file the caller owns is reopened for reading,
	 * through that same descriptor.
	 */
	if ((pfd = open(file, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return kzp_bad(r, "the file cannot be opened");
	if ((e = kzp_callers(p, pfd, r)) == 0) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
		if ((fd = open(link, O_RDONLY | O_NOCTTY | O_CLOEXEC)) < 0)
			e = kzp_bad(r, "the file cannot be opened");
		else
			e = kzp_blob_put(p->blobdir, fd, p->b.max_file_bytes,
			    NULL, NULL, sha, &size, r);
	}
	if (fd >= 0)
		close(fd);
	close(pfd);
	if (e != 0)
		return e;
	cJSON_AddStringToObject(out, "sha256", sha);
	cJSON_AddNumberToObject(out, "size", (double)size);
	return 0;
}

int
kzp_op_resource_create(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	static const char *const kinds[] = {"document", "artifact", "output",
	    "library", "prompt", NULL};
	char mh[KZ_IDHASH_HEX + 1], why[KZP_WHY];
	const char *rid, *kind, *conn, *obj, *av[5] = {NULL, mh, NULL};
	bool ok = false;
	int e;

	if ((e = kzp_req_id(req, "resource", &rid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	if (kz_json_str_opt(req, "kind", 16, "document", &kind, why,
	        sizeof(why)) != 0)
		return kzp_bad(r, "field 'kind' must be a string");
	for (int i = 0; kinds[i] != NULL; i++)
		ok |= strcmp(kind, kinds[i]) == 0;
	if (!ok)
		return kzp_bad(r, "unknown resource kind");
	/*
	 * An object key is resolved only through a connection (the
	 * declared-source rule).
	 */
	if (kz_json_str_opt(req, "connection", KZP_ID_MAX, "", &conn, why,
	        sizeof(why)) != 0 ||
	    kz_json_str_opt(req, "object", KZP_PATH_MAX, "", &obj, why,
	        sizeof(why)) != 0)
		return kzp_bad(r, "bad 'connection' or 'object'");
	if ((*conn != '\0' && !kzp_id_ok(conn)) ||
	    (*conn == '\0') != (*obj == '\0') ||
	    (*obj != '\0' && kzp_relpath_ok(obj) != 0))
		return kzp_bad(r,
		    "'connection' and 'object' come together: "
		    "an id and a relative object key");
	av[0] = rid;
	av[2] = kind;
	av[3] = conn;
	av[4] = obj;
	return kzp_mutate_as(p, "res_create", *conn != '\0' ? 5 : 3, av,
	    "value", out, r);
}

int
kzp_op_version_new(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1], why[KZP_WHY], size[24];
	const char *rid, *path, *sha, *av[9];
	struct kzp_bargs ba;
	bool pending;
	int64_t bytes;
	int e;

	if ((e = kzp_req_id(req, "resource", &rid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	if (kz_json_str(req, "path", KZP_PATH_MAX, &path, why, sizeof(why)) ||
	    kzp_relpath_ok(path) != 0)
		return kzp_bad(r, "field 'path' must be a relative path");
	if (kz_json_bool_opt(req, "pending", false, &pending, why,
	        sizeof(why)) != 0 ||
	    kz_json_str_opt(req, "blob", KZP_SHA_HEX, "", &sha, why,
	        sizeof(why)) != 0)
		return kzp_bad(r, "bad 'pending' or 'blob'");
	snprintf(size, sizeof(size), "0");
	/* Renewed, so blob-collect keeps it while the version is made. */
	if (!pending) {
		if ((e = kzp_blob_renew(p->blobdir, sha, &bytes)) == KZ_ESYS)
			return kzp_bad(r, "the blob cannot be read");
		if (e != 0)
			return kzp_bad(r,
			    "field 'blob' must name a stored blob");
		snprintf(size, sizeof(size), "%lld", (long long)bytes);
	}
	av[0] = rid;
	av[1] = mh;
	av[2] = path;
	av[3] = size;
	av[4] = pending ? "" : sha;
	av[5] = pending ? "0" : "1";
	/* In every room it is linked to, the version takes its place. */
	kzp_bounds_args(p, &ba, av + 6);
	return kzp_mutate_as(p, "res_version", 9, av, "version", out, r);
}

int
kzp_op_resource_revoke(struct kzp *p, const cJSON *req, cJSON *out,
    struct kzp_res *r, const char *mode)
{
	char mh[KZ_IDHASH_HEX + 1];
	const char *rid, *av[2] = {NULL, mh};
	int e;

	if ((e = kzp_req_id(req, "resource", &rid, r)) != 0 ||
	    (e = kzp_req_hash(p, req, "member", "member", mh, r)) != 0)
		return e;
	av[0] = rid;
	return kzp_mutate_as(p, "res_revoke", 2, av, "value", out, r);
}
