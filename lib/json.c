#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_json.h"
#include "banned.h"

int
kz_utf8_next(const char *s, size_t len, uint32_t *cp)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if ((p[0] & 0xe0) == 0xc0) {
		n = 2;
		*cp = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		n = 3;
		*cp = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		n = 4;
		*cp = p[0] & 0x07;
	} else
		return 0;
	for (size_t k = 1; k < n; k++) {
		if (k == len)
			return -1;
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		*cp = (*cp << 6) | (p[k] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF. */
	if ((n == 2 && *cp < 0x80) || (n == 3 && *cp < 0x800) ||
	    (n == 4 && *cp < 0x10000) || *cp > 0x10ffff ||
	    (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return (int)n;
}

bool
kz_cp_acts(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c ||
	    cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
	    (cp >= 0x2066 && cp <= 0x2069);
}

/* Unicode's Default_Ignorable_Code_Point set (DerivedCoreProperties.txt)
 * less what kz_cp_acts names, and the interlinear annotation controls;
 * the name of each class is what a refusal says. */
static const struct {
	uint32_t lo, hi;
	const char *what;
} invisible[] = {
    {0x00ad, 0x00ad, "soft hyphen"},
    {0x034f, 0x034f, "combining grapheme joiner"},
    {0x115f, 0x1160, "Hangul filler"},
    {0x17b4, 0x17b5, "Khmer inherent vowel"},
    {0x180b, 0x180d, "variation selector"},
    {0x180e, 0x180e, "Mongolian vowel separator"},
    {0x180f, 0x180f, "variation selector"},
    {0x200b, 0x200d, "zero-width character"},
    {0x2060, 0x2065, "word joiner or invisible operator"},
    {0x206a, 0x206f, "deprecated formatting character"},
    {0x3164, 0x3164, "Hangul filler"},
    {0xfe00, 0xfe0f, "variation selector"},
    {0xfeff, 0xfeff, "zero-width no-break space"},
    {0xffa0, 0xffa0, "Hangul filler"},
    {0xfff0, 0xfffb, "interlinear annotation or reserved character"},
    {0x1bca0, 0x1bca3, "shorthand format control"},
    {0x1d173, 0x1d17a, "musical formatting character"},
    {0xe0000, 0xe007f, "tag character"},
    {0xe0080, 0xe00ff, "reserved ignorable character"},
    {0xe0100, 0xe01ef, "variation selector"},
    {0xe01f0, 0xe0fff, "reserved ignorable character"},
};

const char *
kz_cp_invisible(uint32_t cp)
{
	for (size_t i = 0; i < sizeof(invisible) / sizeof(invisible[0]); i++)
		if (cp >= invisible[i].lo && cp <= invisible[i].hi)
			return invisible[i].what;
	return NULL;
}

/* kz_json_inert's text written to out, or only measured when out is NULL:
 * its length either way. */
static size_t
inert(const char *s, size_t len, char *out)
{
	char esc[13];
	size_t i = 0, o = 0, k;
	uint32_t cp;
	int n;

	while (i < len) {
		n = kz_utf8_next(s + i, len - i, &cp);
		if (n <= 0) {
			k = (size_t)snprintf(esc, sizeof(esc), "\\ufffd");
			n = 1;
		} else if (kz_cp_acts(cp) || kz_cp_invisible(cp) != NULL)
			k = (size_t)(cp > 0xffff ?
			        snprintf(esc, sizeof(esc), "\\u%04x\\u%04x",
			            0xd800 + ((cp - 0x10000) >> 10),
			            0xdc00 + ((cp - 0x10000) & 0x3ff)) :
			        snprintf(esc, sizeof(esc), "\\u%04x",
			            (unsigned)cp));
		else
			k = 0;
		if (out != NULL)
			memcpy(out + o, k > 0 ? esc : s + i,
			    k > 0 ? k : (size_t)n);
		o += k > 0 ? k : (size_t)n;
		i += (size_t)n;
	}
	return o;
}

char *
kz_json_inert(const char *s, size_t len, size_t *olen)
{
	/* Measured first, so a reply of tens of MiB takes its own size
	 * again, not the six times of its worst case. */
	size_t n = inert(s, len, NULL);
	char *out;

	if ((out = malloc(n + 1)) == NULL)
		return NULL;
	inert(s, len, out);
	out[n] = '\0';
	*olen = n;
	return out;
}

bool
kz_utf8_valid(const char *s, size_t len)
{
	uint32_t cp;
	int n;

	for (size_t i = 0; i < len; i += (size_t)n)
		if ((n = kz_utf8_next(s + i, len - i, &cp)) <= 0)
			return false;
	return true;
}

/*
 * A lexical pass before cJSON sees the bytes: cJSON accepts raw control
 * characters in strings, decodes "\u0000" into a silently shortened string
 * and recurses without a useful depth bound, so those are checked here.
 */
static int
prescan(const char *buf, size_t len, char *why, size_t wlen)
{
	int depth = 0;
	bool instr = false;

	if (!kz_utf8_valid(buf, len)) {
		kz_why(why, wlen, "payload is not valid UTF-8");
		return KZ_EUTF8;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (instr) {
			if (c == '"')
				instr = false;
			else if (c < 0x20) {
				kz_why(why, wlen,
				    "control character in string");
				return KZ_EJSON;
			} else if (c == '\\' && i + 1 < len) {
				if (buf[i + 1] == 'u' && i + 5 < len &&
				    memcmp(buf + i + 2, "0000", 4) == 0) {
					kz_why(why, wlen, "\\u0000 in string");
					return KZ_ENULCHAR;
				}
				i++;
			}
			continue;
		}
		if (c == '"')
			instr = true;
		else if (c == '{' || c == '[') {
			if (++depth > KZ_JSON_MAX_DEPTH) {
				kz_why(why, wlen, "nesting deeper than %d",
				    KZ_JSON_MAX_DEPTH);
				return KZ_EDEPTH;
			}
		} else if (c == '}' || c == ']')
			depth--;
	}
	return 0;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
check_dups(const cJSON *v, char *why, size_t wlen)
{
	const cJSON *c;
	size_t n = 0, i;
	const char **names;
	int r = 0;

	if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
		return 0;
	for (c = v->child; c != NULL; c = c->next) {
		n++;
		if ((r = check_dups(c, why, wlen)) != 0)
			return r;
	}
	if (!cJSON_IsObject(v) || n < 2)
		return 0;
	if ((names = calloc(n, sizeof(*names))) == NULL)
		return KZ_ENOMEM;
	for (i = 0, c = v->child; c != NULL; c = c->next)
		names[i++] = c->string;
	qsort(names, n, sizeof(*names), cmpstr);
	for (i = 1; i < n; i++) {
		if (strcmp(names[i - 1], names[i]) == 0) {
			kz_why(why, wlen, "duplicate key");
			r = KZ_EDUPKEY;
			break;
		}
	}
	free(names);
	return r;
}

int
kz_json_parse(const char *buf, size_t len, cJSON **out, char *why, size_t wlen)
{
	const char *end = NULL;
	cJSON *v;
	int r;

	if ((r = prescan(buf, len, why, wlen)) != 0)
		return r;
	v = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
	if (v == NULL) {
		kz_why(why, wlen, "invalid JSON");
		return KZ_EJSON;
	}
	for (; end != NULL && end < buf + len; end++) {
		if (*end != ' ' && *end != '\t' && *end != '\n' &&
		    *end != '\r') {
			cJSON_Delete(v);
			kz_why(why, wlen, "trailing data after JSON value");
			return KZ_EJSON;
		}
	}
	if ((r = check_dups(v, why, wlen)) != 0) {
		cJSON_Delete(v);
		return r;
	}
	*out = v;
	return 0;
}

int
kz_json_parse_object(const char *buf, size_t len, cJSON **out, char *why,
    size_t wlen)
{
	cJSON *v;
	int r;

	if ((r = kz_json_parse(buf, len, &v, why, wlen)) != 0)
		return r;
	if (!cJSON_IsObject(v)) {
		cJSON_Delete(v);
		kz_why(why, wlen, "JSON value is not an object");
		return KZ_ENOTOBJ;
	}
	*out = v;
	return 0;
}

cJSON *
kz_json_get(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

int
kz_json_str_opt(const cJSON *obj, const char *key, size_t max, const char *dflt,
    const char **out, char *why, size_t wlen)
{
	const cJSON *v = kz_json_get(obj, key);

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsString(v) || v->valuestring == NULL) {
		kz_why(why, wlen, "field '%s' must be a string", key);
		return KZ_ETYPE;
	}
	if (strlen(v->valuestring) > max) {
		kz_why(why, wlen, "field '%s' longer than %zu bytes", key, max);
		return KZ_ETOOBIG;
	}
	*out = v->valuestring;
	return 0;
}

int
kz_json_str(const cJSON *obj, const char *key, size_t max, const char **out,
    char *why, size_t wlen)
{
	if (kz_json_get(obj, key) == NULL) {
		kz_why(why, wlen, "field '%s' is required", key);
		return KZ_EMISSING;
	}
	return kz_json_str_opt(obj, key, max, NULL, out, why, wlen);
}

int
kz_json_int_opt(const cJSON *obj, const char *key, int64_t min, int64_t max,
    int64_t dflt, int64_t *out, char *why, size_t wlen)
{
	const cJSON *v = kz_json_get(obj, key);
	double d;

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v)) {
		kz_why(why, wlen, "field '%s' must be a number", key);
		return KZ_ETYPE;
	}
	d = v->valuedouble;
	/* Range before the cast: converting an out-of-range double to an
	 * integer is undefined behaviour (found by the fuzzer). */
	if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) ||
	    d != (double)(int64_t)d) {
		kz_why(why, wlen, "field '%s' must be an integer", key);
		return KZ_ETYPE;
	}
	if ((int64_t)d < min || (int64_t)d > max) {
		kz_why(why, wlen, "field '%s' out of range [%lld, %lld]", key,
		    (long long)min, (long long)max);
		return KZ_ERANGE;
	}
	*out = (int64_t)d;
	return 0;
}

