/*
 * Per-run egress grants: base64url(claims) "." base64url(Ed25519 signature
 * of the first part's text).  The signing key is the GRANT subkey of the
 * field key used as an Ed25519 seed; the proxy holds only the public half,
 * so a compromised proxy cannot mint a grant.  Also the TURN REST
 * credential (coturn's scheme: HMAC-SHA1 of "expiry:user", by nettle).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <cJSON.h>
#include <nettle/hmac.h>

#include "egress.h"
#include "kz_json.h"
#include "kz_key.h"
#include "banned.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define CLAIMS_MAX 512
#define SKEW 30 /* seconds of clock difference tolerated at nbf/iat */

int
eg_grant_keypair(const char *field_key_file, unsigned char pk[32],
    unsigned char sk[64], char *why, size_t wlen)
{
	struct kz_key seed;
	int r;

	if ((r = kz_key_load_subkey(field_key_file, KZ_SUBKEY_GRANT, &seed, why,
	         wlen)) != 0)
		return r;
	if (crypto_sign_seed_keypair(pk, sk, seed.k) != 0)
		r = KZ_ECRYPTO;
	kz_key_wipe(&seed);
	return r;
}

/* The claims text, built with cJSON (never by hand: the run id is
 * quoted the one correct way).  The caller frees it. */
static char *
claims_text(const char *run_hash, int64_t now, int64_t ttl, unsigned caps)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char *txt = NULL;

	if (o == NULL || !cJSON_AddNumberToObject(o, "v", 1) ||
	    !cJSON_AddStringToObject(o, "run", run_hash) ||
	    !cJSON_AddNumberToObject(o, "iat", (double)now) ||
	    !cJSON_AddNumberToObject(o, "nbf", (double)now) ||
	    !cJSON_AddNumberToObject(o, "exp", (double)(now + ttl)) ||
	    (a = cJSON_AddArrayToObject(o, "caps")) == NULL)
		goto out;
	if ((caps & EG_CAP_TURN) &&
	    !cJSON_AddItemToArray(a, cJSON_CreateString("turn")))
		goto out;
	txt = kz_json_print(o);
out:
	cJSON_Delete(o);
	return txt;
}

