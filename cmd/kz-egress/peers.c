/*
 * Who may connect, and the connections that have not yet shown a grant.
 *
 * The proxy's Unix sockets are the runs' path: a run's relay (kz-sandbox,
 * as root or the deployment's service user) connects there.  The file
 * mode is not the boundary: a peer is admitted only when its credentials
 * (SO_PEERCRED) are root's, the proxy's own, or in KZ_PEER_UIDS or
 * KZ_PEER_GIDS, checked before a byte is read.  Any other is closed
 * unanswered, counted as peer_refused and logged at most once in
 * EG_PEER_LOG_SECONDS.  TCP peers have no credentials: a TCP listener is
 * the operator's, reachable by whoever its address lets in.
 *
 * Every connection arrives without a grant; a run's relay sends its grant
 * with the first bytes, but a client that can reach the proxy directly can
 * open connection after connection and send half a head each time
 * (slowloris): within one header timeout it would hold
 * SANDBOX_EGRESS_MAX_CONNECTIONS and no run would get in.  So an
 * ungranted connection counts against its peer (a uid, a source address)
 * and against its pool, from accept until a grant admits a request on it:
 * one peer holds at most an eighth of the bound.  The Unix socket's
 * allowed peers and the TCP peers are two pools, so that no number of TCP
 * clients (a source address each, a /64 each) can keep the runs' relays
 * out: the Unix pool holds at most half of the bound, the TCP pool, whose
 * peers nobody vouched for, at most a quarter, and at least a quarter is
 * always there for connections a grant admitted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "kz_log.h"
#include "kz_sock.h"
#include "banned.h"

static const char RESP_503[] = "HTTP/1.1 503 Service Unavailable\r\n"
                               "Content-Type: text/plain\r\n"
                               "Content-Length: 37\r\n"
                               "Connection: close\r\n\r\n"
                               "too many connections without a grant\n";

static struct eg_tally unix_pool = {.mu = PTHREAD_MUTEX_INITIALIZER};
static struct eg_tally tcp_pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* One log line per window for refusals that come in floods. */
struct ratelog {
	atomic_llong at;
	atomic_ulong unlogged;
};

static struct ratelog ungranted_log, peer_log;

size_t
eg_ungranted_per_peer(size_t max_conns)
{
	size_t floor = max_conns < EG_UNGRANTED_PEER_MIN ?
	    max_conns :
	    EG_UNGRANTED_PEER_MIN;

	return max_conns / 8 > floor ? max_conns / 8 : floor;
}

size_t
eg_ungranted_pool(size_t max_conns, bool unix_peer)
{
	size_t peer = eg_ungranted_per_peer(max_conns);
	size_t pool = unix_peer ? max_conns / 2 : max_conns / 4;

	return pool > peer ? pool : peer;
}

/* A peer's pool, by its key: eg_peer_key makes every Unix peer's, and
 * only those, with "uid:". */
static bool
is_unix_key(const char *peer)
{
	return strncmp(peer, "uid:", 4) == 0;
}

static void
key_v4(const uint8_t b[4], char *out, size_t len)
{
	char a[INET_ADDRSTRLEN];

	/* Any local process can bind any address of 127.0.0.0/8. */
	if (b[0] == 127) {
		snprintf(out, len, "ip:127.0.0.0/8");
		return;
	}
	inet_ntop(AF_INET, b, a, sizeof(a));
	snprintf(out, len, "ip:%s", a);
}

static void
key_v6(const struct in6_addr *in, char *out, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	struct in6_addr m = *in;

	if (IN6_IS_ADDR_V4MAPPED(in)) {
		key_v4(&in->s6_addr[12], out, len);
		return;
	}
	if (IN6_IS_ADDR_LOOPBACK(in)) {
		snprintf(out, len, "ip6:::1");
		return;
	}
	/* A host is given a /64 and picks addresses in it at will. */
	memset(&m.s6_addr[8], 0, 8);
	inet_ntop(AF_INET6, &m, a, sizeof(a));
	snprintf(out, len, "ip6:%s/64", a);
}

