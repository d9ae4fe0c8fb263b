/*
 * What an invocation may carry, what its tool may be given, and what may
 * come back: the request's grammar, the environment guard and the result
 * sanitizer, each free of side effects so the unit suite can throw hostile
 * tables at them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kz_json.h"
#include "kz_path.h"
#include "pkgrun.h"
#include "banned.h"

/* One line of text: valid UTF-8, no control character, 1..max bytes. */
static bool
line_ok(const char *s, size_t max)
{
	size_t n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n > max || !kz_utf8_valid(s, n))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f ||
		    ((unsigned char)s[i] == 0xc2 && i + 1 < n &&
		        (unsigned char)s[i + 1] < 0xa0))
			return false;
	return true;
}

static bool
name_ok(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	return n > 0 && n <= PR_TOOL_NAME_MAX &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

bool
pr_segment_ok(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	return n > 0 && strchr(s, '/') == NULL &&
	    kz_path_check(s, n, NULL, 0) == 0;
}

int
pr_inv_check(const struct pr_inv *iv, char *why, size_t wlen)
{
	if (!pr_hash_hex_ok(iv->package))
		kz_why(why, wlen, "--package must be 64 lowercase hex digits");
	else if (!name_ok(iv->tool))
		kz_why(why, wlen, "--tool must be 1-%d of [a-z0-9_.-]",
		    PR_TOOL_NAME_MAX);
	else if (!line_ok(iv->actor, PR_IDENT_MAX) ||
	    !line_ok(iv->conversation, PR_IDENT_MAX) ||
	    (iv->room != NULL && !line_ok(iv->room, PR_IDENT_MAX)))
		kz_why(why, wlen,
		    "actor, conversation and room must be one "
		    "line of 1-%d bytes",
		    PR_IDENT_MAX);
	else if (iv->rid != NULL &&
	    (strlen(iv->rid) == 0 || strlen(iv->rid) > 128 ||
	        strspn(iv->rid,
	            "abcdefghijklmnopqrstuvwxyz"
	            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@+=-") !=
	            strlen(iv->rid)))
		kz_why(why, wlen,
		    "a request id is 1-128 of [A-Za-z0-9._:@+=-]");
	else if (iv->workspace != NULL &&
	    kz_path_check(iv->workspace, strlen(iv->workspace), NULL, 0) != 0)
		kz_why(why, wlen,
		    "the workspace must be a rooted relative "
		    "path");
	else if (iv->nfiles > 0 &&
	    (!pr_segment_ok(iv->conversation) || !pr_segment_ok(iv->actor)))
		kz_why(why, wlen,
		    "member files need an actor and a conversation that are "
		    "each one path segment");
	else {
		for (int i = 0; i < iv->nargs; i++)
			if (!line_ok(iv->args[i], PR_ARG_BYTES)) {
				kz_why(why, wlen,
				    "argument %d is not one line "
				    "of 1-%d bytes",
				    i + 1, PR_ARG_BYTES);
				return KZ_EINVAL;
			}
		for (int i = 0; i < iv->nfiles; i++) {
			int r = kz_path_check(iv->files[i],
			    strlen(iv->files[i]), NULL, 0);

			if (r != 0) {
				kz_why(why, wlen, "file %d: %s", i + 1,
				    kz_strerror(r));
				return KZ_EINVAL;
			}
		}
		return 0;
	}
	return KZ_EINVAL;
}

bool
pr_env_name_secret(const char *name)
{
	static const char *const tails[] = {"TOKEN", "KEY", "SECRET",
	    "PASSWORD", "CREDENTIALS", NULL};
	size_t n = strlen(name);

	for (int i = 0; tails[i] != NULL; i++) {
		size_t t = strlen(tails[i]);

		if (n >= t && strcasecmp(name + n - t, tails[i]) == 0)
			return true;
	}
	return false;
}

/* Length of the valid UTF-8 sequence at p (of n bytes), or 0. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
	size_t want = p[0] < 0x80 ? 1 :
	    (p[0] & 0xe0) == 0xc0 ? 2 :
	    (p[0] & 0xf0) == 0xe0 ? 3 :
	    (p[0] & 0xf8) == 0xf0 ? 4 :
	                            0;

	if (want == 0 || want > n || !kz_utf8_valid((const char *)p, want))
		return 0;
	return want;
}

/* A control character: C0 but tab and newline, DEL, C1, and the Unicode
 * line and paragraph separators. */
static bool
is_control(const unsigned char *p, size_t len)
{
	if (len == 1)
		return (p[0] < 0x20 && p[0] != '\t' && p[0] != '\n') ||
		    p[0] == 0x7f;
	if (len == 2)
		return p[0] == 0xc2 && p[1] < 0xa0;
	return len == 3 && p[0] == 0xe2 && p[1] == 0x80 &&
	    (p[2] == 0xa8 || p[2] == 0xa9);
}

char *
pr_sanitize(const char *in, size_t len, size_t *outlen)
{
	static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */
	const unsigned char *p = (const unsigned char *)in;
	size_t i = 0, o = 0;
	char *out;

	/* Every input byte becomes at most the three of U+FFFD. */
	if ((out = malloc(len * 3 + 1)) == NULL)
		return NULL;
	while (i < len) {
		size_t n = utf8_len(p + i, len - i);

		if (n == 0 || is_control(p + i, n)) {
			memcpy(out + o, repl, 3);
			o += 3;
			i += n ? n : 1;
			continue;
		}
		memcpy(out + o, p + i, n);
		o += n, i += n;
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}

bool
pr_result_bound(char *s, size_t *len, size_t max)
{
	size_t n = *len;

	if (n <= max)
		return false;
	/* Back off continuation bytes so a character is never split. */
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	s[n] = '\0';
	*len = n;
	return true;
}
