/*
 * Connections that have not yet shown a grant.  Every connection arrives
 * without one; a run's relay sends its grant with the first bytes, but a
 * client that can reach the proxy directly (kz-browser's, an operator's,
 * anything that can connect to the Unix socket or a TCP listener) can open
 * connection after connection and send half a head each time (slowloris):
 * within one header timeout it would hold SANDBOX_EGRESS_MAX_CONNECTIONS
 * and no run would get in.  So an ungranted connection counts against its
 * peer (a uid, a source address) and against all ungranted connections
 * together, from accept until a grant admits a request on it: one peer
 * holds at most an eighth of the bound, all of them at most half, and the
 * other half is always there for connections a grant admitted.
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
#include "banned.h"

static const char RESP_503[] = "HTTP/1.1 503 Service Unavailable\r\n"
                               "Content-Type: text/plain\r\n"
                               "Content-Length: 37\r\n"
                               "Connection: close\r\n\r\n"
                               "too many connections without a grant\n";

static struct eg_tally ungranted = {.mu = PTHREAD_MUTEX_INITIALIZER};
static atomic_llong logged_at;
static atomic_ulong unlogged;

size_t
eg_ungranted_per_peer(size_t max_conns)
{
	size_t floor = max_conns < EG_UNGRANTED_PEER_MIN ?
	    max_conns :
	    EG_UNGRANTED_PEER_MIN;

	return max_conns / 8 > floor ? max_conns / 8 : floor;
}

size_t
eg_ungranted_all(size_t max_conns)
{
	size_t peer = eg_ungranted_per_peer(max_conns);

	return max_conns / 2 > peer ? max_conns / 2 : peer;
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
	return eg_tally_hold(&ungranted, peer, eg_ungranted_per_peer(max_conns),
	    eg_ungranted_all(max_conns));
}

void
eg_ungranted_release(const char *peer)
{
	eg_tally_release(&ungranted, peer);
}

/*
 * A flood is refused thousands of times a second: one line per refusal
 * would be a flood of its own.  The first refusal in a window of
 * EG_UNGRANTED_LOG_SECONDS is logged, with the refusals not logged since
 * the line before.
 */
static void
log_refusal(const char *peer, enum eg_tally_res why)
{
	long long now = (long long)time(NULL), last = atomic_load(&logged_at);
	char n[24];

	atomic_fetch_add(&unlogged, 1);
	if (last != 0 && now - last < EG_UNGRANTED_LOG_SECONDS)
		return;
	if (!atomic_compare_exchange_strong(&logged_at, &last, now))
		return;
	snprintf(n, sizeof(n), "%lu", atomic_exchange(&unlogged, 0));
	kz_log(KZ_LOG_WARN, "egress.ungranted", 0,
	    "too many connections without a grant; refused", "bound",
	    why == EG_TALLY_KEY     ? "peer" :
	        why == EG_TALLY_ALL ? "all" :
	                              "memory",
	    "peer", peer, "refused", n, NULL);
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
