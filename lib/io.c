#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kz_io.h"
#include "banned.h"

int64_t
kz_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
		if (deadline_ms >= 0 &&
		    (r = wait_fd(fd, POLLIN, deadline_ms)) != 0)
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

		if (deadline_ms >= 0 &&
		    (r = wait_fd(fd, POLLOUT, deadline_ms)) != 0)
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

ssize_t
kz_read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	if (len < 2 || (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}
