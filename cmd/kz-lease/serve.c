/*
 * The kz-lease daemon: framed ops over the async store client.  Every
 * decision about a worker is a store script; this process only runs the
 * scripts, drives the controller, resets released workers (reset.c) and
 * deletes retired ones (chores.c).  This file sets the daemon up, keeps
 * the store's epoch (admission.c opens admission on it) and runs the
 * tick.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <event2/event.h>

#include "kz_audit.h"
#include "kz_exit.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_pool.h"
#include "kz_srv.h"
#include "kz_store.h"
#include "lease.h"
#include "daemon.h"
#include "banned.h"

/* ---- store epoch ---- */

static void
init_done(struct lease_daemon *d, int err, cJSON *res, const char *why,
    void *arg)
{
	const char *ep;

	(void)arg;
	if (err != 0 || kz_pool_errcode(res) != NULL ||
	    kz_json_str(res, "epoch", KZ_POOL_EPOCH_HEX, &ep, NULL, 0) != 0) {
		kz_log(KZ_LOG_WARN, "store.init", err, why, NULL);
		return;
	}
	snprintf(d->epoch, sizeof(d->epoch), "%s", ep);
	d->store_ok = true;
	kz_log(KZ_LOG_INFO, "store.epoch", 0,
	    cJSON_IsTrue(kz_json_get(res, "changed")) ? "new store epoch" :
	                                                "store epoch unchanged",
	    "epoch", d->epoch, NULL);
	d->next_reconcile = 0;
	admission_update(d);
}

static void
info_done(int err, redisReply *r, const char *why, void *arg)
{
	struct lease_daemon *d = arg;
	char runid[64], fresh[KZ_POOL_EPOCH_HEX + 1];
	const char *av[3] = {"", runid, fresh};
	const char *p;
	size_t n;

	if (err != 0 || r->type != REDIS_REPLY_STRING ||
	    (p = strstr(r->str, "run_id:")) == NULL) {
		kz_log(KZ_LOG_WARN, "store.init", err, why ? why : "no run id",
		    NULL);
		return;
	}
	p += 7;
	n = strspn(p, "0123456789abcdef");
	if (n == 0 || n >= sizeof(runid))
		return;
	memcpy(runid, p, n);
	runid[n] = '\0';
	kz_pool_new_epoch(fresh);
	(void)pool_async(d, KZ_POOL_INIT, 2, av + 1, init_done, NULL);
}

static void
store_up(struct kz_astore *a, void *arg)
{
	const char *av[2] = {"INFO", "server"};

	kz_log(KZ_LOG_INFO, "store.up", 0, "store connected", NULL);
	if (kz_astore_cmd(a, 2, av, info_done, arg) != 0)
		kz_astore_drop(a);
}

static void
store_down(struct kz_astore *a, void *arg)
{
	struct lease_daemon *d = arg;

	(void)a;
	d->store_ok = false;
	kz_log(KZ_LOG_WARN, "store.down", KZ_EUNAVAIL, "store lost", NULL);
	admission_update(d);
}

/* ---- signals and the tick ---- */

static void
sig_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct lease_daemon *d = arg;

	(void)ev;
	if (sig == SIGCHLD) {
		/* Each controller call is a child of ours: ctl_exec.c waits
		 * for it through a pidfd and tolerates being reaped here
		 * first.  This keeps any other child from lingering as a
		 * zombie. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		return;
	}
	kz_log(KZ_LOG_INFO, "serve.stop", 0, "stopping", NULL);
	event_base_loopbreak(d->base);
}

/* While the store is unreachable, logs why the client cannot connect (a
 * wrong password, no primary, a refused address) once each time the reason
 * changes, so the operator sees why admission stays closed. */
static void
log_store_why(struct lease_daemon *d)
{
	const char *why = kz_astore_why(d->st);

	if (d->store_ok || why == NULL || strcmp(why, d->store_why) == 0)
		return;
	snprintf(d->store_why, sizeof(d->store_why), "%s", why);
	if (why[0] != '\0')
		kz_log(KZ_LOG_WARN, "store.unavailable", KZ_EUNAVAIL, why,
		    NULL);
}

static void
tick_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct lease_daemon *d = arg;

	(void)fd;
	(void)ev;
	log_store_why(d);
	admission_update(d);
	ready_tick(d);
	if (!d->store_ok)
		return;
	maint_tick(d);
}

static int
setup_events(struct lease_daemon *d)
{
	struct timeval tv = {.tv_sec = d->c->tick_ms / 1000,
	    .tv_usec = (d->c->tick_ms % 1000) * 1000};
	static const int sigs[] = {SIGCHLD, SIGTERM, SIGINT};
	size_t i;

	for (i = 0; i < 3; i++) {
		d->sig[i] = evsignal_new(d->base, sigs[i], sig_cb, d);
		if (d->sig[i] == NULL || evsignal_add(d->sig[i], NULL) != 0)
			return KZ_ENOMEM;
	}
	d->tick = event_new(d->base, -1, EV_PERSIST, tick_cb, d);
	if (d->tick == NULL || evtimer_add(d->tick, &tv) != 0)
		return KZ_ENOMEM;
	return 0;
}

