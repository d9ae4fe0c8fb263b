/*
 * Per-run broker tokens: base64url(claims) "." base64url(Ed25519 signature
 * of the first part's text), the shape of kz-egress's grants.  The signing
 * key is the PKGTOKEN subkey of the field key used as an Ed25519 seed; the
 * broker holds only the public half, so a compromised broker cannot mint a
 * token.  The claims name the run (its identifier hash) and a lifetime of
 * minutes; "aud" keeps a token from ever being read as anything else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sodium.h>
#include <cJSON.h>

#include "pkgbroker.h"
#include "kz_json.h"
#include "kz_key.h"
#include "banned.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define CLAIMS_MAX 256
#define SKEW 30 /* seconds of clock difference tolerated at nbf/iat */
#define AUD "kz-pkgbroker"

static const char *const codes[] = {
#define X(n, code, text) code,
    PB_TOKEN_REASONS(X)
#undef X
};
static const char *const texts[] = {
#define X(n, code, text) text,
    PB_TOKEN_REASONS(X)
#undef X
};

const char *
pb_tok_code(enum pb_tok t)
{
	return (unsigned)t < sizeof(codes) / sizeof(codes[0]) ? codes[t] : "?";
}

const char *
pb_tok_text(enum pb_tok t)
{
	return (unsigned)t < sizeof(texts) / sizeof(texts[0]) ? texts[t] : "?";
}

int
pb_token_keypair(const char *field_key_file, unsigned char pk[32],
    unsigned char sk[64], char *why, size_t wlen)
{
	struct kz_key seed;
	int r;

	if ((r = kz_key_load_subkey(field_key_file, KZ_SUBKEY_PKGTOKEN, &seed,
	         why, wlen)) != 0)
		return r;
	if (crypto_sign_seed_keypair(pk, sk, seed.k) != 0)
		r = KZ_ECRYPTO;
	kz_key_wipe(&seed);
	return r;
}

/* The claims text, built with cJSON so the run id is quoted the one
 * correct way.  The caller frees it. */
static char *
claims_text(const char *run_hash, int64_t now, int64_t ttl)
{
	cJSON *o = cJSON_CreateObject();
	char *txt = NULL;

	if (o == NULL || !cJSON_AddNumberToObject(o, "v", 1) ||
	    !cJSON_AddStringToObject(o, "aud", AUD) ||
	    !cJSON_AddStringToObject(o, "run", run_hash) ||
	    !cJSON_AddNumberToObject(o, "iat", (double)now) ||
	    !cJSON_AddNumberToObject(o, "nbf", (double)now) ||
	    !cJSON_AddNumberToObject(o, "exp", (double)(now + ttl)))
		goto out;
	txt = kz_json_print(o);
out:
	cJSON_Delete(o);
	return txt;
}

int
pb_token_mint(const unsigned char sk[64], const char *run_hash, int64_t now,
    int64_t ttl, char *out, size_t len)
{
	char enc[sodium_base64_ENCODED_LEN(CLAIMS_MAX, B64URL)], *claims;
	unsigned char sig[crypto_sign_BYTES];
	char senc[sodium_base64_ENCODED_LEN(crypto_sign_BYTES, B64URL)];
	size_t cn;
	int n;

	if (run_hash == NULL || *run_hash == '\0' ||
	    strlen(run_hash) > PB_RUN_MAX || ttl <= 0)
		return KZ_EINVAL;
	if ((claims = claims_text(run_hash, now, ttl)) == NULL)
		return KZ_ENOMEM;
	cn = strlen(claims);
	if (cn >= CLAIMS_MAX) {
		free(claims);
		return KZ_ETOOBIG;
	}
	sodium_bin2base64(enc, sizeof(enc), (unsigned char *)claims, cn,
	    B64URL);
	free(claims);
	crypto_sign_detached(sig, NULL, (unsigned char *)enc, strlen(enc), sk);
	sodium_bin2base64(senc, sizeof(senc), sig, sizeof(sig), B64URL);
	n = snprintf(out, len, "%s.%s", enc, senc);
	if (n < 0 || (size_t)n >= len)
		return KZ_ETOOBIG;
	return 0;
}

