/* The judging of raw DNS answers: every address checked, the bound on
 * answers (64 pass, 65 refuse), a mixed answer refused whole with its
 * gravest reason, CNAME chains followed, and a table of hostile answers
 * (truncated, lying counts, oversized, foreign owners) that never pass;
 * the verdict delivered once, from the loop; and a lookup cancelled while
 * its answers are on their way never touches its policy again. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <event2/event.h>

#include "egress.h"
#include "kz_check.h"
#include "banned.h"

static char pkfile[64];
static struct eg_policy *pol;
static struct eg_dest dest;

/* A DNS answer being built: header, question, then records. */
struct pkt {
	unsigned char b[EG_DNS_ANSWER_MAX + 4096];
	size_t n;
	unsigned ancount;
};

static void
put(struct pkt *p, const void *v, size_t n)
{
	ck_assert_uint_le(p->n + n, sizeof(p->b));
	memcpy(p->b + p->n, v, n);
	p->n += n;
}

static void
put16(struct pkt *p, unsigned v)
{
	unsigned char b[2] = {(unsigned char)(v >> 8), (unsigned char)v};

	put(p, b, 2);
}

static void
put_name(struct pkt *p, const char *name)
{
	const char *s = name, *dot;

	while (*s != '\0') {
		unsigned char len;

		dot = strchr(s, '.');
		len = (unsigned char)(dot ? (size_t)(dot - s) : strlen(s));
		put(p, &len, 1);
		put(p, s, len);
		s += len + (dot ? 1 : 0);
	}
	put(p, "", 1);
}

static void
pkt_init(struct pkt *p, const char *qname, unsigned qtype)
{
	static const unsigned char hdr[12] = {0x12, 0x34, 0x84, 0x80, 0, 1};

	memset(p, 0, sizeof(*p));
	put(p, hdr, sizeof(hdr));
	put_name(p, qname);
	put16(p, qtype);
	put16(p, 1);
}

static void
pkt_rr(struct pkt *p, const char *owner, unsigned type, const void *rdata,
    size_t rlen)
{
	put_name(p, owner);
	put16(p, type);
	put16(p, 1);
	put16(p, 0);
	put16(p, 0);
	put16(p, (unsigned)rlen);
	put(p, rdata, rlen);
	p->ancount++;
	p->b[6] = (unsigned char)(p->ancount >> 8);
	p->b[7] = (unsigned char)p->ancount;
}

static void
pkt_addr(struct pkt *p, const char *owner, const char *addr)
{
	unsigned char b[16];
	int six = strchr(addr, ':') != NULL;

	ck_assert_int_eq(inet_pton(six ? AF_INET6 : AF_INET, addr, b), 1);
	pkt_rr(p, owner, six ? 28 : 1, b, six ? 16 : 4);
}

static void
pkt_cname(struct pkt *p, const char *owner, const char *target)
{
	struct pkt t;

	t.n = 0;
	put_name(&t, target);
	pkt_rr(p, owner, 5, t.b, t.n);
}

static void
setup(void)
{
	FILE *f;
	const char *r;

	snprintf(pkfile, sizeof(pkfile), "/tmp/kz-egress-dnspk.%d", getpid());
	f = fopen(pkfile, "w");
	ck_assert_ptr_nonnull(f);
	fputs("be6ba96ccd5e7d69d57f27b578f292d37e460d4402786403eea4ef1774b7695a"
	      "\n",
	    f);
	fclose(f);
	for (int i = 0; eg_conf_keys[i] != NULL; i++)
		unsetenv(eg_conf_keys[i]);
	setenv("SANDBOX_EGRESS_MODE", "public_internet", 1);
	setenv("SANDBOX_EGRESS_PUBLIC_KEY_FILE", pkfile, 1);
	setenv("SANDBOX_EGRESS_RESOLVER", "127.0.0.1:53", 1);
	setenv("SANDBOX_EGRESS_LISTEN", "127.0.0.1:3128", 1);
	ck_assert_int_eq(eg_policy_load(NULL, NULL, NULL, &pol), 0);
	r = eg_reason_str(eg_dest_init(&dest, "cdn.example", 443, true, 0));
	ck_assert_ptr_null(r);
}

static void
teardown(void)
{
	eg_policy_free(pol);
	unlink(pkfile);
}

