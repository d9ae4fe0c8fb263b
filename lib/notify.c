/*
 * The notification protocol written out rather than linked from
 * libsystemd: it is one datagram on a Unix socket, specified as a stable
 * interface in sd_notify(3), whose standalone example this follows.
 * libsystemd would bring libgcrypt, liblzma, libzstd, liblz4 and libcap
 * into every daemon, kz-lease and the root workers included, for one
 * sendto(); liblzma reached sshd exactly that way (CVE-2024-3094).
 */
#include <errno.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kz_notify.h"
#include "banned.h"

static struct {
	bool read;
	socklen_t len; /* 0: no manager */
	struct sockaddr_un sa;
} N;

/* Reads NOTIFY_SOCKET once, then hides it from later children. */
static void
load(void)
{
	const char *v;
	size_t n;

	if (N.read)
		return;
	N.read = true;
	if ((v = getenv("NOTIFY_SOCKET")) == NULL)
		return;
	n = strlen(v);
	/* A path, or "@name" for the abstract namespace; anything else
	 * (vsock:, a relative path, one too long) is not ours to use. */
	if (n >= 2 && n < sizeof(N.sa.sun_path) &&
	    (v[0] == '/' || v[0] == '@')) {
		N.sa.sun_family = AF_UNIX;
		memcpy(N.sa.sun_path, v, n);
		if (v[0] == '@')
			N.sa.sun_path[0] = '\0';
		N.len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
		    (v[0] == '/'));
	}
	(void)unsetenv("NOTIFY_SOCKET");
}

static int
send_msg(const char *msg, size_t len)
{
	ssize_t w;
	int fd, e;

	load();
	if (N.len == 0)
		return 0;
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return KZ_ESYS;
	w = sendto(fd, msg, len, MSG_NOSIGNAL, (struct sockaddr *)&N.sa, N.len);
	e = errno;
	close(fd);
	errno = e;
	return w == (ssize_t)len ? 0 : KZ_ESYS;
}

/* prefix, then "STATUS=" and text on one line, cut to its maximum. */
static int
with_status(const char *prefix, const char *text)
{
	char msg[32 + KZ_NOTIFY_STATUS_MAX];
	size_t n = strlen(prefix), i;

	memcpy(msg, prefix, n);
	if (text != NULL) {
		memcpy(msg + n, "STATUS=", 7);
		n += 7;
		for (i = 0; text[i] != '\0' && i < KZ_NOTIFY_STATUS_MAX; i++)
			msg[n++] = text[i] == '\n' || text[i] == '\r' ? ' ' :
			                                                text[i];
		msg[n++] = '\n';
	}
	return send_msg(msg, n);
}

int
kz_notify_ready(const char *status)
{
	return with_status("READY=1\n", status);
}

int
kz_notify_status(const char *text)
{
	return with_status("", text != NULL ? text : "");
}

int
kz_notify_stopping(void)
{
	return send_msg("STOPPING=1\n", 11);
}

int
kz_notify_enabled(void)
{
	load();
	return N.len != 0;
}
