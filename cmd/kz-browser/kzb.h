/*
 * kz-browser internals: conf (the keys), cdp (Chromium's protocol over a
 * worker's bridge), session (a lease, a grant, a bridge), async (each
 * session's thread), ops (the op table), serve (the loop, the audit, the
 * reaper), view (viewers' connections).  Functions return 0 or a negative
 * kz_err and fill (why, wlen) with the one line a member or the audit is
 * told.
 */
#ifndef KZB_H
#define KZB_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_sock.h"
#include "kz_srv.h"

#define KZB_ID_MAX 128 /* actor and conversation ids */
#define KZB_URL_MAX 2048
#define KZB_SID_HEX 32 /* a session id: 16 random bytes */
#define KZB_GRANT_MAX 4096
#define KZB_REPLY_MAX (64u << 20) /* a reply frame (a screenshot) */

struct kzb_conf {
	char run_dir[PATH_MAX];
	char sock[108];
	char view_sock[108]; /* the viewers': sock + ".view" */
	char lease_sock[108];
	char audit_sock[108]; /* "" with KZ_AUDIT = off */
	char key_file[PATH_MAX];
	char egress_bin[PATH_MAX];
	char egress_conf[PATH_MAX]; /* "" : kz-egress's own default */
	bool enabled; /* BROWSER_ENABLED */
	int64_t idle_s; /* BROWSER_IDLE */
	int64_t sessions_max, nav_timeout_ms, io_timeout_ms;
	int64_t op_timeout_ms; /* BROWSER_OP_TIMEOUT_MS: page calls */
	struct kz_peer_policy peers, operators;
	/* TURN for the sessions' WebRTC: SANDBOX_EGRESS_TURN (the host
	 * without brackets; "" : none) and BROWSER_TURN_SECRET_FILE. */
	char turn_host[256];
	int turn_port;
	char turn_secret[PATH_MAX];
	int64_t turn_ttl; /* BROWSER_TURN_TTL, seconds */
};

/* conf.c */
extern const char *const kzb_conf_keys[];
KZ_WUR int kzb_conf_load(struct kzb_conf *c, const char *path, const char *self,
    char *why, size_t wlen);

/* turn.c: the session's TURN server and credentials, and the script
 * that makes every RTCPeerConnection use only them. */
struct kz_conf;
struct kzb_out;
KZ_WUR int kzb_turn_conf(struct kzb_conf *c, const struct kz_conf *k, char *why,
    size_t wlen);
/* The page script for session sid (malloc'd, free with free()): mints
 * its credentials with "kz-egress turn-credential" for the session's
 * keyed hash.  NULL with TURN off is not an error (*out stays NULL). */
KZ_WUR int kzb_turn_script(const struct kzb_conf *c, const char *sid,
    char **out, struct kzb_out *o);
/* The egress tool with av; its first line of stdout in out (may be
 * NULL).  Returns its exit status, or -1. */
int kzb_egress_run(const char *const *av, char *out, size_t olen);

/* cdp.c: one CDP connection (the bridge's socket, one frame a message). */
#define KZB_EV_MAX 64
struct kzb_cdp {
	int fd;
	int stop_fd; /* readable once the session is being ended */
	int64_t next_id;
	char target_sid[128]; /* the page's flattened session */
	char target_id[128]; /* the page's target, to close it */
	/* The last page call that timed out: its answer may still come,
	 * and kzb_cdp_unstick keeps it. */
	int64_t late_id;
	bool dead; /* the bridge or Chromium is gone */
	bool crashed; /* the page's renderer went (Inspector.targetCrashed) */
	/* The page events seen since kzb_cdp_forget, by name. */
	char ev[KZB_EV_MAX][48];
	int nev;
	/* The TURN script every page and frame target gets before its
	 * first script runs (NULL: none, and no target is paused). */
	char *inject;
};
void kzb_cdp_forget(struct kzb_cdp *c);
/* Sends method (params consumed, may be NULL) to the page (page = true)
 * or the browser and waits until its answer: *result is malloc'd (NULL
 * on an error, whose message is in why).  KZ_EUNAVAIL when the browser is
 * gone, KZ_ETIMEDOUT, KZ_EDENIED for a CDP error. */
