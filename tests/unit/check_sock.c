/*
 * sock.c's peer check over a real Unix socket: a peer connects from a
 * child that has dropped to another uid with a chosen primary gid and
 * supplementary groups, and the listening side checks it against tables
 * of policies (needs root to change ids; skipped otherwise).  And what a
 * refused client sees: kz_frame_call returns the daemon's one refusal
 * even when the daemon closed before the request was written.  And that
 * listening sets the socket's mode without touching the process umask,
 * which other threads create files under.  And a full backlog: waited
 * out, never taken for a connection or for a stale socket.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_call.h"
#include "kz_frame.h"
#include "kz_json.h"
#include "kz_sock.h"
#include "kz_check.h"
#include "banned.h"

#define PEER_UID 47190
#define PEER_GID 47191
#define MEMBER_GID 47192
#define OTHER_GID 47193

static char dir[64], path[96];

/* Accepts one connection from a child with these ids; the check's result. */
static int
check_peer(const struct kz_peer_policy *pol, const gid_t *groups, int ngroups)
{
	struct pollfd pf;
	struct kz_peer peer;
	pid_t pid;
	int lfd, fd, r, st, p[2];

	ck_assert_int_eq(kz_sock_listen(path, 4, &lfd, NULL, 0), 0);
	/* Past the socket's mode (0660 root's): the peer check decides. */
	ck_assert(chmod(path, 0666) == 0);
	ck_assert(pipe(p) == 0);
	if ((pid = fork()) == 0) {
		char c;

		close(p[1]);
		if (setgroups((size_t)ngroups, groups) != 0 ||
		    setgid(PEER_GID) != 0 || setuid(PEER_UID) != 0 ||
		    kz_sock_connect(path, 1000, &fd, NULL, 0) != 0)
			_exit(1);
		/* Stay connected until the parent has looked. */
		(void)!read(p[0], &c, 1);
		_exit(0);
	}
	close(p[0]);
	pf.fd = lfd;
	pf.events = POLLIN;
	ck_assert_int_eq(poll(&pf, 1, 5000), 1);
	ck_assert((fd = accept(lfd, NULL, NULL)) >= 0);
	r = kz_peer_check(fd, pol, &peer);
	ck_assert_int_eq(peer.uid, PEER_UID);
	ck_assert_int_eq(peer.gid, PEER_GID);
	close(p[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	close(fd);
	close(lfd);
	unlink(path);
	return r;
}

static const struct {
	const char *uids, *gids;
	gid_t groups[3];
	int ngroups, want;
} cases[] = {
    /* Nothing configured: only root and the daemon's own uid. */
    {"", "", {MEMBER_GID}, 1, KZ_EPEER},
    /* The primary gid, as before. */
    {"", "47191", {0}, 0, 0},
    /* A supplementary group: the operator's usual membership. */
    {"", "47192", {MEMBER_GID}, 1, 0},
    {"", "47192", {OTHER_GID, MEMBER_GID}, 2, 0},
    {"", "47193,47192", {MEMBER_GID}, 1, 0},
    /* Groups the policy does not name. */
    {"", "47192", {OTHER_GID}, 1, KZ_EPEER},
    {"", "47192", {0}, 0, KZ_EPEER},
    /* A uid entry still works without any group. */
    {"47190", "", {0}, 0, 0},
    {"47194", "47193", {MEMBER_GID}, 1, KZ_EPEER},
};

START_TEST(test_peer_groups)
{
	struct kz_peer_policy pol;
	char why[128];

	if (geteuid() != 0)
		return;
	ck_assert_int_eq(kz_peer_policy_parse(cases[_i].uids, cases[_i].gids,
	                     &pol, why, sizeof(why)),
	    0);
	ck_assert_int_eq(check_peer(&pol, cases[_i].groups, cases[_i].ngroups),
	    cases[_i].want);
}
END_TEST

/*
 * The daemon answers before reading anything and closes; the request is
 * larger than the socket buffer, so its write fails with a broken pipe.
 */
START_TEST(test_call_reads_refusal_after_broken_pipe)
{
	cJSON *req = cJSON_CreateObject(), *rep = NULL, *err;
	char *big = malloc(900000), why[128] = "";
	struct pollfd pf;
	pid_t pid;
	int lfd, fd, st;

	ck_assert_int_eq(kz_sock_listen(path, 4, &lfd, NULL, 0), 0);
	if ((pid = fork()) == 0) {
		pf.fd = lfd;
		pf.events = POLLIN;
		if (poll(&pf, 1, 5000) != 1 ||
		    (fd = accept(lfd, NULL, NULL)) < 0)
			_exit(1);
		err = kz_reply_err(NULL, KZ_WE_UNAUTHORIZED_PEER, "no");
		_exit(kz_frame_write(fd, err, 1 << 20, 1000) == 0 ? 0 : 2);
	}
	memset(big, 'a', 899999);
	big[899999] = '\0';
	cJSON_AddStringToObject(req, "op", "x");
	cJSON_AddStringToObject(req, "pad", big);
	ck_assert_int_eq(kz_frame_call(path, req, 5000, &rep, why, sizeof(why)),
	    0);
	ck_assert_str_eq(cJSON_GetStringValue(kz_json_get(rep, "error")),
	    KZ_WE_UNAUTHORIZED_PEER);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	free(big);
	close(lfd);
}
END_TEST

/* Connects until the listener's backlog (1) is full; those fds, -1 ended. */
static void
fill_backlog(int *held, int max)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = 0, fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	while (n < max - 1) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ck_assert(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			close(fd);
			break;
		}
		held[n++] = fd;
	}
	ck_assert(n > 0 && n < max - 1);
	held[n] = -1;
}

