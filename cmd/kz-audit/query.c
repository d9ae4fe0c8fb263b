/*
 * query: prints the stored records that match every filter given, each
 * line as written, except that a character a terminal would act on or not
 * show (a bidi override, a zero-width character) is printed as its JSON
 * escape: the same JSON, shown as it is.  A record written before such
 * characters were refused (t0108) may hold one.  --raw prints the lines
 * byte for byte.  It reads without the key and so does not verify: run
 * verify for that.  A line that does not parse is reported and skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "audit.h"
#include "banned.h"

static bool
str_is(const cJSON *obj, const char *key, const char *want)
{
	const cJSON *v = kz_json_get(obj, key);

	return cJSON_IsString(v) && strcmp(v->valuestring, want) == 0;
}

static bool
matches(const struct aud_query *q, const struct aud_rec *rec)
{
	const cJSON *ev = kz_json_get(rec->json, "event");

	if (rec->ts_ms < q->since_ms || rec->ts_ms > q->until_ms)
		return false;
	if (q->kind != NULL && !str_is(rec->json, "kind", q->kind))
		return false;
	if (q->uid >= 0 && rec->uid != q->uid)
		return false;
	if (q->actor_hash != NULL && !str_is(ev, "actor_hash", q->actor_hash))
		return false;
	if (q->conversation_hash != NULL &&
	    !str_is(ev, "conversation_hash", q->conversation_hash))
		return false;
	return true;
}

static int
print_line(const struct aud_query *q, const char *line, size_t len, FILE *out)
{
	char *shown = NULL;

	if (!q->raw && (line = shown = kz_json_inert(line, len, &len)) == NULL)
		return KZ_ENOMEM;
	fwrite(line, 1, len, out);
	fputc('\n', out);
	free(shown);
	return 0;
}

static int
query_file(const struct aud_query *q, const char *path, FILE *out, FILE *err,
    uint64_t *skipped)
{
	struct aud_file af;
	char why[160];
	size_t len, lineno = 0;
	bool nl;
	int r;

	if ((r = aud_file_open(path, err, &af)) != 0)
		return r;
	while ((r = aud_file_getline(&af, &len, &nl)) != 0) {
		struct aud_rec rec;

		lineno++;
		if (r < 0 ||
		    aud_record_parse(af.line, len, &rec, why, sizeof(why)) !=
		        0) {
			fprintf(err, "kz-audit: %s:%zu: skipped: %s\n", path,
			    lineno, r < 0 ? "over the length limit" : why);
			(*skipped)++;
			continue;
		}
		if (matches(q, &rec) && print_line(q, af.line, len, out) != 0) {
			aud_rec_release(&rec);
			aud_file_close(&af);
			return KZ_EXIT_INTERNAL;
		}
		aud_rec_release(&rec);
	}
	aud_file_close(&af);
	return 0;
}

int
aud_query(const struct aud_query *q, char **files, size_t n, FILE *out,
    FILE *err)
{
	uint64_t skipped = 0;
	int rc;

	for (size_t i = 0; i < n; i++)
		if ((rc = query_file(q, files[i], out, err, &skipped)) != 0)
			return rc;
	return fflush(out) == 0 ? KZ_EXIT_OK : KZ_EXIT_INTERNAL;
}
