/*
 * Declared shared-turn outputs.  After the run, while the lease still
 * holds, the worker archives its workspace (the same tar inside the
 * sandbox a snapshot is, so nothing reads the workspace with more
 * privilege than the code had) and sends it over its socket; only the
 * declared members are taken out of it (untar.c) into a directory of this
 * run's own beside the snapshot, in the deployment's group, and kz-project's
 * link-output validates each (name, size, type) and links it to exactly
 * the turn's room, recording the turn and member.  Nothing undeclared
 * leaves the archive, which is removed with the directory once every
 * output was linked or refused.
 *
 * Each output is one audit record (kind output): linked with its durable
 * reference and size, or refused with the code and a reason that names no
 * file; the file's name, path and bytes are never recorded.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_path.h"
#include "kz_tree.h"
#include "run.h"
#include "banned.h"

static void
refuse(struct run_output *o, int err, const char *code, const char *reason)
{
	size_t i;

	o->err = err != 0 ? err : KZ_EDENIED;
	snprintf(o->code, sizeof(o->code), "%s", code);
	snprintf(o->reason, sizeof(o->reason), "%s", reason);
	/* kz-project's reason is one printable line by contract; kept so. */
	for (i = 0; o->reason[i] != '\0'; i++)
		if ((unsigned char)o->reason[i] < 0x20 ||
		    (unsigned char)o->reason[i] > 0x7e)
			o->reason[i] = '?';
	for (i = 0; o->code[i] != '\0'; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyz_", o->code[i]) == NULL)
			o->code[i] = '_';
}

/* The declared paths: rooted relative paths, each declared once. */
static void
declare(const struct run_ctx *x, struct run_result *r)
{
	size_t i, j;

	r->nout = x->o->noutputs;
	for (i = 0; i < r->nout; i++) {
		struct run_output *o = &r->out[i];

		memset(o, 0, sizeof(*o));
		o->path = x->o->outputs[i];
		o->err = KZ_ENOENT; /* pending: not read yet; 1: extracted */
		if (kz_path_check(o->path, strlen(o->path), NULL, 0) != 0)
			refuse(o, KZ_EINVAL, KZ_WE_BAD_REQUEST,
			    "not a rooted relative path");
		for (j = 0; j < i && o->err == KZ_ENOENT; j++)
			if (strcmp(r->out[j].path, o->path) == 0)
				refuse(o, KZ_EINVAL, KZ_WE_BAD_REQUEST,
				    "declared twice");
	}
}

static const char *
untar_reason(int e)
{
	return e == KZ_ENOENT    ? "missing from the workspace" :
	    e == KZ_EPATH_NOTREG ? "not a regular file" :
	    e == KZ_ETOOBIG      ? "over the size bound (RUN_FILE_MAX)" :
	                           "could not be read from the workspace";
}

