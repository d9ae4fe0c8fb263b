/*
 * The exchange, with a look at the first bytes of the reply before they
 * are taken as a frame header: a server of another protocol (a Redis
 * server's "-ERR ...", an HTTP proxy's "HTTP/1.1 400 ...") answers with
 * text whose "length" is absurd, and is told apart at once instead of
 * being waited for.  A peer that says nothing is bounded by first_ms.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_sock.h"
#include "msg.h"
#include "banned.h"

/* How much of a foreign reply is quoted. */
#define SHOW_MAX 24

static void
show(const unsigned char *b, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n && i < SHOW_MAX && o + 5 < cap; i++) {
		if (b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\'' && b[i] != '\\')
			out[o++] = (char)b[i];
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x",
			    b[i]);
	}
	out[o] = '\0';
}

int
msg_sniff(const unsigned char *b, size_t n, size_t max, int eof, char *why,
    size_t wlen)
{
	char got[SHOW_MAX * 4 + 1];
	uint32_t len;

	if (n >= KZ_FRAME_HDR) {
		len = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
		    (uint32_t)b[2] << 8 | b[3];
		if (len > 0 && len <= max)
			return 0;
	} else if (!eof || n == 0) {
		/* Not yet decidable; an empty close is the caller's. */
		return 0;
	}
	show(b, n, got, sizeof(got));
	kz_why(why, wlen, "does not speak kz frames (got '%s%s')", got,
	    n > SHOW_MAX ? "..." : "");
	return KZ_EPROTO;
}

/* Waits for the reply's first bytes and judges them without taking
 * them off the socket. */
static int
peek_head(int fd, size_t max, int first_ms, int64_t dl, char *why, size_t wlen)
{
	unsigned char b[SHOW_MAX + 1];
	int64_t first_dl = kz_now_ms() + first_ms, until;

	if (first_dl > dl)
		first_dl = dl;
	until = first_dl;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
		int64_t left = until - kz_now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			if (until == first_dl && first_dl < dl)
				kz_why(why, wlen,
				    "no reply within %lld ms: "
				    "it does not speak kz frames (a Redis "
				    "server is silent), or the daemon is "
				    "stalled (-t waits longer)",
				    (long long)first_ms);
			else
				kz_why(why, wlen, "no whole reply in time");
			return KZ_ETIMEDOUT;
		}
		if ((n = recv(fd, b, sizeof(b), MSG_PEEK)) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			kz_why(why, wlen, "reading reply: %s", strerror(errno));
			return KZ_ESYS;
		}
		if (n == 0) {
			kz_why(why, wlen,
			    "closed the connection without a reply");
			return KZ_EEOF;
		}
		if (n >= KZ_FRAME_HDR || (p.revents & (POLLRDHUP | POLLHUP)))
			return msg_sniff(b, (size_t)n, max, 1, why, wlen);
		/* Part of a header: the rest may follow. */
		until = dl;
		usleep(10000);
	}
}

int
msg_call(const char *path, const cJSON *req, size_t max, int timeout_ms,
    int first_ms, cJSON **reply, char *why, size_t wlen)
{
	int64_t dl = kz_now_ms() + timeout_ms;
	int fd, r;

	if ((r = kz_sock_connect(path, timeout_ms, &fd, why, wlen)) != 0)
		return r;
	r = kz_frame_write(fd, req, max, timeout_ms);
	if (r != 0 && r != KZ_EEOF) {
		kz_why(why, wlen, "sending request: %s", kz_strerror(r));
		goto out;
	}
	/* A daemon that refuses the peer answers once and closes, perhaps
	 * before the request was written: its answer is still queued. */
	if ((r = peek_head(fd, max, first_ms, dl, why, wlen)) != 0)
		goto out;
	/* At least a moment: a negative timeout would wait forever. */
	r = kz_frame_read(fd, max,
	    (int)(dl - kz_now_ms() > 1 ? dl - kz_now_ms() : 1), reply, why,
	    wlen);
out:
	close(fd);
	return r;
}
