/* The readiness datagrams: what arrives on a bound socket, nothing without
 * NOTIFY_SOCKET, hostile values refused, the variable hidden from
 * children.  Each test runs in its own fork (CK_FORK), so each reads the
 * environment afresh. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kz_notify.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64];

/* Binds a datagram socket at a path (or abstract when name starts with @)
 * and points NOTIFY_SOCKET at it. */
static int
bound(const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t len;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	if (name[0] == '@') {
		memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
		    strlen(name));
		ck_assert_int_eq(setenv("NOTIFY_SOCKET", name, 1), 0);
	} else {
		snprintf(dir, sizeof(dir), "/tmp/kz-notify.XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(dir));
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
		len = sizeof(sa);
		ck_assert_int_eq(setenv("NOTIFY_SOCKET", sa.sun_path, 1), 0);
	}
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, len), 0);
	return fd;
}

/* Closes fd and removes what bound() made on disk. */
static void
unbind(int fd)
{
	char p[128];

	close(fd);
	if (dir[0] == '\0')
		return;
	snprintf(p, sizeof(p), "%s/notify.sock", dir);
	unlink(p);
	rmdir(dir);
}

static const char *
got(int fd)
{
	static char buf[512];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

START_TEST(test_path_socket)
{
	int fd = bound("notify.sock");

	ck_assert_int_eq(kz_notify_enabled(), 1);
	ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
	ck_assert_int_eq(kz_notify_status("filling 1/3"), 0);
	ck_assert_str_eq(got(fd), "STATUS=filling 1/3\n");
	ck_assert_int_eq(kz_notify_ready("3/3 workers warm"), 0);
	ck_assert_str_eq(got(fd), "READY=1\nSTATUS=3/3 workers warm\n");
	ck_assert_int_eq(kz_notify_ready(NULL), 0);
	ck_assert_str_eq(got(fd), "READY=1\n");
	ck_assert_int_eq(kz_notify_stopping(), 0);
	ck_assert_str_eq(got(fd), "STOPPING=1\n");
	unbind(fd);
}
END_TEST

START_TEST(test_abstract_socket)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "@kz-notify-%d", (int)getpid());
	fd = bound(name);
	ck_assert_int_eq(kz_notify_ready(NULL), 0);
	ck_assert_str_eq(got(fd), "READY=1\n");
	close(fd);
}
END_TEST

/* A status cannot add a line of its own (no READY=1 smuggled in) and is
 * cut at its maximum. */
START_TEST(test_status_one_line)
{
	char big[KZ_NOTIFY_STATUS_MAX + 50];
	const char *m;
	int fd = bound("notify.sock");

	ck_assert_int_eq(kz_notify_status("a\nREADY=1\rb"), 0);
	ck_assert_str_eq(got(fd), "STATUS=a READY=1 b\n");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(kz_notify_status(big), 0);
	m = got(fd);
	ck_assert_uint_eq(strlen(m), 7 + KZ_NOTIFY_STATUS_MAX + 1);
	unbind(fd);
}
END_TEST

START_TEST(test_none)
{
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(kz_notify_enabled(), 0);
	ck_assert_int_eq(kz_notify_ready("x"), 0);
	ck_assert_int_eq(kz_notify_stopping(), 0);
}
END_TEST

/* Values that are not a Unix socket address are ignored, not used. */
START_TEST(test_hostile_values)
{
	static const char *const bad[] = {"", "@", "relative/sock",
	    "vsock:2:1234", "/", NULL};
	char big[200];

	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	if (_i == 5)
		ck_assert_int_eq(setenv("NOTIFY_SOCKET", big, 1), 0);
	else
		ck_assert_int_eq(setenv("NOTIFY_SOCKET", bad[_i], 1), 0);
	ck_assert_int_eq(kz_notify_enabled(), 0);
	ck_assert_int_eq(kz_notify_ready(NULL), 0);
}
END_TEST

/* A manager that has gone away is an error the caller may log. */
START_TEST(test_gone)
{
	int fd = bound("notify.sock");

	unbind(fd);
	ck_assert_int_eq(kz_notify_ready(NULL), KZ_ESYS);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_path_socket);
	tcase_add_test(tc, test_abstract_socket);
	tcase_add_test(tc, test_status_one_line);
	tcase_add_test(tc, test_none);
	tcase_add_loop_test(tc, test_hostile_values, 0, 6);
	tcase_add_test(tc, test_gone);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