/* Judges an A answer and an AAAA answer as one lookup would. */
static const char *
lookup(const struct pkt *a, const struct pkt *aaaa, struct eg_verdict *v)
{
	bool ok = true;

	memset(v, 0, sizeof(*v));
	if (a != NULL)
		ok = eg_dns_judge(v, pol, &dest, 4, a->b, a->n) && ok;
	if (aaaa != NULL)
		ok = eg_dns_judge(v, pol, &dest, 6, aaaa->b, aaaa->n) && ok;
	eg_dns_settle(v, !ok);
	return eg_reason_str(v->reason);
}

/* n4 public A and n6 public AAAA answers for cdn.example. */
static void
cdn(struct pkt *a, struct pkt *aaaa, int n4, int n6)
{
	char s[64];

	pkt_init(a, "cdn.example", 1);
	pkt_init(aaaa, "cdn.example", 28);
	for (int i = 0; i < n4; i++) {
		snprintf(s, sizeof(s), "93.184.%d.%d", i / 200, 1 + i % 200);
		pkt_addr(a, "cdn.example", s);
	}
	for (int i = 0; i < n6; i++) {
		snprintf(s, sizeof(s), "2606:2800:220:1::%x", i + 1);
		pkt_addr(aaaa, "cdn.example", s);
	}
}

START_TEST(test_bound)
{
	static const struct {
		int n4, n6;
		const char *want;
	} t[] = {
	    {1, 0, NULL},
	    {0, 1, NULL},
	    {12, 12, NULL},
	    {16, 16, NULL},
	    {17, 0, NULL},
	    {64, 0, NULL},
	    {0, 64, NULL},
	    {32, 32, NULL},
	    {33, 32, "too_many_answers"},
	    {65, 0, "too_many_answers"},
	    {0, 65, "too_many_answers"},
	    {200, 200, "too_many_answers"},
	    {0, 0, "unresolvable"},
	};
	static struct pkt a, aaaa;
	struct eg_verdict v;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const char *r;

		cdn(&a, &aaaa, t[i].n4, t[i].n6);
		r = lookup(&a, &aaaa, &v);
		ck_assert_msg((r == NULL && t[i].want == NULL) ||
		        (r != NULL && t[i].want != NULL &&
		            strcmp(r, t[i].want) == 0),
		    "%d A + %d AAAA: got %s", t[i].n4, t[i].n6,
		    r ? r : "allow");
		if (r == NULL) {
			ck_assert_uint_eq(v.nanswers,
			    (size_t)(t[i].n4 + t[i].n6));
			/* IPv4 pinned when there is one. */
			ck_assert_uint_eq(v.pinned.fam, t[i].n4 ? 4 : 6);
		}
	}
}
END_TEST

START_TEST(test_mixed)
{
	static const struct {
		const char *extra, *want;
		int at; /* where among 32 the bad one goes */
	} t[] = {
	    {"10.1.2.3", "private_use", 31},
	    {"10.1.2.3", "private_use", 0},
	    {"127.0.0.1", "loopback", 17},
	    {"::1", "loopback", 5},
	    {"169.254.169.254", "metadata", 30},
	    {"fd12::1", "unique_local", 9},
	};
	static struct pkt a, aaaa;
	struct eg_verdict v;
	char s[64];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		pkt_init(&a, "cdn.example", 1);
		pkt_init(&aaaa, "cdn.example", 28);
		for (int j = 0; j < 32; j++) {
			struct pkt *p;

			if (j == t[i].at) {
				p = strchr(t[i].extra, ':') ? &aaaa : &a;
				pkt_addr(p, "cdn.example", t[i].extra);
				continue;
			}
			p = j % 2 ? &aaaa : &a;
			if (j % 2)
				snprintf(s, sizeof(s), "2606:2800::%x", j);
			else
				snprintf(s, sizeof(s), "93.184.216.%d", j);
			pkt_addr(p, "cdn.example", s);
		}
		ck_assert_str_eq(lookup(&a, &aaaa, &v), t[i].want);
	}
	/* A merely private answer does not hide a graver one. */
	pkt_init(&a, "cdn.example", 1);
	pkt_addr(&a, "cdn.example", "10.1.2.3");
	pkt_addr(&a, "cdn.example", "169.254.169.254");
	pkt_addr(&a, "cdn.example", "100.64.0.1");
	ck_assert_str_eq(lookup(&a, NULL, &v), "metadata");
}
END_TEST

