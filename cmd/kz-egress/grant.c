/*
 * Per-run egress grants: signed blobs (kz_signed.h) from the GRANT subkey
 * of the field key; the proxy holds only the public half, so a compromised
 * proxy cannot mint a grant.  The body adds "caps" to the common fields.  Also
 * the TURN REST credential (coturn's scheme: HMAC-SHA1 of "expiry:user", by
 * nettle).
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
#include "kz_signed.h"
#include "banned.h"

int
eg_grant_keypair(const char *field_key_file, unsigned char pk[32],
    unsigned char sk[64], char *why, size_t wlen)
{
	return kz_signed_keypair(field_key_file, KZ_SUBKEY_GRANT, pk, sk, why,
	    wlen);
}

int
eg_grant_mint(const unsigned char sk[64], const char *run_hash, int64_t now,
    int64_t ttl, unsigned caps, char *out, size_t len)
{
	cJSON *o = kz_signed_body_new(run_hash, now, ttl), *a;
	int r = KZ_ENOMEM;

	if (o == NULL || (a = cJSON_AddArrayToObject(o, "caps")) == NULL)
		goto out;
	if ((caps & EG_CAP_TURN) &&
	    !cJSON_AddItemToArray(a, cJSON_CreateString("turn")))
		goto out;
	r = kz_signed_make(sk, o, out, len);
out:
	cJSON_Delete(o);
	return r;
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

/* The grant's own fields, read once the signature has verified. */
static enum eg_reason
parse_claims(const cJSON *o, struct eg_claims *cl)
{
	static const char *const fields[] = {"v", "run", "iat", "nbf", "exp",
	    "caps", NULL};
	const char *run;
	char why[128];

	if (kz_json_only(o, fields, why, sizeof(why)) != 0 ||
	    kz_json_str(o, "run", 64, &run, why, sizeof(why)) != 0 ||
	    *run == '\0')
		return EG_R_GRANT_MALFORMED;
	snprintf(cl->run, sizeof(cl->run), "%s", run);
	return parse_caps(kz_json_get(o, "caps"), &cl->caps);
}

static const enum eg_reason from_signed[] = {
    [KZ_SIGNED_OK] = EG_R_NONE,
    [KZ_SIGNED_MALFORMED] = EG_R_GRANT_MALFORMED,
    [KZ_SIGNED_FORGED] = EG_R_GRANT_SIGNATURE,
    [KZ_SIGNED_NOT_YET] = EG_R_GRANT_NOT_YET_VALID,
    [KZ_SIGNED_EXPIRED] = EG_R_GRANT_EXPIRED,
    [KZ_SIGNED_LIFETIME] = EG_R_GRANT_LIFETIME,
};

enum eg_reason
eg_grant_verify(const unsigned char pk[32], const char *grant, size_t len,
    int64_t now, int64_t max_ttl, struct eg_claims *cl)
{
	struct kz_signed_times t;
	enum kz_signed_res sr;
	enum eg_reason r;
	cJSON *o;

	memset(cl, 0, sizeof(*cl));
	if ((sr = kz_signed_open(pk, grant, len, EG_GRANT_MAX, &o, &t)) !=
	    KZ_SIGNED_OK)
		return from_signed[sr];
	r = parse_claims(o, cl);
	cJSON_Delete(o);
	if (r != EG_R_NONE) {
		memset(cl, 0, sizeof(*cl));
		return r;
	}
	cl->iat = t.iat;
	cl->nbf = t.nbf;
	cl->exp = t.exp;
	return from_signed[kz_signed_current(&t, now, max_ttl)];
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
