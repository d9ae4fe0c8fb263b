/*
 * kz-sandbox: the code-sandbox worker.  run (one-shot), serve (a persistent
 * worker driven over its socket), classify (artifact scripts) and seccomp
 * (print the system call policy).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_log.h"
#include "kz_classify.h"
#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: kz-sandbox run [--config FILE] [--id ID] [--env "
	    "NAME=VALUE]...\n"
	    "           [--cwd DIR] [--grant-file FILE] [--broker-token-file "
	    "FILE]\n"
	    "           [--pass-fd N]... [--start-fd N]\n"
	    "           [options] -- CMD [ARG...]\n"
	    "       kz-sandbox serve --id ID [--socket PATH] [--pid-file "
	    "FILE]\n"
	    "           [--config FILE] [options]\n"
	    "       kz-sandbox reap --id ID [--config FILE] [options]\n"
	    "       kz-sandbox files [--config FILE] [options]\n"
	    "       kz-sandbox classify FILE...\n"
	    "       kz-sandbox seccomp\n"
	    "       kz-sandbox --help | --version\n"
	    "options (each also a config key and environment variable):\n");
	sbx_conf_usage(fp);
}

static int die(enum kz_exit code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Says why on stderr and returns code, the status main exits with. */
static int
die(enum kz_exit code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kz-sandbox: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

struct opts {
	const char *config, *pid_file, *cwd, *grant_file, *token_file, *id;
	const char *env[SBX_ENV_MAX];
	int nenv;
	int pass[SBX_PASS_MAX];
	int npass;
	int start_fd; /* -1: run as soon as the sandbox is made */
	char **cmd;
};

/* Splits argv into our options and the command after "--". */
static int
parse(int argc, char **argv, struct sbx_conf *c, struct opts *o)
{
	char why[256];
	int i, r;

	for (i = 2; i < argc; i++)
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			o->config = argv[i + 1];
	if (o->config == NULL)
		o->config = getenv("KZ_CONFIG");
	if (sbx_conf_load(c, o->config, why, sizeof(why)) != 0)
		return die(KZ_EXIT_USAGE, "bad config: %s", why);
	for (i = 2; i < argc; i++) {
		const char *a = argv[i], *v;

		if (strcmp(a, "--") == 0) {
			o->cmd = argv + i + 1;
			break;
		}
		if (strncmp(a, "--", 2) != 0 || i + 1 >= argc)
			return die(KZ_EXIT_USAGE, "bad argument %s", a);
		v = argv[++i];
		a += 2;
		if (strcmp(a, "config") == 0)
			continue;
		else if (strcmp(a, "pid-file") == 0)
			o->pid_file = v;
		else if (strcmp(a, "cwd") == 0)
			o->cwd = v;
		else if (strcmp(a, "grant-file") == 0)
			o->grant_file = v;
		else if (strcmp(a, "broker-token-file") == 0)
			o->token_file = v;
		else if (strcmp(a, "id") == 0)
			snprintf(c->id, sizeof(c->id), "%s", v);
		else if (strcmp(a, "env") == 0 && o->nenv < SBX_ENV_MAX)
			o->env[o->nenv++] = v;
		else if (strcmp(a, "pass-fd") == 0) {
			int64_t fd;

			if (o->npass >= SBX_PASS_MAX ||
			    kz_parse_int(v, 3, 1023, &fd) != 0 ||
			    fcntl((int)fd, F_GETFD) < 0)
				return die(KZ_EXIT_USAGE,
				    "--pass-fd needs an "
				    "open descriptor from 3 to 1023 (at most "
				    "%d)",
				    SBX_PASS_MAX);
			o->pass[o->npass++] = (int)fd;
		} else if (strcmp(a, "start-fd") == 0) {
			int64_t fd;

			if (kz_parse_int(v, 3, 1023, &fd) != 0 ||
			    fcntl((int)fd, F_GETFD) < 0)
				return die(KZ_EXIT_USAGE,
				    "--start-fd needs an open descriptor "
				    "from 3 to 1023");
			o->start_fd = (int)fd;
		} else if ((r = sbx_conf_opt(c, a, v, why, sizeof(why))) ==
		    KZ_ENOENT)
			return die(KZ_EXIT_USAGE, "unknown option --%s", a);
		else if (r != 0)
			return die(KZ_EXIT_USAGE, "%s", why);
	}
	for (i = 0; i < o->npass; i++)
		if (o->pass[i] == o->start_fd)
			return die(KZ_EXIT_USAGE,
			    "--start-fd %d is the caller's, never the code's: "
			    "not also --pass-fd",
			    o->start_fd);
	if (sbx_conf_check(c, why, sizeof(why)) != 0)
		return die(KZ_EXIT_USAGE, "bad config: %s", why);
	return 0;
}

static int
read_grant(const char *path, char *buf, size_t len)
{
	if (kz_read_small(path, buf, len) < 0)
		return -1;
	buf[strcspn(buf, "\r\n")] = '\0';
	return 0;
}

static int
exit_for(const struct sbx_res *rs)
{
	if (rs->setup_failed)
		return die(KZ_EXIT_UNAVAIL, "isolation setup failed at %s: %s",
		    rs->step, rs->why);
	if (rs->limit != NULL && strcmp(rs->limit, "interrupted") == 0)
		return die(KZ_EXIT_REFUSED, "run stopped: interrupted");
	if (rs->limit != NULL)
		return die(KZ_EXIT_REFUSED, "run stopped: %s limit reached",
		    rs->limit);
	if (rs->exited)
		return rs->code;
	return 128 + rs->sig;
}

/*
 * --start-fd: the sandbox is made, and the code waits for the caller's
 * word, one byte on fd, so that a caller can make the sandbox while it
 * finishes what must come before the code (kz-pkgrun's dispatch record).
 * End of file, an error, a signal or the run's timeout first: nothing
 * runs.  The descriptor is closed either way; the code never has it.
 */
static int
await_start(int fd, int64_t timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t deadline = kz_now_ms() + timeout_ms;
	char b;
	ssize_t n = -1;

	while (!sbx_interrupted && kz_now_ms() < deadline) {
		int r = poll(&p, 1, (int)(deadline - kz_now_ms()));

		if (r < 0 && errno != EINTR)
			break;
		if (r > 0) {
			while ((n = read(fd, &b, 1)) < 0 && errno == EINTR)
				;
			break;
		}
	}
	close(fd);
	return n == 1 ? 0 : -1;
}

static void
on_signal(int sig)
{
	(void)sig;
	sbx_interrupted = 1;
}

static int
cmd_run(struct sbx_conf *c, struct opts *o)
{
	struct sigaction sa;
	struct sbx_worker w;
	struct sbx_req rq;
	struct sbx_res rs;
	char why[256], grant[4096] = "", tok[SBX_BROKER_TOKEN_MAX + 2] = "";
	int code;

	if (o->cmd == NULL || o->cmd[0] == NULL)
		return die(KZ_EXIT_USAGE, "run needs -- CMD");
	/* The job reaches the init as NUL-separated strings, where an empty
	 * one would end the argument vector early; serve refuses it too. */
	for (int i = 0; o->cmd[i] != NULL; i++)
		if (o->cmd[i][0] == '\0')
			return die(KZ_EXIT_USAGE, "run: argument %d is empty",
			    i);
	memset(&rq, 0, sizeof(rq));
	sbx_env_init(&rq.env);
	for (int i = 0; i < o->nenv; i++) {
		char name[256];
		const char *eq = strchr(o->env[i], '=');

		if (eq == NULL || (size_t)(eq - o->env[i]) >= sizeof(name))
			return die(KZ_EXIT_USAGE, "bad --env %s", o->env[i]);
		snprintf(name, sizeof(name), "%.*s", (int)(eq - o->env[i]),
		    o->env[i]);
		if (sbx_env_add(&rq.env, name, eq + 1, why, sizeof(why)) != 0)
			return die(KZ_EXIT_USAGE, "%s", why);
	}
	if (o->grant_file && read_grant(o->grant_file, grant, sizeof(grant)))
		return die(KZ_EXIT_USAGE, "cannot read the grant file");
	if (o->token_file != NULL) {
		if (read_grant(o->token_file, tok, sizeof(tok)) != 0)
			return die(KZ_EXIT_USAGE,
			    "cannot read the broker token file");
		if (c->broker_sock[0] == '\0')
			return die(KZ_EXIT_USAGE,
			    "a broker token, but no --broker-socket");
		if (sbx_env_broker(&rq.env, (int)c->broker_port, tok, rq.npmrc,
		        why, sizeof(why)) != 0)
			return die(KZ_EXIT_USAGE, "%s", why);
		snprintf(rq.broker_token, sizeof(rq.broker_token), "%s", tok);
		sodium_memzero(tok, sizeof(tok));
	}
	if (sbx_env_finish(&rq.env,
	        c->egress_sock[0] && grant[0] ? (int)c->relay_port : 0, why,
	        sizeof(why)) != 0)
		return die(KZ_EXIT_USAGE, "%s", why);
	/* An interrupted run still tears down its cgroups and mounts. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	(void)sigaction(SIGINT, &sa, NULL);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGHUP, &sa, NULL);
	rq.argv = o->cmd, rq.cwd = o->cwd, rq.grant = grant;
	rq.stdin_fd = 0, rq.out_fd[0] = 1, rq.out_fd[1] = 2;
	memcpy(rq.pass_fd, o->pass, sizeof(o->pass));
	rq.npass = o->npass;
	rq.timeout_ms = c->timeout_s * 1000;
	rq.out_max[0] = c->stdout_max, rq.out_max[1] = c->stderr_max;
	if (sbx_worker_init(&w, c, false, why, sizeof(why)) != 0) {
		sbx_worker_release(&w);
		return die(KZ_EXIT_UNAVAIL, "isolation setup failed: %s", why);
	}
	if (o->start_fd >= 0 &&
	    await_start(o->start_fd, (int64_t)c->timeout_s * 1000) != 0) {
		sbx_worker_release(&w);
		sbx_env_release(&rq.env);
		sodium_memzero(grant, sizeof(grant));
		return die(KZ_EXIT_UNAVAIL,
		    "the caller withheld the start: nothing ran");
	}
	if (sbx_run(&w, &rq, &rs) != 0)
		code = die(KZ_EXIT_INTERNAL, "run failed");
	else
		code = exit_for(&rs);
	if (rs.leftovers > 0)
		fprintf(stderr, "kz-sandbox: %d leftover processes killed\n",
		    rs.leftovers);
	sbx_res_release(&rs);
	sbx_worker_release(&w);
	sbx_env_release(&rq.env);
	sodium_memzero(grant, sizeof(grant));
	return code;
}

static int
cmd_serve(struct sbx_conf *c, struct opts *o)
{
	struct sbx_worker w;
	char why[256];
	int lfd, code;

	if (c->id[0] == '\0' || c->sock[0] == '\0')
		return die(KZ_EXIT_USAGE, "serve needs --id and --socket");
	/* The socket lives in the host's filesystem: open it first. */
	if (kz_sock_listen(c->sock, 16, &lfd, why, sizeof(why)) != 0)
		return die(KZ_EXIT_UNAVAIL, "cannot listen: %s", why);
	if (sbx_worker_init(&w, c, true, why, sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "sandbox.isolation", KZ_EDENIED, why,
		    "worker", c->id, NULL);
		sbx_worker_release(&w);
		close(lfd);
		(void)unlink(c->sock);
		return die(KZ_EXIT_UNAVAIL, "isolation setup failed: %s", why);
	}
	code = sbx_serve(&w, lfd, o->pid_file);
	sbx_worker_release(&w);
	close(lfd);
	(void)unlink(c->sock);
	return code;
}

/*
 * reap: the cgroups of worker ID, which was killed before its own
 * teardown, emptied and removed with the configuration it was started
 * with (kz-ctl-local's delete).
 */
static int
cmd_reap(struct sbx_conf *c)
{
	char why[256];

	if (c->id[0] == '\0')
		return die(KZ_EXIT_USAGE, "reap needs --id");
	if (sbx_reap(c, why, sizeof(why)) != 0)
		return die(KZ_EXIT_UNAVAIL, "reap %s: %s", c->id, why);
	return KZ_EXIT_OK;
}

/* files: the bound on the open files of one run (kz-ctl-local's create). */
static int
cmd_files(const struct sbx_conf *c)
{
	printf("%llu\n", (unsigned long long)sbx_files_bound(c));
	return fflush(stdout) == 0 ? KZ_EXIT_OK : KZ_EXIT_INTERNAL;
}

static int
cmd_classify(int argc, char **argv)
{
	enum kz_exit code = KZ_EXIT_OK;

	if (argc < 3)
		return die(KZ_EXIT_USAGE, "classify needs FILE...");
	for (int i = 2; i < argc; i++) {
		char why[256] = "";
		int r = kz_classify_file(argv[i], why, sizeof(why));

		if (r < 0)
			return die(KZ_EXIT_USAGE, "%s", why);
		if (r == KZ_CLASS_HOST_ADMIN) {
			printf("%s: host_administration\n", argv[i]);
			fprintf(stderr, "kz-sandbox: %s: %s\n", argv[i], why);
			code = KZ_EXIT_REFUSED;
		} else
			printf("%s: ok\n", argv[i]);
	}
	return code;
}

/* Whether two programs are the same instructions. */
static bool
same_prog(const struct sock_fprog *a, const struct sock_fprog *b)
{
	return a->len == b->len &&
	    memcmp(a->filter, b->filter, a->len * sizeof(*a->filter)) == 0;
}

/* Compiles the tables with the installed libseccomp, so a list that cannot
 * be compiled fails here too, says whether that is the program embedded at
 * build time, then prints the list. */
static int
cmd_seccomp(void)
{
	struct sock_fprog prog = {0}, rtc = {0}, e = {0}, er = {0};
	char why[256];
	bool same;
	int rc = KZ_EXIT_OK;

	if (sbx_seccomp_compile(&prog, false, why, sizeof(why)) != 0 ||
	    sbx_seccomp_compile(&rtc, true, why, sizeof(why)) != 0 ||
	    sbx_seccomp_build(&e, false, why, sizeof(why)) != 0 ||
	    sbx_seccomp_build(&er, true, why, sizeof(why)) != 0) {
		rc = die(KZ_EXIT_UNAVAIL, "%s", why);
		goto out;
	}
	same = same_prog(&prog, &e) && same_prog(&rtc, &er);
	printf("# %u BPF instructions (%u in the WebRTC browser variant), "
	       "embedded at build time;\n# the installed libseccomp "
	       "compiles %s\n",
	    (unsigned)e.len, (unsigned)er.len,
	    same ? "the same programs from the tables" :
	           "different programs from the tables (it changed since "
	           "the build)");
	if (sbx_seccomp_list(stdout, why, sizeof(why)) != 0)
		rc = die(KZ_EXIT_UNAVAIL, "%s", why);
	else if (fflush(stdout) != 0)
		rc = KZ_EXIT_INTERNAL;
out:
	sbx_seccomp_free(&prog);
	sbx_seccomp_free(&rtc);
	sbx_seccomp_free(&e);
	sbx_seccomp_free(&er);
	return rc;
}

int
main(int argc, char **argv)
{
	static struct sbx_conf c;
	struct opts o;
	int r;

	memset(&o, 0, sizeof(o));
	o.start_fd = -1;
	kz_log_init("kz-sandbox", KZ_LOG_INFO);
	(void)signal(SIGPIPE, SIG_IGN);
	/* Descriptors 0-2 must exist so no pipe lands on them. */
	while ((r = open("/dev/null", O_RDWR)) >= 0 && r < 3)
		;
	if (r > 2)
		close(r);
	if (argc < 2 || strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? KZ_EXIT_USAGE : KZ_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("kz-sandbox %s\n", KZ_VERSION);
		return KZ_EXIT_OK;
	}
	if (strcmp(argv[1], "classify") == 0)
		return cmd_classify(argc, argv);
	if (strcmp(argv[1], "seccomp") == 0 && argc == 2)
		return cmd_seccomp();
	if (sodium_init() < 0)
		return die(KZ_EXIT_INTERNAL, "libsodium init failed");
	sbx_conf_defaults(&c);
	if (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "serve") != 0 &&
	    strcmp(argv[1], "reap") != 0 && strcmp(argv[1], "files") != 0) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if ((r = parse(argc, argv, &c, &o)) != 0)
		return r;
	if (strcmp(argv[1], "files") == 0)
		return cmd_files(&c);
	if (geteuid() != 0)
		return die(KZ_EXIT_UNAVAIL,
		    "isolation setup failed: namespaces and cgroups need root");
	if (strcmp(argv[1], "reap") == 0)
		return cmd_reap(&c);
	return strcmp(argv[1], "run") == 0 ? cmd_run(&c, &o) :
	                                     cmd_serve(&c, &o);
}