void
eg_peer_key(int fd, const struct sockaddr *sa, char *out, size_t len)
{
	const struct sockaddr_in *v4 = (const void *)sa;
	const struct sockaddr_in6 *v6 = (const void *)sa;
	struct ucred uc;
	socklen_t ul = sizeof(uc);

	if (sa->sa_family == AF_INET) {
		key_v4((const uint8_t *)&v4->sin_addr, out, len);
	} else if (sa->sa_family == AF_INET6) {
		key_v6(&v6->sin6_addr, out, len);
	} else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0 &&
	    ul == sizeof(uc)) {
		snprintf(out, len, "uid:%u", (unsigned)uc.uid);
	} else {
		snprintf(out, len, "uid:unknown");
	}
}

enum eg_tally_res
eg_ungranted_hold(const char *peer, size_t max_conns)
{
	bool u = is_unix_key(peer);

	return eg_tally_hold(u ? &unix_pool : &tcp_pool, peer,
	    eg_ungranted_per_peer(max_conns), eg_ungranted_pool(max_conns, u));
}

void
eg_ungranted_release(const char *peer)
{
	eg_tally_release(is_unix_key(peer) ? &unix_pool : &tcp_pool, peer);
}

/*
 * A flood is refused thousands of times a second: one line per refusal
 * would be a flood of its own.  The first refusal in a window of secs is
 * logged (true, with the refusals not logged since the line before in n,
 * this one included); the others only counted (false).
 */
static bool
ratelog_due(struct ratelog *rl, long long secs, char *n, size_t nlen)
{
	long long now = (long long)time(NULL), last = atomic_load(&rl->at);

	atomic_fetch_add(&rl->unlogged, 1);
	if (last != 0 && now - last < secs)
		return false;
	if (!atomic_compare_exchange_strong(&rl->at, &last, now))
		return false;
	snprintf(n, nlen, "%lu", atomic_exchange(&rl->unlogged, 0));
	return true;
}

static void
log_refusal(const char *peer, enum eg_tally_res why)
{
	char n[24];

	if (!ratelog_due(&ungranted_log, EG_UNGRANTED_LOG_SECONDS, n,
	        sizeof(n)))
		return;
	kz_log(KZ_LOG_WARN, "egress.ungranted", 0,
	    "too many connections without a grant; refused", "bound",
	    why == EG_TALLY_KEY     ? "peer" :
	        why == EG_TALLY_ALL ? "all" :
	                              "memory",
	    "pool", is_unix_key(peer) ? "unix" : "tcp", "peer", peer, "refused",
	    n, NULL);
}

void
eg_ungranted_refuse(int fd, const char *peer, enum eg_tally_res why)
{
	ssize_t n;

	/* The socket is new and non-blocking: the answer fits its buffer,
	 * and a client that cannot take it is not waited for. */
	while ((n = write(fd, RESP_503, sizeof(RESP_503) - 1)) < 0 &&
	    errno == EINTR)
		;
	eg_count_refused(EG_R_UNGRANTED_CONNECTIONS);
	log_refusal(peer, why);
}

bool
eg_peer_admit(int fd, const struct sockaddr *sa,
    const struct kz_peer_policy *pol)
{
	struct kz_peer pr = {.uid = (uid_t)-1};
	char n[24], uid[16] = "unknown";

	if (sa->sa_family != AF_UNIX || kz_peer_check(fd, pol, &pr) == 0)
		return true;
	eg_count_refused(EG_R_PEER_REFUSED);
	if (!ratelog_due(&peer_log, EG_PEER_LOG_SECONDS, n, sizeof(n)))
		return false;
	if (pr.uid != (uid_t)-1)
		snprintf(uid, sizeof(uid), "%u", (unsigned)pr.uid);
	kz_log(KZ_LOG_WARN, "egress.peer_refused", KZ_EPEER,
	    "a peer that is not allowed connected to the proxy socket; closed",
	    "uid", uid, "refused", n, NULL);
	return false;
}
