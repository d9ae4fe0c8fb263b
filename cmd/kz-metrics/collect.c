/*
 * What each daemon's status reply becomes: one const table from a status
 * field to a metric (kz-metrics(8) lists them).  A field a reply lacks
 * (an older daemon, a store that did not answer) gives no sample; a field
 * of the wrong JSON type is skipped the same way.  Numbers are taken as
 * they are, booleans as 0 or 1; an object gives one sample per member,
 * labelled with the member's name; a string gives the value 1 labelled
 * with the string (an info-style gauge).  A value the format cannot carry
 * (a negative counter) is left out.
 */
#include <string.h>

#include "kz_json.h"
#include "metrics.h"
#include "banned.h"

const char *const mx_daemons[] = {"kz-audit", "kz-lease", "kz-project",
    "kz-egress", "kz-pkgrun", "kz-browser", NULL};

struct col {
	const char *daemon; /* NULL: every daemon, labelled daemon=... */
	const char *key; /* a field of the reply; "a.b": b of object a */
	const char *metric;
	enum mx_type type;
	const char *label; /* NULL, or the label's name */
	const char *lval; /* its fixed value; NULL: from the JSON */
	const char *help;
};

#define C MX_COUNTER
#define G MX_GAUGE
static const struct col cols[] = {
    {NULL, "open_conns", "kz_open_connections", G, NULL, NULL,
        "Client connections open on the daemon's socket."},
    {NULL, "bad_frames", "kz_bad_frames_total", C, NULL, NULL,
        "Frames refused as malformed or too large."},
    {NULL, "peer_refused", "kz_peer_refused_total", C, NULL, NULL,
        "Connections refused by the SO_PEERCRED check."},

    {"kz-audit", "acked", "kz_audit_appends_total", C, NULL, NULL,
        "Records appended and on disk (acknowledged)."},
    {"kz-audit", "append_errors", "kz_audit_append_errors_total", C, NULL, NULL,
        "Appends that failed to reach the disk."},
    {"kz-audit", "busy", "kz_audit_busy_total", C, NULL, NULL,
        "Appends answered busy: the queue, or the peer's share of it, full."},
    {"kz-audit", "refused_by_reason", "kz_audit_refusals_total", C, "reason",
        NULL, "Appends refused by the schema, by reason."},
    {"kz-audit", "last_seq", "kz_audit_last_seq", G, NULL, NULL,
        "Sequence number of the last record in the log."},
    {"kz-audit", "batches", "kz_audit_batches_total", C, NULL, NULL,
        "Group-commit batches written."},
    {"kz-audit", "fsyncs", "kz_audit_fsyncs_total", C, NULL, NULL,
        "fdatasync calls on the log."},
    {"kz-audit", "rotations", "kz_audit_rotations_total", C, NULL, NULL,
        "Log file rotations."},
    {"kz-audit", "writable", "kz_audit_writable", G, NULL, NULL,
        "1 when the log can be written, 0 after a write failure."},

    {"kz-lease", "store", "kz_lease_store_up", G, NULL, NULL,
        "1 when the store answered the status script."},
    {"kz-lease", "inventory", "kz_lease_inventory_ok", G, NULL, NULL,
        "1 when the controller's inventory is known."},
    {"kz-lease", "admission", "kz_lease_admission_open", G, NULL, NULL,
        "1 when admission is open."},
    {"kz-lease", "draining", "kz_lease_draining", G, NULL, NULL,
        "1 while the pool drains."},
    {"kz-lease", "capacity", "kz_lease_capacity", G, NULL, NULL,
        "Workers the pool keeps."},
    {"kz-lease", "members", "kz_lease_members", G, NULL, NULL,
        "Members holding leases."},
    {"kz-lease", "creating", "kz_lease_workers", G, "state", "creating",
        "Workers by pool state."},
    {"kz-lease", "warm", "kz_lease_workers", G, "state", "warm",
        "Workers by pool state."},
    {"kz-lease", "leased", "kz_lease_workers", G, "state", "leased",
        "Workers by pool state."},
    {"kz-lease", "resetting", "kz_lease_workers", G, "state", "resetting",
        "Workers by pool state."},
    {"kz-lease", "retiring", "kz_lease_workers", G, "state", "retiring",
        "Workers by pool state."},
    {"kz-lease", "deleting", "kz_lease_workers", G, "state", "deleting",
        "Workers by pool state."},
    {"kz-lease", "resets_running", "kz_lease_resets_running", G, NULL, NULL,
        "Resets in progress."},
    {"kz-lease", "creates_running", "kz_lease_creates_running", G, NULL, NULL,
        "Worker creations in progress."},
    {"kz-lease", "deletes_running", "kz_lease_deletes_running", G, NULL, NULL,
        "Worker deletions queued or in progress."},
    {"kz-lease", "leases_granted", "kz_lease_leases_granted_total", C, NULL,
        NULL, "Leases granted by this process."},
    {"kz-lease", "leases_refused", "kz_lease_leases_refused_total", C, NULL,
        NULL, "Lease requests refused by this process."},
    {"kz-lease", "releases", "kz_lease_releases_total", C, NULL, NULL,
        "Releases that sent a worker to reset."},
    {"kz-lease", "resets_warm", "kz_lease_resets_total", C, "outcome", "warm",
        "Resets decided, by outcome."},
    {"kz-lease", "resets_retired", "kz_lease_resets_total", C, "outcome",
        "retired", "Resets decided, by outcome."},
    {"kz-lease", "resets_stale", "kz_lease_resets_total", C, "outcome", "stale",
        "Resets decided, by outcome."},
    {"kz-lease", "resets_failed", "kz_lease_resets_total", C, "outcome",
        "failed", "Resets decided, by outcome."},
    {"kz-lease", "retired_by_reason", "kz_lease_retirements_total", C, "reason",
        NULL, "Workers retired, by reason."},

    {"kz-project", "store", "kz_project_store_connected", G, NULL, NULL,
        "1 when the daemon holds a store connection."},
    {"kz-project", "answered_ok", "kz_project_requests_ok_total", C, NULL, NULL,
        "Requests answered ok."},
    {"kz-project", "refused_by_code", "kz_project_refusals_total", C, "code",
        NULL, "Requests refused, by error code."},

    {"kz-egress", "mode", "kz_egress_mode", G, "mode", NULL,
        "1, labelled with the egress mode in force."},
    {"kz-egress", "allowed", "kz_egress_allowed_total", C, NULL, NULL,
        "Requests that passed every check and went upstream."},
    {"kz-egress", "refused_by_reason", "kz_egress_refused_total", C, "reason",
        NULL, "Requests refused, by reason."},
    {"kz-egress", "bad_requests", "kz_egress_bad_requests_total", C, NULL, NULL,
        "Malformed requests answered 400."},

    {"kz-pkgrun", "inflight", "kz_pkgrun_inflight", G, NULL, NULL,
        "Invocations being served."},
    {"kz-pkgrun", "answered_ok", "kz_pkgrun_invocations_ok_total", C, NULL,
        NULL, "Invocations answered ok."},
    {"kz-pkgrun", "answered_refused", "kz_pkgrun_invocations_refused_total", C,
        NULL, NULL, "Invocations refused or failed."},
    {"kz-pkgrun", "warm.target", "kz_pkgrun_warm_target", G, NULL, NULL,
        "Warm single-use workers the daemon keeps (PKGRUN_WARM)."},
    {"kz-pkgrun", "warm.ready", "kz_pkgrun_warm_workers", G, "state", "ready",
        "Warm workers, by state."},
    {"kz-pkgrun", "warm.starting", "kz_pkgrun_warm_workers", G, "state",
        "starting", "Warm workers, by state."},
    {"kz-pkgrun", "warm.in_use", "kz_pkgrun_warm_workers", G, "state", "in_use",
        "Warm workers, by state."},
    {"kz-pkgrun", "warm.stopping", "kz_pkgrun_warm_workers", G, "state",
        "stopping", "Warm workers, by state."},
    {"kz-pkgrun", "warm.served", "kz_pkgrun_warm_served_total", C, NULL, NULL,
        "Invocations served by a warm worker."},
    {"kz-pkgrun", "warm.start_failed", "kz_pkgrun_warm_start_failures_total", C,
        NULL, NULL, "Warm workers that did not start."},
    {"kz-pkgrun", "one_shot", "kz_pkgrun_one_shot_total", C, NULL, NULL,
        "Invocations run on a one-shot sandbox."},
    {"kz-pkgrun", "fallbacks", "kz_pkgrun_fallbacks_total", C, NULL, NULL,
        "Invocations that fell back to a one-shot: no warm worker fit."},

    {"kz-browser", "enabled", "kz_browser_enabled", G, NULL, NULL,
        "1 when browser sessions are on for the deployment."},
    {"kz-browser", "sessions", "kz_browser_sessions", G, NULL, NULL,
        "Sessions open."},
    {"kz-browser", "opened", "kz_browser_sessions_total", C, "outcome",
        "opened", "Sessions, by how they began or ended."},
    {"kz-browser", "closed", "kz_browser_sessions_total", C, "outcome",
        "closed", "Sessions, by how they began or ended."},
    {"kz-browser", "reaped", "kz_browser_sessions_total", C, "outcome",
        "reaped", "Sessions, by how they began or ended."},
    {"kz-browser", "failed", "kz_browser_sessions_total", C, "outcome",
        "failed", "Sessions, by how they began or ended."},
};
#undef C
#undef G

