/*
 * libFuzzer harness for kz-egress's HTTP/1.1 message heads (http.c): the
 * bytes a sandboxed client sends as a request head, or an origin sends as
 * a response head, then the body the chunked scanner reads.  The first
 * byte chooses request or response; the head is everything up to and
 * including the first blank line, the rest is fed to eg_chunk_feed in
 * pieces.  Beyond not crashing, a parsed head must point inside the
 * buffer, and the framing it reports must be unambiguous.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_span(const char *buf, size_t len, const char *p, size_t n)
{
	if (n > 0 && (p < buf || p + n > buf + len))
		abort();
}

static void
body(const char *p, size_t n, unsigned step)
{
	struct eg_chunk c;
	bool done;

	memset(&c, 0, sizeof(c));
	while (n > 0) {
		size_t k = step < n ? step : n;
		long r = eg_chunk_feed(&c, p, k, &done);

		if (r < 0)
			return;
		if ((size_t)r > k || (done && r == 0) ||
		    (!done && (size_t)r != k))
			abort();
		if (done)
			return;
		p += k;
		n -= k;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eg_head *hd;
	const char *end;
	char *buf, grant[EG_GRANT_MAX + 1];
	size_t hlen;
	bool is_req;

	if (size < 1 || size > EG_HDR_MAX_BYTES + 4096)
		return 0;
	is_req = (data[0] & 1) == 0;
	data++;
	size--;
	end = memmem(data, size, "\r\n\r\n", 4);
	hlen = end ? (size_t)(end - (const char *)data) + 4 : size;
	/* An exact-size copy: ASan sees any read past the head. */
	if ((buf = malloc(hlen ? hlen : 1)) == NULL ||
	    (hd = malloc(sizeof(*hd))) == NULL) {
		free(buf);
		return 0;
	}
	memcpy(buf, data, hlen);
	if (eg_http_parse(buf, hlen, is_req, hd) == EG_R_NONE) {
		if (hd->nh > EG_HDR_MAX_COUNT ||
		    (hd->chunked && hd->has_length))
			abort();
		check_span(buf, hlen, hd->method, hd->mlen);
		check_span(buf, hlen, hd->target, hd->tlen);
		for (size_t i = 0; i < hd->nh; i++) {
			check_span(buf, hlen, hd->h[i].name, hd->h[i].nlen);
			check_span(buf, hlen, hd->h[i].value, hd->h[i].vlen);
			(void)eg_hdr_hop(hd, &hd->h[i]);
		}
		if (hd->proxy_auth != NULL &&
		    eg_http_grant(hd->proxy_auth->value, hd->proxy_auth->vlen,
		        grant, sizeof(grant)) == 0 &&
		    strlen(grant) >= sizeof(grant))
			abort();
		if (hd->chunked)
			body((const char *)data + hlen, size - hlen,
			    1u + (data[0] >> 1));
	}
	free(hd);
	free(buf);
	return 0;
}