int
eg_grant_mint(const unsigned char sk[64], const char *run_hash, int64_t now,
    int64_t ttl, unsigned caps, char *out, size_t len)
{
	char enc[CLAIMS_MAX * 2], *claims;
	unsigned char sig[crypto_sign_BYTES];
	char senc[sodium_base64_ENCODED_LEN(crypto_sign_BYTES, B64URL)];
	size_t cn;
	int n;

	if ((claims = claims_text(run_hash, now, ttl, caps)) == NULL)
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

static enum eg_reason
parse_caps(const cJSON *caps, unsigned *out)
{
	const cJSON *it;

	*out = 0;
	if (caps == NULL)
		return EG_R_NONE;
	if (!cJSON_IsArray(caps) || cJSON_GetArraySize(caps) > 4)
		return EG_R_GRANT_MALFORMED;
	cJSON_ArrayForEach(it, caps)
	{
		/* Unknown capabilities are refused, not ignored: a grant can
		 * only narrow, and its issuer meant something by it. */
		if (!cJSON_IsString(it) || strcmp(it->valuestring, "turn") != 0)
			return EG_R_GRANT_MALFORMED;
		*out |= EG_CAP_TURN;
	}
	return EG_R_NONE;
}

static enum eg_reason
parse_claims(const unsigned char *buf, size_t n, struct eg_claims *cl)
{
	static const char *const fields[] = {"v", "run", "iat", "nbf", "exp",
	    "caps", NULL};
	enum eg_reason reason = EG_R_GRANT_MALFORMED;
	const char *run;
	cJSON *o = NULL;
	int64_t v;
	char why[128];

	if (kz_json_parse_object((const char *)buf, n, &o, why, sizeof(why)) !=
	    0)
		return reason;
	if (kz_json_only(o, fields, why, sizeof(why)) != 0 ||
	    kz_json_int(o, "v", 1, 1, &v, why, sizeof(why)) != 0 ||
	    kz_json_str(o, "run", 64, &run, why, sizeof(why)) != 0 ||
	    kz_json_int(o, "iat", 0, INT64_C(1) << 40, &cl->iat, why,
	        sizeof(why)) != 0 ||
	    kz_json_int(o, "exp", 0, INT64_C(1) << 40, &cl->exp, why,
	        sizeof(why)) != 0 ||
	    kz_json_int_opt(o, "nbf", 0, INT64_C(1) << 40, cl->iat, &cl->nbf,
	        why, sizeof(why)) != 0 ||
	    *run == '\0' || cl->exp <= cl->iat)
		goto out;
	if ((reason = parse_caps(kz_json_get(o, "caps"), &cl->caps)) !=
	    EG_R_NONE)
		goto out;
	snprintf(cl->run, sizeof(cl->run), "%s", run);
out:
	cJSON_Delete(o);
	return reason;
}

enum eg_reason
eg_grant_verify(const unsigned char pk[32], const char *grant, size_t len,
    int64_t now, int64_t max_ttl, struct eg_claims *cl)
{
	unsigned char claims[CLAIMS_MAX], sig[crypto_sign_BYTES + 1];
	const char *dot, *end;
	size_t clen, slen;
	enum eg_reason r;

	memset(cl, 0, sizeof(*cl));
	if (len == 0 || len > EG_GRANT_MAX ||
	    (dot = memchr(grant, '.', len)) == NULL ||
	    memchr(dot + 1, '.', len - (size_t)(dot - grant) - 1) != NULL)
		return EG_R_GRANT_MALFORMED;
	if (sodium_base642bin(claims, sizeof(claims), grant,
	        (size_t)(dot - grant), NULL, &clen, &end, B64URL) != 0 ||
	    end != dot ||
	    sodium_base642bin(sig, sizeof(sig), dot + 1,
	        len - (size_t)(dot - grant) - 1, NULL, &slen, &end,
	        B64URL) != 0 ||
	    end != grant + len || slen != crypto_sign_BYTES)
		return EG_R_GRANT_MALFORMED;
	/* The signature covers the encoded claims exactly as sent. */
	if (crypto_sign_verify_detached(sig, (const unsigned char *)grant,
	        (size_t)(dot - grant), pk) != 0)
		return EG_R_GRANT_SIGNATURE;
	if ((r = parse_claims(claims, clen, cl)) != EG_R_NONE)
		return r;
	if (cl->nbf > now + SKEW || cl->iat > now + SKEW)
		return EG_R_GRANT_NOT_YET_VALID;
	if (cl->exp <= now)
		return EG_R_GRANT_EXPIRED;
	if (cl->exp - cl->iat > max_ttl || cl->exp - cl->nbf > max_ttl)
		return EG_R_GRANT_LIFETIME;
	return EG_R_NONE;
}

/* ---- TURN REST credentials: nettle's HMAC-SHA1 (libsodium has none) ---- */

void
eg_hmac_sha1(const unsigned char *key, size_t klen, const unsigned char *msg,
    size_t mlen, unsigned char out[EG_SHA1_BYTES])
{
	struct hmac_sha1_ctx ctx;

	hmac_sha1_set_key(&ctx, klen, key);
	hmac_sha1_update(&ctx, mlen, msg);
	hmac_sha1_digest(&ctx, SHA1_DIGEST_SIZE, out);
	/* The context holds the key's inner and outer states. */
	sodium_memzero(&ctx, sizeof(ctx));
}

int
eg_turn_credential(const unsigned char *secret, size_t slen, const char *user,
    int64_t expiry, char *uname, size_t ulen, char *pass, size_t plen)
{
	unsigned char mac[EG_SHA1_BYTES];
	int n;

	n = snprintf(uname, ulen, "%lld:%s", (long long)expiry, user);
	if (n < 0 || (size_t)n >= ulen ||
	    plen <
	        sodium_base64_ENCODED_LEN(20, sodium_base64_VARIANT_ORIGINAL))
		return KZ_ETOOBIG;
	eg_hmac_sha1(secret, slen, (const unsigned char *)uname, (size_t)n,
	    mac);
	sodium_bin2base64(pass, plen, mac, sizeof(mac),
	    sodium_base64_VARIANT_ORIGINAL);
	return 0;
}
