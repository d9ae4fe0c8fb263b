/*
 * kz-pkgbroker: the package-install broker.  main parses the subcommand
 * and its options, loads the config and hands over; what is served and
 * refused lives in the modules.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sodium.h>

#include "pkgbroker.h"
#include "kz_conf.h"
#include "kz_exit.h"
#include "kz_key.h"
#include "kz_log.h"
#include "kz_signed.h"
#include "banned.h"

static const char
    usage[] = "usage: kz-pkgbroker serve [--config FILE]\n"
              "       kz-pkgbroker check [--config FILE]\n"
              "       kz-pkgbroker pubkey --field-key FILE\n"
              "       kz-pkgbroker token --field-key FILE --run ID [--uid UID]"
              " [--ttl S] [--config FILE]\n"
              "       kz-pkgbroker --help | --version\n";

struct opts {
	const char *config, *field_key, *run;
	int64_t ttl, uid;
	int argc;
	char **argv;
};

static enum kz_exit
bad_usage(const char *msg)
{
	if (msg != NULL)
		fprintf(stderr, "kz-pkgbroker: %s\n", msg);
	fputs(usage, stderr);
	return KZ_EXIT_USAGE;
}

static enum kz_exit
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"field-key", required_argument, NULL, 'k'},
	    {"run", required_argument, NULL, 'r'},
	    {"ttl", required_argument, NULL, 't'},
	    {"uid", required_argument, NULL, 'u'},
	    {NULL, 0, NULL, 0},
	};
	int ch;

	memset(o, 0, sizeof(*o));
	o->uid = PB_UID_NONE;
	o->config = getenv("KZ_CONFIG");
	o->field_key = getenv("KZ_FIELD_KEY_FILE");
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->config = optarg;
			break;
		case 'k':
			o->field_key = optarg;
			break;
		case 'r':
			o->run = optarg;
			break;
		case 't':
			if (kz_parse_int(optarg, 1, 14400, &o->ttl) != 0)
				return bad_usage("--ttl: expected seconds");
			break;
		case 'u':
			if (kz_parse_int(optarg, 0, PB_UID_MAX, &o->uid) != 0)
				return bad_usage("--uid: expected a uid");
			break;
		default:
			return bad_usage(NULL);
		}
	}
	o->argc = argc - optind;
	o->argv = argv + optind;
	return KZ_EXIT_OK;
}

static enum kz_exit
load(const struct opts *o, struct pb_conf *c)
{
	char why[192] = "";

	if (pb_conf_load(o->config, c, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-pkgbroker: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	return KZ_EXIT_OK;
}

static enum kz_exit
cmd_serve(const struct opts *o)
{
	struct pb_conf *c = calloc(1, sizeof(*c));
	enum kz_exit e;

	if (c == NULL)
		return KZ_EXIT_INTERNAL;
	if ((e = load(o, c)) == KZ_EXIT_OK && !c->have_pk) {
		/* Without the public key no token can verify: refuse to
		 * start rather than refuse every request. */
		fprintf(stderr, "kz-pkgbroker: no PKGBROKER_PUBLIC_KEY_FILE\n");
		e = KZ_EXIT_USAGE;
	}
	if (e == KZ_EXIT_OK && pb_serve(c) != 0)
		e = KZ_EXIT_UNAVAIL;
	free(c);
	return e;
}

static enum kz_exit
cmd_check(const struct opts *o)
{
	struct pb_conf *c = calloc(1, sizeof(*c));
	enum kz_exit e;

	if (c == NULL)
		return KZ_EXIT_INTERNAL;
	if ((e = load(o, c)) == KZ_EXIT_OK)
		printf("npm %s\npypi %s\npublic key %s\nfile max %llu\n",
		    c->npm.url[0] ? c->npm.url : "off",
		    c->pypi.url[0] ? c->pypi.url : "off",
		    c->have_pk ? "loaded" : "missing",
		    (unsigned long long)c->file_max);
	if (e == KZ_EXIT_OK && !c->have_pk)
		e = KZ_EXIT_USAGE;
	free(c);
	return e;
}

