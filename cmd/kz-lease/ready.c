/*
 * Readiness for the service manager (kz_notify): kz-lease is ready once it
 * listens, admission is open and the pool can grant a lease, that is once
 * a worker is warm, or every place in the pool already holds a made
 * worker (a restarted kz-lease may find them all leased).  Until then, and
 * until the first fill has made every worker, STATUS= says how far the
 * pool is ("1/4 workers warm"), then "serving: 4/4 workers warm".  The pool is
 * read with the status script, one call a tick at most, and no more once the
 * first fill is done.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "daemon.h"
#include "banned.h"

static struct {
	bool ready, filled, polling;
	char last[KZ_NOTIFY_STATUS_MAX];
} R;

static void
say(const char *text)
{
	if (strcmp(text, R.last) == 0)
		return;
	snprintf(R.last, sizeof(R.last), "%s", text);
	(void)kz_notify_status(text);
}

static void
pool_read(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	int64_t warm, total, creating, cap = d->c->capacity;
	char s[KZ_NOTIFY_STATUS_MAX];

	(void)why;
	(void)arg;
	R.polling = false;
	if (err != 0 ||
	    kz_json_int(res, "warm", 0, 1 << 30, &warm, NULL, 0) != 0 ||
	    kz_json_int(res, "total", 0, 1 << 30, &total, NULL, 0) != 0 ||
	    kz_json_int(res, "creating", 0, 1 << 30, &creating, NULL, 0) != 0 ||
	    !d->open)
		return;
	/* Every place in the pool holds a made worker, whatever its state. */
	R.filled = total - creating >= cap;
	snprintf(s, sizeof(s), "%s%lld/%lld workers warm",
	    R.filled ? "serving: " : "", (long long)warm, (long long)cap);
	if (!R.ready && (warm >= 1 || R.filled)) {
		R.ready = true;
		snprintf(R.last, sizeof(R.last), "%s", s);
		if (kz_notify_ready(s) != 0)
			kz_log(KZ_LOG_WARN, "serve.notify", KZ_ESYS,
			    "cannot tell the service manager it is ready",
			    NULL);
		return;
	}
	say(s);
}

void
ready_start(struct lease_daemon *d)
{
	(void)d;
	say("starting: waiting for the store and the controller");
}

void
ready_tick(struct lease_daemon *d)
{
	char cap[24], s[KZ_NOTIFY_STATUS_MAX];
	const char *av[1] = {cap};

	if (R.filled || R.polling || !kz_notify_enabled())
		return;
	if (!d->open) {
		snprintf(s, sizeof(s), "%sadmission closed: %s",
		    R.ready ? "" : "starting: ", d->closed_why);
		say(s);
		return;
	}
	snprintf(cap, sizeof(cap), "%lld", (long long)d->c->capacity);
	if (pool_async(d, KZ_POOL_STATUS, 1, av, pool_read, NULL) == 0)
		R.polling = true;
}
