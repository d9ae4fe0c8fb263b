/*
 * One record per line:
 *   {"seq":N,"ts":"...","kind":"...","event":{...},"prev":"<hex>","mac":"<hex>"}
 * The MAC is keyed BLAKE2b-256 (the AUDIT subkey) over a domain tag and the
 * exact bytes of the line up to ',"mac":"'.  Those bytes include prev, the
 * previous record's MAC, so a deleted, reordered or edited record breaks
 * the chain.  Verifying bytes rather than a re-serialization means the
 * checker never depends on how a JSON library prints numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_json.h"
#include "audit.h"
#include "banned.h"

#define MAC_TAG "kz-audit-v1\n"
#define MAC_SUFFIX_HEAD ",\"mac\":\""
#define MAC_SUFFIX_LEN (sizeof(MAC_SUFFIX_HEAD) - 1 + AUD_MAC_HEX + 2)

int64_t
aud_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
aud_ts_format(int64_t ms, char out[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	/* Years past 9999 do not occur; the bound only quiets the checker. */
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	    (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
	    tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
	    tm.tm_sec % 100, (int)(ms % 1000));
}

/* "YYYY-MM-DDTHH:MM:SS[.mmm]Z" (UTC only), or whole epoch seconds. */
int
aud_ts_parse(const char *s, int64_t *ms)
{
	struct tm tm;
	int frac = 0, n = 0;
	int64_t v;
	char *end;

	if (kz_parse_int(s, 0, INT64_MAX / 1000, &v) == 0) {
		*ms = v * 1000;
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL || strlen(s) < 19)
		return KZ_EINVAL;
	if (end[0] == '.') {
		for (end++; n < 3 && *end >= '0' && *end <= '9'; end++, n++)
			frac = frac * 10 + (*end - '0');
		if (n != 3)
			return KZ_EINVAL;
	}
	if (strcmp(end, "Z") != 0)
		return KZ_EINVAL;
	*ms = (int64_t)timegm(&tm) * 1000 + frac;
	return 0;
}

static void
mac_compute(const struct kz_key *key, const char *body, size_t len,
    unsigned char out[AUD_MAC_BYTES])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, key->k, sizeof(key->k), AUD_MAC_BYTES);
	crypto_generichash_update(&st, (const unsigned char *)MAC_TAG,
	    sizeof(MAC_TAG) - 1);
	crypto_generichash_update(&st, (const unsigned char *)body, len);
	crypto_generichash_final(&st, out, AUD_MAC_BYTES);
	sodium_memzero(&st, sizeof(st));
}

int
aud_record_format(struct aud_chain *c, const char *kind, const cJSON *event,
    int64_t ts_ms, char **line, size_t *len)
{
	char ts[32], prev[AUD_MAC_HEX + 1], mhex[AUD_MAC_HEX + 1];
	unsigned char mac[AUD_MAC_BYTES];
	char *ev, *buf = NULL;
	size_t cap, n;
	int w, r = 0;

	if (sodium_init() < 0)
		return KZ_EINTERNAL;
	if ((ev = kz_json_print(event)) == NULL)
		return KZ_ENOMEM;
	cap = strlen(ev) + strlen(kind) + 256;
	if (cap > AUD_LINE_MAX) {
		r = KZ_ETOOBIG;
		goto out;
	}
	if ((buf = malloc(cap)) == NULL) {
		r = KZ_ENOMEM;
		goto out;
	}
	aud_ts_format(ts_ms, ts);
	kz_hex(c->mac, AUD_MAC_BYTES, prev);
	w = snprintf(buf, cap,
	    "{\"seq\":%llu,\"ts\":\"%s\",\"kind\":\"%s\",\"event\":%s,"
	    "\"prev\":\"%s\"",
	    (unsigned long long)c->seq + 1, ts, kind, ev, prev);
	if (w < 0 || (size_t)w + MAC_SUFFIX_LEN + 2 > cap) {
		r = KZ_EINTERNAL;
		goto out;
	}
	n = (size_t)w;
	mac_compute(&c->key, buf, n, mac);
	kz_hex(mac, AUD_MAC_BYTES, mhex);
	w = snprintf(buf + n, cap - n, MAC_SUFFIX_HEAD "%s\"}\n", mhex);
	*len = n + (size_t)w;
	*line = buf;
	buf = NULL;
	c->seq++;
	memcpy(c->mac, mac, AUD_MAC_BYTES);
out:
	free(buf);
	free(ev);
	return r;
}

void
aud_rec_release(struct aud_rec *r)
{
	cJSON_Delete(r->json);
	r->json = NULL;
}

