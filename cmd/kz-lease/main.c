/*
 * kz-lease: the warm pool and admission.  "serve" runs the daemon; the
 * other subcommands send one op to it and print the reply.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_call.h"
#include "kz_conf.h"
#include "kz_exit.h"
#include "kz_json.h"
#include "kz_log.h"
#include "lease.h"
#include "banned.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: kz-lease serve [--config FILE] [--socket PATH]\n"
	    "       kz-lease lease --actor A --conversation C [--capability X]"
	    " [--ttl-ms N]\n"
	    "       kz-lease release --lease-id L --token T\n"
	    "       kz-lease renew --lease-id L --token T [--ttl-ms N]\n"
	    "       kz-lease status | reconcile | drain [--off]\n"
	    "       kz-lease --help | --version\n"
	    "one-shot subcommands also take [--config FILE] [--socket PATH]\n");
}

struct args {
	const char *config, *socket, *actor, *conv, *cap, *lid, *token;
	long long ttl;
	int off;
};

static int
parse(int argc, char **argv, struct args *a)
{
	static const struct option lo[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"socket", required_argument, NULL, 's'},
	    {"actor", required_argument, NULL, 'a'},
	    {"conversation", required_argument, NULL, 'C'},
	    {"capability", required_argument, NULL, 'x'},
	    {"lease-id", required_argument, NULL, 'l'},
	    {"token", required_argument, NULL, 't'},
	    {"ttl-ms", required_argument, NULL, 'T'},
	    {"off", no_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	int64_t v;
	int ch;

	optind = 2;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'c':
			a->config = optarg;
			break;
		case 's':
			a->socket = optarg;
			break;
		case 'a':
			a->actor = optarg;
			break;
		case 'C':
			a->conv = optarg;
			break;
		case 'x':
			a->cap = optarg;
			break;
		case 'l':
			a->lid = optarg;
			break;
		case 't':
			a->token = optarg;
			break;
		case 'o':
			a->off = 1;
			break;
		case 'T':
			if (kz_parse_int(optarg, 100, 86400000, &v) != 0)
				return -1;
			a->ttl = v;
			break;
		default:
			return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

static cJSON *
request(const char *op, const struct args *a)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddNumberToObject(r, "v", 1);
	cJSON_AddStringToObject(r, "op", op);
	cJSON_AddStringToObject(r, "id", "kz-lease");
	if (strcmp(op, "lease") == 0) {
		cJSON_AddStringToObject(r, "actor", a->actor);
		cJSON_AddStringToObject(r, "conversation", a->conv);
		if (a->cap)
			cJSON_AddStringToObject(r, "capability", a->cap);
	}
	if (strcmp(op, "release") == 0 || strcmp(op, "renew") == 0) {
		cJSON_AddStringToObject(r, "lease_id", a->lid);
		cJSON_AddStringToObject(r, "token", a->token);
	}
	if (a->ttl > 0 &&
	    (strcmp(op, "lease") == 0 || strcmp(op, "renew") == 0))
		cJSON_AddNumberToObject(r, "ttl_ms", (double)a->ttl);
	if (strcmp(op, "drain") == 0)
		cJSON_AddBoolToObject(r, "on", !a->off);
	return r;
}

static int
oneshot(const char *op, const struct args *a, const struct lease_conf *c)
{
	cJSON *req, *rep = NULL;
	const cJSON *code, *reason;
	char why[256] = "", *s;
	int e, rc;

	if (strcmp(op, "lease") == 0 && (a->actor == NULL || a->conv == NULL))
		return -1;
	if ((strcmp(op, "release") == 0 || strcmp(op, "renew") == 0) &&
	    (a->lid == NULL || a->token == NULL))
		return -1;
	req = request(op, a);
	e = kz_frame_call(a->socket ? a->socket : c->sock, req, 30000, &rep,
	    why, sizeof(why));
	cJSON_Delete(req);
	if (e != 0) {
		fprintf(stderr,
		    "kz-lease: %s: kz-lease unreachable at %s: %s\n", op,
		    a->socket ? a->socket : c->sock, kz_strerror(e));
		return KZ_EXIT_UNAVAIL;
	}
	if (cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		cJSON_DeleteItemFromObjectCaseSensitive(rep, "v");
		cJSON_DeleteItemFromObjectCaseSensitive(rep, "id");
		cJSON_DeleteItemFromObjectCaseSensitive(rep, "ok");
		if ((s = kz_json_print(rep)) != NULL)
			printf("%s\n", s);
		free(s);
		rc = KZ_EXIT_OK;
	} else {
		code = kz_json_get(rep, "error");
		reason = kz_json_get(rep, "reason");
		fprintf(stderr, "kz-lease: %s: %s: %s\n", op,
		    cJSON_IsString(code) ? code->valuestring : "internal",
		    cJSON_IsString(reason) ? reason->valuestring : "");
		rc = kz_exit_for_wire(
		    cJSON_IsString(code) ? code->valuestring : NULL);
	}
	cJSON_Delete(rep);
	return rc;
}

int
main(int argc, char **argv)
{
	static const char *const ops[] = {"lease", "release", "renew", "status",
	    "reconcile", "drain", NULL};
	struct lease_conf c;
	struct args a = {0};
	char why[256] = "", self[PATH_MAX];
	size_t i;
	int rc;

	kz_log_init("kz-lease", KZ_LOG_INFO);
	if (argc < 2 || strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? KZ_EXIT_USAGE : KZ_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("kz-lease " KZ_VERSION "\n");
		return KZ_EXIT_OK;
	}
	if (parse(argc, argv, &a) != 0) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (a.config == NULL)
		a.config = getenv("KZ_CONFIG");
	/* The default worker and reset binaries sit beside this one. */
	if (realpath("/proc/self/exe", self) == NULL)
		snprintf(self, sizeof(self), "%s", argv[0]);
	if (lease_conf_load(&c, a.config, self, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-lease: config: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	if (strcmp(argv[1], "serve") == 0) {
		if (a.socket != NULL)
			snprintf(c.sock, sizeof(c.sock), "%s", a.socket);
		return lease_serve(&c);
	}
	for (i = 0; ops[i] != NULL; i++)
		if (strcmp(argv[1], ops[i]) == 0)
			break;
	if (ops[i] == NULL || (rc = oneshot(ops[i], &a, &c)) < 0) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	return rc;
}
