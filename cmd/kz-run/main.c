/*
 * kz-run --actor A --conversation C [--egress] [--file PATH]... -- CMD...
 * leases a worker, runs CMD in it, prints its output and exit status,
 * releases it and leaves the reset to kz-lease (kz-run(1)).
 */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_log.h"
#include "run.h"
#include "banned.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: kz-run --actor A --conversation C [--capability X] "
	    "[--egress]\n"
	    "              [--file PATH]... [--config FILE] [--socket PATH] "
	    "[-q]\n"
	    "              -- CMD [ARG]...\n"
	    "       kz-run --help | --version\n");
}

static int
parse(int argc, char **argv, struct run_opts *o)
{
	static const struct option lo[] = {
		{"actor", required_argument, NULL, 'a'},
		{"conversation", required_argument, NULL, 'C'},
		{"capability", required_argument, NULL, 'x'},
		{"egress", no_argument, NULL, 'e'},
		{"file", required_argument, NULL, 'f'},
		{"config", required_argument, NULL, 'c'},
		{"socket", required_argument, NULL, 's'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "+q", lo, NULL)) != -1) {
		switch (ch) {
		case 'a': o->actor = optarg; break;
		case 'C': o->conv = optarg; break;
		case 'x': o->cap = optarg; break;
		case 'e': o->egress = true; break;
		case 'c': o->config = optarg; break;
		case 's': o->socket = optarg; break;
		case 'q': o->quiet = true; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("kz-run " RUN_VERSION "\n"); exit(0);
		case 'f':
			if (o->nfiles == RUN_FILES_MAX)
				return -1;
			o->files[o->nfiles++] = optarg;
			break;
		default:
			return -1;
		}
	}
	if (o->actor == NULL || o->conv == NULL || *o->actor == '\0' ||
	    *o->conv == '\0' || strlen(o->actor) > 256 ||
	    strlen(o->conv) > 256 || optind >= argc || argc - optind > 256)
		return -1;
	if (o->cap == NULL)
		o->cap = "code.run";
	o->argc = argc - optind;
	o->argv = argv + optind;
	return 0;
}

int
main(int argc, char **argv)
{
	struct run_opts o = {0};
	struct run_conf c;
	char why[256] = "", self[PATH_MAX];

	kz_log_init("kz-run", KZ_LOG_WARN);
	if (parse(argc, argv, &o) != 0) {
		usage(stderr);
		return RUN_EXIT_USAGE;
	}
	if (o.config == NULL)
		o.config = getenv("KZ_CONFIG");
	if (realpath("/proc/self/exe", self) == NULL)
		snprintf(self, sizeof(self), "%s", argv[0]);
	if (run_conf_load(&c, o.config, self, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-run: config: %s\n", why);
		return RUN_EXIT_USAGE;
	}
	if (o.socket != NULL && (size_t)snprintf(c.lease_sock,
	    sizeof(c.lease_sock), "%s", o.socket) >= sizeof(c.lease_sock)) {
		fprintf(stderr, "kz-run: --socket is too long\n");
		return RUN_EXIT_USAGE;
	}
	if (sodium_init() < 0)
		return RUN_EXIT_INTERNAL;
	/* A reader that goes away (kz-run ... | head) must not keep the
	 * lease from being released. */
	signal(SIGPIPE, SIG_IGN);
	return run_dispatch(&c, &o);
}
