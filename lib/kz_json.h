/*
 * Strict JSON over cJSON.  kz_json_parse() takes an explicit length, requires
 * the end of input and rejects what the wire protocol forbids: invalid UTF-8,
 * "\u0000", duplicate keys and nesting deeper than KZ_JSON_MAX_DEPTH.  Lookups
 * are case-sensitive.  Getters return 0 or a negative kz_err and name the
 * field in why.
 */
#ifndef KZ_JSON_H
#define KZ_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_wire.h"

#define KZ_JSON_MAX_DEPTH 16
#define KZ_JSON_STR_MAX 4096 /* default bound for a string field */

/* Validates UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool kz_utf8_valid(const char *s, size_t len);
/* The UTF-8 sequence at s (len > 0 bytes there): its length (1 to 4), its
 * code point in *cp; 0 when it is not well formed by kz_utf8_valid's
 * rules; -1 when the len bytes are only the start of one that more bytes
 * could complete (a sequence cut by the end of a buffer). */
int kz_utf8_next(const char *s, size_t len, uint32_t *cp);
/*
 * Whether a code point is one a terminal acts on rather than shows: C0 and
 * C1 controls and DEL (U+009B is CSI, an escape sequence in one
 * character), the line and paragraph separators, and the bidirectional
 * formatting characters (U+061C, U+200E-U+200F, U+202A-U+202E,
 * U+2066-U+2069), which reorder what a reader sees.
 */
bool kz_cp_acts(uint32_t cp);
/*
 * The class of a code point a reader is shown as nothing, or that changes
 * how the characters around it look, without a terminal acting on it
 * ("zero-width character", "tag character", ...), or NULL: in a value
 * shown to an operator it makes two values that read the same differ.
 */
const char *kz_cp_invisible(uint32_t cp);
/*
 * The len bytes at s as text a terminal shows as it is: each character
 * kz_cp_acts or kz_cp_invisible names as its JSON \u escape (its UTF-16
 * pair past U+FFFF), a byte that is not UTF-8 as \ufffd.  In a JSON
 * document, where such characters can only stand inside strings, the
 * result is JSON that means the same.  A NUL-terminated copy the caller
 * frees, its length in *olen; NULL when out of memory.
 */
char *kz_json_inert(const char *s, size_t len, size_t *olen);

/* Parses exactly len bytes as one JSON value; *out set only on success. */
KZ_WUR int kz_json_parse(const char *buf, size_t len, cJSON **out, char *why,
    size_t wlen);
/* Same, and requires an object: KZ_ENOTOBJ otherwise. */
KZ_WUR int kz_json_parse_object(const char *buf, size_t len, cJSON **out,
    char *why, size_t wlen);

/* Case-sensitive member lookup; NULL if absent. */
cJSON *kz_json_get(const cJSON *obj, const char *key);

/* Required string of at most max bytes (UTF-8 was checked at parse). */
KZ_WUR int kz_json_str(const cJSON *obj, const char *key, size_t max,
    const char **out, char *why, size_t wlen);
/* Optional string: *out = dflt when absent (null is not absence). */
KZ_WUR int kz_json_str_opt(const cJSON *obj, const char *key, size_t max,
    const char *dflt, const char **out, char *why, size_t wlen);
/* Required integer in [min, max] (a JSON number with no fraction). */
KZ_WUR int kz_json_int(const cJSON *obj, const char *key, int64_t min,
    int64_t max, int64_t *out, char *why, size_t wlen);
KZ_WUR int kz_json_int_opt(const cJSON *obj, const char *key, int64_t min,
    int64_t max, int64_t dflt, int64_t *out, char *why, size_t wlen);
KZ_WUR int kz_json_bool_opt(const cJSON *obj, const char *key, bool dflt,
    bool *out, char *why, size_t wlen);
/* Rejects any member whose name is not in the NULL-terminated list. */
KZ_WUR int kz_json_only(const cJSON *obj, const char *const *allowed, char *why,
    size_t wlen);

/* Single-line serialization; caller frees with free().  NULL on ENOMEM. */
char *kz_json_print(const cJSON *v);

/*
 * Wire envelope (kz-protocol(7)).  Both return a new object the caller owns,
 * or NULL on ENOMEM.  The id is copied from req when req has a string id.
 */
cJSON *kz_reply_ok(const cJSON *req);
cJSON *kz_reply_err(const cJSON *req, const char *code, const char *reason);

#endif
