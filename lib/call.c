#include <unistd.h>

#include "kz_call.h"
#include "kz_frame.h"
#include "kz_sock.h"
#include "banned.h"

int
kz_frame_call(const char *sockpath, const cJSON *req, int timeout_ms,
    cJSON **reply, char *why, size_t wlen)
{
	int fd, r;

	if ((r = kz_sock_connect(sockpath, timeout_ms, &fd, why, wlen)) != 0)
		return r;
	r = kz_frame_write(fd, req, KZ_FRAME_MAX_LIMIT, timeout_ms);
	if (r == 0)
		r = kz_frame_read(fd, KZ_FRAME_MAX_LIMIT, timeout_ms, reply,
		    why, wlen);
	else if (r == KZ_EEOF &&
	    kz_frame_read(fd, KZ_FRAME_MAX_LIMIT, timeout_ms, reply, NULL, 0) ==
	        0)
		/* A daemon that refuses the peer answers once and closes,
		 * perhaps before the request was written: its answer
		 * (unauthorized_peer) is still queued on the socket. */
		r = 0;
	else
		kz_why(why, wlen, "sending request: %s", kz_strerror(r));
	close(fd);
	return r;
}
