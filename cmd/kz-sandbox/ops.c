/*
 * The handlers of the worker's ops run, health, status and wipe; serve.c
 * checks each request against its op table before a handler runs.  run
 * parses the request into a run (run.c) and answers with its outcome;
 * health and status say what the worker is and has served; wipe is the
 * reset between tenants, answered with its evidence item by item
 * (kz-reset(8)).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "sbx.h"
#include "sbx_browser.h"
#include "banned.h"

static bool
cwd_ok(const char *s)
{
	const char *p = s;

	if (*s == '\0')
		return true;
	if (*s == '/' || strlen(s) > 1024)
		return false;
	for (const char *q = s; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			return false;
	while (*p != '\0') {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return true;
}

static int
parse_argv(const cJSON *a, struct sbx_req *rq, char *why, size_t wlen)
{
	size_t n = 0, bytes = 0;
	const cJSON *it;

	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 ||
	    cJSON_GetArraySize(a) > SBX_ARGV_MAX) {
		kz_why(why, wlen, "argv must be an array of 1 to %d strings",
		    SBX_ARGV_MAX);
		return KZ_EINVAL;
	}
	if ((rq->argv = calloc((size_t)cJSON_GetArraySize(a) + 1,
	         sizeof(char *))) == NULL)
		return KZ_ENOMEM;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsString(it) ||
		    (bytes += strlen(it->valuestring) + 1) > SBX_ARG_BYTES ||
		    (n == 0 && it->valuestring[0] == 0)) {
			kz_why(why, wlen,
			    "argv must hold non-empty strings within %d bytes",
			    SBX_ARG_BYTES);
			return KZ_EINVAL;
		}
		rq->argv[n++] = it->valuestring;
	}
	return 0;
}

static int
parse_run(struct sbx_worker *w, const cJSON *j, struct sbx_req *rq,
    unsigned char **stdin_buf, char *why, size_t wlen)
{
	const struct sbx_conf *c = w->c;
	const char *s, *grant, *tok, *cwd;
	const cJSON *env, *it;
	int64_t v;
	int r;

	if ((r = parse_argv(kz_json_get(j, "argv"), rq, why, wlen)) != 0)
		return r;
	if ((r = kz_json_str_opt(j, "cwd", 1024, "", &cwd, why, wlen)) != 0)
		return r;
	if (!cwd_ok(cwd)) {
		kz_why(why, wlen,
		    "cwd must be a relative path inside the workspace");
		return KZ_EINVAL;
	}
	rq->cwd = cwd;
	if ((r = kz_json_int_opt(j, "timeout_ms", 1, c->timeout_s * 1000,
	         c->timeout_s * 1000, &rq->timeout_ms, why, wlen)) != 0 ||
	    (r = kz_json_int_opt(j, "stdout_max", 0, (int64_t)c->stdout_max,
	         (int64_t)c->stdout_max, &v, why, wlen)) != 0)
		return r;
	rq->out_max[0] = (uint64_t)v;
	if ((r = kz_json_int_opt(j, "stderr_max", 0, (int64_t)c->stderr_max,
	         (int64_t)c->stderr_max, &v, why, wlen)) != 0)
		return r;
	rq->out_max[1] = (uint64_t)v;
	if ((r = kz_json_str_opt(j, "grant", KZ_JSON_STR_MAX, "", &grant, why,
	         wlen)) != 0)
		return r;
	rq->grant = (char *)grant;
	if (*grant != '\0' && w->c->egress_sock[0] == '\0') {
		/* Running it would be a run without the network it was
		 * granted: the caller records a grant that does nothing. */
		kz_why(why, wlen,
		    "an egress grant, but this worker has no egress socket");
		return KZ_EUNAVAIL;
	}
	if ((r = kz_json_str_opt(j, "broker_token", SBX_BROKER_TOKEN_MAX, "",
	         &tok, why, wlen)) != 0)
		return r;
	if (*tok != '\0' && c->broker_sock[0] == '\0') {
		/* As with a grant: the caller would record package installs
		 * for a run that has no broker. */
		kz_why(why, wlen,
		    "a broker token, but this worker has no package broker");
		return KZ_EUNAVAIL;
	}
	if ((r = kz_json_str_opt(j, "stdin_b64", c->frame_max, "", &s, why,
	         wlen)) != 0)
		return r;
	if (*s != '\0') {
		size_t cap = strlen(s) / 4 * 3 + 3, len = 0;

		if ((*stdin_buf = malloc(cap)) == NULL)
			return KZ_ENOMEM;
		if (sodium_base642bin(*stdin_buf, cap, s, strlen(s), NULL, &len,
		        NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
			kz_why(why, wlen, "stdin_b64 is not base64");
			return KZ_EINVAL;
		}
		rq->stdin_buf = *stdin_buf, rq->stdin_len = len;
	}
	if ((env = kz_json_get(j, "env")) != NULL) {
		if (!cJSON_IsObject(env)) {
			kz_why(why, wlen, "env must be an object of strings");
			return KZ_ETYPE;
		}
		cJSON_ArrayForEach(it, env)
		{
			if (!cJSON_IsString(it)) {
				kz_why(why, wlen, "env values must be strings");
				return KZ_ETYPE;
			}
			if ((r = sbx_env_add(&rq->env, it->string,
			         it->valuestring, why, wlen)) != 0)
				return r;
		}
	}
	if (*tok != '\0' &&
	    (r = sbx_env_broker(&rq->env, (int)c->broker_port, tok, rq->npmrc,
	         why, wlen)) != 0)
		return r;
	snprintf(rq->broker_token, sizeof(rq->broker_token), "%s", tok);
	return sbx_env_finish(&rq->env,
	    w->c->egress_sock[0] && *grant ? (int)c->relay_port : 0, why, wlen);
}

