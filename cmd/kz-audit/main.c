/*
 * kz-audit: the append-only, tamper-evident audit sink.  main parses the
 * command line and the config and hands over to one subcommand module.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_conf.h"
#include "kz_log.h"
#include "audit.h"
#include "banned.h"

enum {
	O_CONFIG = 256,
	O_SOCKET,
	O_KEY,
	O_DIR,
	O_KIND,
	O_SINCE,
	O_UNTIL,
	O_ACTOR,
	O_CONV,
	O_UID,
	O_ANCHOR,
	O_CHECK,
	O_RAW
};

static const struct option lopts[] = {{"config", required_argument, NULL,
                                          O_CONFIG},
    {"socket", required_argument, NULL, O_SOCKET},
    {"field-key", required_argument, NULL, O_KEY},
    {"dir", required_argument, NULL, O_DIR},
    {"kind", required_argument, NULL, O_KIND},
    {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},
    {"actor-hash", required_argument, NULL, O_ACTOR},
    {"conversation-hash", required_argument, NULL, O_CONV},
    {"uid", required_argument, NULL, O_UID},
    {"anchor", no_argument, NULL, O_ANCHOR},
    {"check", no_argument, NULL, O_CHECK}, {"raw", no_argument, NULL, O_RAW},
    {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0}};

struct opts {
	const char *config, *socket, *key, *dir;
	struct aud_query q;
	bool anchor, check;
};

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kz-audit serve [--config FILE] [--socket PATH] [-n | "
	    "--check]\n"
	    "       kz-audit append [--config FILE] [--socket PATH] < EVENTS\n"
	    "       kz-audit verify [--config FILE] [--field-key FILE] "
	    "[--anchor]\n"
	    "                       [--dir DIR | FILE...]\n"
	    "       kz-audit query [--kind KIND] [--since TIME] [--until "
	    "TIME]\n"
	    "                      [--actor-hash HEX] [--conversation-hash HEX]"
	    "\n"
	    "                      [--uid UID] [--raw]\n"
	    "                      [--config FILE] [--dir DIR | FILE...]\n"
	    "       kz-audit --help | --version\n"
	    "TIME is YYYY-MM-DDTHH:MM:SS[.mmm]Z or seconds since the epoch.\n"
	    "Exit: 0 done, 1 refused or a bad record, 2 usage, input or "
	    "config,\n"
	    "      3 unavailable, 4 internal.\n");
}

static int
parse_opts(int argc, char **argv, struct opts *o)
{
	int c;

	o->q.since_ms = INT64_MIN;
	o->q.until_ms = INT64_MAX;
	o->q.uid = -1;
	o->config = getenv("KZ_CONFIG");
	while ((c = getopt_long(argc, argv, "hVn", lopts, NULL)) != -1) {
		switch (c) {
		case O_CONFIG:
			o->config = optarg;
			break;
		case O_SOCKET:
			o->socket = optarg;
			break;
		case O_KEY:
			o->key = optarg;
			break;
		case O_DIR:
			o->dir = optarg;
			break;
		case O_KIND:
			if (!aud_kind_known(optarg)) {
				fprintf(stderr,
				    "kz-audit: unknown kind '%.64s' "
				    "(kz-audit(8) lists the kinds)\n",
				    optarg);
				return KZ_EXIT_USAGE;
			}
			o->q.kind = optarg;
			break;
		case O_ACTOR:
			o->q.actor_hash = optarg;
			break;
		case O_CONV:
			o->q.conversation_hash = optarg;
			break;
		case O_UID:
			if (kz_parse_int(optarg, 0, UINT32_MAX, &o->q.uid) !=
			    0) {
				fprintf(stderr,
				    "kz-audit: bad uid '%.32s' (a number)\n",
				    optarg);
				return KZ_EXIT_USAGE;
			}
			break;
		case O_ANCHOR:
			o->anchor = true;
			break;
		case O_RAW:
			o->q.raw = true;
			break;
		case 'n':
		case O_CHECK:
			o->check = true;
			break;
		case O_SINCE:
		case O_UNTIL:
			if (aud_ts_parse(optarg,
			        c == O_SINCE ? &o->q.since_ms :
			                       &o->q.until_ms) != 0) {
				fprintf(stderr, "kz-audit: bad time '%s'\n",
				    optarg);
				return KZ_EXIT_USAGE;
			}
			break;
		case 'h':
			usage(stdout);
			exit(KZ_EXIT_OK);
		case 'V':
			printf("kz-audit " KZ_VERSION "\n");
			exit(KZ_EXIT_OK);
		default:
			usage(stderr);
			return KZ_EXIT_USAGE;
		}
	}
	if (o->config != NULL && o->config[0] == '\0')
		o->config = NULL;
	return 0;
}

/*
 * The files to read: the operands, or --dir's log files in chain order,
 * or by default those of the configured log directory (KZ_AUDIT_DIR, else
 * RUN/audit with KZ_RUN_DIR: the one rule of kaizen.conf(5)).
 */
