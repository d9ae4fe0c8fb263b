/*
 * Per-run egress grants: base64url(claims) "." base64url(Ed25519 signature
 * of the first part's text).  The signing key is the GRANT subkey of the
 * field key used as an Ed25519 seed; the proxy holds only the public half,
 * so a compromised proxy cannot mint a grant.  Also the TURN REST
 * credential (coturn's scheme: HMAC-SHA1 of "expiry:user").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <cJSON.h>

#include "egress.h"
#include "kz_json.h"
#include "kz_key.h"
#include "banned.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define CLAIMS_MAX 512
#define SKEW 30	/* seconds of clock difference tolerated at nbf/iat */

int
eg_grant_keypair(const char *field_key_file, unsigned char pk[32],
    unsigned char sk[64], char *why, size_t wlen)
{
	struct kz_key master, seed;
	int r;

	if ((r = kz_key_load(field_key_file, &master, why, wlen)) != 0)
		return r;
	r = kz_key_derive(&master, KZ_SUBKEY_GRANT, &seed);
	kz_key_wipe(&master);
	if (r != 0)
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

static const char *
parse_caps(const cJSON *caps, unsigned *out)
{
	const cJSON *it;

	*out = 0;
	if (caps == NULL)
		return NULL;
	if (!cJSON_IsArray(caps) || cJSON_GetArraySize(caps) > 4)
		return "grant_malformed";
	cJSON_ArrayForEach(it, caps) {
		/* Unknown capabilities are refused, not ignored: a grant can
		 * only narrow, and its issuer meant something by it. */
		if (!cJSON_IsString(it) || strcmp(it->valuestring, "turn") != 0)
			return "grant_malformed";
		*out |= EG_CAP_TURN;
	}
	return NULL;
}

static const char *
parse_claims(const unsigned char *buf, size_t n, struct eg_claims *cl)
{
	static const char *const fields[] = {"v", "run", "iat", "nbf", "exp",
		"caps", NULL};
	const char *reason = "grant_malformed", *run;
	cJSON *o = NULL;
	int64_t v;
	char why[128];

	if (kz_json_parse_object((const char *)buf, n, &o, why,
	    sizeof(why)) != 0)
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
	if ((reason = parse_caps(kz_json_get(o, "caps"), &cl->caps)) != NULL)
		goto out;
	snprintf(cl->run, sizeof(cl->run), "%s", run);
out:
	cJSON_Delete(o);
	return reason;
}

const char *
eg_grant_verify(const unsigned char pk[32], const char *grant, size_t len,
    int64_t now, int64_t max_ttl, struct eg_claims *cl)
{
	unsigned char claims[CLAIMS_MAX], sig[crypto_sign_BYTES + 1];
	const char *dot, *end;
	size_t clen, slen;
	const char *r;

	memset(cl, 0, sizeof(*cl));
	if (len == 0 || len > EG_GRANT_MAX ||
	    (dot = memchr(grant, '.', len)) == NULL ||
	    memchr(dot + 1, '.', len - (size_t)(dot - grant) - 1) != NULL)
		return "grant_malformed";
	if (sodium_base642bin(claims, sizeof(claims), grant,
	    (size_t)(dot - grant), NULL, &clen, &end, B64URL) != 0 ||
	    end != dot ||
	    sodium_base642bin(sig, sizeof(sig), dot + 1,
	    len - (size_t)(dot - grant) - 1, NULL, &slen, &end, B64URL) != 0 ||
	    end != grant + len || slen != crypto_sign_BYTES)
		return "grant_malformed";
	/* The signature covers the encoded claims exactly as sent. */
	if (crypto_sign_verify_detached(sig, (const unsigned char *)grant,
	    (size_t)(dot - grant), pk) != 0)
		return "grant_signature";
	if ((r = parse_claims(claims, clen, cl)) != NULL)
		return r;
	if (cl->nbf > now + SKEW || cl->iat > now + SKEW)
		return "grant_not_yet_valid";
	if (cl->exp <= now)
		return "grant_expired";
	if (cl->exp - cl->iat > max_ttl || cl->exp - cl->nbf > max_ttl)
		return "grant_lifetime";
	return NULL;
}

/* ---- TURN REST credentials: HMAC-SHA1, which libsodium lacks ---- */

struct sha1 {
	uint32_t h[5];
	uint64_t n;
	unsigned char buf[64];
};

static uint32_t
rol(uint32_t x, int k)
{
	return (x << k) | (x >> (32 - k));
}

static void
sha1_block(struct sha1 *s, const unsigned char *p)
{
	uint32_t w[80], a, b, c, d, e, f, k, t;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		    (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
	for (int i = 0; i < 80; i++) {
		if (i < 20)
			f = (b & c) | (~b & d), k = 0x5a827999;
		else if (i < 40)
			f = b ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = b ^ c ^ d, k = 0xca62c1d6;
		t = rol(a, 5) + f + e + k + w[i];
		e = d, d = c, c = rol(b, 30), b = a, a = t;
	}
	s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e;
}

static void
sha1_init(struct sha1 *s)
{
	static const uint32_t iv[5] = {0x67452301, 0xefcdab89, 0x98badcfe,
		0x10325476, 0xc3d2e1f0};

	memset(s, 0, sizeof(*s));
	memcpy(s->h, iv, sizeof(iv));
}

static void
sha1_update(struct sha1 *s, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		s->buf[s->n++ % 64] = p[i];
		if (s->n % 64 == 0)
			sha1_block(s, s->buf);
	}
}

static void
sha1_final(struct sha1 *s, unsigned char out[20])
{
	uint64_t bits = s->n * 8;
	unsigned char pad = 0x80, z = 0, len[8];

	sha1_update(s, &pad, 1);
	while (s->n % 64 != 56)
		sha1_update(s, &z, 1);
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)(bits >> (56 - 8 * i));
	sha1_update(s, len, 8);
	for (int i = 0; i < 20; i++)
		out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
	sodium_memzero(s, sizeof(*s));
}

