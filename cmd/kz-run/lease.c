/*
 * The lease and every call to the leased worker.  Workers do not check
 * the fencing token, so kz-run itself must never send anything to a
 * worker whose lease it no longer holds: kz-lease retires the worker of
 * an expired lease, but until it is deleted its endpoint still answers.
 *
 * The lease is known to hold until valid_until, a local monotonic time:
 * the moment the lease or renew request was sent plus the TTL granted,
 * which is never later than the expiry the store recorded (it started its
 * clock after we sent).  While a worker call is in flight the lease is
 * renewed every third of its TTL; a renewal refused (stale_token,
 * not_owner) or not confirmed before valid_until, less a margin, loses
 * the lease: the call is abandoned (its connection closed) and nothing
 * more goes to the worker.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_call.h"
#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_pool.h"
#include "kz_sock.h"
#include "run.h"
#include "banned.h"

/* Retry gap for a renewal that got no answer, at most. */
#define RETRY_MS 500

cJSON *
run_request(const char *op, const char *rid)
{
	cJSON *r = cJSON_CreateObject();

	if (r != NULL) {
		cJSON_AddNumberToObject(r, "v", 1);
		cJSON_AddStringToObject(r, "op", op);
		cJSON_AddStringToObject(r, "id", rid);
	}
	return r;
}

