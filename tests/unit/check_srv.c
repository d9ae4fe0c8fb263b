/* The framed server: envelope checks, bad frames, deferred replies, slow
 * peers, pipelining and peer credentials, over real Unix sockets. */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_sock.h"
#include "kz_srv.h"
#include "kz_check.h"
#include "banned.h"

static char path[108];
static struct event_base *base;
static struct kz_srv *srv;
static pthread_t loop_thr;

static void
op_echo(struct kz_req *req, void *arg)
{
	cJSON *f = cJSON_CreateObject();
	const cJSON *m = kz_json_get(kz_req_json(req), "msg");

	cJSON_AddItemToObject(f, "msg", cJSON_Duplicate(m, 1));
	kz_req_ok(req, f);
}

static void
later(evutil_socket_t fd, short ev, void *arg)
{
	kz_req_ok(arg, NULL);
}

static void
op_defer(struct kz_req *req, void *arg)
{
	struct timeval tv = {0, 50000};

	event_base_once(base, -1, EV_TIMEOUT, later, req, &tv);
}

static void
op_hold(struct kz_req *req, void *arg)
{
	struct timeval tv = {1, 0};

	event_base_once(base, -1, EV_TIMEOUT, later, req, &tv);
}

static const char *const echo_fields[] = {"msg", NULL};
static const struct kz_op ops[] = {
    {"echo", op_echo, echo_fields, 0},
    {"defer", op_defer, NULL, 0},
    {"hold", op_hold, NULL, 0},
    {"gated", op_echo, echo_fields, KZ_OP_ADMIT},
    {"drain", op_echo, echo_fields, KZ_OP_OPERATOR},
    {"both", op_echo, echo_fields, KZ_OP_ADMIT | KZ_OP_OPERATOR},
    {NULL, NULL, NULL, 0},
};

/* The admission the hook reports; the loop thread reads it. */
static volatile bool admission_open = true;

static bool
admit(void *arg, char *why, size_t wlen)
{
	if (!admission_open)
		snprintf(why, wlen, "draining for the test");
	return admission_open;
}

static sem_t loop_running;

static void
running(evutil_socket_t fd, short ev, void *arg)
{
	sem_post(&loop_running);
}

