/*
 * libFuzzer harness for frame and JSON decoding: the input is what a hostile
 * peer sends.  The header is checked first (as the server does, before any
 * allocation), then the payload goes through the strict JSON parser and the
 * typed getters.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kz_frame.h"
#include "kz_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const allowed[] = {"v", "op", "id", NULL};
	uint32_t n;
	cJSON *v = NULL;
	char why[128];
	const char *s;
	int64_t i;

	if (size < KZ_FRAME_HDR ||
	    kz_frame_hdr(data, KZ_FRAME_MAX_DEFAULT, &n) != 0)
		return 0;
	if (n > size - KZ_FRAME_HDR)
		n = (uint32_t)(size - KZ_FRAME_HDR);
	if (kz_frame_decode((const char *)data + KZ_FRAME_HDR, n, &v, why,
	        sizeof(why)) != 0)
		return 0;
	(void)kz_json_str(v, "op", 64, &s, why, sizeof(why));
	(void)kz_json_int(v, "v", 1, 1, &i, why, sizeof(why));
	(void)kz_json_only(v, allowed, why, sizeof(why));
	free(kz_json_print(v));
	cJSON_Delete(v);
	return 0;
}