/* Makes the parents of path that are missing, mode 0755. */
static void
make_parents(const char *path)
{
	char p[PATH_MAX];
	char *s;

	snprintf(p, sizeof(p), "%s", path);
	for (s = strchr(p + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0700) == 0)
			(void)chmod(p, 0755);
		*s = '/';
	}
}

/*
 * The snapshot directory is made here, not by kz-run: a kz-run that is
 * not root cannot create it (nor the actors' directories below it, made
 * at lease time), only commit saves into them.
 */
static void
make_snap_dir(const struct lease_conf *c)
{
	make_parents(c->snap_dir);
	if (mkdir(c->snap_dir, 0700) == 0) {
		if (chmod(c->snap_dir, LEASE_SNAPSHOT_DIR_MODE) == 0)
			return;
		(void)rmdir(c->snap_dir);
	} else if (errno == EEXIST)
		return;
	kz_log(KZ_LOG_WARN, "serve.snapshots", KZ_ESYS,
	    "no snapshot directory: workspaces will not be saved", NULL);
}

enum kz_exit
lease_serve(struct lease_conf *c)
{
	struct kz_astore_conf ac = {0};
	struct kz_srv_conf sc = {0};
	struct lease_daemon d = {0};
	char why[256] = "";
	int e;
	enum kz_exit rc = KZ_EXIT_INTERNAL;
	size_t i;

	d.c = c;
	LIST_INIT(&d.jobs);
	signal(SIGPIPE, SIG_IGN);
	if ((e = kz_key_load_subkey(c->key_file, KZ_SUBKEY_IDHASH, &d.idkey,
	         why, sizeof(why))) != 0) {
		kz_log(KZ_LOG_ERROR, "serve.key", e, why, NULL);
		return KZ_EXIT_UNAVAIL;
	}
	make_snap_dir(c);
	ready_start(&d);
	if ((d.base = event_base_new()) == NULL)
		goto out;
	ac.sock = c->store_sock;
	ac.dep = c->dep;
	ac.timeout_ms = (int)c->store_timeout_ms;
	ac.reconnect_ms = 200;
	ac.on_up = store_up;
	ac.on_down = store_down;
	ac.arg = &d;
	if ((e = kz_astore_new(d.base, &ac, &d.st, why, sizeof(why))) != 0) {
		kz_log(KZ_LOG_ERROR, "serve.store", e, why, NULL);
		rc = e == KZ_EINVAL ? KZ_EXIT_USAGE : KZ_EXIT_UNAVAIL;
		goto out;
	}
	sc.sock_path = c->sock;
	sc.frame_max = c->frame_max;
	sc.peers = c->peers;
	sc.operators = c->operators;
	sc.ops = lease_ops;
	sc.admit = admission_admit;
	sc.arg = &d;
	if ((e = kz_srv_new(d.base, &sc, &d.srv, why, sizeof(why))) != 0) {
		kz_log(KZ_LOG_ERROR, "serve.listen", e, why, NULL);
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	if (setup_events(&d) != 0)
		goto out;
	if ((e = resets_new(&d, (int)c->reset_threads)) != 0) {
		kz_log(KZ_LOG_ERROR, "serve.reset", e, "reset threads", NULL);
		goto out;
	}
	if ((e = chores_new(&d)) != 0) {
		kz_log(KZ_LOG_ERROR, "serve.chores", e, "deletion threads",
		    NULL);
		goto out;
	}
	/* The opt-out is said once on stderr and kept in the log.  A sink
	 * not up yet does not keep the pool from starting (kz-audit may start
	 * later); the operator is told where it was looked for. */
	if (c->audit_sock[0] == '\0') {
		fprintf(stderr,
		    "kz-lease: audit is off (KZ_AUDIT = off): no "
		    "reset or retirement is recorded\n");
		kz_log(KZ_LOG_WARN, "audit.off", 0, "audit is off", NULL);
	} else {
		why[0] = '\0';
		if (kz_audit_ping(c->audit_sock, 1000, why, sizeof(why)) != 0)
			kz_log(KZ_LOG_WARN, "audit.unreachable", KZ_EUNAVAIL,
			    why, "socket", c->audit_sock, NULL);
	}
	kz_log(KZ_LOG_INFO, "serve.start", 0, "serving", "socket", c->sock,
	    "worker_bin", c->worker_bin, "audit",
	    c->audit_sock[0] ? c->audit_sock : "off", NULL);
	event_base_dispatch(d.base);
	(void)kz_notify_stopping();
	rc = KZ_EXIT_OK;
	/* Deletions in flight finish first: they and the stop below would
	 * otherwise remove the same directories at once. */
	chores_free(&d);
	/* Workers are detached so that a restarted kz-lease finds them; a
	 * deployment that is stopped stops them too. */
	if (c->stop_workers)
		ctl_stop_all(c);
out:
	chores_free(&d);
	resets_free(&d);
	jobs_stop(&d);
	kz_srv_free(d.srv);
	kz_astore_free(d.st);
	for (i = 0; i < 3; i++)
		if (d.sig[i] != NULL)
			event_free(d.sig[i]);
	if (d.tick != NULL)
		event_free(d.tick);
	if (d.base != NULL)
		event_base_free(d.base);
	kz_key_wipe(&d.idkey);
	return rc;
}
