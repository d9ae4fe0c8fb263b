/*
 * libFuzzer harness for the rooted-path grammar (lib/path.c): the paths a
 * hostile package or artifact names.  Beyond not crashing, a path that
 * kz_path_check accepts keeps every promise of kz_path.h: 1..KZ_PATH_MAX
 * bytes, valid UTF-8, no NUL, control character (C0, DEL, C1) or
 * backslash, no empty, "." or ".." segment, segments of at most
 * KZ_PATH_SEG_MAX bytes, at most KZ_PATH_DEPTH_MAX of them.  The same
 * bytes, split at the first NUL-free '|', also go through
 * kz_path_is_under, whose answer must match its lexical definition.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "kz_path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
promises(const char *p, size_t n)
{
	size_t seg = 0, nseg = 1;

	if (n == 0 || n > KZ_PATH_MAX || !kz_utf8_valid(p, n))
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c < 0x20 || c == 0x7f || c == '\\')
			abort();
		/* C1 controls are U+0080..U+009F: C2 80..C2 9F in UTF-8. */
		if (c == 0xc2 && i + 1 < n && (unsigned char)p[i + 1] >= 0x80 &&
		    (unsigned char)p[i + 1] <= 0x9f)
			abort();
		if (c != '/') {
			seg++;
			continue;
		}
		if (seg == 0 || (seg == 1 && p[i - 1] == '.') ||
		    (seg == 2 && p[i - 1] == '.' && p[i - 2] == '.'))
			abort();
		if (seg > KZ_PATH_SEG_MAX)
			abort();
		seg = 0;
		nseg++;
	}
	if (seg == 0 || seg > KZ_PATH_SEG_MAX || nseg > KZ_PATH_DEPTH_MAX ||
	    (seg == 1 && p[n - 1] == '.') ||
	    (seg == 2 && p[n - 1] == '.' && p[n - 2] == '.'))
		abort();
}

static void
under(const char *s, size_t n)
{
	const char *bar = memchr(s, '|', n);
	size_t rl, pl;
	bool want;

	if (bar == NULL)
		return;
	rl = (size_t)(bar - s);
	pl = n - rl - 1;
	if (rl == 1 && s[0] == '/')
		want = pl > 1 && bar[1] == '/';
	else
		want = pl > rl + 1 && memcmp(bar + 1, s, rl) == 0 &&
		    bar[1 + rl] == '/';
	if (kz_path_is_under(s, rl, bar + 1, pl) != want)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *p;

	if (size > KZ_PATH_MAX + 16 || (p = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(p, data, size);
	if (kz_path_check(p, size, NULL, 0) == 0)
		promises(p, size);
	under(p, size);
	free(p);
	return 0;
}