START_TEST(test_cname_chain)
{
	static struct pkt a;
	struct eg_verdict v;
	char prev[256], next[256];
	char s[64];

	/* Eight links of long names and twelve addresses: far over 512
	 * bytes, what a CDN answers, and it must resolve. */
	pkt_init(&a, "cdn.example", 1);
	snprintf(prev, sizeof(prev), "cdn.example");
	for (int i = 0; i < 8; i++) {
		snprintf(next, sizeof(next), "edge%d-%.50s.%.50s.example", i,
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
		pkt_cname(&a, prev, next);
		snprintf(prev, sizeof(prev), "%s", next);
	}
	for (int i = 0; i < 12; i++) {
		snprintf(s, sizeof(s), "93.184.216.%d", i + 1);
		pkt_addr(&a, prev, s);
	}
	ck_assert_uint_gt(a.n, 1500);
	ck_assert_ptr_null(lookup(&a, NULL, &v));
	ck_assert_uint_eq(v.nanswers, 12);
	/* Addresses owned by a name outside the chain are not answers. */
	pkt_init(&a, "cdn.example", 1);
	pkt_cname(&a, "cdn.example", "edge.example");
	pkt_addr(&a, "elsewhere.example", "93.184.216.1");
	ck_assert_str_eq(lookup(&a, NULL, &v), "unresolvable");
}
END_TEST

START_TEST(test_hostile)
{
	static struct pkt a, big;
	struct eg_verdict v;

	cdn(&a, &big, 4, 0);
	/* Cut anywhere inside the records: never judged as fewer answers. */
	for (size_t cut = 12; cut < a.n; cut++) {
		struct pkt c = a;

		c.n = cut;
		ck_assert_msg(lookup(&c, NULL, &v) != NULL,
		    "answer cut at %zu of %zu passed", cut, a.n);
	}
	/* A count that claims more records than are there. */
	a.b[7] = 9;
	ck_assert_str_eq(lookup(&a, NULL, &v), "resolve_failed");
	/* Over the size bound, however well-formed: refused unread. */
	pkt_init(&big, "cdn.example", 1);
	for (int i = 0; big.n <= EG_DNS_ANSWER_MAX; i++)
		pkt_cname(&big, i ? "x.example" : "cdn.example", "x.example");
	ck_assert_uint_gt(big.n, EG_DNS_ANSWER_MAX);
	ck_assert_str_eq(lookup(&big, NULL, &v), "resolve_failed");
	/* Garbage and nothing. */
	ck_assert(!eg_dns_judge(&v, pol, &dest, 4,
	    (const unsigned char *)"\xff\xff\xff", 3));
	ck_assert(!eg_dns_judge(&v, pol, &dest, 4, NULL, 0));
}
END_TEST

struct got {
	int calls;
	const char *reason;
};

static void
on_verdict(const struct eg_verdict *v, void *arg)
{
	struct got *g = arg;

	g->calls++;
	g->reason = eg_reason_str(v->reason);
}

/* The loop integration: the verdict comes once, from the loop, never
 * before eg_dns_check returns; a cancelled lookup never calls back. */
START_TEST(test_loop)
{
	struct event_base *base = event_base_new();
	struct eg_dns *dns = NULL;
	struct eg_lookup *l;
	struct got g = {0, NULL}, gc = {0, NULL};
	char why[160];

	ck_assert_ptr_nonnull(base);
	ck_assert_int_ne(eg_dns_new(base, "no resolver", &dns, why,
	                     sizeof(why)),
	    0);
	ck_assert_ptr_null(dns);
	/* Nothing listens on the discard port of loopback: refused fast. */
	ck_assert_int_eq(eg_dns_new(base, "127.0.0.1:9", &dns, why,
	                     sizeof(why)),
	    0);
	ck_assert_ptr_nonnull(eg_dns_check(dns, pol, &dest, on_verdict, &g));
	l = eg_dns_check(dns, pol, &dest, on_verdict, &gc);
	ck_assert_ptr_nonnull(l);
	eg_lookup_cancel(l);
	ck_assert_int_eq(g.calls, 0);
	while (g.calls == 0 && event_base_loop(base, EVLOOP_ONCE) == 0)
		;
	/* Let the cancelled one finish too: it must stay silent. */
	(void)event_base_dispatch(base);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_str_eq(g.reason, "resolve_failed");
	ck_assert_int_eq(gc.calls, 0);
	eg_dns_free(dns);
	event_base_free(base);
}
END_TEST

/* A resolver in the test: it holds the questions it is asked until the
 * test has it answer them. */
struct fake {
	int fd;
	int n;
	unsigned char q[2][512];
	size_t qlen[2];
	struct sockaddr_storage from[2];
	socklen_t fromlen[2];
};

static void
on_question(evutil_socket_t fd, short what, void *arg)
{
	struct fake *f = arg;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	unsigned char b[512];
	ssize_t n = recvfrom(fd, b, sizeof(b), 0, (struct sockaddr *)&ss, &sl);

	if (n <= 12 || f->n == 2)
		return;
	memcpy(f->q[f->n], b, (size_t)n);
	f->qlen[f->n] = (size_t)n;
	f->from[f->n] = ss;
	f->fromlen[f->n] = sl;
	f->n++;
}

/* Answers held question i with one public address of the type asked: data
 * for the policy to judge (the lookup only returns a verdict), never a
 * destination anything connects to. */
static void
fake_answer(struct fake *f, int i)
{
	static struct pkt p;
	const unsigned char *q = f->q[i];
	size_t at = 12;
	unsigned qtype;

	while (at < f->qlen[i] && q[at] != 0)
		at += 1 + q[at];
	ck_assert_uint_lt(at + 2, f->qlen[i]);
	qtype = (unsigned)q[at + 1] << 8 | q[at + 2];
	pkt_init(&p, "cdn.example", qtype);
	p.b[0] = q[0];
	p.b[1] = q[1];
	pkt_addr(&p, "cdn.example",
	    qtype == 1 ? "93.184.216.34" : "2606:2800:220:1::34");
	ck_assert_int_eq(sendto(f->fd, p.b, p.n, 0,
	                     (struct sockaddr *)&f->from[i], f->fromlen[i]),
	    (ssize_t)p.n);
}

/*
 * A lookup cancelled (its client gone) while its answers are on their way
 * must not judge them: the policy it was given may be freed by then (the
 * connection held the last reference to a policy a reload replaced).  The
 * policy lives in a page of its own, taken away at the cancel, so that a
 * touch is a fault in any build, not a quiet read of freed memory.
 */
START_TEST(test_cancel_policy_gone)
{
	struct event_base *base = event_base_new();
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct fake f = {.fd = -1};
	struct got g = {0, NULL}, gc = {0, NULL};
	struct timeval settle = {0, 300000};
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	struct eg_policy *pc;
	struct eg_dns *dns = NULL;
	struct event *ev;
	struct eg_lookup *l;
	char res[32], why[160];

	psz = (sizeof(*pol) + psz - 1) / psz * psz;
	pc = mmap(NULL, psz, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(pc, MAP_FAILED);
	memcpy(pc, pol, sizeof(*pol));
	f.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(f.fd, (struct sockaddr *)&sa, sl), 0);
	ck_assert_int_eq(getsockname(f.fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(res, sizeof(res), "127.0.0.1:%u", ntohs(sa.sin_port));
	ev = event_new(base, f.fd, EV_READ | EV_PERSIST, on_question, &f);
	ck_assert_int_eq(event_add(ev, NULL), 0);
	ck_assert_int_eq(eg_dns_new(base, res, &dns, why, sizeof(why)), 0);

	/* Not cancelled: the answers are judged (so the fake is heard). */
	ck_assert_ptr_nonnull(eg_dns_check(dns, pc, &dest, on_verdict, &g));
	while (f.n < 2 && event_base_loop(base, EVLOOP_ONCE) == 0)
		;
	fake_answer(&f, 0);
	fake_answer(&f, 1);
	while (g.calls == 0 && event_base_loop(base, EVLOOP_ONCE) == 0)
		;
	ck_assert_int_eq(g.calls, 1);
	ck_assert_ptr_null(g.reason);

	/* Cancelled with both questions out, then the policy taken away. */
	f.n = 0;
	l = eg_dns_check(dns, pc, &dest, on_verdict, &gc);
	ck_assert_ptr_nonnull(l);
	while (f.n < 2 && event_base_loop(base, EVLOOP_ONCE) == 0)
		;
	eg_lookup_cancel(l);
	ck_assert_int_eq(mprotect(pc, psz, PROT_NONE), 0);
	fake_answer(&f, 0);
	fake_answer(&f, 1);
	event_base_loopexit(base, &settle);
	(void)event_base_dispatch(base);
	ck_assert_int_eq(gc.calls, 0);

	eg_dns_free(dns);
	event_free(ev);
	close(f.fd);
	munmap(pc, psz);
	event_base_free(base);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("egress_dns");
	TCase *tc = tcase_create("dns");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_bound);
	tcase_add_test(tc, test_mixed);
	tcase_add_test(tc, test_cname_chain);
	tcase_add_test(tc, test_hostile);
	tcase_add_test(tc, test_loop);
	tcase_add_test(tc, test_cancel_policy_gone);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
