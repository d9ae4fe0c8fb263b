/*
 * Signed blobs (kz_signed.h): Ed25519 by libsodium over the base64url text
 * of a cJSON body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <cJSON.h>

#include "kz_signed.h"
#include "kz_json.h"
#include "kz_key.h"
#include "banned.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define TIME_MAX (INT64_C(1) << 40)

static const char *const texts[] = {
#define X(n, text) text,
    KZ_SIGNED_RESULTS(X)
#undef X
};

const char *
kz_signed_text(enum kz_signed_res r)
{
	return (unsigned)r < sizeof(texts) / sizeof(texts[0]) ? texts[r] : "?";
}

int
kz_signed_keypair(const char *field_key_file, enum kz_subkey id,
    unsigned char pk[KZ_SIGNED_PK_BYTES], unsigned char sk[KZ_SIGNED_SK_BYTES],
    char *why, size_t wlen)
{
	struct kz_key seed;
	int r;

	if ((r = kz_key_load_subkey(field_key_file, id, &seed, why, wlen)) != 0)
		return r;
	if (crypto_sign_seed_keypair(pk, sk, seed.k) != 0)
		r = KZ_ECRYPTO;
	kz_key_wipe(&seed);
	return r;
}

int
kz_signed_pubkey_hex(const char *field_key_file, enum kz_subkey id,
    char hex[KZ_SIGNED_PK_BYTES * 2 + 1], char *why, size_t wlen)
{
	unsigned char pk[KZ_SIGNED_PK_BYTES], sk[KZ_SIGNED_SK_BYTES];
	int r;

	r = kz_signed_keypair(field_key_file, id, pk, sk, why, wlen);
	sodium_memzero(sk, sizeof(sk));
	if (r == 0)
		kz_hex(pk, sizeof(pk), hex);
	return r;
}

int
kz_signed_run_hash(const char *field_key_file, const char *run,
    char out[KZ_IDHASH_HEX + 1], char *why, size_t wlen)
{
	struct kz_key idk;
	int r;

	if ((r = kz_key_load_subkey(field_key_file, KZ_SUBKEY_IDHASH, &idk, why,
	         wlen)) != 0)
		return r;
	r = kz_key_idhash(&idk, "run", run, out);
	kz_key_wipe(&idk);
	return r;
}

cJSON *
kz_signed_body_new(const char *run_hash, int64_t now, int64_t ttl)
{
	cJSON *o = cJSON_CreateObject();

	/* Built with cJSON, never by hand: the run id is quoted the one
	 * correct way. */
	if (o == NULL || !cJSON_AddNumberToObject(o, "v", 1) ||
	    !cJSON_AddStringToObject(o, "run", run_hash) ||
	    !cJSON_AddNumberToObject(o, "iat", (double)now) ||
	    !cJSON_AddNumberToObject(o, "nbf", (double)now) ||
	    !cJSON_AddNumberToObject(o, "exp", (double)(now + ttl))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int
kz_signed_make(const unsigned char sk[KZ_SIGNED_SK_BYTES], const cJSON *body,
    char *out, size_t len)
{
	char enc[sodium_base64_ENCODED_LEN(KZ_SIGNED_BODY_MAX, B64URL)], *txt;
	unsigned char sig[crypto_sign_BYTES];
	char senc[sodium_base64_ENCODED_LEN(crypto_sign_BYTES, B64URL)];
	size_t tn;
	int n;

	if ((txt = kz_json_print(body)) == NULL)
		return KZ_ENOMEM;
	tn = strlen(txt);
	if (tn >= KZ_SIGNED_BODY_MAX) {
		free(txt);
		return KZ_ETOOBIG;
	}
	sodium_bin2base64(enc, sizeof(enc), (unsigned char *)txt, tn, B64URL);
	free(txt);
	crypto_sign_detached(sig, NULL, (unsigned char *)enc, strlen(enc), sk);
	sodium_bin2base64(senc, sizeof(senc), sig, sizeof(sig), B64URL);
	n = snprintf(out, len, "%s.%s", enc, senc);
	if (n < 0 || (size_t)n >= len)
		return KZ_ETOOBIG;
	return 0;
}

/* The version and the times every body carries. */
static enum kz_signed_res
read_times(const cJSON *o, struct kz_signed_times *t)
{
	char why[128];
	int64_t v;

	if (kz_json_int(o, "v", 1, 1, &v, why, sizeof(why)) != 0 ||
	    kz_json_int(o, "iat", 0, TIME_MAX, &t->iat, why, sizeof(why)) !=
	        0 ||
	    kz_json_int(o, "exp", 0, TIME_MAX, &t->exp, why, sizeof(why)) !=
	        0 ||
	    kz_json_int_opt(o, "nbf", 0, TIME_MAX, t->iat, &t->nbf, why,
	        sizeof(why)) != 0 ||
	    t->exp <= t->iat)
		return KZ_SIGNED_MALFORMED;
	return KZ_SIGNED_OK;
}

enum kz_signed_res
kz_signed_open(const unsigned char pk[KZ_SIGNED_PK_BYTES], const char *blob,
    size_t len, size_t max_len, cJSON **body, struct kz_signed_times *t)
{
	unsigned char txt[KZ_SIGNED_BODY_MAX], sig[crypto_sign_BYTES + 1];
	const char *dot, *end;
	size_t dlen, tlen, slen;
	enum kz_signed_res r;
	cJSON *o = NULL;
	char why[128];

	*body = NULL;
	memset(t, 0, sizeof(*t));
	if (len == 0 || len > max_len ||
	    (dot = memchr(blob, '.', len)) == NULL ||
	    memchr(dot + 1, '.', len - (size_t)(dot - blob) - 1) != NULL)
		return KZ_SIGNED_MALFORMED;
	dlen = (size_t)(dot - blob);
	if (sodium_base642bin(txt, sizeof(txt), blob, dlen, NULL, &tlen, &end,
	        B64URL) != 0 ||
	    end != dot ||
	    sodium_base642bin(sig, sizeof(sig), dot + 1, len - dlen - 1, NULL,
	        &slen, &end, B64URL) != 0 ||
	    end != blob + len || slen != crypto_sign_BYTES)
		return KZ_SIGNED_MALFORMED;
	/* The signature covers the encoded body exactly as sent. */
	if (crypto_sign_verify_detached(sig, (const unsigned char *)blob, dlen,
	        pk) != 0)
		return KZ_SIGNED_FORGED;
	if (kz_json_parse_object((const char *)txt, tlen, &o, why,
	        sizeof(why)) != 0)
		return KZ_SIGNED_MALFORMED;
	if ((r = read_times(o, t)) != KZ_SIGNED_OK) {
		cJSON_Delete(o);
		return r;
	}
	*body = o;
	return KZ_SIGNED_OK;
}

enum kz_signed_res
kz_signed_current(const struct kz_signed_times *t, int64_t now, int64_t max_ttl)
{
	if (t->nbf > now + KZ_SIGNED_SKEW || t->iat > now + KZ_SIGNED_SKEW)
		return KZ_SIGNED_NOT_YET;
	if (t->exp <= now)
		return KZ_SIGNED_EXPIRED;
	if (t->exp - t->iat > max_ttl || t->exp - t->nbf > max_ttl)
		return KZ_SIGNED_LIFETIME;
	return KZ_SIGNED_OK;
}
