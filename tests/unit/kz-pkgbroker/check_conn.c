/* The bindings of socket connections (conn.c), on a real evhttp server
 * over a real Unix socket: hundreds of connections, each bound to its own
 * run, each find their own run and only it; a connection not bound finds
 * none; a second bind is refused; when the clients close, every binding
 * goes with its connection (none is left behind), and the connections
 * accepted next, which reuse the freed ones' memory, start out unbound. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "serve.h"
#include "kz_check.h"
#include "banned.h"

#define NCONN 300

static struct pb_srv srv;
static char sock_path[108];

/* /bind/RUN binds the connection, /run names its run ("-" none),
 * /count the bindings held, /quit stops the loop. */
static void
on_req(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *ec = evhttp_request_get_connection(req);
	const char *uri = evhttp_request_get_uri(req), *run;
	struct evbuffer *b = evbuffer_new();
	int status = 200;

	if (strncmp(uri, "/bind/", 6) == 0) {
		if (pb_conn_bind(&srv, ec, uri + 6) != 0)
			status = 409;
	} else if (strcmp(uri, "/run") == 0) {
		run = pb_conn_run(&srv, ec);
		evbuffer_add_printf(b, "%s", run == NULL ? "-" : run);
	} else if (strcmp(uri, "/count") == 0) {
		evbuffer_add_printf(b, "%zu", pb_conn_count(&srv));
	} else {
		event_base_loopbreak(srv.base);
	}
	evhttp_send_reply(req, status, "x", b);
	evbuffer_free(b);
}

static void *
loop(void *arg)
{
	event_base_dispatch(srv.base);
	return NULL;
}

static int
dial(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* One request on fd; its status, and its body in body. */
static int
ask(int fd, const char *path, char *body, size_t len)
{
	char buf[1024], rq[256];
	size_t n = 0;
	int status = 0;
	char *end;

	snprintf(rq, sizeof(rq), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
	ck_assert_int_eq(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
		const char *cl;

		ck_assert_int_gt(r, 0);
		n += (size_t)r;
		buf[n] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) == NULL ||
		    (cl = strstr(buf, "Content-Length: ")) == NULL)
			continue;
		if (strlen(end + 4) >= strtoul(cl + 16, NULL, 10))
			break;
	}
	ck_assert_int_eq(sscanf(buf, "HTTP/1.1 %d", &status), 1);
	snprintf(body, len, "%s", end + 4);
	return status;
}

static size_t
count(void)
{
	char body[32];
	int fd = dial();

	ck_assert_int_eq(ask(fd, "/count", body, sizeof(body)), 200);
	close(fd);
	return strtoul(body, NULL, 10);
}

/* The bindings held, once the server has seen the clients close (which
 * it learns asynchronously). */
static size_t
settled_count(size_t want)
{
	size_t c = count();

	for (int i = 0; i < 500 && c != want; i++) {
		usleep(10000);
		c = count();
	}
	return c;
}

START_TEST(test_bindings)
{
	struct rlimit rl;
	pthread_t thr;
	int lfd, fd[NCONN];
	char body[128], path[64], want[32];
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char dir[] = "/tmp/check_conn.XXXXXX";

	/* Two descriptors a connection, the client's and the server's. */
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * NCONN + 64 && rl.rlim_max >= 2 * NCONN + 64) {
		rl.rlim_cur = 2 * NCONN + 64;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/s", dir);
	memset(&srv, 0, sizeof(srv));
	ck_assert_ptr_nonnull(srv.base = event_base_new());
	ck_assert_ptr_nonnull(srv.http = evhttp_new(srv.base));
	evhttp_set_gencb(srv.http, on_req, NULL);
	evhttp_set_bevcb(srv.http, pb_conn_bev, &srv);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 2 * NCONN), 0);
	ck_assert_ptr_nonnull(evhttp_accept_socket_with_handle(srv.http, lfd));
	ck_assert_int_eq(pthread_create(&thr, NULL, loop, NULL), 0);

	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < NCONN; i++) {
			fd[i] = dial();
			/* A new connection, at first or on the freed memory
			 * of the last round's, is bound to nothing. */
			ck_assert_int_eq(ask(fd[i], "/run", body, sizeof(body)),
			    200);
			ck_assert_str_eq(body, "-");
			snprintf(path, sizeof(path), "/bind/run-%d-%d", round,
			    i);
			ck_assert_int_eq(ask(fd[i], path, body, sizeof(body)),
			    200);
		}
		ck_assert_uint_eq(count(), NCONN);
		for (int i = NCONN - 1; i >= 0; i--) {
			snprintf(want, sizeof(want), "run-%d-%d", round, i);
			ck_assert_int_eq(ask(fd[i], "/run", body, sizeof(body)),
			    200);
			ck_assert_str_eq(body, want);
		}
		ck_assert_int_eq(ask(fd[7], "/bind/other", body, sizeof(body)),
		    409);
		ck_assert_int_eq(ask(fd[7], "/run", body, sizeof(body)), 200);
		snprintf(want, sizeof(want), "run-%d-7", round);
		ck_assert_str_eq(body, want);
		/* Half closed: their bindings go, the others' stay. */
		for (int i = 0; i < NCONN; i += 2)
			close(fd[i]);
		ck_assert_uint_eq(settled_count(NCONN / 2), NCONN / 2);
		for (int i = 1; i < NCONN; i += 2) {
			snprintf(want, sizeof(want), "run-%d-%d", round, i);
			ck_assert_int_eq(ask(fd[i], "/run", body, sizeof(body)),
			    200);
			ck_assert_str_eq(body, want);
			close(fd[i]);
		}
		ck_assert_uint_eq(settled_count(0), 0);
	}
	/* The loop stops before it answers: nothing is read back. */
	fd[0] = dial();
	snprintf(path, sizeof(path), "GET /quit HTTP/1.1\r\nHost: t\r\n\r\n");
	ck_assert_int_eq(write(fd[0], path, strlen(path)),
	    (ssize_t)strlen(path));
	pthread_join(thr, NULL);
	close(fd[0]);
	evhttp_free(srv.http);
	ck_assert_uint_eq(pb_conn_count(&srv), 0);
	pb_conn_release(&srv);
	ck_assert_ptr_null(srv.conns);
	event_base_free(srv.base);
	unlink(sock_path);
	rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pkgbroker_conn");
	TCase *tc = tcase_create("conn");

	/* Hundreds of connections on a loaded two-core host. */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_bindings);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
