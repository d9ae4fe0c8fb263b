#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kz_frame.h"
#include "kz_json.h"
#include "kz_sock.h"
#include "banned.h"

int64_t
kz_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static int
wait_fd(int fd, short ev, int64_t deadline_ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r, t = -1;

	if (deadline_ms >= 0) {
		int64_t left = deadline_ms - kz_now_ms();

		if (left <= 0)
			return KZ_ETIMEDOUT;
		t = left > 1000000 ? 1000000 : (int)left;
	}
	do
		r = poll(&p, 1, t);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return KZ_ESYS;
	return r == 0 ? KZ_ETIMEDOUT : 0;
}

/* Returns bytes read before EOF in *got; KZ_EEOF only for EOF at 0. */
static int
read_some(int fd, void *buf, size_t len, int64_t deadline_ms, size_t *got)
{
	size_t off = 0;
	int r;

	while (off < len) {
		ssize_t n;

		/* Poll first: a blocking descriptor must not outlive the
		 * deadline inside read(). */
		if (deadline_ms >= 0 && (r = wait_fd(fd, POLLIN,
		    deadline_ms)) != 0)
			return r;
		n = read(fd, (char *)buf + off, len - off);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return KZ_ESYS;
		if (deadline_ms < 0 && (r = wait_fd(fd, POLLIN, -1)) != 0)
			return r;
	}
	*got = off;
	return off < len ? KZ_EEOF : 0;
}

int
kz_read_full(int fd, void *buf, size_t len, int64_t deadline_ms)
{
	size_t got = 0;
	int r = read_some(fd, buf, len, deadline_ms, &got);

	if (r == KZ_EEOF && got > 0)
		return KZ_EFRAME_TRUNC;
	return r;
}

int
kz_write_full(int fd, const void *buf, size_t len, int64_t deadline_ms)
{
	size_t off = 0;
	int r;

	while (off < len) {
		ssize_t n;

		if (deadline_ms >= 0 && (r = wait_fd(fd, POLLOUT,
		    deadline_ms)) != 0)
			return r;
		n = send(fd, (const char *)buf + off, len - off,
		    MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, (const char *)buf + off, len - off);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return errno == EPIPE ? KZ_EEOF : KZ_ESYS;
		if (deadline_ms < 0 && (r = wait_fd(fd, POLLOUT, -1)) != 0)
			return r;
	}
	return 0;
}

int
kz_frame_read(int fd, size_t max, int timeout_ms, cJSON **out, char *why,
    size_t wlen)
{
	int64_t deadline = timeout_ms < 0 ? -1 : kz_now_ms() + timeout_ms;
	unsigned char hdr[KZ_FRAME_HDR];
	size_t got = 0;
	uint32_t n;
	char *buf;
	int r;

	r = read_some(fd, hdr, sizeof(hdr), deadline, &got);
	if (r == KZ_EEOF && got > 0)
		r = KZ_EFRAME_TRUNC;
	if (r != 0) {
		kz_why(why, wlen, "reading frame header: %s", kz_strerror(r));
		return r;
	}
	if ((r = kz_frame_hdr(hdr, max, &n)) != 0) {
		kz_why(why, wlen, "%s", r == KZ_ETOOBIG ?
		    "frame longer than the limit" : "zero-length frame");
		return r;
	}
	if ((buf = malloc(n)) == NULL)
		return KZ_ENOMEM;
	r = read_some(fd, buf, n, deadline, &got);
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

int
kz_frame_call(const char *sockpath, const cJSON *req, int timeout_ms,
    cJSON **reply, char *why, size_t wlen)
{
	int fd, r;

	if ((r = kz_sock_connect(sockpath, timeout_ms, &fd, why, wlen)) != 0)
		return r;
	r = kz_frame_write(fd, req, KZ_FRAME_MAX_LIMIT, timeout_ms);
	if (r == 0)
		r = kz_frame_read(fd, KZ_FRAME_MAX_LIMIT, timeout_ms, reply, why,
		    wlen);
	else if (r == KZ_EEOF && kz_frame_read(fd, KZ_FRAME_MAX_LIMIT,
	    timeout_ms, reply, NULL, 0) == 0)
		/* A daemon that refuses the peer answers once and closes,
		 * perhaps before the request was written: its answer
		 * (unauthorized_peer) is still queued on the socket. */
		r = 0;
	else
		kz_why(why, wlen, "sending request: %s", kz_strerror(r));
	close(fd);
	return r;
}
