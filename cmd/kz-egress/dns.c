/*
 * Resolution for one connection: A and AAAA asked in parallel with c-ares
 * against the configured resolver only (no hosts file, no search list),
 * never cached, the event loop never blocked.  c-ares asks with EDNS0 and
 * asks again over TCP when the answer over UDP is truncated, which evdns in
 * libevent 2.1 (Debian 12) cannot: without it a long CNAME chain or a CDN's
 * dozens of addresses failed to resolve.  One channel per worker thread,
 * driven by that thread's loop: an event per socket c-ares opens, one timer
 * for its retries, and one deadline per lookup that bounds it whole.
 *
 * Every answer is judged; one refused answer refuses the destination (no
 * mixed answers), and the address handed back is the one that was checked:
 * the caller connects to it and never resolves the name again for that
 * connection.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <ares.h>
#include <event2/event.h>

#include "egress.h"
#include "kz_log.h"
#include "banned.h"

#define QCLASS_IN 1
#define QTYPE_A 1
#define QTYPE_AAAA 28

/* A socket c-ares opened, watched by the loop. */
struct dns_sock {
	struct dns_sock *next;
	struct eg_dns *dns;
	ares_socket_t fd;
	struct event *ev;
};

struct eg_dns {
	struct event_base *base;
	ares_channel ch;
	bool have_ch;
	struct event *timer;
	struct dns_sock *socks;
};

/*
 * A lookup lives until both of its questions are over (c-ares cannot
 * cancel one query); its verdict is delivered once, when both are in or
 * when the deadline passes, whichever is first.  p is borrowed: the
 * caller's connection holds the policy until the verdict or the cancel,
 * and a lookup cancelled (its connection gone, and with it maybe the last
 * reference to a policy a reload replaced) touches neither p nor arg.
 */
struct eg_lookup {
	struct eg_dns *dns;
	const struct eg_policy *p;
	struct eg_dest d;
	eg_verdict_fn fn;
	void *arg;
	struct event *deadline;
	int pending;
	bool failed, cancelled, delivered;
	struct eg_verdict v;
};

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_init_status = ARES_ENOTINITIALIZED;

static void
library_init(void)
{
	ares_init_status = ares_library_init(ARES_LIB_INIT_ALL);
}

static void
rearm(struct eg_dns *dns)
{
	struct timeval tv, *t;

	if ((t = ares_timeout(dns->ch, NULL, &tv)) == NULL)
		(void)evtimer_del(dns->timer);
	else
		(void)evtimer_add(dns->timer, t);
}

