/*
 * SIGHUP: the configuration is read again and becomes the policy for every
 * request admitted from then on.  A policy is immutable once loaded and
 * shared by reference count: each worker thread holds the one in force,
 * each connection the one its request was admitted under, so an exchange
 * or a tunnel already admitted keeps its verdict while the next request
 * head, on any connection, is judged under the new policy.
 *
 * The reload runs on the first worker's loop (where the signal and the
 * status socket are served).  It hands the new policy to every worker
 * through a one-slot mailbox and an event activated across threads; each
 * worker swaps its own pointer on its own thread, so the hot path takes
 * no lock.  A configuration that cannot be read or parsed loads as
 * isolated (eg_policy_load never fails open), never as the old policy or
 * the open default.  What the running process cannot change (listeners
 * and the peers they admit, threads, connection bound, resolver, status
 * socket, audit sink) is kept from the start and said in the log.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include <event2/event.h>

#include "egress.h"
#include "kz_log.h"
#include "conn.h"
#include "banned.h"

struct eg_reload {
	struct proxy *w;
	size_t n;
	struct eg_policy *cur; /* the latest policy (one reference) */
	eg_load_fn load;
	void *arg;
	struct event *sighup;
};

static void
on_mail(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	struct eg_policy *np, *old;

	pthread_mutex_lock(&px->mu);
	np = px->next;
	px->next = NULL;
	pthread_mutex_unlock(&px->mu);
	if (np == NULL)
		return;
	old = px->p;
	px->p = np;
	eg_policy_free(old);
}

int
eg_reload_worker_init(struct proxy *px)
{
	px->next = NULL;
	if ((px->reload_ev = event_new(px->base, -1, 0, on_mail, px)) == NULL)
		return KZ_ENOMEM;
	pthread_mutex_init(&px->mu, NULL);
	return 0;
}

void
eg_reload_worker_release(struct proxy *px)
{
	if (px->reload_ev != NULL) {
		event_free(px->reload_ev);
		px->reload_ev = NULL;
		pthread_mutex_destroy(&px->mu);
	}
	eg_policy_free(px->next);
	eg_policy_free(px->p);
	px->next = px->p = NULL;
}

static void
post(struct proxy *px, struct eg_policy *np)
{
	struct eg_policy *stale;

	pthread_mutex_lock(&px->mu);
	stale = px->next; /* a reload the worker has not taken yet */
	px->next = eg_policy_ref(np);
	pthread_mutex_unlock(&px->mu);
	eg_policy_free(stale);
	event_active(px->reload_ev, 0, 0);
}

/* Keeps what a running process cannot change; true when the new config
 * asked to change it. */
static bool
keep_fixed(struct eg_policy *np, const struct eg_policy *old)
{
	bool changed = np->nlisten != old->nlisten ||
	    memcmp(np->listen, old->listen, sizeof(np->listen)) != 0 ||
	    np->threads != old->threads || np->max_conns != old->max_conns ||
	    strcmp(np->resolver, old->resolver) != 0 ||
	    strcmp(np->status_sock, old->status_sock) != 0 ||
	    strcmp(np->audit_sock, old->audit_sock) != 0 ||
	    memcmp(&np->peers, &old->peers, sizeof(np->peers)) != 0 ||
	    np->peers_err != old->peers_err;

	memcpy(np->listen, old->listen, sizeof(np->listen));
	np->nlisten = old->nlisten;
	memcpy(np->own, old->own, sizeof(np->own));
	np->nown = old->nown;
	np->threads = old->threads;
	np->max_conns = old->max_conns;
	memcpy(np->resolver, old->resolver, sizeof(np->resolver));
	memcpy(np->status_sock, old->status_sock, sizeof(np->status_sock));
	memcpy(np->audit_sock, old->audit_sock, sizeof(np->audit_sock));
	/* The peers the sockets admit are the status socket's from the
	 * start, so the proxy's sockets keep them too: one list, and none
	 * that a reload could leave unparsed. */
	np->peers = old->peers;
	np->peers_err = old->peers_err;
	memcpy(np->peers_why, old->peers_why, sizeof(np->peers_why));
	return changed;
}

/* One log line and one audit event per reload. */
static void
record(const struct eg_policy *np, bool fixed)
{
	bool iso = np->mode == EG_MODE_ISOLATED;
	char gen[24];
	cJSON *ev;

	snprintf(gen, sizeof(gen), "%llu", (unsigned long long)np->gen);
	kz_log(iso || fixed ? KZ_LOG_WARN : KZ_LOG_INFO, "egress.reload", 0,
	    fixed ? "configuration reloaded; listeners, peers, threads, "
	            "connection bound, resolver, status socket and audit sink "
	            "change only at restart" :
	            "configuration reloaded",
	    "mode", eg_mode_name(np->mode), "generation", gen, "restart_needed",
	    fixed ? "yes" : "no", "isolated_because",
	    iso ? np->isolated_why : NULL, NULL);
	if ((ev = cJSON_CreateObject()) == NULL)
		return;
	cJSON_AddStringToObject(ev, "mode", eg_mode_name(np->mode));
	cJSON_AddBoolToObject(ev, "ok", !iso);
	cJSON_AddNumberToObject(ev, "generation", (double)np->gen);
	if (iso)
		cJSON_AddStringToObject(ev, "reason", np->isolated_why);
	eg_audit_event("egress_reload", ev);
}

static void
on_sighup(evutil_socket_t sig, short what, void *arg)
{
	struct eg_reload *rl = arg;
	struct eg_policy *np = NULL;
	bool fixed;

	/* Only memory can fail here; then the scope is isolation too. */
	if (rl->load(rl->arg, &np) != 0 &&
	    eg_policy_load(NULL, "the reload failed", NULL, &np) != 0) {
		kz_log(KZ_LOG_ERROR, "egress.reload", KZ_ENOMEM,
		    "reload failed: out of memory; the scope is unchanged",
		    NULL);
		return;
	}
	fixed = keep_fixed(np, rl->cur);
	np->gen = rl->cur->gen + 1;
	for (size_t i = 0; i < rl->n; i++)
		post(&rl->w[i], np);
	eg_status_set_policy(np);
	eg_policy_free(rl->cur);
	rl->cur = np;
	eg_count_reload();
	record(np, fixed);
}

int
eg_reload_new(struct proxy *w, size_t n, struct eg_policy *p, eg_load_fn load,
    void *arg, struct eg_reload **out)
{
	struct eg_reload *rl;

	*out = NULL;
	if (load == NULL)
		return 0;
	if ((rl = calloc(1, sizeof(*rl))) == NULL)
		return KZ_ENOMEM;
	rl->w = w;
	rl->n = n;
	rl->load = load;
	rl->arg = arg;
	rl->cur = eg_policy_ref(p);
	rl->sighup = evsignal_new(w[0].base, SIGHUP, on_sighup, rl);
	if (rl->sighup == NULL || evsignal_add(rl->sighup, NULL) != 0) {
		eg_reload_free(rl);
		return KZ_ESYS;
	}
	*out = rl;
	return 0;
}

void
eg_reload_free(struct eg_reload *rl)
{
	if (rl == NULL)
		return;
	if (rl->sighup != NULL)
		event_free(rl->sighup);
	eg_policy_free(rl->cur);
	free(rl);
}
