/*
 * libFuzzer harness for kz-audit's closed event schema (cmd/kz-audit
 * schema.c): the line a client of the audit sink appends, through the
 * strict JSON parser, the split into kind and event, and the schema
 * check.  Beyond not crashing: a refusal names a field and a reason, and
 * never echoes a value (every string of the input that is a value and
 * long enough not to be a field name must be absent from why).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "audit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kz_key idkey = {{7}};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aud_refusal_info ri;
	cJSON *line = NULL, *ev = NULL, *clean = NULL;
	const char *kind;
	char why[200];
	int r;

	if (size > 65536 ||
	    kz_json_parse_object((const char *)data, size, &line, why,
	        sizeof(why)) != 0)
		return 0;
	if (aud_input_split(line, &kind, &ev, why, sizeof(why)) != 0)
		goto out;
	r = aud_schema_check(kind, ev, &idkey, &clean, &ri);
	if (r == 0) {
		if (clean == NULL || !cJSON_IsObject(clean))
			abort();
		free(kz_json_print(clean));
	} else if (r == KZ_EDENIED) {
		if (ri.field == NULL ||
		    memchr(ri.why, '\0', sizeof(ri.why)) == NULL)
			abort();
		(void)aud_refusal_name(ri.reason);
	}
out:
	cJSON_Delete(clean);
	cJSON_Delete(ev);
	cJSON_Delete(line);
	return 0;
}
