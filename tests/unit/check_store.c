/* lib/store.c against a real redis-server/valkey-server (teststore.h):
 * connect and timeout errors, error replies, EVALSHA with the reload on
 * NOSCRIPT, and the asynchronous client's replies, per-call timers,
 * reconnects and shutdown. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <event2/event.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_store.h"
#include "teststore.h"
#include "kz_check.h"
#include "banned.h"

static struct kz_store *
conn(int timeout_ms)
{
	struct kz_store *s = NULL;
	char why[160] = "";

	ck_assert_msg(kz_store_open(ts_sock, "t", timeout_ms, &s, why,
	                  sizeof(why)) == 0,
	    "open: %s", why);
	return s;
}

static void
flush(void)
{
	struct kz_store *s;
	redisReply *r;
	const char *av[] = {"FLUSHALL"};

	ts_freeze(false);
	s = conn(2000);
	ck_assert(kz_store_cmd(s, 1, av, &r, NULL, 0) == 0);
	freeReplyObject(r);
	kz_store_free(s);
}

START_TEST(test_open_errors)
{
	struct kz_store *s = (struct kz_store *)0x1;
	char why[160] = "", path[160];

	snprintf(path, sizeof(path), "%s/nope.sock", ts_dir);
	ck_assert_int_eq(kz_store_open(path, "t", 500, &s, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_str_eq(why, "store unreachable");
	ck_assert_int_eq(kz_store_open("", "t", 500, &s, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_int_eq(kz_store_open(NULL, "t", 500, &s, why, sizeof(why)),
	    KZ_EUNAVAIL);
	/* Constructors set *out only on success. */
	ck_assert_ptr_eq(s, (struct kz_store *)0x1);
	kz_store_free(NULL);
}
END_TEST

/* Braces would break the hash tag: deployment names stay plain. */
static const char *const bad_deps[] = {"", "a{b}", "a}", "a b", "a:b",
    "0123456789012345678901234567890123456789012345678901234567890123x"};

START_TEST(test_bad_dep)
{
	struct kz_store *s = NULL;
	char why[160];

	ck_assert_int_eq(kz_store_open(ts_sock, bad_deps[_i], 500, &s, why,
	                     sizeof(why)),
	    KZ_EINVAL);
	ck_assert_ptr_null(s);
}
END_TEST

START_TEST(test_keys)
{
	struct kz_store *s = conn(1000);
	char buf[16], big[KZ_STORE_KEY_MAX];

	ck_assert_str_eq(kz_store_prefix(s), "kz:{t}:");
	ck_assert_int_eq(kz_store_key(s, "w:1", big, sizeof(big)), 0);
	ck_assert_str_eq(big, "kz:{t}:w:1");
	ck_assert_int_eq(kz_store_key(s, "0123456789", buf, sizeof(buf)),
	    KZ_ETOOBIG);
	kz_store_free(s);
}
END_TEST

START_TEST(test_cmd_and_error_reply)
{
	struct kz_store *s = conn(1000);
	const char *set[] = {"SET", "kz:{t}:x", "v\0w"},
	           *get[] = {"GET", "kz:{t}:x"},
	           *bad[] = {"NOSUCHCOMMAND", "x"},
	           *wrong[] = {"HGET", "kz:{t}:x", "f"};
	redisReply *r = NULL, *keep = (redisReply *)0x1;
	char why[160] = "";

	ck_assert_int_eq(kz_store_cmd(s, 3, set, &r, why, sizeof(why)), 0);
	freeReplyObject(r);
	ck_assert_int_eq(kz_store_cmd(s, 2, get, &r, why, sizeof(why)), 0);
	ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
	ck_assert_str_eq(r->str, "v");
	freeReplyObject(r);
	r = keep;
	ck_assert_int_eq(kz_store_cmd(s, 2, bad, &r, why, sizeof(why)),
	    KZ_EPROTO);
	ck_assert_ptr_eq(r, keep);
	ck_assert(strstr(why, "ERR") == why);
	ck_assert_int_eq(kz_store_cmd(s, 3, wrong, &r, why, sizeof(why)),
	    KZ_EPROTO);
	ck_assert(strstr(why, "WRONGTYPE") == why);
	/* The connection is still usable after an error reply. */
	ck_assert_int_eq(kz_store_cmd(s, 2, get, &r, why, sizeof(why)), 0);
	freeReplyObject(r);
	kz_store_free(s);
}
END_TEST

