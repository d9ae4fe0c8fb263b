/*
 * Workspace snapshots for kz-lease and kz-reset.  A snapshot is a tar
 * archive of /workspace made by an ordinary run inside the sandbox (same
 * uid, no capabilities, seccomp), so reading the workspace never happens
 * with more privilege than the code had; /projection is outside the
 * workspace and never part of it.  A restore is the reverse run, so a
 * hostile archive can only rearrange the sandbox's own workspace.  The
 * archive travels base64 in the frame or through a host path that the
 * trusted caller names, bounded by SANDBOX_SNAPSHOT_MAX either way, and
 * in the frame also by what a frame can carry (B64_MAX).
 *
 * The run executes kz-sandbox-tar (cmd/kz-sandbox/tar/), a static
 * archiver, as /proc/self/fd/N: N is a descriptor of it that the worker
 * opened at start and passes to the run at its own number, so the view
 * holds no kz path, and the archiver maps no shared library, which is
 * most of a small snapshot's time with GNU tar.  Under gvisor a run cannot be
 * passed a descriptor, and the sandbox's /bin/tar archives as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "sbx.h"
#include "banned.h"

/* Where make install puts the archiver, from the binary's directory;
 * the source tree builds it at the same place. */
#define ARCHIVER_BESIDE "../libexec/kaizen/kz-sandbox-tar"
/* Owner 0 in the archive: a restore never sets owners, and the archive
 * then names no worker's host uid and is the same from every worker; no
 * set-id bit, which a restore never sets either; entries in the order of
 * their names, not the order a directory lists them in, which a restore
 * changes (kz-sandbox-tar.c does the same). */
static char *const tar_out[] = {"/bin/tar", "--numeric-owner", "--owner=0",
    "--group=0", "--mode=ug-s", "--sort=name", "-C", SBX_WS, "-cf", "-", ".",
    NULL};
static char *const tar_in[] = {"/bin/tar", "--no-same-owner",
    "--no-same-permissions", "--delay-directory-restore", "-C", SBX_WS, "-xf",
    "-", NULL};

/*
 * The most an archive sent back in the reply may be: base64 makes four
 * bytes of three, and the one frame must carry them and the reply's other
 * fields.  A workspace whose archive is over it is refused at once, as one
 * over SANDBOX_SNAPSHOT_MAX is; a reply too large to send would leave the
 * caller waiting for an answer that never comes (kz-run's outputs).
 */
#define B64_MAX ((size_t)47 << 20)
#define B64_MAX_TEXT "47M"
_Static_assert(B64_MAX / 3 * 4 + 4096 < KZ_FRAME_MAX_LIMIT,
    "an archive of B64_MAX fits a frame in base64");

_Static_assert(sizeof(((struct sbx_worker *)0)->restored) ==
        crypto_generichash_BYTES,
    "the restored archive's hash is a default-size BLAKE2b");

const char *const sbx_snapshot_fields[] = {"path", "skip_unchanged", NULL};
const char *const sbx_restore_fields[] = {"path", "archive_b64", NULL};

int
sbx_snapshot_open(struct sbx_worker *w, char *why, size_t wlen)
{
	char p[PATH_MAX];
	struct stat st;

	if (sbx_beside(w->c->archiver, ARCHIVER_BESIDE, p, sizeof(p)) != 0) {
		kz_why(why, wlen,
		    "snapshots: cannot find the archiver beside the "
		    "binary (SANDBOX_ARCHIVER)");
		return KZ_EUNAVAIL;
	}
	if ((w->tar_fd = open(p, O_PATH | O_CLOEXEC)) < 0) {
		kz_why(why, wlen, "snapshots: the archiver %s: %s", p,
		    strerror(errno));
		return KZ_EUNAVAIL;
	}
	if (fstat(w->tar_fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (st.st_mode & S_IXOTH) == 0) {
		kz_why(why, wlen,
		    "snapshots: the archiver %s is not a file every uid may "
		    "execute",
		    p);
		return KZ_EUNAVAIL;
	}
	return 0;
}

/* The archiver, saving (its stdout kept up to max) or restoring in. */
static int
tar_run(struct sbx_worker *w, bool save, const unsigned char *in, size_t inlen,
    size_t max, struct sbx_res *rs)
{
	char why[128], self[32];
	char *ar[] = {self, save ? "save" : "restore", NULL};
	struct sbx_req rq;
	int r;

	memset(&rq, 0, sizeof(rq));
	sbx_env_init(&rq.env);
	if (w->tar_fd >= 0) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", w->tar_fd);
		rq.argv = ar;
		rq.pass_fd[0] = w->tar_fd;
		rq.npass = 1;
	} else
		rq.argv = (char **)(save ? tar_out : tar_in);
	rq.stdin_fd = -1, rq.out_fd[0] = rq.out_fd[1] = -1;
	rq.stdin_buf = in, rq.stdin_len = inlen;
	rq.timeout_ms = w->c->timeout_s * 1000;
	rq.out_max[0] = max;
	rq.out_max[1] = 4096;
	if ((r = sbx_env_finish(&rq.env, 0, why, sizeof(why))) == 0)
		r = sbx_run(w, &rq, rs);
	sbx_env_release(&rq.env);
	return r;
}

