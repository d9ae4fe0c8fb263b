/*
 * kz-project: the authority for what crosses into a sandbox.  main parses
 * the command, loads the config and the field key, and hands over to the
 * daemon (serve.c) or runs one op (ops.c).  No policy lives here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_exit.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_log.h"
#include "kzp.h"
#include "kzp_conf.h"
#include "banned.h"

#define ARGS_MAX 256

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kz-project serve [--config FILE] [--socket PATH]\n"
	    "       kz-project COMMAND [--config FILE] [--FIELD VALUE]...\n"
	    "       kz-project --help | --version\n"
	    "Commands (fields as --name value; lists repeat; flags alone):\n");
	for (const struct kzp_opdef *d = kzp_ops; d->op != NULL; d++) {
		fprintf(f, "  %-20s", d->op);
		for (int i = 0; d->fields[i] != NULL; i++)
			fprintf(f, " --%s", d->fields[i]);
		fprintf(f, "\n");
	}
	fprintf(f,
	    "Exit: 0 done, 1 refused, 2 usage or bad input, "
	    "3 store or audit unavailable, 4 internal.\n");
}

static int
load_key(struct kzp *p, const char *file)
{
	char why[200];
	int e;

	e = kz_key_load_subkey(file, KZ_SUBKEY_IDHASH, &p->idkey, why,
	    sizeof(why));
	if (e != 0)
		fprintf(stderr, "kz-project: field key: %s\n", why);
	return e;
}

static enum kz_exit
one_shot(struct kzp *p, const char *op, int argc, char **argv)
{
	struct kzp_res r = {0};
	cJSON *req = NULL, *out = NULL;
	char why[200], *s;
	const cJSON *v;
	enum kz_exit rc;

	if (kzp_cli_request(op, argc, argv, &req, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-project: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	if (kzp_run(p, op, req, &out, &r) != 0) {
		fprintf(stderr, "kz-project: %s: %s\n", r.code, r.why);
		rc = kz_exit_for_wire(r.code);
		goto out;
	}
	v = kz_json_get(out, "admission");
	if ((s = cJSON_Print(v != NULL ? v : out)) != NULL) {
		printf("%s\n", s);
		free(s);
	}
	rc = KZ_EXIT_OK;
out:
	cJSON_Delete(req);
	cJSON_Delete(out);
	return rc;
}

int
main(int argc, char **argv)
{
	struct kzp p = {0};
	struct kzp_cfg c = {0};
	char *rest[ARGS_MAX];
	const char *conf = getenv("KZ_CONFIG"), *sock = NULL;
	char why[200];
	int n = 0;
	enum kz_exit rc;

	kz_log_init("kz-project", KZ_LOG_INFO);
	if (argc < 2) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return KZ_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("kz-project " KZ_VERSION "\n");
		return KZ_EXIT_OK;
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			conf = argv[++i];
		else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc &&
		    strcmp(argv[1], "serve") == 0)
			sock = argv[++i];
		else if (n < ARGS_MAX)
			rest[n++] = argv[i];
	}
	if (strcmp(argv[1], "serve") != 0 && kzp_op_find(argv[1]) == NULL) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (sodium_init() < 0)
		return KZ_EXIT_INTERNAL;
	if (kz_conf_load(conf, kzp_conf_keys, &c.conf, why, sizeof(why)) ||
	    kzp_conf_apply(&c, &p, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-project: config: %s\n", why);
		rc = KZ_EXIT_USAGE;
		goto out;
	}
	if (load_key(&p, c.keyfile) != 0) {
		rc = KZ_EXIT_USAGE;
		goto out;
	}
	if (c.audit_sock[0] == '\0')
		fprintf(stderr,
		    "kz-project: audit is off (KZ_AUDIT = off): "
		    "no decision is recorded\n");
	if (strcmp(argv[1], "serve") == 0) {
		if (n > 0) {
			usage(stderr);
			rc = KZ_EXIT_USAGE;
			goto out;
		}
		if (sock != NULL) {
			free(c.sock);
			c.sock = strdup(sock);
		}
		rc = c.sock != NULL ? kzp_serve(&p, &c) : KZ_EXIT_INTERNAL;
	} else {
		p.oneshot = true;
		rc = one_shot(&p, argv[1], n, rest);
	}
out:
	kz_store_free(p.st);
	kz_key_wipe(&p.idkey);
	kzp_cfg_release(&c);
	return rc;
}