/* A frozen server: the call times out (unknown outcome) and the
 * connection is never used again, so no late reply can be read as the
 * answer to a later call. */
START_TEST(test_timeout_fails_closed)
{
	struct kz_store *s = conn(300);
	const char *ping[] = {"PING"};
	redisReply *r;
	char why[160] = "";
	int64_t t0;

	ts_freeze(true);
	t0 = kz_now_ms();
	ck_assert_int_eq(kz_store_cmd(s, 1, ping, &r, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_int_lt(kz_now_ms() - t0, 2000);
	ck_assert_str_eq(why, "store did not answer");
	ts_freeze(false);
	ck_assert_int_eq(kz_store_cmd(s, 1, ping, &r, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_str_eq(why, "store connection lost");
	kz_store_free(s);
	s = conn(300);
	ck_assert_int_eq(kz_store_cmd(s, 1, ping, &r, why, sizeof(why)), 0);
	freeReplyObject(r);
	kz_store_free(s);
}
END_TEST

static struct kz_script sc_add = {"add",
    "return redis.call('INCRBY', KEYS[1], ARGV[1])", ""};

START_TEST(test_eval_noscript_reload)
{
	struct kz_store *s = conn(1000);
	const char *av[] = {"kz:{t}:n", "5"}, *fl[] = {"SCRIPT", "FLUSH"};
	redisReply *r;
	char why[160] = "", sha[41];

	sc_add.sha[0] = '\0';
	ck_assert_int_eq(kz_store_eval(s, &sc_add, 1, 2, av, &r, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(r->integer, 5);
	freeReplyObject(r);
	ck_assert_uint_eq(strlen(sc_add.sha), 40);
	snprintf(sha, sizeof(sha), "%s", sc_add.sha);
	/* The server loses its script cache (restart, failover). */
	ck_assert_int_eq(kz_store_cmd(s, 2, fl, &r, why, sizeof(why)), 0);
	freeReplyObject(r);
	ck_assert_int_eq(kz_store_eval(s, &sc_add, 1, 2, av, &r, why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(r->integer, 10);
	freeReplyObject(r);
	ck_assert_str_eq(sc_add.sha, sha);
	kz_store_free(s);
}
END_TEST

START_TEST(test_eval_errors)
{
	struct kz_store *s = conn(1000);
	struct kz_script boom = {"boom", "return redis.error_reply('no')", ""},
	                 syn = {"syn", "this is not lua", ""};
	const char *av[70];
	redisReply *r;
	char why[160] = "";
	int i;

	for (i = 0; i < 70; i++)
		av[i] = "x";
	ck_assert_int_eq(kz_store_eval(s, &sc_add, 2, 1, av, &r, why,
	                     sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_store_eval(s, &sc_add, 0, 65, av, &r, why,
	                     sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_store_eval(s, &boom, 0, 0, av, &r, why,
	                     sizeof(why)),
	    KZ_EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "no"));
	ck_assert_int_eq(kz_store_eval(s, &syn, 0, 0, av, &r, why, sizeof(why)),
	    KZ_EPROTO);
	ck_assert_str_eq(syn.sha, "");
	kz_store_free(s);
}
END_TEST

START_TEST(test_runid_and_opid)
{
	struct kz_store *s = conn(1000);
	char a[64], b[64], o1[KZ_OPID_HEX + 1], o2[KZ_OPID_HEX + 1];

	ck_assert_int_eq(kz_store_runid(s, a, sizeof(a), NULL, 0), 0);
	ck_assert_uint_eq(strlen(a), 40);
	ck_assert_int_eq(kz_store_runid(s, b, 8, NULL, 0), KZ_EPROTO);
	kz_store_free(s);
	kz_store_opid(o1);
	kz_store_opid(o2);
	ck_assert_uint_eq(strspn(o1, "0123456789abcdef"), KZ_OPID_HEX);
	ck_assert_str_ne(o1, o2);
	/* A restart changes the run id (the pool's epoch follows it). */
	ck_assert_int_eq(ts_restart(), 0);
	s = conn(1000);
	ck_assert_int_eq(kz_store_runid(s, b, sizeof(b), NULL, 0), 0);
	ck_assert_str_ne(a, b);
	kz_store_free(s);
}
END_TEST

/* ---- the asynchronous client ---- */

struct ares {
	int n, err, ups, downs;
	long long integer;
	char str[64], why[160];
};

static struct event_base *base;
static struct kz_astore *as;
static struct ares res;

static void
on_reply(int err, redisReply *r, const char *why, void *arg)
{
	struct ares *x = arg;

	x->n++;
	x->err = err;
	x->integer = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer :
	                                                           -1;
	snprintf(x->str, sizeof(x->str), "%s",
	    r != NULL && r->str != NULL ? r->str : "");
	snprintf(x->why, sizeof(x->why), "%s", why != NULL ? why : "");
}

static void
on_up(struct kz_astore *a, void *arg)
{
	((struct ares *)arg)->ups++;
}

static void
on_down(struct kz_astore *a, void *arg)
{
	((struct ares *)arg)->downs++;
}

/* Runs the loop until *v reaches want or ms pass. */
static bool
spin(const int *v, int want, int ms)
{
	int64_t end = kz_now_ms() + ms;

	while (*v < want && kz_now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), ts_nap(2);
	return *v >= want;
}

static void
anew(const char *sock, int timeout_ms)
{
	struct kz_astore_conf c = {.sock = sock,
	    .dep = "t",
	    .timeout_ms = timeout_ms,
	    .reconnect_ms = 50,
	    .on_up = on_up,
	    .on_down = on_down,
	    .arg = &res};
	char why[160] = "";

	memset(&res, 0, sizeof(res));
	ck_assert((base = event_base_new()) != NULL);
	ck_assert_msg(kz_astore_new(base, &c, &as, why, sizeof(why)) == 0, "%s",
	    why);
}

static void
afree(void)
{
	kz_astore_free(as);
	event_base_free(base);
}

START_TEST(test_async_cmd_and_eval)
{
	const char *ping[] = {"PING"}, *bad[] = {"NOSUCH"},
	           *av[] = {"kz:{t}:an", "7"}, *fl[] = {"SCRIPT", "FLUSH"};

	anew(ts_sock, 1000);
	ck_assert(spin(&res.ups, 1, 3000));
	ck_assert(kz_astore_connected(as));
	ck_assert_str_eq(kz_astore_prefix(as), "kz:{t}:");
	ck_assert_int_eq(kz_astore_cmd(as, 1, ping, on_reply, &res), 0);
	ck_assert(spin(&res.n, 1, 3000));
	ck_assert_int_eq(res.err, 0);
	ck_assert_str_eq(res.str, "PONG");
	ck_assert_int_eq(kz_astore_cmd(as, 1, bad, on_reply, &res), 0);
	ck_assert(spin(&res.n, 2, 3000));
	ck_assert_int_eq(res.err, KZ_EPROTO);
	ck_assert(strstr(res.why, "ERR") == res.why);
	/* First use sends the source; after a flush, NOSCRIPT makes the
	 * client send it again, transparently. */
	sc_add.sha[0] = '\0';
	ck_assert_int_eq(kz_astore_eval(as, &sc_add, 1, 2, av, on_reply, &res),
	    0);
	ck_assert(spin(&res.n, 3, 3000));
	ck_assert_int_eq(res.integer, 7);
	ck_assert_int_eq(kz_astore_cmd(as, 2, fl, on_reply, &res), 0);
	ck_assert(spin(&res.n, 4, 3000));
	ck_assert_uint_eq(strlen(sc_add.sha), 40);
	ck_assert_int_eq(kz_astore_eval(as, &sc_add, 1, 2, av, on_reply, &res),
	    0);
	ck_assert(spin(&res.n, 5, 3000));
	ck_assert_int_eq(res.err, 0);
	ck_assert_int_eq(res.integer, 14);
	ck_assert_int_eq(kz_astore_eval(as, &sc_add, 3, 2, av, on_reply, &res),
	    KZ_EINVAL);
	afree();
}
END_TEST

/* A frozen server: the call's own timer answers KZ_EUNAVAIL, the
 * connection is dropped (on_down) and comes back by itself (on_up). */
START_TEST(test_async_timeout_and_reconnect)
{
	const char *ping[] = {"PING"};
	int64_t t0;

	anew(ts_sock, 200);
	ck_assert(spin(&res.ups, 1, 3000));
	ts_freeze(true);
	t0 = kz_now_ms();
	ck_assert_int_eq(kz_astore_cmd(as, 1, ping, on_reply, &res), 0);
	ck_assert(spin(&res.n, 1, 3000));
	ck_assert_int_eq(res.err, KZ_EUNAVAIL);
	ck_assert_int_lt(kz_now_ms() - t0, 1500);
	ck_assert_int_eq(res.downs, 1);
	ck_assert(!kz_astore_connected(as));
	ts_freeze(false);
	ck_assert(spin(&res.ups, 2, 5000));
	ck_assert_int_eq(kz_astore_cmd(as, 1, ping, on_reply, &res), 0);
	ck_assert(spin(&res.n, 2, 3000));
	ck_assert_int_eq(res.err, 0);
	/* Exactly one answer per call: the late PONG was not delivered. */
	ck_assert_int_eq(res.n, 2);
	afree();
}
END_TEST

START_TEST(test_async_unreachable_and_free)
{
	const char *ping[] = {"PING"};
	char path[160];

	snprintf(path, sizeof(path), "%s/nope.sock", ts_dir);
	anew(path, 200);
	ts_nap(100);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert(!kz_astore_connected(as));
	ck_assert_int_eq(kz_astore_cmd(as, 1, ping, on_reply, &res),
	    KZ_EUNAVAIL);
	ck_assert_int_eq(res.n, 0);
	afree();
	/* Pending calls are answered when the client is freed. */
	anew(ts_sock, 5000);
	ck_assert(spin(&res.ups, 1, 3000));
	ts_freeze(true);
	ck_assert_int_eq(kz_astore_cmd(as, 1, ping, on_reply, &res), 0);
	ck_assert_int_eq(kz_astore_cmd(as, 1, ping, on_reply, &res), 0);
	kz_astore_free(as);
	ts_freeze(false);
	ck_assert_int_eq(res.n, 2);
	ck_assert_int_eq(res.err, KZ_EUNAVAIL);
	event_base_free(base);
}
END_TEST

START_TEST(test_async_bad_conf)
{
	struct kz_astore_conf c = {.sock = ts_sock,
	    .dep = "a{b}",
	    .timeout_ms = 100};
	struct kz_astore *a = NULL;

	ck_assert((base = event_base_new()) != NULL);
	ck_assert_int_eq(kz_astore_new(base, &c, &a, NULL, 0), KZ_EINVAL);
	c.dep = "t";
	c.timeout_ms = 0;
	ck_assert_int_eq(kz_astore_new(base, &c, &a, NULL, 0), KZ_EINVAL);
	c.timeout_ms = 100;
	c.sock = "";
	ck_assert_int_eq(kz_astore_new(base, &c, &a, NULL, 0), KZ_EUNAVAIL);
	ck_assert_ptr_null(a);
	event_base_free(base);
}
END_TEST

/* A raw command on a connection of our own, past every kz check. */
static void
raw(const char *auth_pw, const char *cmd)
{
	redisContext *rc = redisConnectUnix(ts_sock);
	redisReply *r;

	ck_assert(rc != NULL && !rc->err);
	if (auth_pw != NULL) {
		r = redisCommand(rc, "AUTH kz %s", auth_pw);
		ck_assert(r != NULL && r->type != REDIS_REPLY_ERROR);
		freeReplyObject(r);
	}
	r = redisCommand(rc, cmd);
	ck_assert_msg(r != NULL && r->type != REDIS_REPLY_ERROR, "%s", cmd);
	freeReplyObject(r);
	redisFree(rc);
}

/*
 * A replica is never written to: the handshake's ROLE keeps the client
 * down (and says why) while the server is a replica, a demoted primary's
 * READONLY drops the connection, and the client comes up by itself once
 * the server is a primary again.
 */
START_TEST(test_async_replica_refused)
{
	const char *set[] = {"SET", "kz:{t}:x", "1"};
	struct kz_store *s = NULL;
	char why[160] = "";

	anew(ts_sock, 300);
	ck_assert(spin(&res.ups, 1, 3000));
	raw(NULL, "REPLICAOF 127.0.0.1 1");
	ck_assert_int_eq(kz_astore_cmd(as, 3, set, on_reply, &res), 0);
	ck_assert(spin(&res.n, 1, 3000));
	ck_assert_int_eq(res.err, KZ_EUNAVAIL);
	ck_assert_int_eq(res.downs, 1);
	ck_assert(!spin(&res.ups, 2, 800));
	ck_assert(!kz_astore_connected(as));
	ck_assert_ptr_nonnull(strstr(kz_astore_why(as), "not a primary"));
	ck_assert_int_eq(kz_astore_cmd(as, 3, set, on_reply, &res),
	    KZ_EUNAVAIL);
	ck_assert_int_eq(kz_store_open(ts_sock, "t", 500, &s, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_ptr_nonnull(strstr(why, "not a primary"));
	raw(NULL, "REPLICAOF NO ONE");
	ck_assert(spin(&res.ups, 2, 3000));
	afree();
}
END_TEST

static void
write_pw(const char *path, const char *pw)
{
	FILE *f = fopen(path, "w");

	ck_assert(f != NULL);
	fprintf(f, "%s\n", pw);
	fclose(f);
	ck_assert(chmod(path, 0600) == 0);
}

/* ACL authentication, blocking and async: refused without credentials or
 * with a wrong password (the reason names the user, never a password). */
START_TEST(test_auth)
{
	char good[96], bad[96], why[160] = "";
	struct kz_store *s = NULL;

	snprintf(good, sizeof(good), "%s/good.pw", ts_dir);
	snprintf(bad, sizeof(bad), "%s/bad.pw", ts_dir);
	write_pw(good, "Gd-pw-1");
	write_pw(bad, "Bd-pw-2");
	raw(NULL, "ACL SETUSER kz on >Gd-pw-1 ~* &* +@all");
	raw(NULL, "ACL SETUSER default off");
	kz_store_auth_clear();
	ck_assert_int_eq(kz_store_open(ts_sock, "t", 500, &s, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_ptr_nonnull(strstr(why, "requires authentication"));
	ck_assert_int_eq(kz_store_auth_load("kz", bad, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_store_open(ts_sock, "t", 500, &s, why, sizeof(why)),
	    KZ_EDENIED);
	ck_assert_ptr_nonnull(
	    strstr(why, "refused authentication for user kz"));
	ck_assert_ptr_null(strstr(why, "pw-"));
	anew(ts_sock, 300);
	ck_assert(!spin(&res.ups, 1, 600));
	ck_assert_ptr_nonnull(
	    strstr(kz_astore_why(as), "refused authentication"));
	afree();
	ck_assert_int_eq(kz_store_auth_load("kz", good, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_store_open(ts_sock, "t", 500, &s, why, sizeof(why)),
	    0);
	kz_store_free(s);
	anew(ts_sock, 300);
	ck_assert(spin(&res.ups, 1, 3000));
	afree();
	raw("Gd-pw-1", "ACL SETUSER default on nopass ~* &* +@all");
	kz_store_auth_clear();
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("blocking"), *ta = tcase_create("async");

	tcase_add_unchecked_fixture(tc, ts_start, ts_stop);
	tcase_add_checked_fixture(tc, flush, NULL);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_open_errors);
	tcase_add_loop_test(tc, test_bad_dep, 0,
	    sizeof(bad_deps) / sizeof(bad_deps[0]));
	tcase_add_test(tc, test_keys);
	tcase_add_test(tc, test_cmd_and_error_reply);
	tcase_add_test(tc, test_timeout_fails_closed);
	tcase_add_test(tc, test_eval_noscript_reload);
	tcase_add_test(tc, test_eval_errors);
	tcase_add_test(tc, test_runid_and_opid);
	suite_add_tcase(s, tc);
	tcase_add_unchecked_fixture(ta, ts_start, ts_stop);
	tcase_add_checked_fixture(ta, flush, NULL);
	tcase_set_timeout(ta, 20);
	tcase_add_test(ta, test_async_cmd_and_eval);
	tcase_add_test(ta, test_async_timeout_and_reconnect);
	tcase_add_test(ta, test_async_unreachable_and_free);
	tcase_add_test(ta, test_async_bad_conf);
	tcase_add_test(ta, test_async_replica_refused);
	tcase_add_test(ta, test_auth);
	suite_add_tcase(s, ta);
	return kz_check_run(s);
}
