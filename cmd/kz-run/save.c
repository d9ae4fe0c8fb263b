/*
 * The workspace snapshot of the workspace key H(actor, conversation):
 * restored into the wiped worker before the run, saved after it.  kz-lease
 * names the file and the bounds it is saved under (lib/snap.c keeps the
 * layout, the bounds and the expiry).  A save that fails for any reason
 * removes the older snapshot, so the next run never silently gets an
 * older workspace than the one this run left; the status line says the
 * workspace was not saved, and why.  Two runs of one workspace at once
 * start from the same snapshot, and only one of their saves can be kept:
 * the first to commit wins, and the other is told its workspace was not
 * saved (never the older snapshot over the newer one).
 */
#include <stdio.h>
#include <string.h>

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
	/* Which file the run starts from, taken before the worker opens
	 * it: a save committed by another run meanwhile is then never
	 * replaced by this one's (kz_snap_commit).  One that cannot be
	 * told is taken as restored, which refuses any commit over a
	 * snapshot that exists then. */
	if (kz_snap_ident(l->snap, &l->base) != 0)
		l->base = (struct kz_snap_id){.exists = true};
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
run_unsave(const struct run_ctx *x, struct run_lease *l)
{
	if (x->c->snapshot && l->snap != NULL)
		kz_snap_drop(l->snap, l->pending ? l->tmp : NULL, &l->base);
	l->pending = false;
}

/*
 * Saves the workspace (never /projection) while the lease holds: a run
 * that returned after its lease expired must not snapshot.  The worker
 * writes the archive beside the snapshot, while the call keeps the lease
 * renewed; what it wrote is put in place (run_save_commit) only once
 * kz-lease has taken the release, which proves the lease held past the
 * end of the write: a lease taken away meanwhile (a worker that is
 * retired then, never handed on) leaves no snapshot, and the older one is
 * removed.  A workspace that archives to exactly what was restored is not
 * written again: the snapshot it came from stays (kz-lease marked it used
 * when it offered it), or, if it is gone meanwhile, the archive is
 * written after all.
 */
int
run_save(const struct run_ctx *x, struct run_lease *l, char *why, size_t wlen)
{
	const char *code = NULL;
	struct kz_snap_id cur;
	bool same = false;
	int e;

	if (l->snap == NULL) {
		kz_why(why, wlen,
		    "kz-lease named no snapshot for this workspace");
		return KZ_ENOENT;
	}
	snprintf(l->tmp, sizeof(l->tmp), "%s.%s.new", l->snap, x->rid);
	e = run_worker_op(x, l, "snapshot", l->tmp, l->restored, &same, &code);
	if (e == 0 && same) {
		/* Nothing to save: the snapshot restored, or one another
		 * run saved since, is in place. */
		if (kz_snap_ident(l->snap, &cur) == 0 && cur.exists)
			return 0;
		e = run_worker_op(x, l, "snapshot", l->tmp, false, NULL, &code);
	}
	if (e == 0) {
		l->pending = true;
		return 0;
	}
	/* The worker may still write it if the lease was lost: the sweep
	 * removes a partial file that is left over. */
	kz_snap_drop(l->snap, l->tmp, &l->base);
	if (e == KZ_ESTATE)
		kz_why(why, wlen, "the lease expired");
	else if (code != NULL && strcmp(code, KZ_WE_REFUSED) == 0)
		kz_why(why, wlen,
		    "the workspace is larger than the "
		    "worker's snapshot bound (SANDBOX_SNAPSHOT_MAX)");
	else
		kz_why(why, wlen, "the worker could not archive the workspace");
	return e;
}

int
run_save_commit(struct run_lease *l, bool released, char *why, size_t wlen)
{
	int evicted;

	if (!l->pending)
		return 0;
	l->pending = false;
	if (!released) {
		kz_snap_drop(l->snap, l->tmp, &l->base);
		kz_why(why, wlen,
		    "kz-lease did not take the release, so the lease is not "
		    "proven to have held to the end of the save");
		return KZ_ESTATE;
	}
	return kz_snap_commit(l->snap, l->tmp, &l->snapb, &l->base, &evicted,
	    why, wlen);
}