static void
hmac_sha1(const unsigned char *key, size_t klen, const unsigned char *msg,
    size_t mlen, unsigned char out[20])
{
	unsigned char k[64] = {0}, ipad[64], opad[64], inner[20];
	struct sha1 s;

	if (klen > 64) {
		sha1_init(&s);
		sha1_update(&s, key, klen);
		sha1_final(&s, k);
	} else {
		memcpy(k, key, klen);
	}
	for (int i = 0; i < 64; i++) {
		ipad[i] = k[i] ^ 0x36;
		opad[i] = k[i] ^ 0x5c;
	}
	sha1_init(&s);
	sha1_update(&s, ipad, 64);
	sha1_update(&s, msg, mlen);
	sha1_final(&s, inner);
	sha1_init(&s);
	sha1_update(&s, opad, 64);
	sha1_update(&s, inner, 20);
	sha1_final(&s, out);
	sodium_memzero(k, sizeof(k));
	sodium_memzero(ipad, sizeof(ipad));
	sodium_memzero(opad, sizeof(opad));
}

int
eg_turn_credential(const unsigned char *secret, size_t slen,
    const char *user, int64_t expiry, char *uname, size_t ulen, char *pass,
    size_t plen)
{
	unsigned char mac[20];
	int n;

	n = snprintf(uname, ulen, "%lld:%s", (long long)expiry, user);
	if (n < 0 || (size_t)n >= ulen ||
	    plen < sodium_base64_ENCODED_LEN(20,
	    sodium_base64_VARIANT_ORIGINAL))
		return KZ_ETOOBIG;
	hmac_sha1(secret, slen, (const unsigned char *)uname, (size_t)n, mac);
	sodium_bin2base64(pass, plen, mac, sizeof(mac),
	    sodium_base64_VARIANT_ORIGINAL);
	return 0;
}
