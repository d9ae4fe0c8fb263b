/*
 * libFuzzer harness for the host-administration classifier (lib
 * classify.c): the text of a member's artifact script.  Beyond not
 * crashing: the answer is one of the two classes, a host-admin answer
 * comes with a reason, and the answer does not depend on the bytes after
 * the input (an exact-size copy lets ASan catch any read past it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kz_classify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *t, why[256];
	enum kz_class c;

	if (size > 65536 || (t = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(t, data, size);
	why[0] = '\0';
	c = kz_classify(t, size, why, sizeof(why));
	if (c != KZ_CLASS_OK && c != KZ_CLASS_HOST_ADMIN)
		abort();
	if (c == KZ_CLASS_HOST_ADMIN &&
	    (why[0] == '\0' || memchr(why, '\0', sizeof(why)) == NULL))
		abort();
	free(t);
	return 0;
}
