/*
 * kz-pi-validate: validates a native Pi package proposal in a disposable
 * child and writes a signed receipt.  Options and config here; the work
 * is in validate.c, pkg.c, tree.c, child.c and receipt.c.
 */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_log.h"
#include "pv.h"
#include "banned.h"

static const char *const keys[] = {"KZ_FIELD_KEY_FILE", "KZ_PI_SANDBOX",
    "KZ_SANDBOX_BIN", "KZ_PI_SANDBOX_CONFIG", "KZ_PI_NODE", "KZ_PI_CHILD",
    "KZ_PI_MODULES", "KZ_PI_VERSION", "KZ_PI_UID", "KZ_PI_GVISOR_UID",
    "KZ_PI_RESULT_MAX", "KZ_PI_DEADLINE_MAX_MS", "KZ_PI_NPM", "KZ_PI_NPM_CACHE",
    "KZ_RUN_DIR", NULL};

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kz-pi-validate [--config FILE] --profile PROFILE.json "
	    "--files DIR\n"
	    "           --contract-digest HEX --out RECEIPT.json\n"
	    "       kz-pi-validate [--config FILE] verify-receipt --receipt R "
	    "--files DIR\n"
	    "           --profile PROFILE.json --contract-digest HEX\n"
	    "       kz-pi-validate --help | --version\n"
	    "The working directory is the workspace the validator works in.\n"
	    "Exit: 0 pass/current, 1 refused/failed/stale, 2 bad input, "
	    "3 sandbox or loader unavailable, 4 internal.\n");
}

/*
 * Paths beside the binary: PREFIX/bin/../libexec/kaizen/kz-pi-validate
 * where make install put the child script, else the source tree's
 * bin/../cmd/kz-pi-validate and bin/../node_modules.
 */
static void
beside(char *out, size_t len, const char *rel)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0) {
		snprintf(out, len, "%s", rel);
		return;
	}
	exe[n] = '\0';
	snprintf(out, len, "%s/../%s", dirname(exe), rel);
}

/* child.mjs and node_modules: the installed layout if it is there. */
static void
loaders(char *child, char *mods, size_t len)
{
	beside(child, len, "libexec/kaizen/kz-pi-validate/child.mjs");
	if (access(child, R_OK) == 0) {
		beside(mods, len, "libexec/kaizen/kz-pi-validate/node_modules");
		return;
	}
	beside(child, len, "cmd/kz-pi-validate/child.mjs");
	beside(mods, len, "node_modules");
}

/*
 * The pinned Node that tests/npm-deps.sh installs where the system's is
 * too old, and make install copies: node/bin/node beside the loaders'
 * node_modules.  NULL when it is not there.
 */
static const char *
pinned_node(const char *mods, char *buf, size_t len)
{
	const char *slash = strrchr(mods, '/');
	int n;

	if (slash == NULL)
		return NULL;
	n = snprintf(buf, len, "%.*s/node/bin/node", (int)(slash - mods), mods);
	if (n <= 0 || (size_t)n >= len || access(buf, X_OK) != 0)
		return NULL;
	return buf;
}

/*
 * The default npm, and node when no pinned one is beside the loaders: the
 * first on PATH (an operator's Node 20 may live in /usr/local/bin), else
 * the Debian location.  The result is an
 * absolute path, so the sandbox runs exactly what was found here.
 */
static const char *
on_path(const char *name, const char *dflt, char *buf, size_t len)
{
	const char *path = getenv("PATH"), *p, *e;

	for (p = path; p != NULL && *p != '\0'; p = *e ? e + 1 : e) {
		int n;

		e = strchrnul(p, ':');
		if (*p != '/')
			continue;
		n = snprintf(buf, len, "%.*s/%s", (int)(e - p), p, name);
		if (n > 0 && (size_t)n < len && access(buf, X_OK) == 0)
			return buf;
	}
	return dflt;
}

