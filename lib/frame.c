#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "banned.h"

int
kz_frame_hdr(const unsigned char hdr[KZ_FRAME_HDR], size_t max, uint32_t *len)
{
	uint32_t n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
	    (uint32_t)hdr[2] << 8 | hdr[3];

	if (n == 0)
		return KZ_EFRAME_EMPTY;
	if (n > max)
		return KZ_ETOOBIG;
	*len = n;
	return 0;
}

int
kz_frame_decode(const char *payload, size_t len, cJSON **out, char *why,
    size_t wlen)
{
	return kz_json_parse_object(payload, len, out, why, wlen);
}

int
kz_frame_encode(const cJSON *obj, size_t max, char **out, size_t *outlen)
{
	char *s = kz_json_print(obj), *buf;
	size_t n;

	if (s == NULL)
		return KZ_ENOMEM;
	n = strlen(s);
	if (n == 0 || n > max || n > UINT32_MAX) {
		free(s);
		return KZ_ETOOBIG;
	}
	if ((buf = malloc(n + KZ_FRAME_HDR)) == NULL) {
		free(s);
		return KZ_ENOMEM;
	}
	buf[0] = (char)(n >> 24);
	buf[1] = (char)(n >> 16);
	buf[2] = (char)(n >> 8);
	buf[3] = (char)n;
	memcpy(buf + KZ_FRAME_HDR, s, n);
	free(s);
	*out = buf;
	*outlen = n + KZ_FRAME_HDR;
	return 0;
}

int
kz_frame_encode_to(const cJSON *obj, size_t max, char *buf, size_t cap,
    size_t *outlen)
{
	size_t n;

	/* cJSON asks for 5 bytes beyond what it prints. */
	if (cap < KZ_FRAME_HDR + 6 || cap - KZ_FRAME_HDR > INT_MAX ||
	    !cJSON_PrintPreallocated((cJSON *)obj, buf + KZ_FRAME_HDR,
	        (int)(cap - KZ_FRAME_HDR), 0))
		return KZ_ENOSPC;
	n = strlen(buf + KZ_FRAME_HDR);
	if (n + 5 > cap - KZ_FRAME_HDR)
		return KZ_ENOSPC;
	if (n == 0 || n > max || n > UINT32_MAX)
		return KZ_ETOOBIG;
	buf[0] = (char)(n >> 24);
	buf[1] = (char)(n >> 16);
	buf[2] = (char)(n >> 8);
	buf[3] = (char)n;
	*outlen = n + KZ_FRAME_HDR;
	return 0;
}

int
kz_frame_read(int fd, size_t max, int timeout_ms, cJSON **out, char *why,
    size_t wlen)
{
	int64_t deadline = timeout_ms < 0 ? -1 : kz_now_ms() + timeout_ms;
	unsigned char hdr[KZ_FRAME_HDR];
	uint32_t n;
	char *buf;
	int r;

	if ((r = kz_read_full(fd, hdr, sizeof(hdr), deadline)) != 0) {
		kz_why(why, wlen, "reading frame header: %s", kz_strerror(r));
		return r;
	}
	if ((r = kz_frame_hdr(hdr, max, &n)) != 0) {
		kz_why(why, wlen, "%s",
		    r == KZ_ETOOBIG ? "frame longer than the limit" :
		                      "zero-length frame");
		return r;
	}
	if ((buf = malloc(n)) == NULL)
		return KZ_ENOMEM;
	r = kz_read_full(fd, buf, n, deadline);
	if (r == KZ_EEOF)
		r = KZ_EFRAME_TRUNC;
	if (r != 0)
		kz_why(why, wlen, "reading frame body: %s", kz_strerror(r));
	else
		r = kz_frame_decode(buf, n, out, why, wlen);
	free(buf);
	return r;
}

int
kz_frame_write(int fd, const cJSON *obj, size_t max, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? -1 : kz_now_ms() + timeout_ms;
	char *buf;
	size_t len;
	int r;

	if ((r = kz_frame_encode(obj, max, &buf, &len)) != 0)
		return r;
	r = kz_write_full(fd, buf, len, deadline);
	free(buf);
	return r;
}