KZ_WUR int kzb_cdp_call(struct kzb_cdp *c, const char *method, cJSON *params,
    bool page, int64_t timeout_ms, cJSON **result, char *why, size_t wlen);
/* Waits for the page event method (events before it are dropped). */
KZ_WUR int kzb_cdp_wait(struct kzb_cdp *c, const char *method,
    int64_t timeout_ms, char *why, size_t wlen);
/* Reads whatever events are waiting, without blocking; KZ_EUNAVAIL once
 * the bridge has closed. */
KZ_WUR int kzb_cdp_drain(struct kzb_cdp *c);
/* A new page target, attached flat. */
KZ_WUR int kzb_cdp_page(struct kzb_cdp *c, int64_t timeout_ms, char *why,
    size_t wlen);
/*
 * After a page call timed out: whether the page's main thread answers
 * again, its scripts terminated (if may_stop) if it does not within
 * busy_ms.  0 when it answers (within busy_ms, or within wait_ms of the
 * termination: *stopped says which); KZ_ETIMEDOUT when it still does not.  The
 * timed-out call's answer, if it came meanwhile, is in *late (malloc'd, for
 * kzb_cdp_answer).
 */
KZ_WUR int kzb_cdp_unstick(struct kzb_cdp *c, int64_t busy_ms, int64_t wait_ms,
    bool may_stop, bool *stopped, cJSON **late, char *why, size_t wlen);
/* A call's answer m (consumed) as kzb_cdp_call gives it. */
KZ_WUR int kzb_cdp_answer(cJSON *m, cJSON **result, char *why, size_t wlen);
/* Closes the page target and attaches a new blank one in its place. */
KZ_WUR int kzb_cdp_repage(struct kzb_cdp *c, int64_t timeout_ms, char *why,
    size_t wlen);

/* agent.c: the agent's path: a confirmation is for one exact action. */
#define KZB_CONFIRM_MAX 8
#define KZB_ACTION_MAX 4096
struct kzb_confirm {
	char id[KZB_SID_HEX + 1];
	unsigned char digest[32]; /* of the action's canonical form */
	int64_t expires;
	bool confirmed;
};

#define KZB_VIEWERS_MAX 8

/* session.c; navigate, screenshot and input: session_page.c */
struct kzb_viewer;
struct kzb_thread;
/* OPENING: the lease is being taken; STARTING: the lease is held (the
 * loop renews it) and Chromium is starting; OPEN; CLOSING. */
enum kzb_state { KZB_OPENING, KZB_STARTING, KZB_OPEN, KZB_CLOSING };
struct kzb_session {
	char id[KZB_SID_HEX + 1];
	char actor[KZB_ID_MAX + 1], conv[KZB_ID_MAX + 1];
	char worker[64], lease_id[64], token[64], endpoint[108];
	char origin[KZB_URL_MAX]; /* scheme://host[:port] it was opened on */
	/* The lease: the thread's while opening and closing, the loop's
	 * (renewals) while starting and open. */
	int64_t ttl_ms, next_renew, valid_until, t0;
	bool leased;
	/* The thread's: the bridge and the agent's confirmations. */
	struct kzb_cdp cdp;
	struct kzb_confirm confirms[KZB_CONFIRM_MAX];
	bool page_stopped; /* its scripts were stopped since the navigation */
	/* The loop's. */
	enum kzb_state state;
	int64_t last_used;
	bool frame_pending; /* a viewers' frame is being taken */
	struct kzb_viewer *view[KZB_VIEWERS_MAX];
	int64_t view_seq;
	/* Both: set by the loop, read by the thread at any time. */
	atomic_bool private_text; /* the member is entering private text */
	atomic_bool stopping; /* the session is being ended */
	struct kzb_thread *th;
};
/* The outcome of an op, for the reply and the audit: a wire code (NULL:
 * ok) and its one-line reason. */
struct kzb_out {
	const char *code;
	char why[256];
};
/* The opening URL admitted, then the lease (from here the loop renews
 * it); then the grant, the worker's browser and a page. */
