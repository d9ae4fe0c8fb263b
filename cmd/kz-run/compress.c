/*
 * Tool-result compression (compress.h).  The compressor is a summarising
 * step, so it is not a library: it is an operator's command, and it runs
 * where it can add no authority.  kz-sandbox's one-shot run gives it a
 * read-only root view, a throwaway workspace, no capabilities and, with
 * no egress socket and no grant, a network namespace with loopback only.
 * kz-sandbox is started with an empty environment and no config file, so
 * neither kz-run's environment nor a SANDBOX_* variable can hand it an
 * egress socket or a wider view.
 *
 * The text goes in through a socket pair (sent with MSG_NOSIGNAL, so a
 * compressor that stops reading cannot kill kz-run with SIGPIPE) and
 * comes back through a pipe; the compressor's stderr, which might echo
 * the input, goes to /dev/null, never to kz-run's log.  A result is kept
 * only when the compressor exited 0, before the deadline, with text
 * (UTF-8 without NUL, so that it can go wherever the original could)
 * strictly shorter than its input.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_io.h"
#include "kz_json.h"
#include "compress.h"
#include "banned.h"

/* After the deadline kz-sandbox gets SIGTERM, which tears its sandbox
 * down; SIGKILL follows only if that takes longer than this. */
#define TEARDOWN_MS 3000
/* kz-sandbox keeps no less than this of a stream. */
#define SBX_OUT_MIN 1024

struct job {
	pid_t pid;
	int in, out; /* to the compressor's stdin, from its stdout */
};

static void
child(const char *const *argv, int in, int out)
{
	static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	int null = open("/dev/null", O_WRONLY);

	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || null < 0 ||
	    dup2(null, 2) < 0)
		_exit(127);
	execve(argv[0], (char *const *)argv, envp);
	_exit(127);
}

static int
spawn(const char *sandbox, const char *cmd, int64_t timeout_ms, size_t len,
    struct job *j)
{
	char id[32], tmo[24], cap[24];
	const char *argv[] = {sandbox, "run", "--id", id, "--egress-socket", "",
	    "--projection", "", "--timeout", tmo, "--stdout-max", cap,
	    "--stderr-max", "1024", "--", "/bin/sh", "-c", cmd, "kz-compress",
	    NULL};
	int sp[2], op[2];

	snprintf(id, sizeof(id), "compress-%ld", (long)getpid());
	snprintf(tmo, sizeof(tmo), "%lld",
	    (long long)(timeout_ms + 999) / 1000);
	/* One byte more than the input, so a result that long is seen. */
	snprintf(cap, sizeof(cap), "%zu",
	    len + 1 > SBX_OUT_MIN ? len + 1 : SBX_OUT_MIN);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
		return KZ_ESYS;
	if (pipe2(op, O_CLOEXEC) != 0) {
		close(sp[0]), close(sp[1]);
		return KZ_ESYS;
	}
	if ((j->pid = fork()) == 0)
		child(argv, sp[1], op[1]);
	close(sp[1]), close(op[1]);
	if (j->pid < 0) {
		close(sp[0]), close(op[0]);
		return KZ_ESYS;
	}
	j->in = sp[0], j->out = op[0];
	(void)fcntl(j->in, F_SETFL, O_NONBLOCK);
	(void)fcntl(j->out, F_SETFL, O_NONBLOCK);
	return 0;
}

/* Feeds the input while the output is read, until the output ends: 0,
 * KZ_ETOOBIG once the result is as long as the input, KZ_ETIMEDOUT. */
