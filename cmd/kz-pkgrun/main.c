/*
 * kz-pkgrun: the package runner tier.  admit (a reviewed package into the
 * content-addressed cache), list and verify (what a cache entry offers,
 * and whether it is still what was admitted), invoke (one tool, one-shot,
 * or sent to serve with --socket) and serve (the same as a daemon op, on
 * warm single-use workers).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "pkgrun.h"
#include "banned.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: kz-pkgrun admit [--config FILE] DIR MANIFEST\n"
	    "       kz-pkgrun list [--config FILE] --package HASH [--shared]\n"
	    "       kz-pkgrun verify [--config FILE] --package HASH\n"
	    "       kz-pkgrun invoke [--config FILE] --package HASH --tool "
	    "NAME\n"
	    "           --actor ID --conversation ID [--room ID] [--rid ID]\n"
	    "           [--workspace PATH] [--file PATH]... [--arg VALUE]...\n"
	    "           [--grant-file FILE] [--socket PATH]\n"
	    "       kz-pkgrun serve [--config FILE] [--socket PATH] "
	    "[--check]\n"
	    "       kz-pkgrun -h | --help | -V | --version\n");
}

static int die(enum kz_exit code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
die(enum kz_exit code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kz-pkgrun: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

struct opts {
	const char *config, *grant_file, *socket, *pos[2];
	int npos;
	bool shared, check;
	struct pr_inv iv;
};

/* An option with a value: where it goes, or NULL for a repeated list. */
static int
set_opt(struct opts *o, const char *a, const char *v)
{
	const char **one[] = {&o->config, &o->iv.package, &o->iv.tool,
	    &o->iv.actor, &o->iv.conversation, &o->iv.room, &o->iv.rid,
	    &o->iv.workspace, &o->grant_file, &o->socket};
	static const char *const names[] = {"config", "package", "tool",
	    "actor", "conversation", "room", "rid", "workspace", "grant-file",
	    "socket"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(a, names[i]) == 0) {
			if (*one[i] != NULL)
				return die(KZ_EXIT_USAGE, "--%s given twice",
				    a);
			*one[i] = v;
			return 0;
		}
	if (strcmp(a, "arg") == 0 && o->iv.nargs < PR_ARGS_MAX)
		o->iv.args[o->iv.nargs++] = v;
	else if (strcmp(a, "file") == 0 && o->iv.nfiles < PR_MEMBER_FILES_MAX)
		o->iv.files[o->iv.nfiles++] = v;
	else
		return die(KZ_EXIT_USAGE, "unknown option or too many: --%s",
		    a);
	return 0;
}

static int
parse(int argc, char **argv, struct opts *o)
{
	int r;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--shared") == 0)
			o->shared = true;
		else if (strcmp(a, "--check") == 0)
			o->check = true;
		else if (strncmp(a, "--", 2) == 0) {
			if (i + 1 >= argc)
				return die(KZ_EXIT_USAGE, "%s needs a value",
				    a);
			if ((r = set_opt(o, a + 2, argv[++i])) != 0)
				return r;
		} else if (o->npos < 2)
			o->pos[o->npos++] = a;
		else
			return die(KZ_EXIT_USAGE, "unexpected argument");
	}
	if (o->config == NULL)
		o->config = getenv("KZ_CONFIG");
	return 0;
}

static int
cmd_admit(const struct pr_conf *c, const struct opts *o)
{
	char hex[PR_HASH_HEX + 1] = "", why[256];
	struct pr_manifest m;
	int r;

	if (o->npos != 2)
		return die(KZ_EXIT_USAGE, "admit needs DIR MANIFEST");
	if ((r = pr_cache_admit(c, o->pos[0], o->pos[1], hex, &m, why,
	         sizeof(why))) != 0) {
		(void)pr_audit_admit(c, NULL, "refused", why, why, 0);
		return die(r == KZ_EUNAVAIL || r == KZ_ESYS ? KZ_EXIT_UNAVAIL :
		        r == KZ_ECRYPTO                     ? KZ_EXIT_REFUSED :
		                                              KZ_EXIT_USAGE,
		    "admit refused: %s", why);
	}
	pr_manifest_release(&m);
	printf("%s\n", hex);
	return fflush(stdout) == 0 ? KZ_EXIT_OK : KZ_EXIT_INTERNAL;
}

