/*
 * kz-ctl-local: the local controller as an executable (kz-controller(7)).
 * kz-lease runs it for each call; it reads request frames on stdin and
 * answers each on stdout until stdin ends.  It holds no state of its own
 * between calls: the workers directory is the inventory.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_exit.h"
#include "kz_frame.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_pool.h"
#include "kz_wire.h"
#include "ctl.h"
#include "banned.h"

/* The only class this controller has: kz-sandbox's one worker shape. */
#define CTL_CLASS "default"
#define CTL_IO_MS 5000

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: kz-ctl-local            (kz-controller(7) frames on "
	    "stdin/stdout)\n"
	    "       kz-ctl-local list       (the inventory, one id a line)\n"
	    "       kz-ctl-local --help | --version\n");
}

static cJSON *
reply_new(bool ok)
{
	cJSON *r = cJSON_CreateObject();

	if (r != NULL) {
		cJSON_AddNumberToObject(r, "v", 1);
		cJSON_AddBoolToObject(r, "ok", ok);
	}
	return r;
}

static cJSON *
reply_err(const char *code, const char *msg)
{
	cJSON *r = reply_new(false);

	if (r != NULL) {
		cJSON_AddStringToObject(r, "error", code);
		cJSON_AddStringToObject(r, "message", msg);
	}
	return r;
}

/* The worker id of a request: a plain pool id. */
static const char *
req_id(const cJSON *req, char *why, size_t wlen)
{
	const char *id;

	if (kz_json_str(req, "id", KZ_POOL_ID_MAX, &id, why, wlen) != 0)
		return NULL;
	if (!kz_pool_id_ok(id)) {
		kz_why(why, wlen, "id: not a worker id");
		return NULL;
	}
	return id;
}

static cJSON *
op_create(const struct ctl_conf *c, const cJSON *req)
{
	static const char *const allowed[] = {"v", "op", "id", "class",
	    "runtime", NULL};
	char why[256] = "", ep[PATH_MAX];
	const char *id, *cls, *rt;
	cJSON *r;
	int e;

	if (kz_json_only(req, allowed, why, sizeof(why)) != 0 ||
	    (id = req_id(req, why, sizeof(why))) == NULL ||
	    kz_json_str(req, "class", 64, &cls, why, sizeof(why)) != 0 ||
	    kz_json_str(req, "runtime", 64, &rt, why, sizeof(why)) != 0)
		return reply_err(KZ_WE_BAD_REQUEST, why);
	if (strcmp(cls, CTL_CLASS) != 0)
		return reply_err(KZ_WE_REFUSED, "unknown class (default)");
	if ((e = ctl_create(c, id, rt, ep, sizeof(ep), why, sizeof(why))) !=
	    0) {
		kz_log(KZ_LOG_WARN, "create.fail", e, why, "worker", id, NULL);
		/* Only a refusal promises that nothing is left behind. */
		return reply_err(e == KZ_EDENIED ? KZ_WE_REFUSED :
		                                   KZ_WE_UNAVAILABLE,
		    why);
	}
	if ((r = reply_new(true)) != NULL)
		cJSON_AddStringToObject(r, "endpoint", ep);
	return r;
}

static cJSON *
op_delete(const struct ctl_conf *c, const cJSON *req)
{
	char why[256] = "";
	const char *id;
	cJSON *r;

	if ((id = req_id(req, why, sizeof(why))) == NULL)
		return reply_err(KZ_WE_BAD_REQUEST, why);
	if (ctl_delete(c, id, why, sizeof(why)) != 0)
		return reply_err(KZ_WE_UNAVAILABLE,
		    why[0] ? why : "worker still present");
	if ((r = reply_new(true)) != NULL)
		cJSON_AddBoolToObject(r, "absent", true);
	return r;
}

static cJSON *
op_list(const struct ctl_conf *c)
{
	static struct ctl_inv inv;
	char why[256] = "";
	cJSON *r, *a;

	if (ctl_list(c, &inv, why, sizeof(why)) != 0)
		return reply_err(KZ_WE_UNAVAILABLE, why);
	if ((r = reply_new(true)) == NULL ||
	    (a = cJSON_AddArrayToObject(r, "workers")) == NULL) {
		cJSON_Delete(r);
		return NULL;
	}
	for (size_t i = 0; i < inv.n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(inv.id[i]));
	return r;
}

