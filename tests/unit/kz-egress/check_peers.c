/* Connections counted by key (runs.c) and the peers of connections not yet
 * granted (peers.c): a key is held to its share and the tally to its
 * total, releases give the room back; the shares follow the bound; the
 * Unix socket's peers and the TCP peers are two pools, one full leaving
 * the other's room; a peer's key is its uid on a Unix socket and its
 * source address on TCP, all of 127.0.0.0/8 one peer, IPv6 by /64,
 * IPv4-mapped as IPv4; a Unix peer is admitted only by the peer policy. */
#include <check.h>
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"
#include "kz_check.h"
#include "banned.h"

START_TEST(test_tally_bounds)
{
	struct eg_tally t = {.mu = PTHREAD_MUTEX_INITIALIZER};
	char k[16];

	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(eg_tally_hold(&t, "a", 3, 5), EG_TALLY_OK);
	ck_assert_int_eq(eg_tally_hold(&t, "a", 3, 5), EG_TALLY_KEY);
	ck_assert_int_eq(eg_tally_hold(&t, "b", 3, 5), EG_TALLY_OK);
	ck_assert_int_eq(eg_tally_hold(&t, "c", 3, 5), EG_TALLY_OK);
	/* Five in all: a new key is refused by the total. */
	ck_assert_int_eq(eg_tally_hold(&t, "d", 3, 5), EG_TALLY_ALL);
	ck_assert_uint_eq(t.total, 5);
	eg_tally_release(&t, "a");
	ck_assert_int_eq(eg_tally_hold(&t, "d", 3, 5), EG_TALLY_OK);
	eg_tally_release(&t, "a");
	eg_tally_release(&t, "a");
	eg_tally_release(&t, "b");
	eg_tally_release(&t, "c");
	eg_tally_release(&t, "d");
	ck_assert_uint_eq(t.total, 0);
	/* Releasing what is not held changes nothing. */
	eg_tally_release(&t, "nobody");
	ck_assert_uint_eq(t.total, 0);
	/* Many keys sharing buckets. */
	for (int i = 0; i < 1000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		ck_assert_int_eq(eg_tally_hold(&t, k, 1, 2000), EG_TALLY_OK);
		ck_assert_int_eq(eg_tally_hold(&t, k, 1, 2000), EG_TALLY_KEY);
	}
	for (int i = 0; i < 1000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		eg_tally_release(&t, k);
	}
	ck_assert_uint_eq(t.total, 0);
	for (size_t i = 0; i < EG_TALLY_BUCKETS; i++)
		ck_assert_ptr_null(t.b[i]);
}
END_TEST

START_TEST(test_shares)
{
	static const struct {
		size_t max, peer, unix_all, tcp_all;
	} v[] = {{8192, 1024, 4096, 2048}, {128, 16, 64, 32}, {64, 16, 32, 16},
	    {20, 16, 16, 16}, {6, 6, 6, 6}, {1, 1, 1, 1}};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ck_assert_uint_eq(eg_ungranted_per_peer(v[i].max), v[i].peer);
		ck_assert_uint_eq(eg_ungranted_pool(v[i].max, true),
		    v[i].unix_all);
		ck_assert_uint_eq(eg_ungranted_pool(v[i].max, false),
		    v[i].tcp_all);
	}
	/* A peer flooding at the default bound keeps half for grants. */
	for (int i = 0; i < 16; i++)
		ck_assert_int_eq(eg_ungranted_hold("uid:1", 64), EG_TALLY_OK);
	ck_assert_int_eq(eg_ungranted_hold("uid:1", 64), EG_TALLY_KEY);
	ck_assert_int_eq(eg_ungranted_hold("uid:2", 64), EG_TALLY_OK);
	eg_ungranted_release("uid:2");
	for (int i = 0; i < 16; i++)
		eg_ungranted_release("uid:1");
}
END_TEST

/* TCP peers filling their pool leave the Unix socket's peers theirs. */
START_TEST(test_pools)
{
	char k[32];

	/* Bound 128: a peer 16, TCP 32, Unix 64. */
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < 16; i++) {
			snprintf(k, sizeof(k), "ip:10.0.0.%d", p);
			ck_assert_int_eq(eg_ungranted_hold(k, 128),
			    EG_TALLY_OK);
		}
	ck_assert_int_eq(eg_ungranted_hold("ip:10.0.0.9", 128), EG_TALLY_ALL);
	ck_assert_int_eq(eg_ungranted_hold("ip6:2001:db8::/64", 128),
	    EG_TALLY_ALL);
	for (int u = 0; u < 4; u++)
		for (int i = 0; i < 16; i++) {
			snprintf(k, sizeof(k), "uid:%d", u);
			ck_assert_int_eq(eg_ungranted_hold(k, 128),
			    EG_TALLY_OK);
		}
	ck_assert_int_eq(eg_ungranted_hold("uid:9", 128), EG_TALLY_ALL);
	/* A release gives the room back to its own pool only. */
	eg_ungranted_release("ip:10.0.0.0");
	ck_assert_int_eq(eg_ungranted_hold("uid:9", 128), EG_TALLY_ALL);
	ck_assert_int_eq(eg_ungranted_hold("ip:10.0.0.9", 128), EG_TALLY_OK);
	eg_ungranted_release("ip:10.0.0.9");
	for (int i = 0; i < 16; i++) {
		eg_ungranted_release("ip:10.0.0.1");
		if (i < 15)
			eg_ungranted_release("ip:10.0.0.0");
		for (int u = 0; u < 4; u++) {
			snprintf(k, sizeof(k), "uid:%d", u);
			eg_ungranted_release(k);
		}
	}
	ck_assert_int_eq(eg_ungranted_hold("uid:9", 128), EG_TALLY_OK);
	eg_ungranted_release("uid:9");
}
END_TEST

