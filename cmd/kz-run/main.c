/*
 * kz-run --actor A --conversation C [--egress] [--file PATH]... -- CMD...
 * kz-run --room R --member M [--select ID]... [--contract]
 *        [--output PATH]... [--json] -- CMD...
 * has kz-project admit the turn (with --room), leases a worker, runs CMD
 * in it, prints its output and exit status, releases it and leaves the
 * reset to kz-lease (kz-run(1)).
 */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_cap.h"
#include "kz_log.h"
#include "run.h"
#include "banned.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: kz-run --actor A --conversation C [--capability X] "
	    "[--egress]\n"
	    "              [--file PATH]... [--json] [--config FILE] "
	    "[--socket PATH] [-q]\n"
	    "              -- CMD [ARG]...\n"
	    "       kz-run --room R --member M [--select ID]... "
	    "[--retrieved ID]...\n"
	    "              [--contract] [--turn T] [--capability X] "
	    "[--egress]\n"
	    "              [--output PATH]... [--json] [--call ID] "
	    "[--config FILE]\n"
	    "              [--socket PATH] [-q]\n"
	    "              -- CMD [ARG]...\n"
	    "       kz-run --help | --version\n");
}

/* --help lists the closed capability set and what each allows. */
static void
help(void)
{
	usage(stdout);
	printf("capabilities (--capability, default code.run):\n");
	for (const struct kz_cap *k = kz_caps; k->name != NULL; k++)
		printf("  %-18s %s\n", k->name, k->what);
}

static int
add(const char **list, size_t *n, size_t max, const char *v)
{
	if (*n == max)
		return -1;
	list[(*n)++] = v;
	return 0;
}

static const struct option lo[] = {
    {"actor", required_argument, NULL, 'a'},
    {"conversation", required_argument, NULL, 'C'},
    {"capability", required_argument, NULL, 'x'},
    {"egress", no_argument, NULL, 'e'},
    {"file", required_argument, NULL, 'f'},
    {"room", required_argument, NULL, 'r'},
    {"member", required_argument, NULL, 'm'},
    {"select", required_argument, NULL, 'S'},
    {"retrieved", required_argument, NULL, 'R'},
    {"contract", no_argument, NULL, 'k'},
    {"turn", required_argument, NULL, 't'},
    {"config", required_argument, NULL, 'c'},
    {"socket", required_argument, NULL, 's'},
    {"output", required_argument, NULL, 'o'},
    {"json", no_argument, NULL, 'j'},
    {"call", required_argument, NULL, 'L'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static int
parse(int argc, char **argv, struct run_opts *o)
{
	int ch, e = 0;

	while (e == 0 && (ch = getopt_long(argc, argv, "+q", lo, NULL)) != -1) {
		switch (ch) {
		case 'a':
			o->actor = optarg;
			break;
		case 'C':
			o->conv = optarg;
			break;
		case 'x':
			o->cap = optarg;
			break;
		case 'e':
			o->egress = true;
			break;
		case 'r':
			o->room = optarg;
			break;
		case 'm':
			o->member = optarg;
			break;
		case 'k':
			o->contract = true;
			break;
		case 't':
			o->turn = optarg;
			break;
		case 'c':
			o->config = optarg;
			break;
		case 's':
			o->socket = optarg;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'L':
			o->call = optarg;
			break;
		case 'o':
			e = add(o->outputs, &o->noutputs, RUN_OUTPUTS_MAX,
			    optarg);
			break;
		case 'h':
			help();
			exit(KZ_EXIT_OK);
		case 'V':
			printf("kz-run " KZ_VERSION "\n");
			exit(KZ_EXIT_OK);
		case 'f':
			e = add(o->files, &o->nfiles, RUN_FILES_MAX, optarg);
			break;
		case 'S':
			e = add(o->select, &o->nselect, RUN_IDS_MAX, optarg);
			break;
		case 'R':
			e = add(o->retrieved, &o->nretrieved, RUN_IDS_MAX,
			    optarg);
			break;
		default:
			return -1;
		}
	}
	o->argc = argc - optind;
	o->argv = argv + optind;
	return e;
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
		return KZ_EXIT_USAGE;
	}
	if (run_opts_check(&o, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-run: %s\n", why);
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (o.config == NULL)
		o.config = getenv("KZ_CONFIG");
	if (realpath("/proc/self/exe", self) == NULL)
		snprintf(self, sizeof(self), "%s", argv[0]);
	if (run_conf_load(&c, o.config, self, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-run: config: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	if (o.socket != NULL &&
	    (size_t)snprintf(c.lease_sock, sizeof(c.lease_sock), "%s",
	        o.socket) >= sizeof(c.lease_sock)) {
		fprintf(stderr, "kz-run: --socket is too long\n");
		return KZ_EXIT_USAGE;
	}
	if (sodium_init() < 0)
		return KZ_EXIT_INTERNAL;
	/* A reader that goes away (kz-run ... | head) must not keep the
	 * lease from being released. */
	signal(SIGPIPE, SIG_IGN);
	return run_dispatch(&c, &o);
}