static void *
accept_later(void *arg)
{
	int lfd = *(int *)arg, fd;

	poll(NULL, 0, 300);
	/* Room in the backlog: the waiting client gets in behind these. */
	for (int i = 0; i < 8 && (fd = accept(lfd, NULL, NULL)) >= 0; i++)
		close(fd);
	return NULL;
}

/*
 * A Unix socket's full backlog (a daemon busy under a flood) is EAGAIN
 * from connect, with nothing connected.  The client waits for room until
 * its timeout instead of going on with an unconnected socket (whose
 * first write fails, ENOTCONN: a dispatch record lost to a busy sink),
 * and a second daemon does not take a busy daemon's socket for stale.
 */
START_TEST(test_connect_waits_out_a_full_backlog)
{
	struct sockaddr_un peer;
	socklen_t pl = sizeof(peer);
	int held[64], lfd, lfd2, fd = -1, r;
	pthread_t th;
	char why[128] = "";

	ck_assert_int_eq(kz_sock_listen(path, 1, &lfd, NULL, 0), 0);
	fill_backlog(held, 64);
	r = kz_sock_connect(path, 200, &fd, why, sizeof(why));
	ck_assert_int_eq(r, KZ_EUNAVAIL);
	ck_assert_ptr_nonnull(strstr(why, "backlog"));
	ck_assert_int_eq(kz_sock_listen(path, 1, &lfd2, why, sizeof(why)),
	    KZ_EEXIST);
	ck_assert(access(path, F_OK) == 0);
	ck_assert(pthread_create(&th, NULL, accept_later, &lfd) == 0);
	ck_assert_int_eq(kz_sock_connect(path, 5000, &fd, why, sizeof(why)), 0);
	ck_assert(getpeername(fd, (struct sockaddr *)&peer, &pl) == 0);
	ck_assert(pthread_join(th, NULL) == 0);
	close(fd);
	for (int i = 0; held[i] >= 0; i++)
		close(held[i]);
	close(lfd);
}
END_TEST

/* Creates files under the umask until told to stop; how many got a mode
 * other than the umask's. */
static volatile int stop_files;

static void *
create_files(void *arg)
{
	char f[128];
	long bad = 0;

	(void)arg;
	for (int i = 0; !stop_files; i++) {
		struct stat sb;
		int fd;

		snprintf(f, sizeof(f), "%s/f%d", dir, i % 16);
		(void)unlink(f);
		if ((fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		         0777)) < 0)
			continue;
		if (fstat(fd, &sb) == 0 && (sb.st_mode & 07777) != 0755)
			bad++;
		close(fd);
	}
	for (int i = 0; i < 16; i++) {
		snprintf(f, sizeof(f), "%s/f%d", dir, i);
		(void)unlink(f);
	}
	return (void *)bad;
}

START_TEST(test_listen_keeps_umask)
{
	static const mode_t masks[] = {0, 077, 022};
	pthread_t th;
	struct stat sb;
	void *bad;
	int lfd;

	/* 0660 whatever the umask, and the umask is left as it was. */
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		umask(masks[i]);
		ck_assert_int_eq(kz_sock_listen(path, 4, &lfd, NULL, 0), 0);
		ck_assert(stat(path, &sb) == 0);
		ck_assert_int_eq(sb.st_mode & 07777, 0660);
		ck_assert_int_eq(umask(masks[i]), masks[i]);
		close(lfd);
	}
	/* A thread creating files meanwhile gets the umask's modes: a
	 * daemon's pool thread makes its workers' directories while the
	 * main thread starts listening (kz-pkgrun serve). */
	stop_files = 0;
	ck_assert(pthread_create(&th, NULL, create_files, NULL) == 0);
	for (int i = 0; i < 2000; i++) {
		ck_assert_int_eq(kz_sock_listen(path, 4, &lfd, NULL, 0), 0);
		close(lfd);
	}
	stop_files = 1;
	ck_assert(pthread_join(th, &bad) == 0);
	ck_assert_int_eq((long)bad, 0);
}
END_TEST

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kz-sock-unit.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	ck_assert(chmod(dir, 0755) == 0);
	snprintf(path, sizeof(path), "%s/s", dir);
}

static void
teardown(void)
{
	unlink(path);
	rmdir(dir);
}

int
main(void)
{
	Suite *s = suite_create("sock");
	TCase *tc = tcase_create("core");

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_peer_groups, 0,
	    sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_call_reads_refusal_after_broken_pipe);
	tcase_add_test(tc, test_listen_keeps_umask);
	tcase_add_test(tc, test_connect_waits_out_a_full_backlog);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