const char *
run_str(const cJSON *o, const char *k)
{
	const cJSON *v = kz_json_get(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Nothing is sent to the worker this close to valid_until. */
static int64_t
margin(const struct run_lease *l)
{
	return l->ttl_ms / 10 < 1000 ? l->ttl_ms / 10 : 1000;
}

static void
held(struct run_lease *l, int64_t sent, int64_t ttl)
{
	l->ttl_ms = ttl;
	l->valid_until = sent + ttl;
	l->next_renew = sent + ttl / 3;
}

static int
lose(struct run_lease *l, const char *why)
{
	l->lost = true;
	snprintf(l->lost_why, sizeof(l->lost_why), "%s", why);
	return KZ_ESTATE;
}

/* One lease call; a lost reply is retried once under the same op id, so
 * a lease granted meanwhile is answered, not granted twice. */
static int
lease_once(const struct run_ctx *x, const char *opid, cJSON **rep, char *why,
    size_t wlen)
{
	cJSON *req = run_request("lease", x->rid);
	int e, i;

	if (req == NULL)
		return KZ_ENOMEM;
	cJSON_AddStringToObject(req, "actor", x->o->actor);
	cJSON_AddStringToObject(req, "conversation", x->o->conv);
	cJSON_AddStringToObject(req, "capability", x->o->cap);
	cJSON_AddStringToObject(req, "op_id", opid);
	/* Kept with the lease: if it expires, its retire names this run. */
	cJSON_AddStringToObject(req, "run_id", x->rid);
	for (i = 0; i < 2; i++)
		if ((e = kz_frame_call(x->c->lease_sock, req,
		         (int)x->c->io_timeout_ms, rep, why, wlen)) !=
		        KZ_ETIMEDOUT &&
		    e != KZ_EEOF)
			break;
	cJSON_Delete(req);
	return e;
}

/* The snapshot comes with the bounds it is saved under, or not at all. */
static void
snap_bounds(struct run_lease *l)
{
	int64_t a, t, ttl;

	if (l->snap == NULL ||
	    kz_json_int(l->rep, "snapshot_actor_max", 1, INT64_MAX, &a, NULL,
	        0) != 0 ||
	    kz_json_int(l->rep, "snapshot_total_max", 1, INT64_MAX, &t, NULL,
	        0) != 0 ||
	    kz_json_int(l->rep, "snapshot_ttl_ms", 1, INT64_MAX, &ttl, NULL,
	        0) != 0) {
		l->snap = NULL;
		return;
	}
	l->snapb.actor_max = (uint64_t)a;
	l->snapb.total_max = (uint64_t)t;
	l->snapb.ttl_ms = ttl;
}

static int
lease_fields(struct run_lease *l, int64_t sent)
{
	int64_t ttl;

	l->worker = run_str(l->rep, "worker");
	l->lid = run_str(l->rep, "lease_id");
	l->token = run_str(l->rep, "token");
	l->endpoint = run_str(l->rep, "endpoint");
	l->proj = run_str(l->rep, "projection");
	l->snap = run_str(l->rep, "snapshot");
	/* Absent (an older kz-lease) is no egress path. */
	l->egress = cJSON_IsTrue(kz_json_get(l->rep, "egress"));
	l->broker = cJSON_IsTrue(kz_json_get(l->rep, "broker"));
	if (l->worker == NULL || l->lid == NULL || l->token == NULL ||
	    l->endpoint == NULL ||
	    kz_json_int(l->rep, "ttl_ms", 100, 86400000, &ttl, NULL, 0) != 0) {
		fprintf(stderr, "kz-run: lease: malformed reply\n");
		return KZ_EXIT_INTERNAL;
	}
	held(l, sent, ttl);
	snap_bounds(l);
	return 0;
}

int
run_lease_get(const struct run_ctx *x, struct run_lease *l)
{
	/* A reset takes a few milliseconds: ask again soon, then less and
	 * less often. */
	int64_t deadline = kz_now_ms() + x->c->lease_wait_ms, nap = 2000;
	int64_t sent;
	unsigned char b[16];
	char opid[33], why[160] = "";
	const char *code, *reason;
	int e;

	for (;;) {
		randombytes_buf(b, sizeof(b));
		kz_hex(b, sizeof(b), opid);
		sent = kz_now_ms();
		if ((e = lease_once(x, opid, &l->rep, why, sizeof(why))) != 0) {
			/* The reason tells a caller outside the deployment's
			 * group from a daemon that is down; the path, where
			 * it was looked for (kaizen.conf(5), DEFAULTS). */
			fprintf(stderr,
			    "kz-run: kz-lease unreachable at %s%s%s\n",
			    x->c->lease_sock, why[0] ? ": " : "", why);
			run_denied(x, "admission", "lease", KZ_WE_UNAVAILABLE,
			    "the lease service could not be reached");
			return KZ_EXIT_UNAVAIL;
		}
		if (cJSON_IsTrue(kz_json_get(l->rep, "ok")))
			break;
		code = run_str(l->rep, "error");
		reason = run_str(l->rep, "reason");
		/* No warm worker yet: released ones are being reset. */
		if (code != NULL && strcmp(code, KZ_WE_BUSY) == 0 &&
		    kz_now_ms() < deadline) {
			cJSON_Delete(l->rep);
			l->rep = NULL;
			usleep((useconds_t)nap);
			nap = nap < 200000 ? nap * 2 : nap;
			continue;
		}
		fprintf(stderr, "kz-run: lease: %s: %s\n",
		    code ? code : KZ_WE_INTERNAL, reason ? reason : "");
		run_denied(x, "admission", "lease",
		    code ? code : KZ_WE_INTERNAL,
		    reason ? reason : "lease refused");
		return kz_exit_for_wire(code);
	}
	return lease_fields(l, sent);
}

/* Whether a renewal refusal means the lease is gone (else kz-lease or
 * its store did not manage to answer, and a retry may). */
static bool
refusal_final(const char *code)
{
	return code == NULL || strcmp(code, KZ_WE_STALE_TOKEN) == 0 ||
	    strcmp(code, KZ_WE_NOT_OWNER) == 0 ||
	    strcmp(code, KZ_WE_BAD_REQUEST) == 0;
}

/* How long a renewal call may wait: until the lease would be lost, at
 * most the I/O timeout (1 ms once that is past: the reply decides). */
static int
renew_ms(const struct run_ctx *x, const struct run_lease *l)
{
	int64_t left = l->valid_until - margin(l) - kz_now_ms();

	return (int)(left <= 0             ? 1 :
	        left < x->c->io_timeout_ms ? left :
	                                     x->c->io_timeout_ms);
}

/* A renewal sent: *fd awaits its reply (renew_wait), or is -1 when none
 * could be sent (renew_wait then counts it unanswered). */
static int
renew_send(const struct run_ctx *x, struct run_lease *l, int *fd, int64_t *sent)
{
	cJSON *req = run_request("renew", x->rid);
	char why[160];
	int e;

	*fd = -1;
	*sent = kz_now_ms();
	if (l->valid_until - margin(l) <= *sent || req == NULL) {
		cJSON_Delete(req);
		return lose(l, "kz-lease did not confirm it in time");
	}
	cJSON_AddStringToObject(req, "lease_id", l->lid);
	cJSON_AddStringToObject(req, "token", l->token);
	cJSON_AddNumberToObject(req, "ttl_ms", (double)l->ttl_ms);
	e = kz_frame_send(x->c->lease_sock, req, renew_ms(x, l), fd, why,
	    sizeof(why));
	cJSON_Delete(req);
	return e == 0 ? 0 : KZ_EUNAVAIL;
}

/* The reply to renew_send's request (unanswered when fd is -1). */
static int
renew_wait(const struct run_ctx *x, struct run_lease *l, int fd, int64_t sent)
{
	cJSON *rep = NULL;
	char why[160] = "";
	const char *code = NULL;
	int64_t ttl, gap;
	int e = KZ_EUNAVAIL;

	if (fd >= 0)
		e = kz_frame_recv(fd, renew_ms(x, l), &rep, why, sizeof(why));
	if (e == 0 && cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		if (kz_json_int(rep, "ttl_ms", 100, 86400000, &ttl, NULL, 0) !=
		    0)
			ttl = l->ttl_ms;
		held(l, sent, ttl);
		cJSON_Delete(rep);
		return 0;
	}
	if (e == 0 && refusal_final(code = run_str(rep, "error"))) {
		snprintf(why, sizeof(why), "the renewal was refused: %s",
		    code ? code : KZ_WE_INTERNAL);
		cJSON_Delete(rep);
		return lose(l, why);
	}
	cJSON_Delete(rep);
	/* Not answered: try again soon, while the lease still holds. */
	gap = l->ttl_ms / 10 < RETRY_MS ? l->ttl_ms / 10 : RETRY_MS;
	l->next_renew = kz_now_ms() + gap;
	if (l->next_renew >= l->valid_until - margin(l))
		return lose(l, "kz-lease did not confirm it in time");
	return KZ_EUNAVAIL;
}

static int
renew(const struct run_ctx *x, struct run_lease *l)
{
	int64_t sent;
	int fd;

	if (renew_send(x, l, &fd, &sent) == KZ_ESTATE)
		return KZ_ESTATE;
	return renew_wait(x, l, fd, sent) == KZ_ESTATE ? KZ_ESTATE : 0;
}

int
run_lease_keep(const struct run_ctx *x, struct run_lease *l, bool now)
{
	if (l->lost)
		return KZ_ESTATE;
	if (kz_now_ms() >= l->valid_until - margin(l))
		return lose(l, "kz-lease did not confirm it in time");
	if (now || kz_now_ms() >= l->next_renew)
		return renew(x, l);
	return 0;
}

/* Waits for the reply on fd, renewing the lease meanwhile. */
static int
await(const struct run_ctx *x, struct run_lease *l, int fd, int64_t deadline,
    cJSON **rep, char *why, size_t wlen)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t now, until;
	int n;

	for (;;) {
		if ((now = kz_now_ms()) >= deadline)
			return KZ_ETIMEDOUT;
		until = deadline < l->next_renew ? deadline : l->next_renew;
		n = poll(&p, 1, until > now ? (int)(until - now) : 0);
		if (n < 0 && errno != EINTR)
			return KZ_ESYS;
		if (n > 0) {
			/* The frame is read within what the lease allows. */
			until = l->valid_until - margin(l);
			until = deadline < until ? deadline : until;
			now = kz_now_ms();
			return kz_frame_read(fd, KZ_FRAME_MAX_LIMIT,
			    until > now ? (int)(until - now) : 1, rep, why,
			    wlen);
		}
		if (kz_now_ms() >= l->next_renew &&
		    run_lease_keep(x, l, false) != 0)
			return KZ_ESTATE;
	}
}

int
run_worker_call(const struct run_ctx *x, struct run_lease *l, const cJSON *req,
    int64_t timeout_ms, bool *sent, cJSON **rep, char *why, size_t wlen)
{
	int io = (int)x->c->io_timeout_ms, fd = -1, e;

	*rep = NULL;
	if (sent != NULL)
		*sent = false;
	if (run_lease_keep(x, l, false) != 0)
		return KZ_ESTATE;
	if ((e = kz_sock_connect(l->endpoint, io, &fd, why, wlen)) != 0)
		return e;
	e = kz_frame_write(fd, req, KZ_FRAME_MAX_LIMIT, io);
	if (e == 0 && sent != NULL)
		*sent = true;
	if (e == 0)
		e = await(x, l, fd, kz_now_ms() + timeout_ms, rep, why, wlen);
	else if (e == KZ_EEOF &&
	    kz_frame_read(fd, KZ_FRAME_MAX_LIMIT, io, rep, NULL, 0) == 0)
		/* Refused peer: the worker answered before closing. */
		e = 0;
	close(fd);
	if (e != 0) {
		cJSON_Delete(*rep);
		*rep = NULL;
	}
	return e;
}

cJSON *
run_lease_ev(const struct run_lease *l)
{
	cJSON *ev = cJSON_CreateObject();

	if (ev != NULL) {
		cJSON_AddStringToObject(ev, "worker_id", l->worker);
		cJSON_AddStringToObject(ev, "lease_id", l->lid);
		cJSON_AddNumberToObject(ev, "token",
		    (double)kz_pool_token_n(l->token));
	}
	return ev;
}

/* The release request alone, no record (run.h). */
bool
run_lease_drop(const struct run_ctx *x, const struct run_lease *l)
{
	cJSON *req, *rep = NULL;
	char why[160] = "";
	bool ok;
	int e;

	if ((req = run_request("release", x->rid)) == NULL)
		return false;
	cJSON_AddStringToObject(req, "lease_id", l->lid);
	cJSON_AddStringToObject(req, "token", l->token);
	cJSON_AddStringToObject(req, "run_id", x->rid);
	e = kz_frame_call(x->c->lease_sock, req, (int)x->c->io_timeout_ms, &rep,
	    why, sizeof(why));
	ok = e == 0 && cJSON_IsTrue(kz_json_get(rep, "ok"));
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return ok;
}

/*
 * The closing dispatch record goes out here, after the release answered,
 * in one append with the release record: the two share one fsync in the sink
 * instead of two in a row (the release round trip is shorter than a sink
 * fsync).  A lease that was lost is not released (nothing that could
 * reset its worker is sent): its records say so instead.
 */
bool
run_lease_release(const struct run_ctx *x, struct run_lease *l)
{
	cJSON *ev;
	bool ok = false;

	if (!l->lost) {
		ok = run_lease_drop(x, l);
		if (!ok)
			fprintf(stderr,
			    "kz-run: kz-lease did not take the release; "
			    "the worker will be retired, not reset\n");
	}
	run_audit_hold(x);
	if (l->result != NULL)
		(void)run_audit(x, "dispatch", l->result);
	l->result = NULL;
	if ((ev = run_lease_ev(l)) != NULL) {
		cJSON_AddNumberToObject(ev, "duration_ms",
		    (double)(kz_now_ms() - l->t0));
		cJSON_AddStringToObject(ev, "outcome",
		    l->lost ? "lease_expired" :
		        ok  ? "released" :
		              "failed");
		if (l->lost)
			cJSON_AddStringToObject(ev, "reason", l->lost_why);
		(void)run_audit(x, "release", ev);
	}
	run_audit_flush(x);
	return ok;
}
