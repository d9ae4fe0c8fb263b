#include <unistd.h>

#include "kz_call.h"
#include "kz_frame.h"
#include "kz_sock.h"
#include "banned.h"

int
kz_frame_send(const char *sockpath, const cJSON *req, int timeout_ms, int *fd,
    char *why, size_t wlen)
{
	int r;

	if ((r = kz_sock_connect(sockpath, timeout_ms, fd, why, wlen)) != 0)
		return r;
	/* A daemon that refuses the peer answers once and closes, perhaps
	 * before the request was written: its answer (unauthorized_peer)
	 * is still queued on the socket, for kz_frame_recv. */
	if ((r = kz_frame_write(*fd, req, KZ_FRAME_MAX_LIMIT, timeout_ms)) !=
	        0 &&
	    r != KZ_EEOF) {
		kz_why(why, wlen, "sending request: %s", kz_strerror(r));
		close(*fd);
		*fd = -1;
		return r;
	}
	return 0;
}

int
kz_frame_recv(int fd, int timeout_ms, cJSON **reply, char *why, size_t wlen)
{
	int r = kz_frame_read(fd, KZ_FRAME_MAX_LIMIT, timeout_ms, reply, why,
	    wlen);

	close(fd);
	return r;
}

int
kz_frame_call(const char *sockpath, const cJSON *req, int timeout_ms,
    cJSON **reply, char *why, size_t wlen)
{
	int fd, r;

	if ((r = kz_frame_send(sockpath, req, timeout_ms, &fd, why, wlen)) != 0)
		return r;
	return kz_frame_recv(fd, timeout_ms, reply, why, wlen);
}