static enum kz_exit
cmd_pubkey(const struct opts *o)
{
	char why[160], hex[65];

	if (o->argc != 0 || o->field_key == NULL)
		return bad_usage("pubkey needs --field-key FILE");
	if (kz_signed_pubkey_hex(o->field_key, KZ_SUBKEY_PKGTOKEN, hex, why,
	        sizeof(why)) != 0) {
		fprintf(stderr, "kz-pkgbroker: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	printf("%s\n", hex);
	return KZ_EXIT_OK;
}

/* The TTL: --ttl, at most the broker's PKGBROKER_TOKEN_TTL_MAX (from the
 * config when one is given, else its default). */
static enum kz_exit
token_ttl(const struct opts *o, int64_t *ttl)
{
	struct pb_conf *c = calloc(1, sizeof(*c));
	enum kz_exit e;

	if (c == NULL)
		return KZ_EXIT_INTERNAL;
	if ((e = load(o, c)) == KZ_EXIT_OK) {
		*ttl = o->ttl > 0 ? o->ttl : 300;
		if (*ttl > c->token_ttl_max) {
			fprintf(stderr,
			    "kz-pkgbroker: --ttl clamped to %lld s\n",
			    (long long)c->token_ttl_max);
			*ttl = c->token_ttl_max;
		}
	}
	free(c);
	return e;
}

static enum kz_exit
cmd_token(const struct opts *o)
{
	unsigned char pk[32], sk[64];
	char why[160] = "", rh[KZ_IDHASH_HEX + 1], t[PB_TOKEN_MAX + 1];
	int64_t ttl = 0;
	enum kz_exit e;
	int r;

	if (o->argc != 0 || o->field_key == NULL || o->run == NULL ||
	    *o->run == '\0')
		return bad_usage("token needs --field-key FILE --run ID");
	if ((e = token_ttl(o, &ttl)) != KZ_EXIT_OK)
		return e;
	if (pb_token_keypair(o->field_key, pk, sk, why, sizeof(why)) != 0 ||
	    kz_signed_run_hash(o->field_key, o->run, rh, why, sizeof(why)) !=
	        0) {
		sodium_memzero(sk, sizeof(sk));
		fprintf(stderr, "kz-pkgbroker: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	r = pb_token_mint(sk, rh, o->uid, (int64_t)time(NULL), ttl, t,
	    sizeof(t));
	sodium_memzero(sk, sizeof(sk));
	if (r != 0)
		return KZ_EXIT_INTERNAL;
	printf("%s\n", t);
	sodium_memzero(t, sizeof(t));
	return KZ_EXIT_OK;
}

static const struct {
	const char *name;
	enum kz_exit (*fn)(const struct opts *);
} cmds[] = {
    {"serve", cmd_serve},
    {"check", cmd_check},
    {"pubkey", cmd_pubkey},
    {"token", cmd_token},
};

int
main(int argc, char **argv)
{
	struct opts o;
	enum kz_exit e;

	kz_log_init("kz-pkgbroker", KZ_LOG_INFO);
	if (argc >= 2 &&
	    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(usage, stdout);
		return KZ_EXIT_OK;
	}
	if (argc >= 2 &&
	    (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
		printf("kz-pkgbroker %s\n", KZ_VERSION);
		return KZ_EXIT_OK;
	}
	if (argc < 2)
		return bad_usage(NULL);
	if (sodium_init() < 0)
		return KZ_EXIT_INTERNAL;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name) != 0)
			continue;
		if ((e = parse_opts(argc - 1, argv + 1, &o)) != KZ_EXIT_OK)
			return e;
		return cmds[i].fn(&o);
	}
	return bad_usage("unknown command");
}