/* Whether a worker still starting has given up (its agent exited). */
static cJSON *
op_probe(const struct ctl_conf *c, const cJSON *req)
{
	char why[256] = "", dir[PATH_MAX];
	const char *id, *st = "running";
	cJSON *r;

	if ((id = req_id(req, why, sizeof(why))) == NULL)
		return reply_err(KZ_WE_BAD_REQUEST, why);
	if (kz_pool_wpath(c->workers_dir, id, "", dir, sizeof(dir)) != 0 ||
	    access(dir, F_OK) != 0)
		st = "absent";
	else if (ctl_gone(c, id, why, sizeof(why)))
		st = "exited";
	if ((r = reply_new(true)) != NULL) {
		cJSON_AddStringToObject(r, "state", st);
		if (strcmp(st, "exited") == 0)
			cJSON_AddStringToObject(r, "why", why);
	}
	return r;
}

static cJSON *
dispatch(const struct ctl_conf *c, const cJSON *req)
{
	char why[128] = "";
	const char *op;

	if (kz_json_str(req, "op", 32, &op, why, sizeof(why)) != 0)
		return reply_err(KZ_WE_BAD_REQUEST, why);
	if (strcmp(op, "create") == 0)
		return op_create(c, req);
	if (strcmp(op, "delete") == 0)
		return op_delete(c, req);
	if (strcmp(op, "list") == 0)
		return op_list(c);
	if (strcmp(op, "probe") == 0)
		return op_probe(c, req);
	return reply_err(KZ_WE_BAD_REQUEST, "unknown op");
}

/* Answers frames until stdin ends; a bad frame is answered, then ends. */
static enum kz_exit
serve(const struct ctl_conf *c)
{
	char why[128];
	cJSON *req, *rep;
	int e;

	for (;;) {
		req = NULL;
		why[0] = '\0';
		e = kz_frame_read(0, c->frame_max, -1, &req, why, sizeof(why));
		if (e == KZ_EEOF)
			return KZ_EXIT_OK;
		rep = e != 0 ?
		    reply_err(kz_wire_code(e), why[0] ? why : "bad frame") :
		    dispatch(c, req);
		cJSON_Delete(req);
		if (rep == NULL)
			return KZ_EXIT_INTERNAL;
		e = kz_frame_write(1, rep, c->frame_max, CTL_IO_MS) != 0 ? -1 :
		    req == NULL                                          ? 1 :
		                                                           0;
		cJSON_Delete(rep);
		if (e < 0)
			return KZ_EXIT_UNAVAIL;
		if (e > 0)
			return KZ_EXIT_USAGE;
	}
}

static enum kz_exit
list_cmd(const struct ctl_conf *c)
{
	static struct ctl_inv inv;
	char why[256] = "";

	if (ctl_list(c, &inv, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-ctl-local: %s\n", why);
		return KZ_EXIT_UNAVAIL;
	}
	for (size_t i = 0; i < inv.n; i++)
		printf("%s\n", inv.id[i]);
	return KZ_EXIT_OK;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {{"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
	char why[256] = "", self[PATH_MAX];
	struct ctl_conf c;
	int ch;

	kz_log_init("kz-ctl-local", KZ_LOG_INFO);
	while ((ch = getopt_long(argc, argv, "hV", lo, NULL)) != -1) {
		switch (ch) {
		case 'h':
			usage(stdout);
			return KZ_EXIT_OK;
		case 'V':
			printf("kz-ctl-local " KZ_VERSION "\n");
			return KZ_EXIT_OK;
		default:
			usage(stderr);
			return KZ_EXIT_USAGE;
		}
	}
	if (argc - optind > 1 ||
	    (argc - optind == 1 && strcmp(argv[optind], "list") != 0)) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (realpath("/proc/self/exe", self) == NULL)
		snprintf(self, sizeof(self), "%s", argv[0]);
	if (ctl_conf_load(&c, self, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-ctl-local: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	return argc - optind == 1 ? list_cmd(&c) : serve(&c);
}