KZ_WUR int kzb_session_open(const struct kzb_conf *c, struct kzb_session *s,
    const char *url, struct kzb_out *o);
KZ_WUR int kzb_session_start(const struct kzb_conf *c, struct kzb_session *s,
    struct kzb_out *o);
/* Navigates, serialised: returns once the page (or its error page) has
 * stopped loading; the final URL and title in *page. */
KZ_WUR int kzb_session_navigate(const struct kzb_conf *c, struct kzb_session *s,
    const char *url, cJSON **page, struct kzb_out *o);
/* Whether the member's address may go to Chromium: 0, or the refusal
 * in o (javascript:, chrome: and about: but about:blank, a space or a
 * control character). */
KZ_WUR int kzb_nav_check(const char *url, struct kzb_out *o);
KZ_WUR int kzb_session_screenshot(const struct kzb_conf *c,
    struct kzb_session *s, char **png_b64, struct kzb_out *o);
/* The member's input, transit-only: events is [{type: text, text} |
 * {type: click, x, y}]; nothing of it is kept, logged or audited. */
KZ_WUR int kzb_session_input(const struct kzb_conf *c, struct kzb_session *s,
    const cJSON *events, struct kzb_out *o);
/* Renews the lease when due (now, with force); false once it is lost. */
bool kzb_session_keep(const struct kzb_conf *c, struct kzb_session *s,
    bool force);
/* Ends the browser (the bridge's connection) and releases the lease. */
void kzb_session_end(const struct kzb_conf *c, struct kzb_session *s);
/* The origin of an http(s) URL ("" and KZ_EINVAL otherwise), and its host
 * and port. */
KZ_WUR int kzb_url_origin(const char *url, char *origin, size_t olen,
    char *host, size_t hlen, int *port);

/* hung.c: every call on the session's page (the thread's).  A call that
 * does not answer within timeout_ms has the page's scripts stopped, and
 * still succeeds if the page answers then; a page that stays busy, or is
 * busy again before the next navigation, is closed and a blank page
 * takes its place.  KZ_ETIMEDOUT with the member's reason in why;
 * KZ_EUNAVAIL (the session is over) when no new page could be made. */
#define KZB_PAGE_STOPPED "the page kept its scripts busy; they were stopped"
#define KZB_PAGE_CLOSED                                                        \
	"the page kept its scripts busy and was closed; the session has a "    \
	"blank page"
KZ_WUR int kzb_page_call(const struct kzb_conf *c, struct kzb_session *s,
    const char *method, cJSON *params, int64_t timeout_ms, cJSON **result,
    char *why, size_t wlen);
/* The same for a wait for the page's event method. */
KZ_WUR int kzb_page_wait(const struct kzb_conf *c, struct kzb_session *s,
    const char *method, int64_t timeout_ms, char *why, size_t wlen);

/* agent.c */
/* The page as an accessibility tree (roles and names, never values),
 * wrapped as untrusted content. */
KZ_WUR int kzb_agent_read(const struct kzb_conf *c, struct kzb_session *s,
    cJSON **out, struct kzb_out *o);
/* A single-use confirmation id for exactly this action. */
KZ_WUR int kzb_agent_propose(struct kzb_session *s, const cJSON *action,
    char id[KZB_SID_HEX + 1], char *summary, size_t slen, struct kzb_out *o);
KZ_WUR int kzb_agent_confirm(struct kzb_session *s, const char *id,
    struct kzb_out *o);
/* Checks and consumes the confirmation, the origin and the password
 * field, then acts; *kind is the action's kind for the audit (set
 * before the effect, so the caller can refuse it unrecorded). */
typedef int (*kzb_audit_fn)(void *arg, const char *kind);
KZ_WUR int kzb_agent_act(const struct kzb_conf *c, struct kzb_session *s,
    const char *id, const cJSON *action, kzb_audit_fn audit, void *arg,
    struct kzb_out *o);

/* view.c: viewers' connections on the view socket: a viewer sends one
 * frame {session, role: member|viewer} and then receives the page as
 * PNG frames, never its HTML or script.  All on the loop. */
