/* sio.c: the socket layer of the plain-HTTP path. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "conn.h"
#include "kz_check.h"
#include "banned.h"

struct seen {
	int errors, drained;
};

static void
on_data(struct sio *s, void *arg)
{
	((struct seen *)arg)->drained++;
}

static void
on_event(struct sio *s, short what, void *arg)
{
	if (what & SIO_ERROR)
		((struct seen *)arg)->errors++;
}

/* Reads everything the peer has sent so far. */
static size_t
drain(int fd)
{
	char buf[65536];
	size_t got = 0;
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		got += (size_t)n;
	return got;
}

/*
 * A write event still armed after sio_flush wrote the rest is not an
 * error.  It was: evbuffer_write of the empty buffer returned -1 with a
 * stale errno, and the exchange answered 502 in the middle of a large
 * upload (seen under load in t2103).
 */
START_TEST(test_flushed_then_writable)
{
	struct event_base *base = event_base_new();
	struct seen seen = {0};
	static char chunk[256 * 1024];
	size_t sent = 0, got = 0;
	struct sio *s;
	int sv[2], small = 4096;

	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	                     sv),
	    0);
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	s = sio_new(base, sv[0], on_data, on_data, on_event, &seen);
	ck_assert_ptr_nonnull(s);
	memset(chunk, 'x', sizeof(chunk));
	ck_assert_int_eq(evbuffer_add(s->out, chunk, sizeof(chunk)), 0);
	sent = sizeof(chunk);
	sio_flush(s); /* the socket is full: wev armed */
	ck_assert_uint_gt(sio_pending(s), 0);
	while (sio_pending(s) > 0) { /* the rest goes from flush alone */
		got += drain(sv[1]);
		sio_flush(s);
	}
	got += drain(sv[1]);
	errno = EINPROGRESS; /* what a connect leaves behind */
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(seen.errors, 0);
	ck_assert_int_eq(seen.drained, 1); /* the event did fire */
	got += drain(sv[1]);
	ck_assert_uint_eq(got, sent);
	sio_free(s);
	close(sv[1]);
	event_base_free(base);
}
END_TEST

/* A peer that is gone is still an error. */
START_TEST(test_peer_gone)
{
	struct event_base *base = event_base_new();
	struct seen seen = {0};
	static char chunk[256 * 1024];
	struct sio *s;
	int sv[2], small = 4096;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	                     sv),
	    0);
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	s = sio_new(base, sv[0], on_data, on_data, on_event, &seen);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(evbuffer_add(s->out, chunk, sizeof(chunk)), 0);
	sio_flush(s);
	ck_assert_uint_gt(sio_pending(s), 0);
	close(sv[1]);
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(seen.errors, 1);
	sio_free(s);
	event_base_free(base);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("egress_sio");
	TCase *tc = tcase_create("sio");

	signal(SIGPIPE, SIG_IGN);
	tcase_add_test(tc, test_flushed_then_writable);
	tcase_add_test(tc, test_peer_gone);
	suite_add_tcase(su, tc);
	return kz_check_run(su);
}
