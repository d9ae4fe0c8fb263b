/*
 * The daemon: every op of the table in ops.c behind the framed server.  The
 * store client is blocking; each request runs to completion in turn, which
 * keeps one decision from interleaving with another on this replica (the
 * store's scripts keep replicas consistent with each other).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "kz_json.h"
#include "kz_log.h"
#include "kz_notify.h"
#include "kz_srv.h"
#include "kzp.h"
#include "kzp_conf.h"
#include "banned.h"

#define OPS_MAX 64
#define CODES_MAX 16

/* Process-lifetime counters for status (this replica's, not the store's). */
static struct {
	struct kz_srv *srv;
	unsigned long ok, refused;
	struct {
		char code[32];
		unsigned long n;
	} by_code[CODES_MAX];
} stats;

static void
count_refusal(const char *code)
{
	size_t i;

	stats.refused++;
	for (i = 0; i < CODES_MAX && stats.by_code[i].code[0] != '\0'; i++)
		if (strcmp(stats.by_code[i].code, code) == 0)
			break;
	if (i == CODES_MAX)
		return;
	if (stats.by_code[i].code[0] == '\0')
		snprintf(stats.by_code[i].code, sizeof(stats.by_code[i].code),
		    "%s", code);
	stats.by_code[i].n++;
}

/*
 * status: what this replica has answered since it started, and whether it
 * holds a store connection.  It never touches the store, so it answers
 * at once even when the store does not.  No top-level field is named like
 * an error code (refused_by_code's members), for readers that grep.
 */
static void
op_status(struct kz_req *req, void *arg)
{
	struct kzp *p = arg;
	struct kz_srv_stats ss;
	cJSON *o = cJSON_CreateObject(), *b;

	kz_srv_stats(stats.srv, &ss);
	if (o == NULL || !cJSON_AddBoolToObject(o, "store", p->st != NULL) ||
	    !cJSON_AddNumberToObject(o, "requests", (double)ss.requests) ||
	    !cJSON_AddNumberToObject(o, "answered_ok", (double)stats.ok) ||
	    !cJSON_AddNumberToObject(o, "answered_refused",
	        (double)stats.refused) ||
	    !cJSON_AddNumberToObject(o, "bad_frames", (double)ss.bad_frames) ||
	    !cJSON_AddNumberToObject(o, "peer_refused",
	        (double)ss.peer_refused) ||
	    !cJSON_AddNumberToObject(o, "open_conns", (double)ss.open_conns) ||
	    (b = cJSON_AddObjectToObject(o, "refused_by_code")) == NULL) {
		cJSON_Delete(o);
		kz_req_err(req, KZ_WE_INTERNAL, "out of memory");
		return;
	}
	for (size_t i = 0; i < CODES_MAX && stats.by_code[i].code[0]; i++)
		cJSON_AddNumberToObject(b, stats.by_code[i].code,
		    (double)stats.by_code[i].n);
	kz_req_ok(req, o);
}

static const char *const no_fields[] = {NULL};

static void
handle(struct kz_req *req, void *arg)
{
	struct kzp *p = arg;
	const cJSON *j = kz_req_json(req);
	const char *op = cJSON_GetStringValue(kz_json_get(j, "op"));
	struct kzp_res r = {0};
	cJSON *out = NULL;

	kz_log_set_rid(cJSON_GetStringValue(kz_json_get(j, "id")));
	p->served = true;
	p->caller = kz_req_peer(req)->uid;
	if (kzp_run(p, op, j, &out, &r) != 0) {
		kz_log(KZ_LOG_INFO, "project.refuse", 0, r.why, "op", op,
		    "error", r.code, NULL);
		count_refusal(r.code);
		kz_req_err(req, r.code, r.why);
	} else {
		stats.ok++;
		kz_log(KZ_LOG_DEBUG, "project.ok", 0, "done", "op", op, NULL);
		kz_req_ok(req, out);
	}
	kz_log_set_rid(NULL);
}

static void
on_signal(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	event_base_loopbreak(arg);
}

enum kz_exit
kzp_serve(struct kzp *p, struct kzp_cfg *c)
{
	struct kz_op ops[OPS_MAX + 1];
	struct kz_srv_conf sc = {0};
	struct event_base *base = NULL;
	struct event *sigs[2] = {NULL, NULL};
	struct kz_srv *srv = NULL;
	char why[200];
	size_t n = 0;
	enum kz_exit rc = KZ_EXIT_INTERNAL;

	memset(ops, 0, sizeof(ops));
	for (const struct kzp_opdef *d = kzp_ops; d->op && n < OPS_MAX - 1; d++)
		ops[n++] = (struct kz_op){d->op, handle, d->fields, d->flags};
	ops[n++] = (struct kz_op){"status", op_status, no_fields, 0};
	if (kz_srv_peers_load(c->conf, &sc.peers, &sc.operators, why,
	        sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "project.config", KZ_ECONF, why, NULL);
		return KZ_EXIT_USAGE;
	}
	sc.sock_path = c->sock;
	sc.frame_max = c->frame_max;
	sc.io_timeout_ms = 10000;
	sc.idle_timeout_ms = 60000;
	sc.ops = ops;
	sc.arg = p;
	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL)
		goto out;
	if (kz_srv_new(base, &sc, &srv, why, sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "project.listen", KZ_ESYS, why, NULL);
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	stats.srv = srv;
	sigs[0] = evsignal_new(base, SIGTERM, on_signal, base);
	sigs[1] = evsignal_new(base, SIGINT, on_signal, base);
	if (sigs[0] == NULL || sigs[1] == NULL || evsignal_add(sigs[0], NULL) ||
	    evsignal_add(sigs[1], NULL))
		goto out;
	kz_log(KZ_LOG_INFO, "project.start", 0, "serving", "socket", c->sock,
	    "audit", *p->audit_sock ? p->audit_sock : "off", NULL);
	if (kz_notify_ready("serving") != 0)
		kz_log(KZ_LOG_WARN, "project.notify", KZ_ESYS,
		    "cannot tell the service manager it is ready", NULL);
	event_base_dispatch(base);
	(void)kz_notify_stopping();
	kz_log(KZ_LOG_INFO, "project.stop", 0, "stopped", NULL);
	rc = KZ_EXIT_OK;
out:
	for (int i = 0; i < 2; i++)
		if (sigs[i] != NULL)
			event_free(sigs[i]);
	kz_srv_free(srv);
	if (base != NULL)
		event_base_free(base);
	return rc;
}
