/*
 * Store scripts on the event loop: every module runs the pool's scripts
 * (lib/pool.c) through pool_async and gets the parsed reply in a pool_fn.
 * A reply that says the store lost its data, or a store that does not
 * answer, closes admission until the epoch is re-established.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_log.h"
#include "kz_store.h"
#include "daemon.h"
#include "banned.h"

struct pcall {
	struct lease_daemon *d;
	pool_fn fn;
	void *arg;
};

static void
pcall_done(int err, redisReply *r, const char *why, void *arg)
{
	struct pcall *pc = arg;
	cJSON *res = NULL;
	char w[256] = "";
	const char *code;

	if (err == 0)
		err = kz_pool_parse(r, &res, w, sizeof(w));
	else
		snprintf(w, sizeof(w), "%s", why ? why : "");
	if (err == 0 && (code = kz_pool_errcode(res)) != NULL &&
	    strcmp(code, "store_unavailable") == 0) {
		/* The store lost its data: re-establish the epoch first. */
		pc->d->store_ok = false;
		kz_astore_drop(pc->d->st);
	}
	if (err == KZ_EUNAVAIL)
		pc->d->store_ok = false;
	admission_update(pc->d);
	pc->fn(pc->d, err, res, w, pc->arg);
	cJSON_Delete(res);
	free(pc);
}

int
pool_async(struct lease_daemon *d, enum kz_pool_script which, int argc,
    const char **argv, pool_fn fn, void *arg)
{
	const char *av[32];
	struct pcall *pc;
	int e;

	if (argc > 31)
		return KZ_EINVAL;
	if ((pc = calloc(1, sizeof(*pc))) == NULL)
		return KZ_ENOMEM;
	pc->d = d;
	pc->fn = fn;
	pc->arg = arg;
	av[0] = kz_astore_prefix(d->st);
	memcpy(av + 1, argv, (size_t)argc * sizeof(*argv));
	e = kz_astore_eval(d->st, &kz_pool_scripts[which], 1, argc + 1, av,
	    pcall_done, pc);
	if (e != 0)
		free(pc);
	return e;
}

void
pool_nothing(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	(void)d;
	(void)res;
	if (err != 0)
		kz_log(KZ_LOG_WARN, "store.call", err, why, "what",
		    (const char *)arg, NULL);
}