/* Takes the pending outputs out of the archive into dir. */
static void
extract(const struct run_ctx *x, struct run_result *r, const char *tar,
    const char *dir)
{
	const char *paths[RUN_OUTPUTS_MAX];
	int res[RUN_OUTPUTS_MAX], idx[RUN_OUTPUTS_MAX];
	size_t i, n = 0;
	int fd = -1, dfd = -1, e = KZ_ESYS;

	for (i = 0; i < r->nout; i++)
		if (r->out[i].err == KZ_ENOENT) {
			idx[n] = (int)i;
			paths[n++] = r->out[i].path;
		}
	if ((fd = open(tar, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0 &&
	    (dfd = open(dir,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
		e = run_untar(fd, paths, n, dfd, x->c->file_max, res);
	for (i = 0; i < n; i++) {
		struct run_output *o = &r->out[idx[i]];

		if (e != 0)
			refuse(o, e, KZ_WE_UNAVAILABLE,
			    "the workspace archive could not be read");
		else if (res[i] != 0)
			refuse(o, res[i], KZ_WE_REFUSED, untar_reason(res[i]));
		else
			o->err = 1; /* extracted: to be linked */
	}
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
}

/* kz-project links one extracted output to the turn's room. */
static void
link_one(const struct run_ctx *x, struct run_output *o, const char *dir,
    const cJSON *snap)
{
	cJSON *req = run_request("link-output", x->rid), *rep = NULL;
	const char *v;
	int64_t n;

	if (req == NULL) {
		refuse(o, KZ_ENOMEM, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	/* kz-project links only under the admission it stored, which it
	 * checks against this copy (kz-protocol(7), link-output). */
	cJSON_AddItemToObject(req, "snapshot", cJSON_Duplicate(snap, 1));
	cJSON_AddStringToObject(req, "room", x->o->room);
	cJSON_AddStringToObject(req, "member", x->o->member);
	cJSON_AddStringToObject(req, "turn",
	    x->o->turn != NULL ? x->o->turn : x->rid);
	cJSON_AddStringToObject(req, "workspace", dir);
	cJSON_AddStringToObject(req, "file", o->path);
	if (run_project_call(x->c, req, &rep) != 0)
		refuse(o, KZ_EUNAVAIL, KZ_WE_UNAVAILABLE,
		    "kz-project could not be reached");
	else if (!cJSON_IsTrue(kz_json_get(rep, "ok")))
		refuse(o, KZ_EDENIED,
		    run_str(rep, "error") ? run_str(rep, "error") :
		                            KZ_WE_INTERNAL,
		    run_str(rep, "reason") ? run_str(rep, "reason") :
		                             "refused by kz-project");
	else if ((v = run_str(rep, "resource")) == NULL ||
	    strlen(v) >= sizeof(o->resource) ||
	    kz_json_int(rep, "size", 0, INT64_MAX, &o->size, NULL, 0) != 0)
		refuse(o, KZ_EPROTO, KZ_WE_INTERNAL,
		    "kz-project's reply is malformed");
	else {
		snprintf(o->resource, sizeof(o->resource), "%s", v);
		if (kz_json_int(rep, "link_seq", 0, INT64_MAX, &n, NULL, 0) ==
		    0)
			o->link_seq = n;
		o->err = 0;
	}
	cJSON_Delete(req);
	cJSON_Delete(rep);
}

/* One line on stderr and one audit record for each output. */
static void
report(const struct run_ctx *x, struct run_result *r)
{
	cJSON *ev;

	for (size_t i = 0; i < r->nout; i++) {
		struct run_output *o = &r->out[i];

		if (o->err == 0)
			r->linked++;
		else
			/* A path that failed the grammar may hold anything:
			 * it is not echoed. */
			fprintf(stderr, "kz-run: output %s: refused: %s: %s\n",
			    kz_path_check(o->path, strlen(o->path), NULL, 0) ==
			            0 ?
			        o->path :
			        "(not a rooted path)",
			    o->code, o->reason);
		if ((ev = cJSON_CreateObject()) == NULL)
			continue;
		cJSON_AddStringToObject(ev, "decision",
		    o->err == 0 ? "linked" : "refused");
		if (o->err == 0) {
			cJSON_AddStringToObject(ev, "resource", o->resource);
			cJSON_AddNumberToObject(ev, "bytes", (double)o->size);
			cJSON_AddNumberToObject(ev, "link_seq",
			    (double)o->link_seq);
		} else {
			cJSON_AddStringToObject(ev, "error", o->code);
			cJSON_AddStringToObject(ev, "reason", o->reason);
		}
		(void)run_audit(x, "output", ev);
	}
}

/*
 * The directory kz-project reads the declared files from: the group of
 * the snapshot's own directory (the deployment's, which kz-run and
 * kz-project share), setgid so that the files made in it get that group
 * too, and closed to everyone else.
 */
static int
make_outdir(const char *dir, const char *snap, bool *made)
{
	char parent[PATH_MAX];
	struct stat st;
	char *slash;
	int fd, e = 0;

	*made = false;
	snprintf(parent, sizeof(parent), "%s", snap);
	if ((slash = strrchr(parent, '/')) == NULL || slash == parent)
		return KZ_EINVAL;
	*slash = '\0';
	if (stat(parent, &st) != 0 || mkdir(dir, 0700) != 0)
		return KZ_ESYS;
	*made = true;
	/* The group and mode go on the directory just made, by descriptor:
	 * the actor's directory is writable by the deployment's group, and a
	 * name swapped for a symlink there must not redirect them. */
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	        0 ||
	    fchown(fd, (uid_t)-1, st.st_gid) != 0 || fchmod(fd, 02750) != 0)
		e = KZ_ESYS;
	if (fd >= 0)
		close(fd);
	return e;
}

/*
 * The workspace archive, over the worker's socket into tar, which kz-run
 * makes (0600, O_EXCL): a file the worker wrote would be the worker's
 * user's, which kz-run, another user in a deployment, cannot read.  The
 * worker bounds the archive (SANDBOX_SNAPSHOT_MAX, and what one frame can
 * carry in base64) and refuses over it.
 */
static int
fetch_archive(const struct run_ctx *x, struct run_lease *l, const char *tar,
    const char **code)
{
	cJSON *req = run_request("snapshot", x->rid), *rep = NULL;
	unsigned char *b = NULL;
	const char *b64, *err;
	size_t n = 0, cap;
	char why[160];
	int e, fd;

	if (req == NULL)
		return KZ_ENOMEM;
	e = run_worker_call(x, l, req, x->c->io_timeout_ms, NULL, &rep, why,
	    sizeof(why));
	cJSON_Delete(req);
	if (e != 0)
		goto out;
	if (!cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		err = run_str(rep, "error");
		*code = err && strcmp(err, KZ_WE_REFUSED) == 0 ? KZ_WE_REFUSED :
		                                                 "error";
		e = KZ_EDENIED;
		goto out;
	}
	if ((b64 = run_str(rep, "archive_b64")) == NULL) {
		e = KZ_EPROTO;
		goto out;
	}
	cap = strlen(b64) / 4 * 3 + 3;
	if ((b = malloc(cap)) == NULL) {
		e = KZ_ENOMEM;
		goto out;
	}
	if (sodium_base642bin(b, cap, b64, strlen(b64), NULL, &n, NULL,
	        sodium_base64_VARIANT_ORIGINAL) != 0) {
		e = KZ_EPROTO;
		goto out;
	}
	fd = open(tar, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd < 0) {
		e = KZ_ESYS;
		goto out;
	}
	e = kz_write_full(fd, b, n, -1);
	if (close(fd) != 0 && e == 0)
		e = KZ_ESYS;
out:
	free(b);
	cJSON_Delete(rep);
	return e;
}

void
run_outputs(const struct run_ctx *x, struct run_lease *l, const cJSON *snap)
{
	struct run_result *r = x->res;
	char tar[PATH_MAX + 64], dir[PATH_MAX + 64];
	const char *code = NULL;
	bool made = false;
	size_t i;

	if (x->o->noutputs == 0)
		return;
	declare(x, r);
	tar[0] = dir[0] = '\0';
	if (snap == NULL) {
		for (i = 0; i < r->nout; i++)
			if (r->out[i].err == KZ_ENOENT)
				refuse(&r->out[i], KZ_EDENIED, KZ_WE_REFUSED,
				    "the turn was not admitted to a room");
		goto out;
	}
	if (l->snap == NULL) {
		for (i = 0; i < r->nout; i++)
			if (r->out[i].err == KZ_ENOENT)
				refuse(&r->out[i], KZ_EUNAVAIL,
				    KZ_WE_UNAVAILABLE,
				    "kz-lease named no snapshot directory to "
				    "read the workspace through");
		goto out;
	}
	/* Beside the snapshot, where the worker may write and kz-project
	 * (the deployment's group) may read; ".new" is swept if we die. */
	snprintf(tar, sizeof(tar), "%s.%s.out.new", l->snap, x->rid);
	snprintf(dir, sizeof(dir), "%s.%s.out.d", l->snap, x->rid);
	if (fetch_archive(x, l, tar, &code) != 0 ||
	    make_outdir(dir, l->snap, &made) != 0) {
		for (i = 0; i < r->nout; i++)
			if (r->out[i].err == KZ_ENOENT)
				refuse(&r->out[i], KZ_EUNAVAIL,
				    code && strcmp(code, KZ_WE_REFUSED) == 0 ?
				        KZ_WE_REFUSED :
				        KZ_WE_UNAVAILABLE,
				    code && strcmp(code, KZ_WE_REFUSED) == 0 ?
				        "the workspace archive is over the "
				        "worker's bound for outputs "
				        "(SANDBOX_SNAPSHOT_MAX, at most 47M)" :
				        "the workspace could not be read");
		goto out;
	}
	extract(x, r, tar, dir);
	for (i = 0; i < r->nout; i++)
		if (r->out[i].err == 1)
			link_one(x, &r->out[i], dir, snap);
out:
	if (tar[0] != '\0')
		unlink(tar);
	/* Only what this run made: never a directory found there. */
	if (made && kz_tree_remove(AT_FDCWD, dir) != 0)
		fprintf(stderr,
		    "kz-run: the outputs' directory %s could not be removed\n",
		    dir);
	report(x, r);
}

void
run_result_release(struct run_result *r)
{
	free(r->tail[0]);
	free(r->tail[1]);
	r->tail[0] = r->tail[1] = NULL;
}