int
kz_json_int(const cJSON *obj, const char *key, int64_t min, int64_t max,
    int64_t *out, char *why, size_t wlen)
{
	if (kz_json_get(obj, key) == NULL) {
		kz_why(why, wlen, "field '%s' is required", key);
		return KZ_EMISSING;
	}
	return kz_json_int_opt(obj, key, min, max, 0, out, why, wlen);
}

int
kz_json_bool_opt(const cJSON *obj, const char *key, bool dflt, bool *out,
    char *why, size_t wlen)
{
	const cJSON *v = kz_json_get(obj, key);

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsBool(v)) {
		kz_why(why, wlen, "field '%s' must be true or false", key);
		return KZ_ETYPE;
	}
	*out = cJSON_IsTrue(v);
	return 0;
}

int
kz_json_only(const cJSON *obj, const char *const *allowed, char *why,
    size_t wlen)
{
	for (const cJSON *c = obj->child; c != NULL; c = c->next) {
		size_t i;

		for (i = 0; allowed[i] != NULL; i++)
			if (strcmp(allowed[i], c->string) == 0)
				break;
		if (allowed[i] == NULL) {
			/* The name was checked as UTF-8; bound what we echo. */
			kz_why(why, wlen, "unknown field '%.64s'", c->string);
			return KZ_EUNKNOWN;
		}
	}
	return 0;
}

char *
kz_json_print(const cJSON *v)
{
	return cJSON_PrintUnformatted(v);
}

static cJSON *
envelope(const cJSON *req, bool ok)
{
	cJSON *r = cJSON_CreateObject();
	const cJSON *id = req ? kz_json_get(req, "id") : NULL;

	if (r == NULL)
		return NULL;
	if (cJSON_AddNumberToObject(r, "v", 1) == NULL)
		goto fail;
	if (cJSON_IsString(id)) {
		if (cJSON_AddStringToObject(r, "id", id->valuestring) == NULL)
			goto fail;
	} else if (cJSON_AddNullToObject(r, "id") == NULL)
		goto fail;
	if (cJSON_AddBoolToObject(r, "ok", ok) == NULL)
		goto fail;
	return r;
fail:
	cJSON_Delete(r);
	return NULL;
}

cJSON *
kz_reply_ok(const cJSON *req)
{
	return envelope(req, true);
}

cJSON *
kz_reply_err(const cJSON *req, const char *code, const char *reason)
{
	cJSON *r = envelope(req, false);

	if (r == NULL)
		return NULL;
	if (cJSON_AddStringToObject(r, "error", code) == NULL ||
	    cJSON_AddStringToObject(r, "reason", reason) == NULL) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}