static int
cmd_list(const struct pr_conf *c, const struct opts *o, bool verify_only)
{
	cJSON *a = NULL, *t;
	char why[256] = "";
	int r;

	if (o->iv.package == NULL)
		return die(KZ_EXIT_USAGE, "--package is required");
	if ((r = pr_list(c, o->iv.package, o->shared, &a, why, sizeof(why))) !=
	    0)
		return die(r == KZ_ENOENT || r == KZ_EDENIED ? KZ_EXIT_REFUSED :
		        r == KZ_EINVAL                       ? KZ_EXIT_USAGE :
		                                               KZ_EXIT_UNAVAIL,
		    "%s", why);
	if (verify_only)
		printf("%s: ok\n", o->iv.package);
	else
		cJSON_ArrayForEach(t, a)
		    printf("%s\t%s\n", kz_json_get(t, "name")->valuestring,
		        kz_json_get(t, "class")->valuestring);
	cJSON_Delete(a);
	return fflush(stdout) == 0 ? KZ_EXIT_OK : KZ_EXIT_INTERNAL;
}

static int
cmd_invoke(const struct pr_conf *c, struct opts *o)
{
	struct pr_result res;
	char grant[4096];
	int code;

	if (o->iv.package == NULL || o->iv.tool == NULL ||
	    o->iv.actor == NULL || o->iv.conversation == NULL)
		return die(KZ_EXIT_USAGE,
		    "invoke needs --package, --tool, "
		    "--actor and --conversation");
	if (o->grant_file != NULL) {
		if (kz_read_small(o->grant_file, grant, sizeof(grant)) <= 0)
			return die(KZ_EXIT_USAGE, "cannot read the grant file");
		grant[strcspn(grant, "\r\n")] = '\0';
		o->iv.grant = grant;
	}
	if (o->socket != NULL) {
		code = pr_client_invoke(c, o->socket, &o->iv);
		sodium_memzero(grant, sizeof(grant));
		return code;
	}
	pr_invoke(c, NULL, &o->iv, &res);
	if ((res.out != NULL &&
	        kz_write_full(1, res.out, res.outlen, -1) != 0) ||
	    (res.err != NULL && kz_write_full(2, res.err, res.errlen, -1) != 0))
		code = die(KZ_EXIT_INTERNAL, "cannot write the result");
	else if (res.wire != NULL)
		code = die(res.code, "%s", res.why);
	else if (res.exit_status != 0)
		code = die(KZ_EXIT_REFUSED, "the tool exited with status %d",
		    res.exit_status);
	else
		code = KZ_EXIT_OK;
	pr_result_release(&res);
	sodium_memzero(grant, sizeof(grant));
	return code;
}

int
main(int argc, char **argv)
{
	static struct pr_conf c;
	struct opts o;
	char why[256], self[PATH_MAX];
	ssize_t n;
	int r;

	memset(&o, 0, sizeof(o));
	kz_log_init("kz-pkgrun", KZ_LOG_INFO);
	(void)signal(SIGPIPE, SIG_IGN);
	while ((r = open("/dev/null", O_RDWR)) >= 0 && r < 3)
		;
	if (r > 2)
		close(r);
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? KZ_EXIT_USAGE : KZ_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("kz-pkgrun %s\n", KZ_VERSION);
		return KZ_EXIT_OK;
	}
	if (sodium_init() < 0)
		return die(KZ_EXIT_INTERNAL, "libsodium init failed");
	/* What the runner writes is read by the tool, under another uid:
	 * the cache and each projection are world-readable and writable by
	 * nobody, whatever umask we were started with.  Nothing secret is
	 * ever written (the runner holds nothing secret; a grant file is
	 * made 0600 explicitly). */
	umask(022);
	if ((r = parse(argc, argv, &o)) != 0)
		return r;
	/* kz-sandbox is found beside our own binary, not beside argv[0]
	 * (a bare name found through PATH). */
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
		return die(KZ_EXIT_INTERNAL, "cannot find our own binary");
	self[n] = '\0';
	if (pr_conf_load(&c, o.config, self, why, sizeof(why)) != 0)
		return die(KZ_EXIT_USAGE, "bad config: %s", why);
	/* invoke --socket: the daemon's audit counts, not ours. */
	if (c.audit_sock[0] == '\0' && !o.check &&
	    !(strcmp(argv[1], "invoke") == 0 && o.socket != NULL))
		fprintf(stderr,
		    "kz-pkgrun: audit is off (KZ_AUDIT = off): "
		    "nothing is recorded\n");
	if (strcmp(argv[1], "admit") == 0)
		return cmd_admit(&c, &o);
	if (strcmp(argv[1], "list") == 0)
		return cmd_list(&c, &o, false);
	if (strcmp(argv[1], "verify") == 0)
		return cmd_list(&c, &o, true);
	if (strcmp(argv[1], "invoke") == 0)
		return cmd_invoke(&c, &o);
	if (strcmp(argv[1], "serve") == 0) {
		if (o.socket != NULL &&
		    (size_t)snprintf(c.sock, sizeof(c.sock), "%s", o.socket) >=
		        sizeof(c.sock))
			return die(KZ_EXIT_USAGE, "--socket is too long");
		return o.check ? KZ_EXIT_OK : pr_serve(&c);
	}
	usage(stderr);
	return KZ_EXIT_USAGE;
}
