/*
 * One record per line:
 *   {"seq":N,"ts":"...","uid":U,"kind":"...","event":{...},"prev":"<hex>",
 *    "mac":"<hex>"}
 * uid is the writer's: the peer's uid (SO_PEERCRED) for an append over the
 * socket, never a value the event claims.  Records written before it was
 * stamped have none.
 * The MAC is keyed BLAKE2b-256 (the AUDIT subkey) over a domain tag and the
 * exact bytes of the line up to ',"mac":"'.  Those bytes include prev, the
 * previous record's MAC, so a deleted, reordered or edited record breaks
 * the chain.  Verifying bytes rather than a re-serialization means the
 * checker never depends on how a JSON library prints numbers; and numbers
 * are written as their digits, not as cJSON prints them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
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

/*
 * Replaces every number under j, each an integer ints_scan accepted, by
 * its decimal digits (a raw item).  cJSON prints numbers with %1.15g and a
 * tolerant round-trip check, which turns 5000000000000001 into 5e+15; the
 * record must hold the integer the schema accepted.
 */
static int
ints_exact(cJSON *j)
{
	char num[24];
	cJSON *c, *raw;
	int i = 0, r;

	for (c = j->child; c != NULL; c = c->next, i++) {
		if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
			if ((r = ints_exact(c)) != 0)
				return r;
			continue;
		}
		if (!cJSON_IsNumber(c))
			continue;
		snprintf(num, sizeof(num), "%" PRId64, (int64_t)c->valuedouble);
		if ((raw = cJSON_CreateRaw(num)) == NULL)
			return KZ_ENOMEM;
		/* The key is copied into raw before c is freed. */
		if (!(cJSON_IsArray(j) ?
		            cJSON_ReplaceItemInArray(j, i, raw) :
		            cJSON_ReplaceItemInObjectCaseSensitive(j, c->string,
		                raw))) {
			cJSON_Delete(raw);
			return KZ_ENOMEM;
		}
		c = raw;
	}
	return 0;
}

/*
 * Whether every number under j is an integer within AUD_INT_MAX (else
 * KZ_EINVAL), and *big whether one lies outside int, where cJSON stops
 * printing exact digits.  Most events have none: they are printed as they
 * are, without a copy.
 */
static int
ints_scan(const cJSON *j, bool *big)
{
	const cJSON *c;
	int r;

	for (c = j->child; c != NULL; c = c->next) {
		double d = c->valuedouble;

		if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
			if ((r = ints_scan(c, big)) != 0)
				return r;
		} else if (cJSON_IsNumber(c)) {
			if (!(d >= (double)-AUD_INT_MAX &&
			        d <= (double)AUD_INT_MAX) ||
			    d != (double)(int64_t)d)
				return KZ_EINVAL;
			*big = *big || d < (double)INT_MIN ||
			    d > (double)INT_MAX;
		}
	}
	return 0;
}

/* The event as stored: compact JSON, integers as their digits. */
static int
event_print(const cJSON *event, char **out)
{
	cJSON *copy;
	bool big = false;
	int r;

	if ((r = ints_scan(event, &big)) != 0)
		return r;
	if (!big)
		return (*out = kz_json_print(event)) != NULL ? 0 : KZ_ENOMEM;
	if ((copy = cJSON_Duplicate(event, true)) == NULL)
		return KZ_ENOMEM;
	if ((r = ints_exact(copy)) == 0 && (*out = kz_json_print(copy)) == NULL)
		r = KZ_ENOMEM;
	cJSON_Delete(copy);
	return r;
}

int
aud_record_format(struct aud_chain *c, const char *kind, uid_t uid,
    const cJSON *event, int64_t ts_ms, char **line, size_t *len)
{
	char ts[32], prev[AUD_MAC_HEX + 1], mhex[AUD_MAC_HEX + 1];
	unsigned char mac[AUD_MAC_BYTES];
	char *ev = NULL, *buf = NULL;
	size_t cap, n;
	int w, r;

	if (sodium_init() < 0)
		return KZ_EINTERNAL;
	if ((r = event_print(event, &ev)) != 0)
		return r;
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
	    "{\"seq\":%llu,\"ts\":\"%s\",\"uid\":%lu,\"kind\":\"%s\","
	    "\"event\":%s,\"prev\":\"%s\"",
	    (unsigned long long)c->seq + 1, ts, (unsigned long)uid, kind, ev,
	    prev);
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
	static const char *const keys[] = {"seq", "ts", "uid", "kind", "event",
	    "prev", "mac", NULL};
	const char *ts, *kind, *prev, *mac;
	int64_t seq, uid = -1;
	int r;

	if ((r = kz_json_only(j, keys, why, wlen)) != 0 ||
	    (kz_json_get(j, "uid") != NULL &&
	        (r = kz_json_int(j, "uid", 0, UINT32_MAX, &uid, why, wlen)) !=
	            0) ||
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
	out->uid = uid;
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

/* A one-line reason a file cannot be read as a log file, or NULL. */
static const char *
open_fd(const char *path, int *fd, uint64_t *size)
{
	struct stat st;

	/* O_NONBLOCK: a FIFO must not hold the open until a writer comes. */
	*fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (*fd < 0)
		return errno == ELOOP ? "is a symbolic link, not a log file" :
		                        "cannot open";
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(*fd);
		*fd = -1;
		return "not a regular file";
	}
	*size = (uint64_t)st.st_size;
	return NULL;
}

int
aud_file_open(const char *path, FILE *err, struct aud_file *af)
{
	const char *bad;
	int fd;

	memset(af, 0, sizeof(*af));
	if ((bad = open_fd(path, &fd, &af->left)) != NULL) {
		fprintf(err, "kz-audit: %s: %s\n", path, bad);
		return KZ_EXIT_USAGE;
	}
	if ((af->line = malloc(AUD_LINE_MAX + 1)) == NULL ||
	    (af->f = fdopen(fd, "r")) == NULL) {
		free(af->line);
		af->line = NULL;
		close(fd);
		return KZ_EXIT_INTERNAL;
	}
	return 0;
}

void
aud_file_close(struct aud_file *af)
{
	if (af->f != NULL)
		fclose(af->f);
	free(af->line);
	memset(af, 0, sizeof(*af));
}

/* aud_getline, reading at most *left bytes (and counting them off). */
static int
getline_max(FILE *f, uint64_t *left, char *buf, size_t cap, size_t *len,
    bool *nl)
{
	size_t n = 0;
	bool over = false;
	int c;

	*nl = false;
	while (*left > 0 && (c = getc_unlocked(f)) != EOF) {
		(*left)--;
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

int
aud_file_getline(struct aud_file *af, size_t *len, bool *nl)
{
	return getline_max(af->f, &af->left, af->line, AUD_LINE_MAX + 1, len,
	    nl);
}

int
aud_getline(FILE *f, char *buf, size_t cap, size_t *len, bool *nl)
{
	uint64_t left = UINT64_MAX;

	return getline_max(f, &left, buf, cap, len, nl);
}