static int
files_of(struct opts *o, const struct aud_cfg *c, int argc, char **argv,
    char ***files, size_t *n)
{
	char why[200];

	if (o->dir != NULL && optind < argc) {
		fprintf(stderr,
		    "kz-audit: give --dir DIR or files, not both\n");
		return KZ_EXIT_USAGE;
	}
	if (o->dir == NULL && optind == argc)
		o->dir = c->dir;
	if (o->dir == NULL) {
		*files = argv + optind;
		*n = (size_t)(argc - optind);
		return 0;
	}
	if (aud_dir_files(o->dir, files, n, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-audit: %s: %s\n", o->dir, why);
		return KZ_EXIT_USAGE;
	}
	return 0;
}

static int
run_verify(struct opts *o, struct aud_cfg *c, int argc, char **argv)
{
	struct kz_key akey;
	char why[300], **files = NULL;
	size_t n = 0;
	int rc;

	if (aud_keys_load(o->key ? o->key : c->keyfile, &akey, NULL, why,
	        sizeof(why)) != 0) {
		fprintf(stderr, "kz-audit: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	if ((rc = files_of(o, c, argc, argv, &files, &n)) == 0) {
		rc = aud_verify_anchor(&akey, files, n, o->anchor, stdout,
		    stderr);
		if (o->dir != NULL)
			aud_paths_free(files, n);
	}
	kz_key_wipe(&akey);
	return rc;
}

static int
run_query(struct opts *o, const struct aud_cfg *c, int argc, char **argv)
{
	char **files = NULL;
	size_t n = 0;
	int rc;

	if ((rc = files_of(o, c, argc, argv, &files, &n)) != 0)
		return rc;
	rc = aud_query(&o->q, files, n, stdout, stderr);
	if (o->dir != NULL)
		aud_paths_free(files, n);
	return rc;
}

static int
run(const char *cmd, struct opts *o, struct aud_cfg *c, int argc, char **argv)
{
	if (strcmp(cmd, "serve") == 0) {
		if (optind != argc)
			return KZ_EXIT_USAGE;
		if (o->socket != NULL)
			snprintf(c->socket, sizeof(c->socket), "%s", o->socket);
		return o->check ? KZ_EXIT_OK : aud_serve(c);
	}
	if (strcmp(cmd, "append") == 0)
		return optind != argc ? KZ_EXIT_USAGE :
		                        aud_append(c, o->socket, stdin);
	if (strcmp(cmd, "verify") == 0)
		return run_verify(o, c, argc, argv);
	if (strcmp(cmd, "query") == 0)
		return run_query(o, c, argc, argv);
	usage(stderr);
	return KZ_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct aud_cfg c;
	const char *cmd;
	char why[300];
	int rc;

	memset(&o, 0, sizeof(o));
	kz_log_init("kz-audit", KZ_LOG_INFO);
	if (argc > 1 && argv[1][0] != '-') {
		cmd = argv[1];
		argv++;
		argc--;
	} else
		cmd = NULL;
	if ((rc = parse_opts(argc, argv, &o)) != 0)
		return rc;
	if (cmd == NULL) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (aud_cfg_load(o.config, &c, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-audit: config: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	rc = run(cmd, &o, &c, argc, argv);
	aud_cfg_release(&c);
	return rc;
}