static bool
path_ok(const char *p)
{
	return p[0] == '/' && strstr(p, "/../") == NULL && strlen(p) < PATH_MAX;
}

static int
write_file(const char *path, const unsigned char *b, size_t n)
{
	int fd = open(path,
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r = 0;

	if (fd < 0)
		return KZ_ESYS;
	if (kz_write_full(fd, b, n, -1) != 0 || fsync(fd) != 0)
		r = KZ_ESYS;
	close(fd);
	if (r != 0)
		(void)unlink(path);
	return r;
}

/* Non-blocking: a FIFO at path is refused below, never waited on. */
static int
read_file(const char *path, size_t max, unsigned char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	int r = KZ_ESYS;

	if (fd < 0)
		return KZ_ESYS;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		goto out;
	if ((size_t)st.st_size > max) {
		r = KZ_ETOOBIG;
		goto out;
	}
	if ((*out = malloc((size_t)st.st_size + 1)) == NULL) {
		r = KZ_ENOMEM;
		goto out;
	}
	if (kz_read_full(fd, *out, (size_t)st.st_size, -1) != 0) {
		free(*out);
		*out = NULL;
		goto out;
	}
	*len = (size_t)st.st_size;
	r = 0;
out:
	close(fd);
	return r;
}

/* big: why an archive cut at its bound is refused. */
static cJSON *
failed(const cJSON *req, const struct sbx_res *rs, const char *what,
    const char *big)
{
	if (rs->setup_failed)
		return kz_reply_err(req, KZ_WE_ISOLATION_DENIED, rs->step);
	if (rs->trunc[0])
		return kz_reply_err(req, KZ_WE_REFUSED, big);
	return kz_reply_err(req, KZ_WE_INTERNAL, what);
}

cJSON *
sbx_op_snapshot(struct sbx_worker *w, const cJSON *req)
{
	const char *path = NULL;
	const cJSON *skip = kz_json_get(req, "skip_unchanged");
	unsigned char h[sizeof(w->restored)];
	struct sbx_res rs;
	size_t max = w->c->snapshot_max;
	char why[160] = "";
	cJSON *o = NULL;
	bool same = false;

	if (kz_json_str_opt(req, "path", PATH_MAX, NULL, &path, why,
	        sizeof(why)) != 0)
		return kz_reply_err(req, KZ_WE_BAD_REQUEST, why);
	if (skip != NULL && (!cJSON_IsBool(skip) || path == NULL))
		return kz_reply_err(req, KZ_WE_BAD_REQUEST,
		    "skip_unchanged is a boolean, and only with a path");
	if (path != NULL && !path_ok(path))
		return kz_reply_err(req, KZ_WE_BAD_REQUEST,
		    "path must be absolute");
	if (path == NULL && max > B64_MAX)
		max = B64_MAX;
	if (tar_run(w, true, NULL, 0, max, &rs) != 0)
		return kz_reply_err(req, KZ_WE_INTERNAL, "snapshot failed");
	if (rs.setup_failed || rs.trunc[0] || !rs.exited || rs.code != 0) {
		o = failed(req, &rs, "snapshot failed",
		    max < w->c->snapshot_max ?
		        "the workspace is larger than an archive sent in the "
		        "reply can be (" B64_MAX_TEXT ")" :
		        "the workspace is larger than the snapshot bound");
		goto out;
	}
	/* The archive this lease restored, byte for byte: the file it came
	 * from needs no second copy, and the caller keeps it. */
	if (cJSON_IsTrue(skip) && w->restored_ok) {
		crypto_generichash(h, sizeof(h), rs.buf[0], rs.len[0], NULL, 0);
		same = sodium_memcmp(h, w->restored, sizeof(h)) == 0;
	}
	if (path != NULL && !same &&
	    write_file(path, rs.buf[0], rs.len[0]) != 0) {
		o = kz_reply_err(req, KZ_WE_INTERNAL,
		    "cannot write the snapshot file");
		goto out;
	}
	if ((o = kz_reply_ok(req)) == NULL)
		goto out;
	cJSON_AddNumberToObject(o, "bytes", (double)rs.len[0]);
	cJSON_AddNumberToObject(o, "generation", (double)w->generation);
	if (same)
		cJSON_AddBoolToObject(o, "unchanged", true);
	if (path == NULL) {
		size_t cap = sodium_base64_ENCODED_LEN(rs.len[0],
		    sodium_base64_VARIANT_ORIGINAL);
		char *b = malloc(cap);

		if (b == NULL ||
		    cJSON_AddStringToObject(o, "archive_b64",
		        sodium_bin2base64(b, cap, rs.buf[0], rs.len[0],
		            sodium_base64_VARIANT_ORIGINAL)) == NULL) {
			cJSON_Delete(o);
			o = NULL;
		}
		free(b);
	}
out:
	sbx_res_release(&rs);
	return o;
}

static int
decode(const char *s, unsigned char **out, size_t *len, size_t max)
{
	size_t cap = strlen(s) / 4 * 3 + 3;

	if (cap > max + 3)
		return KZ_ETOOBIG;
	if ((*out = malloc(cap)) == NULL)
		return KZ_ENOMEM;
	if (sodium_base642bin(*out, cap, s, strlen(s), NULL, len, NULL,
	        sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(*out);
		*out = NULL;
		return KZ_EINVAL;
	}
	return 0;
}

cJSON *
sbx_op_restore(struct sbx_worker *w, const cJSON *req)
{
	const char *path = NULL, *b64 = NULL;
	unsigned char *ar = NULL;
	size_t len = 0;
	struct sbx_res rs;
	char why[160] = "";
	cJSON *o;
	int r;

	if (kz_json_str_opt(req, "path", PATH_MAX, NULL, &path, why,
	        sizeof(why)) != 0 ||
	    kz_json_str_opt(req, "archive_b64", KZ_FRAME_MAX_LIMIT, NULL, &b64,
	        why, sizeof(why)) != 0)
		return kz_reply_err(req, KZ_WE_BAD_REQUEST, why);
	if ((path == NULL) == (b64 == NULL) || (path && !path_ok(path)))
		return kz_reply_err(req, KZ_WE_BAD_REQUEST,
		    "give exactly one of an absolute path or archive_b64");
	r = path ? read_file(path, w->c->snapshot_max, &ar, &len) :
	           decode(b64, &ar, &len, w->c->snapshot_max);
	w->restored_ok = false;
	if (r != 0)
		return kz_reply_err(req,
		    r == KZ_ETOOBIG ? KZ_WE_REFUSED : KZ_WE_BAD_REQUEST,
		    r == KZ_ETOOBIG ? "the archive is "
		                      "larger than the snapshot bound" :
		                      "cannot read the archive");
	if (tar_run(w, false, ar, len, w->c->snapshot_max, &rs) != 0) {
		free(ar);
		return kz_reply_err(req, KZ_WE_INTERNAL, "restore failed");
	}
	crypto_generichash(w->restored, sizeof(w->restored), ar, len, NULL, 0);
	free(ar);
	if (rs.setup_failed || !rs.exited || rs.code != 0)
		o = failed(req, &rs, "the archive did not restore",
		    "the workspace is larger than the snapshot bound");
	else if ((o = kz_reply_ok(req)) != NULL) {
		w->restored_ok = true;
		cJSON_AddNumberToObject(o, "generation", (double)w->generation);
	}
	sbx_res_release(&rs);
	return o;
}
