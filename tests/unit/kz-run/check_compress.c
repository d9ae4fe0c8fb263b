/* kz-run compress.c: a real kz-sandbox one-shot run per case, a compressor
 * that shortens and every kind that must fall back to the original. */
#include <check.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kz_io.h"
#include "compress.h"
#include "kz_check.h"
#include "banned.h"

#define SENTINEL ((char *)"untouched")

static char sandbox[PATH_MAX];
static int lfd = -1; /* a host listener the network case must not reach */
static char net_cmd[200];

struct ccase {
	const char *name, *cmd;
	const char *in;
	const char *want; /* NULL: must fall back */
};

static const char spaced[] = "a b c d e f g h i j k l m n o p";

static const struct ccase cases[] = {
    {"shortens", "tr -d ' '", spaced, "abcdefghijklmnop"},
    {"fails", "cat >/dev/null; exit 1", spaced, NULL},
    {"short but fails", "echo x; exit 1", spaced, NULL},
    {"killed", "kill -9 $$", spaced, NULL},
    {"longer", "cat; echo more", spaced, NULL},
    {"as long", "cat", spaced, NULL},
    {"empty", "cat >/dev/null", spaced, NULL},
    {"not found", "/nonexistent/compressor", spaced, NULL},
    {"echo to stderr", "cat >&2; echo ok", spaced, "ok\n"},
    {"a NUL", "printf 'a\\000b'", spaced, NULL},
    {"not UTF-8", "printf 'a\\377b'", spaced, NULL},
    {"UTF-8", "printf 'caf\\303\\251'", spaced, "caf\xc3\xa9"},
};

static void
setup(void)
{
	const char *env = getenv("KZ_SANDBOX_BIN");
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);

	snprintf(sandbox, sizeof(sandbox), "%s",
	    env != NULL ? env : "bin/kz-sandbox");
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert((lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) >= 0);
	ck_assert(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	ck_assert(listen(lfd, 4) == 0);
	ck_assert(getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
	/* Prints a short line only if the host's loopback answered. */
	snprintf(net_cmd, sizeof(net_cmd),
	    "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%u' && echo net",
	    (unsigned)ntohs(a.sin_port));
}

static void
teardown(void)
{
	if (lfd >= 0)
		close(lfd);
	lfd = -1;
}

static bool
usable(void)
{
	if (geteuid() != 0 || access(sandbox, X_OK) != 0) {
		fprintf(stderr, "check_compress: skipped (needs root and %s)\n",
		    sandbox);
		return false;
	}
	return true;
}

/* One compression; the input must come back as it went in. */
static int
one(const char *cmd, const char *in, size_t len, int64_t tmo, char **out,
    size_t *olen)
{
	char *copy = malloc(len);
	int e;

	ck_assert(copy != NULL);
	memcpy(copy, in, len);
	e = run_compress_exec(sandbox, cmd, tmo, copy, len, out, olen);
	ck_assert_msg(memcmp(copy, in, len) == 0, "input changed");
	free(copy);
	return e;
}

START_TEST(test_cases)
{
	const struct ccase *k = &cases[_i];
	char *out = SENTINEL;
	size_t olen = 7;
	int e;

	if (!usable())
		return;
	e = one(k->cmd, k->in, strlen(k->in), RUN_COMPRESS_TIMEOUT_MS, &out,
	    &olen);
	if (k->want == NULL) {
		ck_assert_msg(e != 0, "%s: kept a result", k->name);
		ck_assert_msg(out == SENTINEL && olen == 7, "%s: out set",
		    k->name);
		return;
	}
	ck_assert_msg(e == 0, "%s: %d", k->name, e);
	ck_assert_uint_eq(olen, strlen(k->want));
	ck_assert_str_eq(out, k->want);
	free(out);
}
END_TEST

/* Whether the one-shot sandbox of this process left a cgroup behind. */
static bool
cgroup_left(void)
{
	static const char *const ctl[] = {"", "memory/", "pids/", "cpu/",
	    "freezer/", NULL};
	char p[PATH_MAX];

	for (int i = 0; ctl[i] != NULL; i++) {
		snprintf(p, sizeof(p),
		    "/sys/fs/cgroup/%skz-sandbox/compress-%ld", ctl[i],
		    (long)getpid());
		if (access(p, F_OK) == 0)
			return true;
	}
	return false;
}

/* A compressor that hangs, with its stdout open or closed after a short
 * line, is stopped at the bound, sandbox and all. */
static const char *const hang[] = {"sleep 60", "echo x; exec >&-; sleep 60"};

START_TEST(test_hangs)
{
	char *out = SENTINEL;
	size_t olen = 0;
	int64_t t0 = kz_now_ms();

	if (!usable())
		return;
	ck_assert_int_ne(one(hang[_i], spaced, strlen(spaced), 1000, &out,
	                     &olen),
	    0);
	ck_assert(out == SENTINEL);
	ck_assert_int_ge(kz_now_ms() - t0, 1000);
	ck_assert_int_lt(kz_now_ms() - t0, 1000 + 4000);
	ck_assert_msg(!cgroup_left(), "the sandbox was not torn down");
}
END_TEST

/* The sandbox's loopback is its own: the host's listener is not there,
 * so the compressor fails and the original stands. */
START_TEST(test_network)
{
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	char *out = SENTINEL;
	size_t olen = 0;

	if (!usable())
		return;
	ck_assert_int_ne(one(net_cmd, spaced, strlen(spaced),
	                     RUN_COMPRESS_TIMEOUT_MS, &out, &olen),
	    0);
	ck_assert(out == SENTINEL);
	ck_assert_int_lt(accept(lfd, (struct sockaddr *)&peer, &pl), 0);
	ck_assert_int_eq(errno, EAGAIN);
}
END_TEST

/* A compressor that never reads a large input must neither block nor
 * kill the caller with SIGPIPE. */
START_TEST(test_unread_input)
{
	size_t len = 300000;
	char *big = malloc(len), *out = SENTINEL;
	size_t olen = 0;

	if (!usable()) {
		free(big);
		return;
	}
	ck_assert(big != NULL);
	memset(big, 'x', len);
	ck_assert_int_eq(one("echo short", big, len, RUN_COMPRESS_TIMEOUT_MS,
	                     &out, &olen),
	    0);
	ck_assert_str_eq(out, "short\n");
	free(out);
	free(big);
}
END_TEST

/* Off, empty or oversized input: no compressor runs at all. */
START_TEST(test_refused_inputs)
{
	static struct run_conf c;
	char *out = SENTINEL;
	size_t olen = 0;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(run_compress(&c, spaced, strlen(spaced), &out, &olen),
	    KZ_EINVAL);
	ck_assert_int_eq(run_compress_exec(sandbox, "cat", 1000, "", 0, &out,
	                     &olen),
	    KZ_EINVAL);
	ck_assert_int_eq(run_compress_exec(sandbox, "cat", 1000, spaced,
	                     RUN_COMPRESS_IN_MAX + 1, &out, &olen),
	    KZ_EINVAL);
	ck_assert(out == SENTINEL);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("run-compress");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_cases, 0,
	    sizeof(cases) / sizeof(cases[0]));
	tcase_add_loop_test(tc, test_hangs, 0, sizeof(hang) / sizeof(hang[0]));
	tcase_add_test(tc, test_network);
	tcase_add_test(tc, test_unread_input);
	tcase_add_test(tc, test_refused_inputs);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
