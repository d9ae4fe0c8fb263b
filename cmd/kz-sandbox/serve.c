/*
 * The persistent worker.  It serves one connection at a time over the frame
 * protocol, each peer checked with SO_PEERCRED and timed out when slow or
 * idle.  Ops: run, health, status, wipe, snapshot, restore, shutdown
 * (kz-sandbox(8)).
 *
 * This file holds the accept loop, the op table and its dispatch, the
 * pre-start timing and shutdown, the one op that only stops the loop.
 * The other ops' handlers are elsewhere: ops.c (run, health, status,
 * wipe), snapshot.c (snapshot, restore) and browser.c (browser).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_srv.h"
#include "sbx.h"
#include "sbx_browser.h"
#include "sbx_gvisor.h"
#include "banned.h"

#define IDLE_MS 10000

static volatile sig_atomic_t stopping;

/* Process-lifetime counters for status. */
struct sbx_stats sbx_stats;

static void
on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

/* Stops the worker once the reply is written, as SIGTERM does. */
static cJSON *
op_shutdown(struct sbx_worker *w, const cJSON *req)
{
	(void)w;
	stopping = 1;
	return kz_reply_ok(req);
}

static const char *const run_fields[] = {"argv", "stdin_b64", "env", "cwd",
    "timeout_ms", "stdout_max", "stderr_max", "grant", "broker_token", NULL};
static const char *const no_fields[] = {NULL};

/*
 * The ops, checked by lib's envelope rules (kz_op_check: v, a string id,
 * a known op, only its fields, its flags) before a handler runs.  The
 * worker is not on libevent, so kz_srv's handler column stays empty and
 * each op's handler sits at the same index of handlers[].  The reset and
 * the stop are the host's, not a tenant's: kz-lease (whose uid the worker
 * runs as) and an operator's kz-reset, both operators by lib's default.
 */
static const struct kz_op ops[] = {
    {"run", NULL, run_fields, 0},
    {"health", NULL, no_fields, 0},
    {"status", NULL, no_fields, 0},
    {"wipe", NULL, no_fields, KZ_OP_OPERATOR},
    {"snapshot", NULL, sbx_snapshot_fields, 0},
    {"restore", NULL, sbx_restore_fields, 0},
    {"shutdown", NULL, no_fields, KZ_OP_OPERATOR},
    {"browser", NULL, sbx_browser_fields, 0},
    {NULL, NULL, NULL, 0},
};
static cJSON *(*const handlers[])(struct sbx_worker *, const cJSON *) = {
    sbx_op_run,
    sbx_op_health,
    sbx_op_status,
    sbx_op_wipe,
    sbx_op_snapshot,
    sbx_op_restore,
    op_shutdown,
    sbx_op_browser,
};
_Static_assert(sizeof(handlers) / sizeof(handlers[0]) ==
        sizeof(ops) / sizeof(ops[0]) - 1,
    "one handler for each op");

static cJSON *
dispatch(struct sbx_worker *w, const cJSON *req, const struct kz_peer *peer)
{
	static const struct kz_srv_conf srv = {.ops = ops};
	const struct kz_op *op;
	const char *code;
	char why[160] = "";

	if ((op = kz_op_check(&srv, req, peer, &code, why, sizeof(why))) ==
	    NULL)
		return kz_reply_err(req, code, why);
	sbx_stats.requests++;
	return handlers[op - ops](w, req);
}

static void
reply(int fd, cJSON *o, int64_t to)
{
	if (o != NULL)
		(void)!kz_frame_write(fd, o, KZ_FRAME_MAX_LIMIT, (int)to);
	cJSON_Delete(o);
}

/* How long to wait for a peer: at most max (< 0: forever) and no later
 * than a due pre-start. */
static int
wait_ms(const struct sbx_worker *w, int max)
{
	int64_t left;

	if (w->prestart_at == 0)
		return max;
	left = w->prestart_at - kz_now_ms();
	if (left < 0)
		left = 0;
	return max >= 0 && left > max ? max : (int)left;
}

/* Forks the pre-started bridge, and boots the next lease's gVisor
 * sandbox, when they are due; true if they were. */
static bool
prestart_if_due(struct sbx_worker *w)
{
	if (w->prestart_at == 0 || kz_now_ms() < w->prestart_at || stopping)
		return false;
	w->prestart_at = 0;
	sbx_browser_prestart(w);
	sbx_gv_preboot(w);
	return true;
}

