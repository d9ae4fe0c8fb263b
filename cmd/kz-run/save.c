/*
 * The workspace snapshot of the workspace key H(actor, conversation):
 * restored into the wiped worker before the run, saved after it.  kz-lease
 * names the file and the bounds it is saved under (lib/snap.c keeps the
 * layout, the bounds and the expiry).  A save that fails for any reason
 * removes the older snapshot, so the next run never silently gets an
 * older workspace than the one this run left; the status line says the
 * workspace was not saved, and why.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "kz_json.h"
#include "kz_snap.h"
#include "run.h"
#include "banned.h"

int
run_worker_op(const struct run_ctx *x, struct run_lease *l, const char *op,
    const char *path, bool skip, bool *unchanged, const char **code)
{
	cJSON *req = run_request(op, x->rid), *rep = NULL;
	const char *err;
	char why[160];
	int e;

	if (req == NULL)
		return KZ_ENOMEM;
	cJSON_AddStringToObject(req, "path", path);
	if (skip)
		cJSON_AddBoolToObject(req, "skip_unchanged", true);
	if (unchanged != NULL)
		*unchanged = false;
	e = run_worker_call(x, l, req, x->c->io_timeout_ms, NULL, &rep, why,
	    sizeof(why));
	cJSON_Delete(req);
	if (e == 0 && !cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		err = run_str(rep, "error");
		if (code != NULL)
			*code = err && strcmp(err, KZ_WE_REFUSED) == 0 ?
			    KZ_WE_REFUSED :
			    "error";
		e = KZ_EDENIED;
	}
	if (e == 0 && unchanged != NULL)
		*unchanged = cJSON_IsTrue(kz_json_get(rep, "unchanged"));
	cJSON_Delete(rep);
	return e;
}

void
run_restore(const struct run_ctx *x, struct run_lease *l)
{
	int e;

	if (!x->c->snapshot || l->snap == NULL)
		return;
	/* kz-lease removes an expired snapshot when it offers it; this
	 * holds even if it did not. */
	if ((e = kz_snap_fresh(l->snap, l->snapb.ttl_ms)) == KZ_ESTATE)
		fprintf(stderr,
		    "kz-run: the saved workspace had not been used "
		    "for longer than its expiry and was removed; starting "
		    "empty\n");
	if (e != 0)
		return;
	if (run_worker_op(x, l, "restore", l->snap, false, NULL, NULL) == 0)
		l->restored = true;
	else if (!l->lost)
		fprintf(stderr,
		    "kz-run: the saved workspace could not be "
		    "restored; starting empty\n");
}

void
run_unsave(const struct run_ctx *x, const struct run_lease *l)
{
	if (x->c->snapshot && l->snap != NULL)
		kz_snap_drop(l->snap, NULL);
}

/*
 * Saves the workspace (never /projection) while the lease holds: a run
 * that returned after its lease expired must not snapshot.  The snapshot
 * op goes out beside a renewal, and what it wrote is kept only once
 * kz-lease has answered the renewal: a lease taken away meanwhile (a
 * worker that is retired then, never handed on) leaves no snapshot, and
 * the older one is removed.  The worker writes the archive beside the snapshot;
 * kz_snap_commit puts it in place under the bounds.  A workspace that
 * archives to exactly what was restored is not written again: the
 * snapshot it came from stays (kz-lease marked it used when it offered
 * it), or, if it is gone meanwhile, the archive is written after all.
 */
int
run_save(const struct run_ctx *x, struct run_lease *l, char *why, size_t wlen)
{
	char tmp[PATH_MAX + 64];
	const char *code = NULL;
	struct run_confirm cf;
	struct stat st;
	bool same = false;
	int evicted, e;

	if (l->snap == NULL) {
		kz_why(why, wlen,
		    "kz-lease named no snapshot for this workspace");
		return KZ_ENOENT;
	}
	snprintf(tmp, sizeof(tmp), "%s.%s.new", l->snap, x->rid);
	if (run_lease_confirm_send(x, l, &cf) != 0)
		e = KZ_ESTATE;
	else {
		e = run_worker_op(x, l, "snapshot", tmp, l->restored, &same,
		    &code);
		if (run_lease_confirm_wait(x, l, &cf) != 0)
			e = KZ_ESTATE;
		else if (e == 0 && same) {
			if (lstat(l->snap, &st) == 0 && S_ISREG(st.st_mode))
				return 0;
			e = run_worker_op(x, l, "snapshot", tmp, false, NULL,
			    &code);
		}
	}
	if (e == KZ_ESTATE) {
		/* The worker may still write it: the sweep removes a
		 * partial file that is left over. */
		kz_snap_drop(l->snap, tmp);
		kz_why(why, wlen, "the lease expired");
		return KZ_ESTATE;
	}
	if (e != 0) {
		kz_snap_drop(l->snap, tmp);
		if (code != NULL && strcmp(code, KZ_WE_REFUSED) == 0)
			kz_why(why, wlen,
			    "the workspace is larger than the "
			    "worker's snapshot bound (SANDBOX_SNAPSHOT_MAX)");
		else
			kz_why(why, wlen,
			    "the worker could not archive the workspace");
		return e;
	}
	return kz_snap_commit(l->snap, tmp, &l->snapb, &evicted, why, wlen);
}