static int
add_b64(cJSON *o, const char *key, const unsigned char *b, size_t n)
{
	size_t cap = sodium_base64_ENCODED_LEN(n,
	    sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(cap);
	int r = 0;

	if (s == NULL)
		return KZ_ENOMEM;
	sodium_bin2base64(s, cap, b ? b : (const unsigned char *)"", n,
	    sodium_base64_VARIANT_ORIGINAL);
	if (cJSON_AddStringToObject(o, key, s) == NULL)
		r = KZ_ENOMEM;
	free(s);
	return r;
}

static cJSON *
run_reply(struct sbx_worker *w, const cJSON *req, struct sbx_res *rs)
{
	cJSON *o = kz_reply_ok(req);

	if (o == NULL)
		return NULL;
	if (rs->exited)
		cJSON_AddNumberToObject(o, "exit_code", rs->code);
	else
		cJSON_AddNullToObject(o, "exit_code");
	if (rs->sig)
		cJSON_AddNumberToObject(o, "signal", rs->sig);
	else
		cJSON_AddNullToObject(o, "signal");
	if (rs->limit)
		cJSON_AddStringToObject(o, "limit", rs->limit);
	else
		cJSON_AddNullToObject(o, "limit");
	if (add_b64(o, "stdout_b64", rs->buf[0], rs->len[0]) != 0 ||
	    add_b64(o, "stderr_b64", rs->buf[1], rs->len[1]) != 0) {
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_AddBoolToObject(o, "stdout_truncated", rs->trunc[0]);
	cJSON_AddBoolToObject(o, "stderr_truncated", rs->trunc[1]);
	cJSON_AddNumberToObject(o, "wall_ms", (double)rs->wall_ms);
	cJSON_AddNumberToObject(o, "cpu_ms", (double)rs->cpu_ms);
	cJSON_AddNumberToObject(o, "peak_memory_bytes", (double)rs->peak);
	cJSON_AddNumberToObject(o, "generation", (double)w->generation);
	return o;
}

cJSON *
sbx_op_run(struct sbx_worker *w, const cJSON *req)
{
	struct sbx_req rq;
	struct sbx_res rs;
	unsigned char *in = NULL;
	char why[256] = "";
	cJSON *reply = NULL;
	int r;

	sbx_stats.runs++;
	memset(&rq, 0, sizeof(rq));
	memset(&rs, 0, sizeof(rs));
	sbx_env_init(&rq.env);
	rq.stdin_fd = -1, rq.out_fd[0] = rq.out_fd[1] = -1;
	if ((r = parse_run(w, req, &rq, &in, why, sizeof(why))) != 0) {
		reply = kz_reply_err(req, kz_wire_code(r), why);
		goto out;
	}
	r = sbx_run(w, &rq, &rs);
	explicit_bzero(rq.npmrc, sizeof(rq.npmrc));
	if (r != 0) {
		reply = kz_reply_err(req, KZ_WE_INTERNAL, "run failed");
		goto out;
	}
	if (rs.setup_failed) {
		char reason[400];

		kz_log(KZ_LOG_ERROR, "sandbox.isolation", KZ_EDENIED, rs.why,
		    "step", rs.step, NULL);
		snprintf(reason, sizeof(reason),
		    "isolation setup failed at %s: %s", rs.step, rs.why);
		reply = kz_reply_err(req,
		    strcmp(rs.step, "cwd") == 0 ? KZ_WE_BAD_REQUEST :
		                                  KZ_WE_ISOLATION_DENIED,
		    reason);
		goto out;
	}
	kz_log(KZ_LOG_DEBUG, "sandbox.run", 0, "run finished", "limit",
	    rs.limit, NULL);
	reply = run_reply(w, req, &rs);
out:
	explicit_bzero(rq.broker_token, sizeof(rq.broker_token));
	if (rq.grant != NULL)
		explicit_bzero(rq.grant, strlen(rq.grant));
	free(rq.argv);
	free(in);
	sbx_env_release(&rq.env);
	sbx_res_release(&rs);
	return reply;
}

cJSON *
sbx_op_health(struct sbx_worker *w, const cJSON *req)
{
	cJSON *o = kz_reply_ok(req);
	char cg[256];

	if (o == NULL)
		return NULL;
	cJSON_AddStringToObject(o, "worker", w->c->id);
	cJSON_AddNumberToObject(o, "generation", (double)w->generation);
	cJSON_AddStringToObject(o, "state", w->broken ? "broken" : "ready");
	cJSON_AddNumberToObject(o, "pid", (double)getpid());
	cJSON_AddNumberToObject(o, "init_pid", (double)w->zpid);
	cJSON_AddStringToObject(o, "cgroup",
	    sbx_cg_relpath(w->c, cg, sizeof(cg)));
	cJSON_AddBoolToObject(o, "userns", w->c->userns != 0);
	/* The uid the broker forward presents: kz-run binds the run's
	 * package-broker token to it (forward.c). */
	if (w->c->broker_sock[0] != '\0')
		cJSON_AddNumberToObject(o, "broker_uid",
		    (double)sbx_host_uid(w->c));
	cJSON_AddStringToObject(o, "browser_prestart",
	    sbx_browser_prestart_state(w));
	/* A clean wipe's evidence is collected once this answer is out
	 * (kz-reset(8)): only then may the next lease's browser start. */
	if (w->prestart_armed) {
		w->prestart_armed = false;
		w->prestart_at = kz_now_ms();
	}
	return o;
}

/* status: health's fields and what this worker has served. */
cJSON *
sbx_op_status(struct sbx_worker *w, const cJSON *req)
{
	cJSON *o = sbx_op_health(w, req);

	if (o == NULL)
		return NULL;
	cJSON_AddNumberToObject(o, "leases", (double)w->leases);
	cJSON_AddNumberToObject(o, "conns", (double)sbx_stats.conns);
	cJSON_AddNumberToObject(o, "requests", (double)sbx_stats.requests);
	cJSON_AddNumberToObject(o, "runs", (double)sbx_stats.runs);
	cJSON_AddNumberToObject(o, "wipes", (double)sbx_stats.wipes);
	cJSON_AddNumberToObject(o, "wipes_unclean",
	    (double)sbx_stats.wipes_unclean);
	cJSON_AddNumberToObject(o, "bad_frames", (double)sbx_stats.bad_frames);
	cJSON_AddNumberToObject(o, "peer_refused",
	    (double)sbx_stats.peer_refused);
	return o;
}

/* The items of a reset's evidence, in the order kz-reset(8) lists them. */
enum {
	EV_KILLED,
	EV_GONE,
	EV_NS,
	EV_LIMIT,
	EV_WS,
	EV_TMP,
	EV_SHM,
	EV_MOUNTS,
	EV_IPC,
	EV_CGROUP,
	EV_MEMORY,
	EV_N
};
static const char *const ev_name[EV_N] = {"leftovers_killed", "previous_gone",
    "namespaces_new", "within_lease_limit", "workspace_empty", "tmp_empty",
    "shm_empty", "mounts_baseline", "ipc_empty", "cgroup_only_agent",
    "memory_clean"};

static cJSON *
wipe_reply(const struct sbx_worker *w, const cJSON *req, const bool ev[EV_N],
    uint64_t usage)
{
	bool clean = true;
	cJSON *o, *e;

	for (int i = 0; i < EV_N; i++)
		clean = clean && ev[i];
	sbx_stats.wipes++;
	sbx_stats.wipes_unclean += !clean;
	o = clean ? kz_reply_ok(req) :
	            kz_reply_err(req, KZ_WE_INTERNAL,
	                "the reset could not be proven clean");
	if (o == NULL || (e = cJSON_AddObjectToObject(o, "evidence")) == NULL)
		return o;
	for (int i = 0; i < EV_N; i++)
		cJSON_AddBoolToObject(e, ev_name[i], ev[i]);
	cJSON_AddNumberToObject(o, "memory_bytes",
	    usage == UINT64_MAX ? -1 : (double)usage);
	cJSON_AddNumberToObject(o, "generation", (double)w->generation);
	return o;
}

/*
 * The reset of a worker between tenants: kill what is left of the code,
 * give the next tenant a run namespace of its own (sbx_worker_refresh),
 * let the previous one's memory go, and answer with positive evidence of
 * each item (kz-reset(8)): ok only when every one holds.  A worker whose
 * reset could not even run is broken and stops after the answer.
 */
cJSON *
sbx_op_wipe(struct sbx_worker *w, const cJSON *req)
{
	bool ev[EV_N] = {false};
	char why[256] = "";
	uint64_t usage = UINT64_MAX;
	unsigned bits = 0;

	/* The lease's browser sessions and any pre-started bridge first:
	 * none of them may outlive the lease. */
	bool browsers = sbx_browser_wipe(w);

	w->prestart_armed = false;
	w->prestart_at = 0;
	ev[EV_KILLED] = sbx_cg_kill_run(&w->cg) == 0;
	if (sbx_worker_refresh(w, &ev[EV_GONE], &ev[EV_NS], why, sizeof(why)) !=
	    0) {
		kz_log(KZ_LOG_ERROR, "sandbox.reset", KZ_EUNAVAIL, why, NULL);
		return wipe_reply(w, req, ev, usage);
	}
	ev[EV_LIMIT] = w->leases <= w->c->leases_max;
	ev[EV_MEMORY] = sbx_cg_settle(&w->cg, w->c->clean_memory, 1000, &usage);
	if (sbx_check(w, &bits) == 0 && (bits & SBX_CHK_DONE)) {
		ev[EV_WS] = bits & SBX_CHK_WS;
		ev[EV_TMP] = bits & SBX_CHK_TMP;
		ev[EV_SHM] = bits & SBX_CHK_SHM;
		ev[EV_MOUNTS] = bits & SBX_CHK_MOUNTS;
		ev[EV_IPC] = (bits & SBX_CHK_SYSV) && (bits & SBX_CHK_MQUEUE);
	}
	ev[EV_CGROUP] = browsers && sbx_cg_only(&w->cg, getpid());
	w->prestart_armed = true;
	for (int i = 0; i < EV_N; i++)
		if (!ev[i]) {
			kz_log(KZ_LOG_ERROR, "sandbox.reset", KZ_ESTATE,
			    "reset not proven clean", "item", ev_name[i], NULL);
			w->prestart_armed = false;
		}
	return wipe_reply(w, req, ev, usage);
}