/* Serves one connection until it closes, idles out or asks to quit. */
static void
conn(struct sbx_worker *w, int fd, const struct kz_peer_policy *pol, bool *quit)
{
	const struct sbx_conf *c = w->c;
	struct kz_peer peer;

	sbx_stats.conns++;
	if (kz_peer_check(fd, pol, &peer) != 0) {
		sbx_stats.peer_refused++;
		kz_log(KZ_LOG_WARN, "sandbox.peer", KZ_EPEER, "peer refused",
		    NULL);
		reply(fd,
		    kz_reply_err(NULL, KZ_WE_UNAUTHORIZED_PEER,
		        "peer not allowed"),
		    c->io_timeout_ms);
		return;
	}
	while (!*quit && !stopping) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char why[160] = "";
		cJSON *req = NULL;
		int r;

		int n = poll(&p, 1, wait_ms(w, IDLE_MS));

		if (n == 0 && prestart_if_due(w))
			continue;
		if (n != 1)
			return;
		r = kz_frame_read(fd, c->frame_max, (int)c->io_timeout_ms, &req,
		    why, sizeof(why));
		if (r == KZ_EEOF || r == KZ_ETIMEDOUT || r == KZ_EFRAME_TRUNC ||
		    r == KZ_ESYS)
			return;
		if (r != 0) {
			sbx_stats.bad_frames++;
			reply(fd,
			    kz_reply_err(NULL,
			        r == KZ_ETOOBIG ? KZ_WE_FRAME_TOO_LARGE :
			                          KZ_WE_BAD_REQUEST,
			        r == KZ_ETOOBIG ? "frame too large" :
			                          "bad frame"),
			    c->io_timeout_ms);
			return;
		}
		reply(fd, dispatch(w, req, &peer), c->io_timeout_ms);
		cJSON_Delete(req);
		prestart_if_due(w);
		if (w->broken) {
			kz_log(KZ_LOG_ERROR, "sandbox.broken", KZ_EUNAVAIL,
			    "the run init is gone; the worker stops", NULL);
			*quit = true;
		}
	}
}

static int
pid_file(const char *path)
{
	char buf[32];
	int fd, n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid()), r = 0;

	if ((fd = open(path,
	         O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)) <
	    0)
		return KZ_ESYS;
	if (write(fd, buf, (size_t)n) != n)
		r = KZ_ESYS;
	close(fd);
	return r;
}

enum kz_exit
sbx_serve(struct sbx_worker *w, int lfd, const char *pidf)
{
	struct kz_peer_policy pol;
	struct sigaction sa;
	char why[256] = "";
	bool quit = false;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGINT, &sa, NULL);
	if (kz_peer_policy_parse(w->c->peer_uids, w->c->peer_gids, &pol, why,
	        sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "sandbox.config", KZ_ECONF, why, NULL);
		return KZ_EXIT_USAGE;
	}
	if (pidf != NULL && pid_file(pidf) != 0) {
		kz_log(KZ_LOG_ERROR, "sandbox.pidfile", KZ_ESYS,
		    "cannot write the pid file", NULL);
		return KZ_EXIT_INTERNAL;
	}
	kz_log(KZ_LOG_INFO, "sandbox.ready", 0, "worker ready", "worker",
	    w->c->id, NULL);
	if (sbx_gvisor(w->c) && w->c->gv_uid == 0)
		kz_log(KZ_LOG_WARN, "sandbox.gvisor_root", 0,
		    "runsc and its gofer run as host root: no "
		    "SANDBOX_GVISOR_UID",
		    "worker", w->c->id, NULL);
	/* A new worker has had no tenant: its first lease's browser may
	 * start now. */
	sbx_browser_prestart(w);
	if (kz_notify_ready("serving") != 0)
		kz_log(KZ_LOG_WARN, "sandbox.notify", KZ_ESYS,
		    "cannot tell the service manager it is ready", NULL);
	while (!quit && !stopping) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		int fd;

		if (poll(&p, 1, wait_ms(w, -1)) != 1) {
			(void)prestart_if_due(w);
			continue;
		}
		if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		(void)!kz_fd_nonblock(fd, false);
		conn(w, fd, &pol, &quit);
		close(fd);
	}
	kz_log(KZ_LOG_INFO, "sandbox.stop", 0, "worker stopping", NULL);
	(void)kz_notify_stopping();
	if (pidf != NULL)
		(void)unlink(pidf);
	return KZ_EXIT_OK;
}
