/*
 * Resolution for one connection: A and AAAA asked in parallel with evdns
 * against the configured resolver only (no hosts file, no search list),
 * never cached, the event loop never blocked.  Every answer is judged; one
 * refused answer refuses the destination (no mixed answers), and the
 * address handed back is the one that was checked: the caller connects to
 * it and never resolves the name again for that connection.
 */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "egress.h"
#include "kz_log.h"
#include "banned.h"

struct eg_dns {
	struct event_base *base;
	struct evdns_base *eb;
};

struct eg_lookup {
	struct eg_dns *dns;
	const struct eg_policy *p;
	struct eg_dest d;
	eg_verdict_fn fn;
	void *arg;
	int pending;
	bool failed, cancelled;
	struct eg_verdict v;
};

/* evdns talks on stderr by default; its messages become debug lines. */
static void
dns_log(int severity, const char *msg)
{
	kz_log(KZ_LOG_DEBUG, "egress.dns", 0, msg, NULL);
}

int
eg_dns_new(struct event_base *base, const char *resolver, struct eg_dns **out,
    char *why, size_t wlen)
{
	struct eg_dns *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return KZ_ENOMEM;
	d->base = base;
	evdns_set_log_fn(dns_log);
	d->eb = evdns_base_new(base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (d->eb == NULL ||
	    evdns_base_nameserver_ip_add(d->eb, resolver) != 0) {
		kz_why(why, wlen, "resolver cannot be used");
		eg_dns_free(d);
		return KZ_EUNAVAIL;
	}
	(void)evdns_base_set_option(d->eb, "timeout:", "2");
	(void)evdns_base_set_option(d->eb, "attempts:", "2");
	(void)evdns_base_set_option(d->eb, "max-inflight:", "4096");
	*out = d;
	return 0;
}

void
eg_dns_free(struct eg_dns *d)
{
	if (d == NULL)
		return;
	if (d->eb != NULL)
		evdns_base_free(d->eb, 1);
	free(d);
}

static bool
merely_private(const char *reason)
{
	return strcmp(reason, "private_use") == 0 ||
	    strcmp(reason, "shared_address") == 0 ||
	    strcmp(reason, "unique_local") == 0;
}

static void
add_answer(struct eg_lookup *l, const struct eg_addr *a)
{
	const char *r;

	if (l->v.nanswers == EG_ANS_MAX) {
		/* More answers than can be judged: refuse, never skip. */
		l->v.reason = l->v.reason ? l->v.reason : "too_many_answers";
		return;
	}
	l->v.answers[l->v.nanswers++] = *a;
	r = eg_policy_check_addr(l->p, &l->d, a);
	/* Any refused answer refuses the name; the record names the gravest
	 * one, a protected class before a merely unlisted private range. */
	if (r != NULL && (l->v.reason == NULL ||
	    (merely_private(l->v.reason) && !merely_private(r))))
		l->v.reason = r;
}

static void
finish(struct eg_lookup *l)
{
	if (!l->cancelled) {
		if (l->v.reason == NULL && l->failed)
			l->v.reason = "resolve_failed";
		else if (l->v.reason == NULL && l->v.nanswers == 0)
			l->v.reason = "unresolvable";
		if (l->v.reason == NULL) {
			/* IPv4 first: it is what most origins answer on. */
			l->v.pinned = l->v.answers[0];
			for (size_t i = 0; i < l->v.nanswers; i++)
				if (l->v.answers[i].fam == 4) {
					l->v.pinned = l->v.answers[i];
					break;
				}
		}
		l->fn(&l->v, l->arg);
	}
	free(l);
}

static void
on_answer(int result, char type, int count, int ttl, void *addrs, void *arg)
{
	struct eg_lookup *l = arg;
	struct eg_addr a;

	if (result == DNS_ERR_NONE && type == DNS_IPv4_A) {
		for (int i = 0; i < count; i++) {
			memset(&a, 0, sizeof(a));
			a.fam = 4;
			memcpy(a.b, (char *)addrs + 4 * i, 4);
			add_answer(l, &a);
		}
	} else if (result == DNS_ERR_NONE && type == DNS_IPv6_AAAA) {
		for (int i = 0; i < count; i++) {
			memset(&a, 0, sizeof(a));
			a.fam = 6;
			memcpy(a.b, (char *)addrs + 16 * i, 16);
			add_answer(l, &a);
		}
	} else if (result != DNS_ERR_NONE && result != DNS_ERR_NOTEXIST &&
	    result != DNS_ERR_NODATA) {
		/* A family we could not see might hold a refused answer. */
		l->failed = true;
	}
	if (--l->pending == 0)
		finish(l);
}

static void
deliver_later(evutil_socket_t fd, short what, void *arg)
{
	finish(arg);
}

struct eg_lookup *
eg_dns_check(struct eg_dns *dns, const struct eg_policy *p,
    const struct eg_dest *d, eg_verdict_fn fn, void *arg)
{
	struct eg_lookup *l = calloc(1, sizeof(*l));
	struct timeval now = {0, 0};

	if (l == NULL)
		return NULL;
	l->dns = dns;
	l->p = p;
	l->d = *d;
	l->fn = fn;
	l->arg = arg;
	l->pending = 2;
	if (evdns_base_resolve_ipv4(dns->eb, d->host, DNS_QUERY_NO_SEARCH,
	    on_answer, l) == NULL) {
		l->failed = true;
		l->pending--;
	}
	if (evdns_base_resolve_ipv6(dns->eb, d->host, DNS_QUERY_NO_SEARCH,
	    on_answer, l) == NULL) {
		l->failed = true;
		l->pending--;
	}
	/* The verdict always arrives from the loop, never re-entrantly. */
	if (l->pending == 0 &&
	    event_base_once(dns->base, -1, EV_TIMEOUT, deliver_later, l,
	    &now) != 0) {
		free(l);
		return NULL;
	}
	return l;
}

void
eg_lookup_cancel(struct eg_lookup *l)
{
	/* The outstanding answers still arrive and free the lookup. */
	if (l != NULL)
		l->cancelled = true;
}