struct kzb_view;
struct event_base;
typedef struct kzb_session *(*kzb_find_fn)(void *arg, const char *id);
KZ_WUR int kzb_view_new(struct event_base *base, const struct kzb_conf *c,
    kzb_find_fn find, void *arg, struct kzb_view **out, char *why, size_t wlen);
void kzb_view_free(struct kzb_view *v);
bool kzb_view_any(const struct kzb_session *s);
/* Queues a picture for every viewer of s; a viewer that is still behind
 * by more than a few frames misses this one. */
void kzb_view_send(struct kzb_session *s, const char *png_b64);
/* Closes the viewers' connections: every one, or every one but the
 * member's (private text). */
void kzb_view_close(struct kzb_session *s, bool keep_member);

/* async.c: a job is one op of one session, run on the session's thread
 * and handed back to the loop. */
struct kzb_job;
typedef void (*kzb_job_fn)(void *ctx, struct kzb_job *j);
struct kzb_job {
	TAILQ_ENTRY(kzb_job) link;
	struct kzb_session *s;
	struct kz_req *req; /* NULL: the daemon's own job */
	kzb_job_fn run; /* on the session's thread */
	kzb_job_fn done; /* on the loop; frees the job */
	bool last; /* the end: the thread returns after it */
	/* The outcome, set on the thread. */
	int rc;
	struct kzb_out o;
	cJSON *reply; /* an ok reply's fields */
	char *png; /* a viewers' frame */
	bool dead; /* the browser is gone */
	/* The end's audit record. */
	const char *kind, *outcome;
	char reason[256];
};
struct kzb_async;
KZ_WUR int kzb_async_new(struct event_base *base, void *ctx, kzb_job_fn dead,
    struct kzb_async **out);
void kzb_async_free(struct kzb_async *a);
KZ_WUR int kzb_thread_start(struct kzb_async *a, struct kzb_session *s);
bool kzb_thread_running(const struct kzb_session *s);
void kzb_thread_push(struct kzb_session *s, struct kzb_job *j);
/* Tells the thread the session is being ended: the wait in flight
 * returns and queued jobs are not run. */
void kzb_thread_stop(struct kzb_session *s);
/* Joins the thread (after its last job) and frees what it held. */
void kzb_thread_free(struct kzb_session *s);

/* serve.c: the daemon, on the loop. */
struct kzb_daemon {
	struct kzb_conf *c;
	struct kzb_session **s; /* sessions_max slots */
	struct kzb_async *async;
	struct event_base *base;
	bool stopping;
	unsigned long opened, closed, reaped, failed;
};
/* An audit record of kind; 0 once it is durable (or audit is off).  Safe
 * on any thread. */
KZ_WUR int kzb_audit(const struct kzb_conf *c, const char *kind,
    const struct kzb_session *s, const char *outcome, const char *reason,
    const char *action);
/* Ends the session: viewers closed now, the rest on its thread (the
 * bridge, the lease, the audit record of kind). */
void kzb_finish(struct kzb_daemon *d, struct kzb_session *s, const char *kind,
    const char *outcome, const char *reason);
/* The same, answering req once all of it is done: ok, or (code not NULL)
 * that error with the reason. */
void kzb_finish_req(struct kzb_daemon *d, struct kzb_session *s,
    const char *kind, const char *outcome, const char *reason,
    struct kz_req *req, const char *code);
#define KZB_LEASE_ENDED "the session's lease ended"
struct kzb_session *kzb_find(struct kzb_daemon *d, const char *id);
/* A job for s, or NULL (out of memory). */
struct kzb_job *kzb_job_new(struct kz_req *req, kzb_job_fn run,
    kzb_job_fn done);
void kzb_job_free(struct kzb_job *j);

/* ops.c */
extern const struct kz_op kzb_ops[];
/* Ends a session whose browser went, for the reason it went: its lease
 * (KZB_LEASE_ENDED, browser_reaped) or the browser itself (why,
 * browser_failed).  Returns the reason used. */
const char *kzb_browser_gone(struct kzb_daemon *d, struct kzb_session *s,
    const char *why);

int kzb_serve(struct kzb_conf *c);

#endif
