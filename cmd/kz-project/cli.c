/*
 * The one-shot command line: "--name value" pairs become the fields of the
 * same request the daemon takes, so both paths run the same checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_json.h"
#include "kzp.h"
#include "kzp_conf.h"
#include "banned.h"

#define SNAP_MAX (4u << 20)

static bool
is_list(const char *f)
{
	return strcmp(f, "select") == 0 || strcmp(f, "retrieved") == 0 ||
	    strcmp(f, "serves") == 0;
}

static bool
is_bool(const char *f)
{
	return strcmp(f, "contract") == 0 || strcmp(f, "pending") == 0 ||
	    strcmp(f, "shared") == 0 || strcmp(f, "dry") == 0;
}

static bool
known(const struct kzp_opdef *d, const char *f)
{
	for (int i = 0; d->fields[i] != NULL; i++)
		if (strcmp(d->fields[i], f) == 0)
			return true;
	return false;
}

/* Reads a snapshot (or the whole admit output) from a file or stdin. */
static int
read_snap(const char *path, cJSON **out, char *why, size_t wlen)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
	char *buf = NULL;
	size_t n = 0;
	cJSON *j = NULL, *a;
	int e;

	if (f == NULL) {
		kz_why(why, wlen, "cannot read the snapshot file");
		return KZ_EINVAL;
	}
	if ((buf = malloc(SNAP_MAX)) == NULL) {
		e = KZ_ENOMEM;
		goto out;
	}
	n = fread(buf, 1, SNAP_MAX, f);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	if ((e = kz_json_parse_object(buf, n, &j, why, wlen)) != 0)
		goto out;
	if ((a = kz_json_get(j, "admission")) != NULL) {
		*out = cJSON_DetachItemViaPointer(j, a);
		cJSON_Delete(j);
	} else
		*out = j;
out:
	free(buf);
	if (f != stdin)
		fclose(f);
	return e;
}

int
kzp_cli_request(const char *op, int argc, char **argv, cJSON **out, char *why,
    size_t wlen)
{
	const struct kzp_opdef *d = kzp_op_find(op);
	cJSON *req;
	int e = 0;

	if (d == NULL) {
		kz_why(why, wlen, "unknown command '%.40s'", op);
		return KZ_EINVAL;
	}
	if ((req = cJSON_CreateObject()) == NULL)
		return KZ_ENOMEM;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *f = a + 2;
		cJSON *v;

		if (strcmp(a, "--private") == 0 && known(d, "shared")) {
			cJSON_AddBoolToObject(req, "shared", false);
			continue;
		}
		if (strncmp(a, "--", 2) != 0 || !known(d, f)) {
			kz_why(why, wlen, "unknown option '%.40s'", a);
			e = KZ_EINVAL;
			goto out;
		}
		if (is_bool(f)) {
			cJSON_AddBoolToObject(req, f, true);
			continue;
		}
		if (i + 1 >= argc) {
			kz_why(why, wlen, "option '%.40s' needs a value", a);
			e = KZ_EINVAL;
			goto out;
		}
		a = argv[++i];
		if (strcmp(f, "snapshot") == 0) {
			if ((e = read_snap(a, &v, why, wlen)) != 0)
				goto out;
			cJSON_AddItemToObject(req, f, v);
		} else if (is_list(f)) {
			cJSON *l = kz_json_get(req, f);

			if (l == NULL)
				l = cJSON_AddArrayToObject(req, f);
			cJSON_AddItemToArray(l, cJSON_CreateString(a));
		} else if (kz_json_get(req, f) != NULL) {
			kz_why(why, wlen, "option '--%.40s' given twice", f);
			e = KZ_EINVAL;
			goto out;
		} else
			cJSON_AddStringToObject(req, f, a);
	}
	*out = req;
	return 0;
out:
	cJSON_Delete(req);
	return e;
}
