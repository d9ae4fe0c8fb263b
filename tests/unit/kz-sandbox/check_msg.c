/* kz-sandbox msg.c: a job message is used only when it parses exactly. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sbx.h"
#include "kz_check.h"
#include "banned.h"

/* Job messages as the init takes them (n bytes, with their NULs) and the
 * number of descriptors passed beside them. */
static const struct {
	const char *b;
	size_t n;
	int npass;
	int ok;
} jobs[] = {
    {"a\0\0\0\0\0\0"
     "0\0",
        9, 0, 0}, /* argv a, no env, top, none, no npmrc, no listener */
    {"a\0b\0\0E=1\0\0d\0\0\0"
     "3\0",
        16, 0, 0}, /* the relay and the forward listen */
    {"a\0\0\0\0"
     "5\0\0"
     "0\0",
        10, 1, 0}, /* one target, 5 */
    {"a\0\0\0\0"
     "5,7\0\0"
     "0\0",
        12, 2, 0},
    {"a\0\0\0\0\0rc\0"
     "2\0",
        11, 0, 0}, /* an npmrc, the forward */
    {"", 0, 0, -1}, /* empty */
    {"a", 1, 0, -1}, /* no terminating NUL */
    {"\0\0\0\0", 4, 0, -1}, /* no argv */
    {"a\0", 2, 0, -1}, /* truncated after argv */
    {"a\0\0", 3, 0, -1}, /* no env terminator */
    {"a\0\0\0", 4, 0, -1}, /* no cwd */
    {"a\0\0\0\0", 5, 0, -1}, /* no targets */
    {"a\0\0\0\0\0", 6, 0, -1}, /* no npmrc */
    {"a\0\0\0\0\0\0", 7, 0, -1}, /* no net */
    {"a\0\0\0\0\0\0"
     "4\0",
        9, 0, -1}, /* a net beyond both */
    {"a\0\0\0\0\0\0"
     "01\0",
        10, 0, -1}, /* two digits */
    {"a\0\0\0\0\0\0\0", 8, 0, -1}, /* an empty net */
    {"a\0\0\0\0\0\0"
     "0\0x\0",
        11, 0, -1}, /* something after it */
    {"a\0\0\0\0"
     "5\0\0"
     "0\0",
        10, 0, -1}, /* a target too many */
    {"a\0\0\0\0\0\0"
     "0\0",
        9, 1, -1}, /* a target too few */
    {"a\0\0\0\0"
     "2\0\0"
     "0\0",
        10, 1, -1}, /* onto stdio */
    {"a\0\0\0\0"
     "1100\0\0"
     "0\0",
        13, 1, -1}, /* above the limit */
    {"a\0\0\0\0"
     "5x\0\0"
     "0\0",
        11, 1, -1},
    {"a\0\0\0\0"
     ",5\0\0"
     "0\0",
        11, 1, -1},
};

START_TEST(test_unpack)
{
	char buf[64];
	struct sbx_job j;

	memset(&j, 0, sizeof(j));
	memcpy(buf, jobs[_i].b, jobs[_i].n);
	j.npass = jobs[_i].npass;
	ck_assert_int_eq(sbx_msg_unpack(buf, jobs[_i].n, &j), jobs[_i].ok);
}
END_TEST

/* What the agent sends is what the init takes: argv, env, cwd, the
 * descriptors and their targets; then a check request; then the end. */
START_TEST(test_roundtrip)
{
	static char buf[ZMSG_MAX];
	char *argv[] = {"/bin/echo", "hi", NULL};
	struct sbx_req rq;
	struct sbx_job j;
	char why[128];
	int sv[2], fds[ZFDS], null;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ck_assert_int_ge(null = open("/dev/null", O_RDWR), 0);
	for (int i = 0; i < ZFDS; i++)
		fds[i] = null;
	memset(&rq, 0, sizeof(rq));
	sbx_env_init(&rq.env);
	ck_assert_int_eq(sbx_env_add(&rq.env, "A", "1", why, sizeof(why)), 0);
	rq.argv = argv, rq.cwd = "src";
	rq.pass_fd[0] = null, rq.npass = 1;
	snprintf(rq.npmrc, sizeof(rq.npmrc), "registry=x\n");
	rq.net = SBX_NET_RELAY;
	ck_assert_int_eq(sbx_msg_job_send(sv[0], &rq, fds), 0);
	ck_assert_int_eq(sbx_msg_check_send(sv[0]), 0);
	close(sv[0]);
	memset(&j, 0, sizeof(j));
	ck_assert_int_eq(sbx_msg_take(sv[1], buf, sizeof(buf), &j), 0);
	ck_assert_str_eq(j.argv[0], "/bin/echo");
	ck_assert_str_eq(j.argv[1], "hi");
	ck_assert_ptr_null(j.argv[2]);
	ck_assert_str_eq(j.env[0], "A=1");
	ck_assert_ptr_null(j.env[1]);
	ck_assert_str_eq(j.cwd, "src");
	ck_assert_int_eq(j.npass, 1);
	ck_assert_int_eq(j.target[0], null);
	ck_assert_str_eq(j.npmrc, "registry=x\n");
	ck_assert_int_eq(j.net, SBX_NET_RELAY);
	for (int i = 0; i < ZFDS + j.npass; i++)
		close(j.fd[i]);
	ck_assert_int_eq(sbx_msg_take(sv[1], buf, sizeof(buf), &j), 1);
	ck_assert_int_eq(sbx_msg_take(sv[1], buf, sizeof(buf), &j), -2);
	close(sv[1]);
	close(null);
	sbx_env_release(&rq.env);
}
END_TEST

/* A message with one descriptor beside it is taken with it; one with
 * two, or none where the reader has room for one, as they are. */
START_TEST(test_one_fd)
{
	int sv[2], fds[2], got, n;
	char b[8];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ck_assert_int_ge(fds[0] = open("/dev/null", O_RDONLY), 0);
	ck_assert_int_ge(fds[1] = open("/dev/null", O_RDONLY), 0);
	ck_assert_int_eq(sbx_msg_send_fds(sv[0], "one", 3, fds, 1), 0);
	ck_assert_int_eq(sbx_msg_recv_fd(sv[1], b, sizeof(b), 0, &got), 3);
	ck_assert_int_ge(got, 0);
	ck_assert_int_ne(fcntl(got, F_GETFD) & FD_CLOEXEC, 0);
	close(got);
	ck_assert_int_eq(sbx_msg_send_fds(sv[0], "two", 3, fds, 2), 0);
	ck_assert_int_eq(sbx_msg_recv_fd(sv[1], b, sizeof(b), 0, &got), -1);
	ck_assert_int_eq(got, -1);
	ck_assert_int_eq(sbx_msg_send_fds(sv[0], "none", 4, NULL, 0), 0);
	n = (int)sbx_msg_recv_fd(sv[1], b, sizeof(b), 0, &got);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(got, -1);
	ck_assert_int_eq(sbx_msg_send_fds(sv[0], "x", 1, fds, -1), KZ_EINVAL);
	close(fds[0]), close(fds[1]), close(sv[0]), close(sv[1]);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-msg");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_unpack, 0, sizeof(jobs) / sizeof(jobs[0]));
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_one_fd);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