static int
pump(struct job *j, const char *in, size_t len, char *buf, size_t *n,
    int64_t deadline)
{
	size_t sent = 0;
	ssize_t r;

	for (;;) {
		struct pollfd p[2] = {{j->out, POLLIN, 0}, {j->in, POLLOUT, 0}};
		int64_t left = deadline - kz_now_ms();

		if (left <= 0)
			return KZ_ETIMEDOUT;
		if (poll(p, j->in >= 0 ? 2 : 1, (int)left) < 0 &&
		    errno != EINTR)
			return KZ_ESYS;
		if (j->in >= 0 && p[1].revents != 0) {
			r = send(j->in, in + sent, len - sent, MSG_NOSIGNAL);
			if (r > 0)
				sent += (size_t)r;
			/* Done, or the compressor will read no more. */
			if (sent == len ||
			    (r < 0 && errno != EAGAIN && errno != EINTR)) {
				close(j->in);
				j->in = -1;
			}
		}
		if (p[0].revents == 0)
			continue;
		r = read(j->out, buf + *n, len - *n);
		if (r == 0)
			return 0;
		if (r > 0 && (*n += (size_t)r) >= len)
			return KZ_ETOOBIG;
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			return KZ_ESYS;
	}
}

/*
 * The wait status of kz-sandbox, given until the deadline to exit on its
 * own; then SIGTERM, on which it kills the compressor and tears its
 * sandbox down, and SIGKILL only if that takes longer than TEARDOWN_MS.
 * -1 when it had to be stopped.
 */
static int
reap(pid_t pid, int64_t deadline)
{
	int64_t until = deadline;
	bool stopped = false;
	int st = 0;
	pid_t r;

	for (;;) {
		if ((r = waitpid(pid, &st, WNOHANG)) != 0)
			break;
		if (kz_now_ms() < until) {
			(void)usleep(5000);
			continue;
		}
		if (stopped) {
			(void)kill(pid, SIGKILL);
			while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
				;
			break;
		}
		(void)kill(pid, SIGTERM);
		stopped = true;
		until = kz_now_ms() + TEARDOWN_MS;
	}
	return r < 0 || stopped ? -1 : st;
}

/* What is kept: a text (UTF-8, no NUL), the compressor having exited 0. */
static int
judge(int st, const char *buf, size_t n)
{
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return KZ_EDENIED;
	if (n == 0)
		return KZ_EMISSING;
	if (memchr(buf, '\0', n) != NULL || !kz_utf8_valid(buf, n))
		return KZ_EUTF8;
	return 0;
}

int
run_compress_exec(const char *sandbox, const char *cmd, int64_t timeout_ms,
    const char *in, size_t len, char **out, size_t *outlen)
{
	struct job j = {-1, -1, -1};
	int64_t deadline;
	size_t n = 0;
	char *buf;
	int e, st;

	if (cmd == NULL || cmd[0] == '\0' || len == 0 ||
	    len > RUN_COMPRESS_IN_MAX)
		return KZ_EINVAL;
	if ((buf = malloc(len + 1)) == NULL)
		return KZ_ENOMEM;
	if ((e = spawn(sandbox, cmd, timeout_ms, len, &j)) != 0)
		goto out;
	deadline = kz_now_ms() + timeout_ms;
	e = pump(&j, in, len, buf, &n, deadline);
	if (j.in >= 0)
		close(j.in);
	close(j.out);
	/* A result too long or too late is not waited for. */
	st = reap(j.pid, e != 0 ? 0 : deadline);
	if (e == 0)
		e = judge(st, buf, n);
out:
	if (e != 0) {
		free(buf);
		return e;
	}
	buf[n] = '\0';
	*out = buf, *outlen = n;
	return 0;
}

/* kz-sandbox next to kz-run, as kz-egress is by default. */
static int
sandbox_bin(char *path, size_t len)
{
	char self[PATH_MAX];

	if (realpath("/proc/self/exe", self) == NULL)
		return KZ_ESYS;
	if ((size_t)snprintf(path, len, "%s/kz-sandbox", dirname(self)) >= len)
		return KZ_ETOOBIG;
	return 0;
}

int
run_compress(const struct run_conf *c, const char *in, size_t len, char **out,
    size_t *outlen)
{
	char sandbox[PATH_MAX];
	int e;

	if (c->compress_cmd[0] == '\0')
		return KZ_EINVAL;
	if ((e = sandbox_bin(sandbox, sizeof(sandbox))) != 0)
		return e;
	return run_compress_exec(sandbox, c->compress_cmd,
	    RUN_COMPRESS_TIMEOUT_MS, in, len, out, outlen);
}