static void
on_sock(evutil_socket_t fd, short what, void *arg)
{
	/* The socket's record may be freed inside ares_process_fd. */
	struct eg_dns *dns = ((struct dns_sock *)arg)->dns;

	ares_process_fd(dns->ch, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
	    (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
	rearm(dns);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct eg_dns *dns = arg;

	ares_process_fd(dns->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	rearm(dns);
}

/*
 * c-ares says which of its sockets it wants to read or write; none of
 * either means the socket is about to be closed.  A socket that cannot be
 * watched leaves its queries to time out: slower, never open.
 */
static void
on_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct eg_dns *dns = data;
	struct dns_sock **pp, *s;
	short what = (short)((readable ? EV_READ : 0) |
	    (writable ? EV_WRITE : 0));

	for (pp = &dns->socks; (s = *pp) != NULL; pp = &s->next)
		if (s->fd == fd)
			break;
	if (s != NULL && s->ev != NULL) {
		event_free(s->ev);
		s->ev = NULL;
	}
	if (what == 0) {
		if (s != NULL) {
			*pp = s->next;
			free(s);
		}
		return;
	}
	if (s == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL)
			return;
		s->fd = fd;
		s->dns = dns;
		s->next = dns->socks;
		dns->socks = s;
	}
	s->ev = event_new(dns->base, fd, what | EV_PERSIST, on_sock, s);
	if (s->ev != NULL && event_add(s->ev, NULL) != 0) {
		event_free(s->ev);
		s->ev = NULL;
	}
}

static int
channel_init(struct eg_dns *d, const char *resolver)
{
	struct ares_options o;
	int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
	    ARES_OPT_DOMAINS | ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB |
	    ARES_OPT_EDNSPSZ;

	memset(&o, 0, sizeof(o));
	/* TCP on truncation is c-ares' default (no ARES_FLAG_IGNTC). */
	o.flags = ARES_FLAG_EDNS | ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
	o.timeout = EG_DNS_TRY_MS;
	o.tries = EG_DNS_TRIES;
	o.ndomains = 0;
	o.lookups = (char *)"b";
	o.sock_state_cb = on_sock_state;
	o.sock_state_cb_data = d;
	o.ednspsz = EG_DNS_EDNS_SIZE;
	if (ares_init_options(&d->ch, &o, mask) != ARES_SUCCESS)
		return -1;
	d->have_ch = true;
	/* The same "host:port" / "[v6]:port" the policy parsed. */
	if (ares_set_servers_ports_csv(d->ch, resolver) != ARES_SUCCESS)
		return -1;
	return 0;
}

int
eg_dns_new(struct event_base *base, const char *resolver, struct eg_dns **out,
    char *why, size_t wlen)
{
	struct eg_dns *d;

	if (pthread_once(&ares_once, library_init) != 0 ||
	    ares_init_status != ARES_SUCCESS) {
		kz_why(why, wlen, "resolver library cannot be initialized");
		return KZ_EUNAVAIL;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return KZ_ENOMEM;
	d->base = base;
	if ((d->timer = evtimer_new(base, on_timer, d)) == NULL) {
		free(d);
		return KZ_ENOMEM;
	}
	if (channel_init(d, resolver) != 0) {
		kz_why(why, wlen, "resolver cannot be used");
		eg_dns_free(d);
		return KZ_EUNAVAIL;
	}
	*out = d;
	return 0;
}

void
eg_dns_free(struct eg_dns *d)
{
	struct dns_sock *s;

	if (d == NULL)
		return;
	/* Outstanding questions are answered as failed, as before. */
	if (d->have_ch)
		ares_destroy(d->ch);
	while ((s = d->socks) != NULL) {
		d->socks = s->next;
		if (s->ev != NULL)
			event_free(s->ev);
		free(s);
	}
	if (d->timer != NULL)
		event_free(d->timer);
	free(d);
}

static bool
merely_private(enum eg_reason reason)
{
	return reason == EG_R_PRIVATE_USE || reason == EG_R_SHARED_ADDRESS ||
	    reason == EG_R_UNIQUE_LOCAL;
}

static void
add_answer(struct eg_verdict *v, const struct eg_policy *p,
    const struct eg_dest *d, const struct eg_addr *a)
{
	enum eg_reason r;

	if (v->nanswers == EG_ANS_MAX) {
		/* More answers than can be judged: refuse, never skip. */
		if (v->reason == EG_R_NONE)
			v->reason = EG_R_TOO_MANY_ANSWERS;
		return;
	}
	v->answers[v->nanswers++] = *a;
	r = eg_policy_check_addr(p, d, a);
	/* Any refused answer refuses the name; the record names the gravest
	 * one, a protected class before a merely unlisted private range. */
	if (r != EG_R_NONE &&
	    (v->reason == EG_R_NONE ||
	        (merely_private(v->reason) && !merely_private(r))))
		v->reason = r;
}

bool
eg_dns_judge(struct eg_verdict *v, const struct eg_policy *p,
    const struct eg_dest *d, int fam, const unsigned char *abuf, size_t alen)
{
	/* One more than the bound, so that an overflow is seen, not cut. */
	struct ares_addrttl a4[EG_ANS_MAX + 1];
	struct ares_addr6ttl a6[EG_ANS_MAX + 1];
	struct eg_addr a;
	int n = EG_ANS_MAX + 1, r;

	if (abuf == NULL || alen > EG_DNS_ANSWER_MAX)
		return false;
	if (fam == 4)
		r = ares_parse_a_reply(abuf, (int)alen, NULL, a4, &n);
	else
		r = ares_parse_aaaa_reply(abuf, (int)alen, NULL, a6, &n);
	if (r == ARES_ENODATA)
		return true;
	if (r != ARES_SUCCESS)
		return false;
	for (int i = 0; i < n; i++) {
		memset(&a, 0, sizeof(a));
		a.fam = (uint8_t)fam;
		if (fam == 4)
			memcpy(a.b, &a4[i].ipaddr, 4);
		else
			memcpy(a.b, &a6[i].ip6addr, 16);
		add_answer(v, p, d, &a);
	}
	return true;
}

void
eg_dns_settle(struct eg_verdict *v, bool failed)
{
	if (v->reason == EG_R_NONE && failed)
		v->reason = EG_R_RESOLVE_FAILED;
	else if (v->reason == EG_R_NONE && v->nanswers == 0)
		v->reason = EG_R_UNRESOLVABLE;
	if (v->reason != EG_R_NONE)
		return;
	/* IPv4 first: it is what most origins answer on. */
	v->pinned = v->answers[0];
	for (size_t i = 0; i < v->nanswers; i++)
		if (v->answers[i].fam == 4) {
			v->pinned = v->answers[i];
			break;
		}
}

static void
deliver(struct eg_lookup *l)
{
	if (l->delivered)
		return;
	l->delivered = true;
	eg_dns_settle(&l->v, l->failed);
	if (!l->cancelled)
		l->fn(&l->v, l->arg);
}

static void
lookup_free(struct eg_lookup *l)
{
	if (l->deadline != NULL)
		event_free(l->deadline);
	free(l);
}

static void
on_answer(void *arg, int status, int timeouts, unsigned char *abuf, int alen,
    int fam)
{
	struct eg_lookup *l = arg;

	if (l->delivered || l->cancelled) {
		/* Too late: the deadline has answered for it, or nobody
		 * waits for it and its policy may be gone. */
	} else if (status == ARES_SUCCESS) {
		if (!eg_dns_judge(&l->v, l->p, &l->d, fam, abuf,
		        alen < 0 ? 0 : (size_t)alen)) {
			kz_log(KZ_LOG_DEBUG, "egress.dns", 0,
			    "an answer was malformed or over the size bound",
			    NULL);
			l->failed = true;
		}
	} else if (status != ARES_ENODATA && status != ARES_ENOTFOUND) {
		/* A family we could not see might hold a refused answer. */
		l->failed = true;
	}
	if (--l->pending == 0) {
		deliver(l);
		lookup_free(l);
	}
}

static void
on_answer4(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	on_answer(arg, status, timeouts, abuf, alen, 4);
}

static void
on_answer6(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	on_answer(arg, status, timeouts, abuf, alen, 6);
}

/* The deadline, or a lookup over before eg_dns_check returned. */
static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct eg_lookup *l = arg;

	if (l->pending > 0)
		l->failed = true;
	deliver(l);
	if (l->pending == 0)
		lookup_free(l);
}

struct eg_lookup *
eg_dns_check(struct eg_dns *dns, const struct eg_policy *p,
    const struct eg_dest *d, eg_verdict_fn fn, void *arg)
{
	struct eg_lookup *l = calloc(1, sizeof(*l));
	struct timeval dl = {EG_DNS_DEADLINE_MS / 1000,
	    (EG_DNS_DEADLINE_MS % 1000) * 1000};

	if (l == NULL)
		return NULL;
	l->dns = dns;
	l->p = p;
	l->d = *d;
	l->fn = fn;
	l->arg = arg;
	l->deadline = evtimer_new(dns->base, on_deadline, l);
	if (l->deadline == NULL || evtimer_add(l->deadline, &dl) != 0) {
		lookup_free(l);
		return NULL;
	}
	/*
	 * One count for this call itself: c-ares may answer a question before
	 * ares_query returns (a bad name), and the verdict must still arrive
	 * from the loop, never re-entrantly.
	 */
	l->pending = 3;
	ares_query(dns->ch, d->host, QCLASS_IN, QTYPE_A, on_answer4, l);
	ares_query(dns->ch, d->host, QCLASS_IN, QTYPE_AAAA, on_answer6, l);
	if (--l->pending == 0)
		event_active(l->deadline, EV_TIMEOUT, 1);
	rearm(dns);
	return l;
}

void
eg_lookup_cancel(struct eg_lookup *l)
{
	/* The outstanding answers still arrive and free the lookup; from
	 * now on they are not judged, and what the caller lent is dropped. */
	if (l == NULL)
		return;
	l->cancelled = true;
	l->p = NULL;
	l->fn = NULL;
	l->arg = NULL;
}