/* The peer of a connection to a listening socket made by a child that
 * runs as uid (root's unit test only); *child is its pid. */
static int
connect_as(uid_t uid, pid_t *child)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int l, c, fd;
	char ok;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "/tmp/check_peers.%d",
	    (int)getpid());
	(void)unlink(sun.sun_path);
	ck_assert_int_ge(l = socket(AF_UNIX, SOCK_STREAM, 0), 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(chmod(sun.sun_path, 0666), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	if ((*child = fork()) == 0) {
		if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
		    setresuid(uid, uid, uid) != 0 ||
		    (c = socket(AF_UNIX, SOCK_STREAM, 0)) < 0 ||
		    connect(c, (struct sockaddr *)&sun, sizeof(sun)) != 0)
			_exit(1);
		/* Held until the parent has looked and closed. */
		_exit(read(c, &ok, 1) < 0 ? 2 : 0);
	}
	fd = accept(l, NULL, NULL);
	close(l);
	(void)unlink(sun.sun_path);
	return fd;
}

START_TEST(test_peer_admit)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct kz_peer_policy none = {0}, some = {0}, grp = {0};
	uid_t u = 64999;
	pid_t pid;
	int fd, sv[2], st;

	/* TCP has no credentials: never looked at. */
	ck_assert(eg_peer_admit(-1, (struct sockaddr *)&sin, &none));
	/* The proxy's own uid is always admitted; unreadable credentials
	 * never. */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert(eg_peer_admit(sv[0], (struct sockaddr *)&sun, &none));
	close(sv[0]);
	close(sv[1]);
	ck_assert(!eg_peer_admit(-1, (struct sockaddr *)&sun, &none));
	if (geteuid() != 0)
		return;
	some.uids[some.nuids++] = u;
	grp.gids[grp.ngids++] = u;
	ck_assert_int_ge(fd = connect_as(u, &pid), 0);
	ck_assert(!eg_peer_admit(fd, (struct sockaddr *)&sun, &none));
	ck_assert(eg_peer_admit(fd, (struct sockaddr *)&sun, &some));
	ck_assert(eg_peer_admit(fd, (struct sockaddr *)&sun, &grp));
	close(fd);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

static const char *
key4(const char *a)
{
	static char out[EG_TALLY_KEY_MAX];
	struct sockaddr_in sin = {.sin_family = AF_INET};

	ck_assert_int_eq(inet_pton(AF_INET, a, &sin.sin_addr), 1);
	eg_peer_key(-1, (struct sockaddr *)&sin, out, sizeof(out));
	return out;
}

static const char *
key6(const char *a)
{
	static char out[EG_TALLY_KEY_MAX];
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};

	ck_assert_int_eq(inet_pton(AF_INET6, a, &sin6.sin6_addr), 1);
	eg_peer_key(-1, (struct sockaddr *)&sin6, out, sizeof(out));
	return out;
}

START_TEST(test_peer_keys)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char out[EG_TALLY_KEY_MAX], want[32];
	int sv[2];

	ck_assert_str_eq(key4("10.1.2.3"), "ip:10.1.2.3");
	ck_assert_str_eq(key4("127.0.0.1"), "ip:127.0.0.0/8");
	ck_assert_str_eq(key4("127.9.8.7"), "ip:127.0.0.0/8");
	ck_assert_str_eq(key6("::ffff:127.3.3.3"), "ip:127.0.0.0/8");
	ck_assert_str_eq(key6("::ffff:10.1.2.3"), "ip:10.1.2.3");
	ck_assert_str_eq(key6("::1"), "ip6:::1");
	ck_assert_str_eq(key6("2001:db8:1:2:aaaa:bbbb:cccc:dddd"),
	    "ip6:2001:db8:1:2::/64");
	ck_assert_str_eq(key6("2001:db8:1:2::9"), "ip6:2001:db8:1:2::/64");
	ck_assert_str_eq(key6("2001:db8:1:3::9"), "ip6:2001:db8:1:3::/64");
	ck_assert_str_eq(key6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	    "ip6:ffff:ffff:ffff:ffff::/64");
	/* A Unix peer is its uid. */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	eg_peer_key(sv[0], (struct sockaddr *)&sun, out, sizeof(out));
	snprintf(want, sizeof(want), "uid:%u", (unsigned)getuid());
	ck_assert_str_eq(out, want);
	close(sv[0]);
	close(sv[1]);
	/* Credentials that cannot be read: one peer for all of them. */
	eg_peer_key(-1, (struct sockaddr *)&sun, out, sizeof(out));
	ck_assert_str_eq(out, "uid:unknown");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("egress_peers");
	TCase *tc = tcase_create("peers");

	tcase_add_test(tc, test_tally_bounds);
	tcase_add_test(tc, test_shares);
	tcase_add_test(tc, test_pools);
	tcase_add_test(tc, test_peer_admit);
	tcase_add_test(tc, test_peer_keys);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