static enum pb_tok
parse_claims(const unsigned char *buf, size_t n, struct pb_claims *cl)
{
	static const char *const fields[] = {"v", "aud", "run", "iat", "nbf",
	    "exp", NULL};
	enum pb_tok t = PB_TOK_MALFORMED;
	const char *run, *aud;
	cJSON *o = NULL;
	int64_t v;
	char why[128];

	if (kz_json_parse_object((const char *)buf, n, &o, why, sizeof(why)) !=
	    0)
		return t;
	if (kz_json_only(o, fields, why, sizeof(why)) != 0 ||
	    kz_json_int(o, "v", 1, 1, &v, why, sizeof(why)) != 0 ||
	    kz_json_str(o, "aud", 32, &aud, why, sizeof(why)) != 0 ||
	    kz_json_str(o, "run", PB_RUN_MAX, &run, why, sizeof(why)) != 0 ||
	    kz_json_int(o, "iat", 0, INT64_C(1) << 40, &cl->iat, why,
	        sizeof(why)) != 0 ||
	    kz_json_int(o, "nbf", 0, INT64_C(1) << 40, &cl->nbf, why,
	        sizeof(why)) != 0 ||
	    kz_json_int(o, "exp", 0, INT64_C(1) << 40, &cl->exp, why,
	        sizeof(why)) != 0 ||
	    strcmp(aud, AUD) != 0 || *run == '\0' || cl->exp <= cl->iat)
		goto out;
	snprintf(cl->run, sizeof(cl->run), "%s", run);
	t = PB_TOK_OK;
out:
	cJSON_Delete(o);
	return t;
}

enum pb_tok
pb_token_verify(const unsigned char pk[32], const char *tok, size_t len,
    int64_t now, int64_t max_ttl, struct pb_claims *cl)
{
	unsigned char claims[CLAIMS_MAX], sig[crypto_sign_BYTES + 1];
	const char *dot, *end;
	size_t clen, slen, dlen;
	enum pb_tok t;

	memset(cl, 0, sizeof(*cl));
	if (len == 0)
		return PB_TOK_MISSING;
	if (len > PB_TOKEN_MAX || (dot = memchr(tok, '.', len)) == NULL ||
	    memchr(dot + 1, '.', len - (size_t)(dot - tok) - 1) != NULL)
		return PB_TOK_MALFORMED;
	dlen = (size_t)(dot - tok);
	if (sodium_base642bin(claims, sizeof(claims), tok, dlen, NULL, &clen,
	        &end, B64URL) != 0 ||
	    end != dot ||
	    sodium_base642bin(sig, sizeof(sig), dot + 1, len - dlen - 1, NULL,
	        &slen, &end, B64URL) != 0 ||
	    end != tok + len || slen != crypto_sign_BYTES)
		return PB_TOK_MALFORMED;
	/* The signature covers the encoded claims exactly as sent: nothing
	 * is parsed before it verifies. */
	if (crypto_sign_verify_detached(sig, (const unsigned char *)tok, dlen,
	        pk) != 0)
		return PB_TOK_FORGED;
	if ((t = parse_claims(claims, clen, cl)) != PB_TOK_OK)
		return t;
	if (cl->nbf > now + SKEW || cl->iat > now + SKEW)
		return PB_TOK_NOT_YET;
	if (cl->exp <= now)
		return PB_TOK_EXPIRED;
	if (cl->exp - cl->iat > max_ttl || cl->exp - cl->nbf > max_ttl)
		return PB_TOK_LIFETIME;
	return PB_TOK_OK;
}

static enum pb_tok
copy_token(const char *s, size_t n, char *out, size_t len)
{
	if (n == 0)
		return PB_TOK_MISSING;
	if (n >= len || n > PB_TOKEN_MAX)
		return PB_TOK_MALFORMED;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return PB_TOK_MALFORMED;
	memcpy(out, s, n);
	out[n] = '\0';
	return PB_TOK_OK;
}

/* Basic: base64("user:token"); any user name (pip's is __token__). */
static enum pb_tok
from_basic(const char *b64, char *out, size_t len)
{
	unsigned char dec[PB_TOKEN_MAX + 128];
	const char *colon, *end;
	size_t n;
	enum pb_tok t;

	if (sodium_base642bin(dec, sizeof(dec) - 1, b64, strlen(b64), NULL, &n,
	        &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    *end != '\0')
		return PB_TOK_MALFORMED;
	dec[n] = '\0';
	if ((colon = memchr(dec, ':', n)) == NULL)
		t = PB_TOK_MALFORMED;
	else
		t = copy_token(colon + 1, n - (size_t)(colon + 1 - (char *)dec),
		    out, len);
	sodium_memzero(dec, sizeof(dec));
	return t;
}

enum pb_tok
pb_token_from_auth(const char *v, char *out, size_t len)
{
	if (v == NULL || *v == '\0')
		return PB_TOK_MISSING;
	if (strncasecmp(v, "Bearer ", 7) == 0)
		return copy_token(v + 7, strlen(v + 7), out, len);
	if (strncasecmp(v, "Basic ", 6) == 0)
		return from_basic(v + 6, out, len);
	return PB_TOK_MALFORMED;
}
