/*
 * libFuzzer harness for kz-egress's request-target parsers (http.c): the
 * CONNECT authority ("host:port", "[v6]:port") and the absolute URI
 * ("http://user@host:port/path").  The host they return goes on to the
 * host parser (addr.c) exactly as the proxy does.  The first byte chooses
 * the form.  Beyond not crashing: the host is NUL-terminated within its
 * buffer, the port is never 0, and the path lies inside the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char host[EG_HOST_MAX + 3], norm[EG_HOST_MAX + 1], *s;
	const char *path;
	size_t plen;
	uint16_t port = 0;
	struct eg_addr a;
	int r;

	if (size < 1 || size > 8192)
		return 0;
	if ((s = malloc(size - 1 ? size - 1 : 1)) == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	if (data[0] & 1) {
		r = eg_http_absolute(s, size - 1, host, sizeof(host), &port,
		    &path, &plen);
		if (r == 0 && (path < s || path + plen != s + size - 1))
			abort();
	} else {
		r = eg_http_authority(s, size - 1, 443, host, sizeof(host),
		    &port);
	}
	if (r == 0) {
		if (memchr(host, '\0', sizeof(host)) == NULL || port == 0)
			abort();
		if (eg_addr_parse_literal(host, &a) == 0)
			(void)eg_name_normalize(host, norm, sizeof(norm));
	}
	free(s);
	return 0;
}
