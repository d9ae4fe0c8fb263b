/*
 * Differential harness: kz-egress's IP-literal parser (addr.c) against
 * glibc's inet_aton and inet_pton(AF_INET6) on the same bytes, so that
 * what kz-egress judges is the address a client's libc would have
 * connected to.  Any disagreement below is a crash.
 *
 * The input is a host as written in a request (no NUL, no whitespace:
 * inet_aton stops at the first space and ignores the rest, which
 * getaddrinfo's exact variant does not, and no kz-egress host holds one).
 * Let K be eg_addr_parse_literal's answer: an address, "name", or
 * "refused".  "Agree" means:
 *
 *  1. inet_aton accepts s as address X: K is the IPv4 address X, or
 *     refused.  K is never "name" when the name would be resolved
 *     (eg_name_normalize accepts it): that host would go to DNS while a
 *     client connects to X.
 *  2. K is an IPv4 address X: inet_aton accepts s, or s with its one
 *     trailing dot removed (the DNS root, which kz-egress folds the WHATWG
 *     way), and reads exactly X.  kz-egress never reads an IPv4 address
 *     that libc does not.
 *  3. inet_pton(AF_INET6) accepts s as X: K is the IPv6 address X, or
 *     refused.
 *  4. K is an IPv6 address X: s without its brackets and without its zone
 *     id ("%eth0", "%25eth0") is accepted by inet_pton(AF_INET6) as X.
 *  5. No string is IPv4 to one parser and IPv6 to the other.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
v6_core(const char *s, struct in6_addr *out)
{
	char buf[300];
	size_t n = strlen(s);
	const char *pct;

	if (n >= sizeof(buf))
		return false;
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		s++;
		n -= 2;
	}
	if ((pct = memchr(s, '%', n)) != NULL)
		n = (size_t)(pct - s);
	memcpy(buf, s, n);
	buf[n] = '\0';
	return inet_pton(AF_INET6, buf, out) == 1;
}

static void
check_v4(const char *s, int k, const struct eg_addr *a)
{
	struct in_addr in;
	char buf[300], norm[EG_HOST_MAX + 1];
	size_t n = strlen(s);

	if (inet_aton(s, &in) == 1) {
		if (k == 0 && eg_name_normalize(s, norm, sizeof(norm)) == 0)
			abort(); /* 1: an address sent to DNS */
		if (k == 1 && (a->fam != 4 || memcmp(a->b, &in, 4) != 0))
			abort(); /* 1, 5: another address */
	}
	if (k == 1 && a->fam == 4) {
		if (inet_aton(s, &in) != 1) {
			if (n == 0 || s[n - 1] != '.' || n >= sizeof(buf))
				abort(); /* 2: libc reads no address */
			memcpy(buf, s, n - 1);
			buf[n - 1] = '\0';
			if (inet_aton(buf, &in) != 1)
				abort(); /* 2: nor without the dot */
		}
		if (memcmp(a->b, &in, 4) != 0)
			abort(); /* 2: another address */
	}
}

static void
check_v6(const char *s, int k, const struct eg_addr *a)
{
	struct in6_addr in6;

	if (inet_pton(AF_INET6, s, &in6) == 1 && k >= 0 &&
	    (k != 1 || a->fam != 6 || memcmp(a->b, &in6, 16) != 0))
		abort(); /* 3, 5 */
	if (k == 1 && a->fam == 6 &&
	    (!v6_core(s, &in6) || memcmp(a->b, &in6, 16) != 0))
		abort(); /* 4 */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eg_addr a;
	char *s;
	int k;

	if (size > 280 || memchr(data, '\0', size) != NULL)
		return 0;
	for (size_t i = 0; i < size; i++)
		if (isspace(data[i]))
			return 0;
	if ((s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	memset(&a, 0, sizeof(a));
	k = eg_addr_parse_literal(s, &a);
	if (k != 0 && k != 1 && k != KZ_EINVAL)
		abort();
	check_v4(s, k, &a);
	check_v6(s, k, &a);
	free(s);
	return 0;
}
