/*
 * kz-browser: owns browser sessions (kz-browser(8)).  One job: each
 * session leases a worker, runs Chromium there through the worker's
 * bridge and ends with the lease.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_exit.h"
#include "kz_log.h"
#include "kzb.h"
#include "banned.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kz-browser serve [--config FILE] [--socket PATH] "
	    "[--check]\n"
	    "       kz-browser -h | --help | -V | --version\n"
	    "\n"
	    "Serves browser sessions on a Unix socket (kz-protocol(7)):\n"
	    "  open {actor, conversation, url}   lease a worker, start its\n"
	    "                                    Chromium, load url\n"
	    "  navigate {session, url}           load url (serialised)\n"
	    "  screenshot {session}              the page as a PNG\n"
	    "  close {session}                   end it; the profile goes\n"
	    "  status                            counters\n"
	    "Config: KZ_CONFIG or --config (kz-browser(8), kaizen.conf(5)).\n"
	    "Exit: 0 done, 1 refused, 2 usage or bad config, 3 unavailable,\n"
	    "4 internal.\n");
}

int
main(int argc, char **argv)
{
	const char *conf = getenv("KZ_CONFIG"), *sock = NULL;
	struct kzb_conf c;
	bool check = false;
	char why[200];

	kz_log_init("kz-browser", KZ_LOG_INFO);
	if (argc >= 2 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return KZ_EXIT_OK;
	}
	if (argc >= 2 &&
	    (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
		printf("kz-browser " KZ_VERSION "\n");
		return KZ_EXIT_OK;
	}
	if (argc < 2 || strcmp(argv[1], "serve") != 0) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			conf = argv[++i];
		else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
			sock = argv[++i];
		else if (strcmp(argv[i], "--check") == 0)
			check = true;
		else {
			usage(stderr);
			return KZ_EXIT_USAGE;
		}
	}
	if (sodium_init() < 0)
		return KZ_EXIT_INTERNAL;
	if (kzb_conf_load(&c, conf, argv[0], why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-browser: config: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	if (check)
		return KZ_EXIT_OK;
	if (sock != NULL) {
		if (strlen(sock) >= sizeof(c.sock)) {
			fprintf(stderr, "kz-browser: --socket is too long\n");
			return KZ_EXIT_USAGE;
		}
		snprintf(c.sock, sizeof(c.sock), "%s", sock);
	}
	if (snprintf(c.view_sock, sizeof(c.view_sock), "%s.view", c.sock) >=
	    (int)sizeof(c.view_sock)) {
		fprintf(stderr, "kz-browser: the socket path is too long\n");
		return KZ_EXIT_USAGE;
	}
	if (c.audit_sock[0] == '\0')
		fprintf(stderr,
		    "kz-browser: audit is off (KZ_AUDIT = off): "
		    "no session is recorded\n");
	return kzb_serve(&c);
}
