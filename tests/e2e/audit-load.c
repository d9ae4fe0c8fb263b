/*
 * Load client for kz-audit's tests and benchmark (built by the scripts with
 * cc; standalone on purpose).  CLIENTS connections each append events back
 * to back for SECONDS, one in flight per connection.  Every acknowledged append
 * is recorded as "RID SEQ" in ACKFILE the moment its reply arrives, so a test
 * that kills the daemon knows exactly what was acknowledged.  A thread
 * stops at its first error (the daemon went away).
 *
 *   audit-load SOCKET CLIENTS SECONDS ACKFILE
 * prints: acked N errors E seconds S rate R
 *
 *   audit-load raw FILE SECONDS
 * appends one 200-byte record and fdatasyncs it, in a loop, to FILE: the
 * disk's rate for one-by-one durability (the same syscalls kz-audit uses).
 * prints: raw N seconds S rate R
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *sock_path;
static double seconds;
static int ackfd;
static long total_acked, total_errors;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
full(int fd, void *buf, size_t len, int wr)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

struct conn {
	int fd;
	long id, i;
	size_t got;
	char rep[4096];
};

static int
send_next(struct conn *c)
{
	char req[1024];
	uint32_t be;
	int len = snprintf(req + 4, sizeof(req) - 4,
	    "{\"v\":1,\"op\":\"append\",\"id\":\"c%ld-%ld\","
	    "\"kind\":\"dispatch\",\"event\":{\"worker_id\":\"w%ld\","
	    "\"rid\":\"c%ld-%ld\",\"duration_ms\":%ld,"
	    "\"capability\":\"code.run\",\"egress\":\"none\"}}",
	    c->id, c->i, c->id, c->id, c->i, c->i);

	be = htonl((uint32_t)len);
	memcpy(req, &be, 4);
	/* A request this small fits an empty socket buffer whole. */
	return write(c->fd, req, (size_t)len + 4) == len + 4 ? 0 : -1;
}

/* 1 a whole acknowledged reply was consumed, 0 need more, -1 error. */
static int
take_reply(struct conn *c)
{
	char line[128], *s;
	uint32_t n, be;
	int len;

	if (c->got < 4)
		return 0;
	memcpy(&be, c->rep, 4);
	n = ntohl(be);
	if (n == 0 || n >= sizeof(c->rep) - 4)
		return -1;
	if (c->got < n + 4)
		return 0;
	if (c->got != n + 4)
		return -1; /* one request in flight: one reply */
	c->rep[n + 4] = '\0';
	if (strstr(c->rep + 4, "\"ok\":true") == NULL ||
	    (s = strstr(c->rep + 4, "\"seq\":")) == NULL)
		return -1;
	len = snprintf(line, sizeof(line), "c%ld-%ld %lld\n", c->id, c->i,
	    strtoll(s + 6, NULL, 10));
	if (ackfd >= 0 && write(ackfd, line, (size_t)len) != len)
		return -1;
	c->got = 0;
	c->i++;
	return 1;
}

static int
dial(struct conn *c, int ep)
{
	struct sockaddr_un sa;
	struct epoll_event ev;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	ev.events = EPOLLIN;
	ev.data.ptr = c;
	return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void
drop(struct conn *c, long *live)
{
	close(c->fd);
	c->fd = -1;
	total_errors++;
	(*live)--;
}

/*
 * CLIENTS connections driven by one epoll thread: each has one append in
 * flight and sends the next only after its acknowledgement, so the daemon
 * sees CLIENTS concurrent clients while the load generator itself costs
 * little CPU on a small machine.
 */
static int
run_clients(long n)
{
	struct epoll_event evs[256];
	struct conn *cs = calloc((size_t)n, sizeof(*cs));
	double end = now() + seconds;
	long live = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (cs == NULL || ep < 0)
		return 4;
	for (long i = 0; i < n; i++) {
		cs[i].id = i;
		if (dial(&cs[i], ep) < 0 || send_next(&cs[i]) < 0) {
			total_errors++;
			if (cs[i].fd >= 0)
				close(cs[i].fd);
			cs[i].fd = -1;
			continue;
		}
		live++;
	}
	while (live > 0 && now() < end) {
		int k = epoll_wait(ep, evs, 256, 100);

		for (int e = 0; e < k; e++) {
			struct conn *c = evs[e].data.ptr;
			ssize_t r;
			int t;

			if (c->fd < 0)
				continue;
			r = read(c->fd, c->rep + c->got,
			    sizeof(c->rep) - 1 - c->got);
			if (r <= 0) {
				drop(c, &live);
				continue;
			}
			c->got += (size_t)r;
			if ((t = take_reply(c)) < 0) {
				drop(c, &live);
				continue;
			}
			if (t == 1) {
				total_acked++;
				if (now() < end && send_next(c) < 0)
					drop(c, &live);
			}
		}
	}
	for (long i = 0; i < n; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	free(cs);
	close(ep);
	return 0;
}

static int
raw(const char *path, double secs)
{
	char rec[200];
	double t0 = now(), end = t0 + secs;
	long n = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0600);

	if (fd < 0)
		return 2;
	memset(rec, 'x', sizeof(rec));
	rec[sizeof(rec) - 1] = '\n';
	while (now() < end) {
		if (full(fd, rec, sizeof(rec), 1) < 0 || fdatasync(fd) < 0)
			return 4;
		n++;
	}
	t0 = now() - t0;
	close(fd);
	printf("raw %ld seconds %.2f rate %.0f\n", n, t0, n / t0);
	return 0;
}

int
main(int argc, char **argv)
{
	long n;
	double t0;

	/* A request written just as the daemon dies must count as an
	 * error, not end the load with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && strcmp(argv[1], "raw") == 0)
		return raw(argv[2], strtod(argv[3], NULL));
	if (argc != 5) {
		fprintf(stderr,
		    "usage: audit-load SOCKET CLIENTS SECONDS ACKFILE\n");
		return 2;
	}
	sock_path = argv[1];
	n = strtol(argv[2], NULL, 10);
	seconds = strtod(argv[3], NULL);
	if (n < 1 || n > 1024 || seconds <= 0)
		return 2;
	ackfd = strcmp(argv[4], "-") == 0 ?
	    -1 :
	    open(argv[4], O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	t0 = now();
	if (run_clients(n) != 0)
		return 4;
	t0 = now() - t0;
	printf("acked %ld errors %ld seconds %.2f rate %.0f\n", total_acked,
	    total_errors, t0, total_acked / t0);
	return 0;
}