static int
load_conf(const char *file, struct pv_conf *c, struct kz_conf **kc)
{
	static char child[PATH_MAX], mods[PATH_MAX], sbx[PATH_MAX];
	static char node[PATH_MAX], npm[PATH_MAX];
	char why[256];
	const char *iso, *pin;
	int64_t v;

	if (kz_conf_load(file, keys, kc, why, sizeof(why)) != 0)
		goto bad;
	loaders(child, mods, sizeof(child));
	beside(sbx, sizeof(sbx), "bin/kz-sandbox");
	c->keyfile = kz_conf_str(*kc, "KZ_FIELD_KEY_FILE", NULL);
	c->sandbox_bin = kz_conf_str(*kc, "KZ_SANDBOX_BIN", sbx);
	c->sandbox_conf = kz_conf_str(*kc, "KZ_PI_SANDBOX_CONFIG", NULL);
	c->child_js = kz_conf_str(*kc, "KZ_PI_CHILD", child);
	c->modules = kz_conf_str(*kc, "KZ_PI_MODULES", mods);
	pin = pinned_node(c->modules, node, sizeof(node));
	c->node = kz_conf_str(*kc, "KZ_PI_NODE",
	    pin != NULL ? pin :
	                  on_path("node", "/usr/bin/node", node, sizeof(node)));
	c->pi_version = kz_conf_str(*kc, "KZ_PI_VERSION", "0.73.1");
	c->npm = kz_conf_str(*kc, "KZ_PI_NPM",
	    on_path("npm", "/usr/bin/npm", npm, sizeof(npm)));
	c->npm_cache = kz_conf_str(*kc, "KZ_PI_NPM_CACHE", NULL);
	if (c->npm_cache != NULL && c->npm_cache[0] == '\0')
		c->npm_cache = NULL;
	iso = kz_conf_str(*kc, "KZ_PI_SANDBOX", "required");
	if (strcmp(iso, "required") != 0 && strcmp(iso, "unshare") != 0) {
		kz_why(why, sizeof(why), "KZ_PI_SANDBOX: required or unshare");
		goto bad;
	}
	c->iso = strcmp(iso, "required") == 0 ? PV_ISO_SANDBOX : PV_ISO_UNSHARE;
	if (kz_conf_int(*kc, "KZ_PI_UID", 2100000000, 1, 2147483647, &v, why,
	        sizeof(why)) != 0)
		goto bad;
	c->uid = (uid_t)v;
	/* Under gvisor, runsc's and its gofer's host uid (kz-sandbox's
	 * SANDBOX_GVISOR_UID): without one they would be the host's root. */
	if (kz_conf_int(*kc, "KZ_PI_GVISOR_UID", 2099999999, 0, 2147483646, &v,
	        why, sizeof(why)) != 0)
		goto bad;
	if (v != 0 && (v == c->uid || v == 65534)) {
		kz_why(why, sizeof(why),
		    "KZ_PI_GVISOR_UID is neither KZ_PI_UID nor nobody (65534)");
		goto bad;
	}
	c->gv_uid = (uid_t)v;
	if (kz_conf_int(*kc, "KZ_PI_RESULT_MAX", 65536, 1024, 1 << 20, &v, why,
	        sizeof(why)) != 0)
		goto bad;
	c->result_max = (size_t)v;
	if (kz_conf_int(*kc, "KZ_PI_DEADLINE_MAX_MS", 300000, 1000, 3600000,
	        &c->deadline_max, why, sizeof(why)) != 0)
		goto bad;
	if (c->keyfile == NULL) {
		kz_why(why, sizeof(why), "KZ_FIELD_KEY_FILE is required");
		goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "kz-pi-validate: config: %s\n", why);
	return KZ_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {{"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"config", required_argument, NULL, 'c'},
	    {"profile", required_argument, NULL, 'p'},
	    {"files", required_argument, NULL, 'f'},
	    {"contract-digest", required_argument, NULL, 'd'},
	    {"out", required_argument, NULL, 'o'},
	    {"receipt", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0}};
	const char *cfg = getenv("KZ_CONFIG"), *prof = NULL, *files = NULL;
	const char *dig = NULL, *out = NULL, *rcpt = NULL;
	struct kz_conf *kc = NULL;
	struct pv_conf c;
	bool verify = false;
	int o, rc;

	kz_log_init("kz-pi-validate", KZ_LOG_INFO);
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'h':
			usage(stdout);
			return KZ_EXIT_OK;
		case 'V':
			puts("kz-pi-validate " KZ_VERSION);
			return KZ_EXIT_OK;
		case 'c':
			cfg = optarg;
			break;
		case 'p':
			prof = optarg;
			break;
		case 'f':
			files = optarg;
			break;
		case 'd':
			dig = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'r':
			rcpt = optarg;
			break;
		default:
			usage(stderr);
			return KZ_EXIT_USAGE;
		}
	}
	if (optind == argc - 1 && strcmp(argv[optind], "verify-receipt") == 0) {
		verify = true;
		optind++;
	}
	if (optind != argc || files == NULL || dig == NULL ||
	    (verify ? (rcpt == NULL || prof == NULL || out) :
	              (prof == NULL || out == NULL || rcpt))) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	memset(&c, 0, sizeof(c));
	if ((rc = load_conf(cfg, &c, &kc)) != 0)
		goto out;
	rc = verify ? pv_verify(&c, rcpt, files, prof, dig) :
	              pv_validate(&c, prof, files, dig, out);
out:
	kz_conf_free(kc);
	return rc;
}