static void *
loop(void *arg)
{
	event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

static void
setup(void)
{
	struct kz_srv_conf c = {0};
	char why[128];

	evthread_use_pthreads();
	snprintf(path, sizeof(path), "/tmp/kzsrv.%d.sock", (int)getpid());
	base = event_base_new();
	c.sock_path = path;
	c.frame_max = 4096;
	c.io_timeout_ms = 300;
	c.idle_timeout_ms = 2000;
	c.max_conns = 16;
	/* One more uid than root: the share test's other peer. */
	c.peers.uids[0] = 65533;
	c.peers.nuids = 1;
	c.ops = ops;
	c.admit = admit;
	admission_open = true;
	ck_assert_int_eq(kz_srv_new(base, &c, &srv, why, sizeof(why)), 0);
	/* event_base_loop() clears a break requested before it started:
	 * wait until the loop runs so that teardown's break is seen. */
	sem_init(&loop_running, 0, 0);
	event_base_once(base, -1, EV_TIMEOUT, running, NULL, NULL);
	pthread_create(&loop_thr, NULL, loop, NULL);
	sem_wait(&loop_running);
}

static void
teardown(void)
{
	event_base_loopbreak(base);
	pthread_join(loop_thr, NULL);
	kz_srv_free(srv);
	event_base_free(base);
}

static int
dial(void)
{
	int fd;

	ck_assert_int_eq(kz_sock_connect(path, 1000, &fd, NULL, 0), 0);
	return fd;
}

static cJSON *
call_raw(int fd, const void *bytes, size_t len)
{
	cJSON *r = NULL;
	char why[128];

	if (len > 0)
		ck_assert_int_eq(kz_write_full(fd, bytes, len, -1), 0);
	if (kz_frame_read(fd, 1 << 20, 2000, &r, why, sizeof(why)) != 0)
		return NULL;
	return r;
}

static cJSON *
call(int fd, const char *json)
{
	char hdr[4];
	size_t n = strlen(json);

	hdr[0] = 0;
	hdr[1] = 0;
	hdr[2] = (char)(n >> 8);
	hdr[3] = (char)n;
	ck_assert_int_eq(kz_write_full(fd, hdr, 4, -1), 0);
	return call_raw(fd, json, n);
}

static const char *
err_of(const cJSON *r)
{
	const cJSON *e = kz_json_get(r, "error");

	return cJSON_IsString(e) ? e->valuestring : "";
}

static bool
closed(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	/* The descriptor is non-blocking: wait for the close, bounded. */
	return poll(&p, 1, 2000) == 1 && read(fd, &c, 1) == 0;
}

/* Appends json as one frame (under 256 bytes) at buf + *n. */
static void
frame_add(char *buf, size_t *n, const char *json)
{
	size_t l = strlen(json);

	ck_assert_uint_lt(l, 256);
	buf[(*n)++] = 0;
	buf[(*n)++] = 0;
	buf[(*n)++] = 0;
	buf[(*n)++] = (char)l;
	memcpy(buf + *n, json, l);
	*n += l;
}

START_TEST(test_echo_and_envelope)
{
	int fd = dial();
	cJSON *r = call(fd,
	    "{\"v\":1,\"op\":\"echo\",\"id\":\"a1\",\"msg\":\"hi\"}");

	ck_assert_ptr_nonnull(r);
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	ck_assert_str_eq(kz_json_get(r, "id")->valuestring, "a1");
	ck_assert_str_eq(kz_json_get(r, "msg")->valuestring, "hi");
	cJSON_Delete(r);
	/* Refusals of well-formed frames keep the connection open. */
	r = call(fd, "{\"v\":1,\"op\":\"nope\",\"id\":\"a2\"}");
	ck_assert_str_eq(err_of(r), "bad_request");
	cJSON_Delete(r);
	r = call(fd, "{\"v\":1,\"op\":\"echo\",\"id\":\"a3\",\"x\":1}");
	ck_assert_str_eq(err_of(r), "bad_request");
	ck_assert_ptr_nonnull(
	    strstr(kz_json_get(r, "reason")->valuestring, "'x'"));
	cJSON_Delete(r);
	r = call(fd, "{\"v\":2,\"op\":\"echo\",\"id\":\"a4\"}");
	ck_assert_str_eq(err_of(r), "bad_request");
	cJSON_Delete(r);
	r = call(fd, "{\"v\":1,\"op\":\"echo\"}");
	ck_assert_str_eq(err_of(r), "bad_request");
	cJSON_Delete(r);
	r = call(fd, "{\"v\":1,\"op\":\"echo\",\"id\":\"a5\"}");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	close(fd);
}
END_TEST

struct bad {
	const char *bytes;
	size_t len;
	const char *code;
};

static const struct bad bads[] = {
    {"\0\0\0\0", 4, "bad_request"},
    {"\0\0\x10\x01", 4, "frame_too_large"},
    {"\x7f\xff\xff\xff", 4, "frame_too_large"},
    {"\0\0\0\x01[", 5, "bad_request"},
    {"\0\0\0\x02[]", 6, "bad_request"},
    {"\0\0\0\x0c{\"a\":1,\"a\":2", 16, "bad_request"},
    {"\0\0\0\x03{\"\xff", 7, "bad_request"},
};

START_TEST(test_bad_frames_answered_once_then_closed)
{
	int fd = dial();
	cJSON *r = call_raw(fd, bads[_i].bytes, bads[_i].len);

	ck_assert_msg(r != NULL, "case %d: no error reply", _i);
	ck_assert_str_eq(err_of(r), bads[_i].code);
	ck_assert(closed(fd));
	cJSON_Delete(r);
	close(fd);
}
END_TEST

START_TEST(test_slow_peer_times_out_without_stalling_others)
{
	int slow = dial(), fast;
	cJSON *r;

	ck_assert_int_eq(kz_write_full(slow, "\0\0\0\x20{\"v\"", 8, -1), 0);
	fast = dial();
	r = call(fast, "{\"v\":1,\"op\":\"echo\",\"id\":\"f\"}");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	usleep(500000);
	ck_assert(closed(slow));
	close(slow);
	close(fast);
}
END_TEST

/* A peer that drips a byte of a frame now and then gets the I/O timeout
 * from the frame's start, not from its last byte. */
START_TEST(test_drip_gets_no_more_time)
{
	int fd = dial(), i;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	ck_assert_int_eq(kz_write_full(fd, "\0\0\0\x20", 4, -1), 0);
	for (i = 0; i < 9; i++) {
		usleep(100000);
		if (write(fd, "{", 1) != 1)
			break;
	}
	/* 0.9 s of a frame that had 0.3: closed well before the drip ends. */
	ck_assert_int_eq(poll(&p, 1, 0), 1);
	ck_assert_int_le(read(fd, &c, 1), 0);
	close(fd);
}
END_TEST

/* At the connection limit the longest-held idle connection makes room:
 * idle connections cannot lock the other clients out. */
START_TEST(test_idle_connections_make_room)
{
	int fds[16], fd;
	cJSON *r;

	for (int i = 0; i < 16; i++)
		fds[i] = dial();
	usleep(100000);
	fd = dial();
	r = call(fd, "{\"v\":1,\"op\":\"echo\",\"id\":\"n\"}");
	ck_assert_ptr_nonnull(r);
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	ck_assert(closed(fds[0]));
	for (int i = 0; i < 16; i++)
		close(fds[i]);
	close(fd);
}
END_TEST

START_TEST(test_deferred_and_pipelined)
{
	int fd = dial();
	const char *a = "{\"v\":1,\"op\":\"defer\",\"id\":\"d1\"}";
	const char *b = "{\"v\":1,\"op\":\"echo\",\"id\":\"e2\"}";
	char buf[256];
	size_t n = 0;
	cJSON *r;

	frame_add(buf, &n, a);
	frame_add(buf, &n, b);
	r = call_raw(fd, buf, n);
	ck_assert_str_eq(kz_json_get(r, "id")->valuestring, "d1");
	cJSON_Delete(r);
	r = call_raw(fd, NULL, 0);
	ck_assert_str_eq(kz_json_get(r, "id")->valuestring, "e2");
	cJSON_Delete(r);
	close(fd);
}
END_TEST

START_TEST(test_half_closed_peer_gets_every_reply)
{
	int fd = dial();
	const char *a = "{\"v\":1,\"op\":\"defer\",\"id\":\"h1\"}";
	const char *b = "{\"v\":1,\"op\":\"echo\",\"id\":\"h2\"}";
	char buf[256];
	size_t n = 0;
	cJSON *r;

	/* Two requests, then the peer shuts its sending side (as `socat` or
	 * a shell pipeline does): both are answered, then the server
	 * closes. */
	frame_add(buf, &n, a);
	frame_add(buf, &n, b);
	ck_assert_int_eq(kz_write_full(fd, buf, n, -1), 0);
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	r = call_raw(fd, NULL, 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(kz_json_get(r, "id")->valuestring, "h1");
	cJSON_Delete(r);
	r = call_raw(fd, NULL, 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(kz_json_get(r, "id")->valuestring, "h2");
	cJSON_Delete(r);
	ck_assert(closed(fd));
	close(fd);
}
END_TEST

START_TEST(test_pipelined_flood_is_bounded_and_served_in_order)
{
	int fd = dial();
	const char *d = "{\"v\":1,\"op\":\"defer\",\"id\":\"p0\"}";
	char one[64], *buf;
	size_t n = 0, k = 400; /* 400 frames: ~10x the frame limit */
	cJSON *r;

	/* While the first request is deferred, the peer pipelines far more
	 * than one maximal frame; the server reads at most that much ahead
	 * and still answers every frame, in order. */
	buf = malloc(64 * (k + 1));
	ck_assert_ptr_nonnull(buf);
	frame_add(buf, &n, d);
	for (size_t i = 1; i <= k; i++) {
		snprintf(one, sizeof(one),
		    "{\"v\":1,\"op\":\"echo\",\"id\":\"p%zu\"}", i);
		frame_add(buf, &n, one);
	}
	ck_assert_int_eq(kz_write_full(fd, buf, n, -1), 0);
	for (size_t i = 0; i <= k; i++) {
		char want[16];

		r = call_raw(fd, NULL, 0);
		ck_assert_msg(r != NULL, "no reply %zu", i);
		snprintf(want, sizeof(want), "p%zu", i);
		ck_assert_str_eq(kz_json_get(r, "id")->valuestring, want);
		cJSON_Delete(r);
	}
	free(buf);
	close(fd);
}
END_TEST

/* A peer with many connections, each holding an unfinished large frame,
 * holds no more of the server's memory than eight frames of the largest
 * size: past that, a connection that is not a whole frame is told busy and
 * closed; small requests are still answered, and once the unfinished ones
 * time out a large frame is taken again. */
START_TEST(test_unfinished_frames_are_bounded)
{
	static char part[4 + 3500], big[4 + 4000];
	int fds[12], fd, busy = 0;
	struct pollfd p;
	size_t n;
	cJSON *r;

	part[2] = (char)(4000 >> 8), part[3] = (char)(4000 & 0xff);
	memset(part + 4, ' ', sizeof(part) - 4);
	for (int i = 0; i < 12; i++) {
		fds[i] = dial();
		ck_assert_int_eq(kz_write_full(fds[i], part, sizeof(part), -1),
		    0);
	}
	/* 12 x 3504 bytes against 8 x 4096: three are refused. */
	for (int i = 0; i < 12; i++) {
		p = (struct pollfd){.fd = fds[i], .events = POLLIN};
		if (poll(&p, 1, 100) == 1 && (r = call_raw(fds[i], NULL, 0))) {
			busy += strcmp(err_of(r), "busy") == 0;
			cJSON_Delete(r);
		}
	}
	ck_assert_int_eq(busy, 3);
	fd = dial();
	r = call(fd, "{\"v\":1,\"op\":\"echo\",\"id\":\"s\"}");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	close(fd);
	for (int i = 0; i < 12; i++)
		close(fds[i]);
	usleep(500000);
	n = (size_t)snprintf(big + 4, sizeof(big) - 4,
	    "{\"v\":1,\"op\":\"echo\",\"id\":\"b\",\"msg\":\"%*s\"}", 3950, "");
	big[2] = (char)(n >> 8), big[3] = (char)(n & 0xff);
	fd = dial();
	r = call_raw(fd, big, 4 + n);
	ck_assert_ptr_nonnull(r);
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	close(fd);
}
END_TEST

/* A connection from uid 65533 (allowed); its echo's answer. */
static bool
other_uid_served(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		cJSON *r;
		int fd;

		if (setgid(65533) != 0 || setuid(65533) != 0)
			_exit(10);
		if (kz_sock_connect(path, 1000, &fd, NULL, 0) != 0)
			_exit(11);
		r = call(fd, "{\"v\":1,\"op\":\"echo\",\"id\":\"o\"}");
		_exit(r && cJSON_IsTrue(kz_json_get(r, "ok")) ? 0 : 12);
	}
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0;
}

START_TEST(test_busy_peer_held_to_its_share)
{
	static const char hold[] = "{\"v\":1,\"op\":\"hold\",\"id\":\"h\"}";
	char buf[64];
	int fds[12], fd;
	size_t n = 0;
	cJSON *r;

	chmod(path, 0666);
	/* 12 of 16 in use, each with a request in it: root's share. */
	frame_add(buf, &n, hold);
	for (int i = 0; i < 12; i++) {
		fds[i] = dial();
		ck_assert_int_eq(kz_write_full(fds[i], buf, n, -1), 0);
	}
	usleep(100000);
	fd = dial();
	r = call_raw(fd, NULL, 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(err_of(r), "busy");
	ck_assert(closed(fd));
	cJSON_Delete(r);
	close(fd);
	/* Another peer still gets in, past the busy one's share. */
	ck_assert(other_uid_served());
	/* Once root's requests are answered, its connections are idle:
	 * the next makes room by closing its own oldest. */
	for (int i = 0; i < 12; i++)
		cJSON_Delete(call_raw(fds[i], NULL, 0));
	fd = dial();
	r = call(fd, "{\"v\":1,\"op\":\"echo\",\"id\":\"n\"}");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	ck_assert(closed(fds[0]));
	close(fd);
	for (int i = 0; i < 12; i++)
		close(fds[i]);
}
END_TEST

START_TEST(test_peer_credentials_checked)
{
	pid_t pid;
	int st;

	/* Let the file mode through so that SO_PEERCRED is what refuses. */
	chmod(path, 0666);
	pid = fork();
	if (pid == 0) {
		cJSON *r;
		int fd;

		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(10);
		if (kz_sock_connect(path, 1000, &fd, NULL, 0) != 0)
			_exit(11);
		r = call_raw(fd, NULL, 0);
		_exit(r && strcmp(err_of(r), "unauthorized_peer") == 0 &&
		            closed(fd) ?
		        0 :
		        12);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

START_TEST(test_flags_checked_before_the_handler)
{
	int fd = dial();
	cJSON *r;

	/* Root is an operator under the empty default policy. */
	r = call(fd, "{\"v\":1,\"op\":\"drain\",\"id\":\"o1\",\"msg\":\"x\"}");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	r = call(fd, "{\"v\":1,\"op\":\"gated\",\"id\":\"g1\",\"msg\":\"x\"}");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	admission_open = false;
	r = call(fd, "{\"v\":1,\"op\":\"gated\",\"id\":\"g2\",\"msg\":\"x\"}");
	ck_assert_str_eq(err_of(r), "admission_closed");
	ck_assert_str_eq(kz_json_get(r, "reason")->valuestring,
	    "draining for the test");
	ck_assert_str_eq(kz_json_get(r, "id")->valuestring, "g2");
	ck_assert_ptr_null(kz_json_get(r, "msg"));
	cJSON_Delete(r);
	/* A refusal by flag keeps the connection; ungated ops still run. */
	r = call(fd, "{\"v\":1,\"op\":\"echo\",\"id\":\"e1\"}");
	ck_assert(cJSON_IsTrue(kz_json_get(r, "ok")));
	cJSON_Delete(r);
	/* A malformed request is bad_request before any flag is looked at. */
	r = call(fd, "{\"v\":1,\"op\":\"gated\",\"id\":\"g3\",\"y\":1}");
	ck_assert_str_eq(err_of(r), "bad_request");
	cJSON_Delete(r);
	admission_open = true;
	close(fd);
}
END_TEST

struct standing {
	const char *op;
	uid_t uid;
	gid_t gid;
	const char *opuids, *opgids;
	bool open;
	const char *code; /* NULL: allowed */
};

static const struct standing standings[] = {
    {"echo", 65534, 65534, "", "", true, NULL},
    {"drain", 65534, 65534, "", "", true, "operator_only"},
    {"drain", 0, 0, "", "", true, NULL},
    {"drain", 65534, 65534, "65534", "", true, NULL},
    {"drain", 65533, 65534, "", "65534", true, NULL},
    {"drain", 0, 0, "65534", "", true, NULL},
    {"drain", 65533, 65533, "65534", "65532", true, "operator_only"},
    {"gated", 65534, 65534, "", "", false, "admission_closed"},
    {"gated", 0, 0, "", "", true, NULL},
    /* Standing before state: a stranger learns nothing of admission. */
    {"both", 65534, 65534, "", "", false, "operator_only"},
    {"both", 0, 0, "", "", false, "admission_closed"},
    {"both", 0, 0, "", "", true, NULL},
};

START_TEST(test_op_standing_table)
{
	const struct standing *t = &standings[_i];
	struct kz_srv_conf c = {.ops = ops, .admit = admit};
	struct kz_peer peer = {.pid = 1, .uid = t->uid, .gid = t->gid};
	const struct kz_op *op;
	const char *code = NULL;
	char json[128], why[128];
	cJSON *req;

	ck_assert_int_eq(kz_peer_policy_parse(t->opuids, t->opgids,
	                     &c.operators, why, sizeof(why)),
	    0);
	admission_open = t->open;
	snprintf(json, sizeof(json), "{\"v\":1,\"op\":\"%s\",\"id\":\"t\"}",
	    t->op);
	req = cJSON_Parse(json);
	op = kz_op_check(&c, req, &peer, &code, why, sizeof(why));
	if (t->code == NULL) {
		ck_assert_msg(op != NULL, "case %d: refused: %s", _i, why);
		ck_assert_str_eq(op->op, t->op);
	} else {
		ck_assert_msg(op == NULL, "case %d: allowed", _i);
		ck_assert_str_eq(code, t->code);
	}
	admission_open = true;
	cJSON_Delete(req);
}
END_TEST

START_TEST(test_listen_refuses_live_socket)
{
	struct kz_srv_conf c = {.sock_path = path, .ops = ops};
	struct kz_srv *s2;
	char why[128];

	ck_assert_int_eq(kz_srv_new(base, &c, &s2, why, sizeof(why)),
	    KZ_EEXIST);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("srv");
	TCase *tc = tcase_create("core");

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_echo_and_envelope);
	tcase_add_loop_test(tc, test_bad_frames_answered_once_then_closed, 0,
	    sizeof(bads) / sizeof(bads[0]));
	tcase_add_test(tc, test_slow_peer_times_out_without_stalling_others);
	tcase_add_test(tc, test_drip_gets_no_more_time);
	tcase_add_test(tc, test_idle_connections_make_room);
	tcase_add_test(tc, test_deferred_and_pipelined);
	tcase_add_test(tc, test_half_closed_peer_gets_every_reply);
	tcase_add_test(tc, test_pipelined_flood_is_bounded_and_served_in_order);
	tcase_add_test(tc, test_unfinished_frames_are_bounded);
	tcase_add_test(tc, test_peer_credentials_checked);
	tcase_add_test(tc, test_busy_peer_held_to_its_share);
	tcase_add_test(tc, test_listen_refuses_live_socket);
	tcase_add_test(tc, test_flags_checked_before_the_handler);
	tcase_add_loop_test(tc, test_op_standing_table, 0,
	    sizeof(standings) / sizeof(standings[0]));
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