static int
parse_fields(const cJSON *j, struct aud_rec *out, char *why, size_t wlen)
{
	static const char *const keys[] = {"seq", "ts", "kind", "event", "prev",
	    "mac", NULL};
	const char *ts, *kind, *prev, *mac;
	int64_t seq;
	int r;

	if ((r = kz_json_only(j, keys, why, wlen)) != 0 ||
	    (r = kz_json_int(j, "seq", 1, INT64_MAX, &seq, why, wlen)) != 0 ||
	    (r = kz_json_str(j, "ts", 31, &ts, why, wlen)) != 0 ||
	    (r = kz_json_str(j, "kind", AUD_KIND_MAX, &kind, why, wlen)) != 0 ||
	    (r = kz_json_str(j, "prev", AUD_MAC_HEX, &prev, why, wlen)) != 0 ||
	    (r = kz_json_str(j, "mac", AUD_MAC_HEX, &mac, why, wlen)) != 0)
		return r;
	if (!cJSON_IsObject(kz_json_get(j, "event"))) {
		kz_why(why, wlen, "record has no event object");
		return KZ_ETYPE;
	}
	if (!aud_kind_known(kind)) {
		kz_why(why, wlen, "record has an unknown kind");
		return KZ_EINVAL;
	}
	if (aud_ts_parse(ts, &out->ts_ms) != 0 ||
	    kz_unhex(prev, out->prev, AUD_MAC_BYTES) != 0 ||
	    kz_unhex(mac, out->mac, AUD_MAC_BYTES) != 0) {
		kz_why(why, wlen, "record has a malformed ts, prev or mac");
		return KZ_EINVAL;
	}
	out->seq = (uint64_t)seq;
	return 0;
}

int
aud_record_parse(const char *line, size_t len, struct aud_rec *out, char *why,
    size_t wlen)
{
	cJSON *j = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	if (len == 0 || len > AUD_LINE_MAX) {
		kz_why(why, wlen, "record is empty or too long");
		return KZ_EINVAL;
	}
	if ((r = kz_json_parse_object(line, len, &j, why, wlen)) != 0)
		return r;
	if ((r = parse_fields(j, out, why, wlen)) != 0) {
		cJSON_Delete(j);
		return r;
	}
	out->json = j;
	return 0;
}

int
aud_record_check(const struct kz_key *key, const char *line, size_t len,
    bool keep_json, struct aud_rec *out, char *why, size_t wlen)
{
	unsigned char mac[AUD_MAC_BYTES], want[AUD_MAC_BYTES];
	const char *sfx;
	int r;

	memset(out, 0, sizeof(*out));
	if (sodium_init() < 0)
		return KZ_EINTERNAL;
	if (len < MAC_SUFFIX_LEN + 2 || len > AUD_LINE_MAX) {
		kz_why(why, wlen, "record is truncated or too long");
		return KZ_EINVAL;
	}
	sfx = line + len - MAC_SUFFIX_LEN;
	if (memcmp(sfx, MAC_SUFFIX_HEAD, sizeof(MAC_SUFFIX_HEAD) - 1) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0) {
		kz_why(why, wlen, "record does not end with its mac");
		return KZ_EINVAL;
	}
	{
		char hex[AUD_MAC_HEX + 1];

		memcpy(hex, sfx + sizeof(MAC_SUFFIX_HEAD) - 1, AUD_MAC_HEX);
		hex[AUD_MAC_HEX] = '\0';
		if (kz_unhex(hex, mac, AUD_MAC_BYTES) != 0) {
			kz_why(why, wlen, "record mac is not hex");
			return KZ_EINVAL;
		}
	}
	mac_compute(key, line, (size_t)(sfx - line), want);
	if (!kz_ct_equal(mac, want, AUD_MAC_BYTES)) {
		kz_why(why, wlen, "mac mismatch (record edited or wrong key)");
		return KZ_ECRYPTO;
	}
	if ((r = aud_record_parse(line, len, out, why, wlen)) != 0)
		return r;
	if (!keep_json)
		aud_rec_release(out);
	return 0;
}

int
aud_file_open(const char *path, FILE *err, FILE **f, char **line)
{
	if ((*line = malloc(AUD_LINE_MAX + 1)) == NULL)
		return KZ_EXIT_INTERNAL;
	if ((*f = fopen(path, "re")) == NULL) {
		fprintf(err, "kz-audit: %s: cannot open\n", path);
		free(*line);
		*line = NULL;
		return KZ_EXIT_USAGE;
	}
	return 0;
}

int
aud_getline(FILE *f, char *buf, size_t cap, size_t *len, bool *nl)
{
	size_t n = 0;
	bool over = false;
	int c;

	*nl = false;
	while ((c = getc_unlocked(f)) != EOF) {
		if (c == '\n') {
			*nl = true;
			break;
		}
		if (n + 1 < cap)
			buf[n++] = (char)c;
		else
			over = true; /* keep reading to the end of line */
	}
	buf[n] = '\0';
	*len = n;
	if (over)
		return KZ_ETOOBIG;
	return n > 0 || *nl ? 1 : 0;
}