static int
sample(struct mx *m, const struct col *c, const char *daemon, const char *lval,
    const cJSON *v)
{
	const char *lb[5] = {NULL};
	size_t n = 0;
	double x;
	int r;

	if (cJSON_IsBool(v))
		x = cJSON_IsTrue(v) ? 1 : 0;
	else if (cJSON_IsNumber(v))
		x = v->valuedouble;
	else
		return 0;
	if (c->daemon == NULL) {
		lb[n++] = "daemon";
		lb[n++] = daemon;
	}
	if (c->label != NULL) {
		lb[n++] = c->label;
		lb[n++] = lval;
	}
	r = mx_add(m, c->metric, c->type, c->help, lb, x);
	/* A sample the format cannot carry (a counter below 0, a label value
	 * a daemon made too long) is left out, not the whole scrape. */
	return r == KZ_EINVAL || r == KZ_ENOSPC ? 0 : r;
}

static const cJSON one_true = {.type = cJSON_True};

/* The field key names in st: "a.b" is member b of object a. */
static const cJSON *
field(const cJSON *st, const char *key)
{
	const char *dot = strchr(key, '.');
	char top[64];

	if (dot == NULL)
		return kz_json_get(st, key);
	snprintf(top, sizeof(top), "%.*s", (int)(dot - key), key);
	return kz_json_get(kz_json_get(st, top), dot + 1);
}

static int
one(struct mx *m, const struct col *c, const char *daemon, const cJSON *st)
{
	const cJSON *v = field(st, c->key), *x;
	int r;

	if (c->label == NULL || c->lval != NULL)
		return sample(m, c, daemon, c->lval, v);
	if (cJSON_IsString(v))
		return sample(m, c, daemon, v->valuestring, &one_true);
	if (!cJSON_IsObject(v))
		return 0;
	cJSON_ArrayForEach(x,
	    v) if ((r = sample(m, c, daemon, x->string, x)) != 0) return r;
	return 0;
}

int
mx_collect(struct mx *m, const char *daemon, const cJSON *st)
{
	const char *up[] = {"daemon", daemon, NULL};
	int r;

	if ((r = mx_add(m, "kz_up", MX_GAUGE,
	         "1 when the daemon answered "
	         "status, 0 when it could not be reached or refused.",
	         up, st != NULL ? 1 : 0)) != 0 ||
	    st == NULL)
		return r;
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
		if ((cols[i].daemon == NULL ||
		        strcmp(cols[i].daemon, daemon) == 0) &&
		    (r = one(m, &cols[i], daemon, st)) != 0)
			return r;
	return 0;
}
