/*
 * Per-run broker tokens: signed blobs (kz_signed.h), as kz-egress's grants
 * are, from the PKGTOKEN subkey of the field key; the broker holds only the
 * public half, so a compromised broker cannot mint a token.  The body names
 * the run (its identifier hash) and a lifetime of minutes; "aud" keeps a
 * token from ever being read as anything else.  "uid" binds it to the
 * worker the run was leased: the host uid that worker's broker forward
 * presents on the broker's socket, which the code inside cannot change.
 * A token that leaks out of its run is then refused from any other
 * worker's forward; and, since each connection on the socket is first
 * bound to its run (serve.c), from the forward of any later run of the
 * same worker too.
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
#include "kz_signed.h"
#include "banned.h"

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
	return kz_signed_keypair(field_key_file, KZ_SUBKEY_PKGTOKEN, pk, sk,
	    why, wlen);
}

int
pb_token_mint(const unsigned char sk[64], const char *run_hash, int64_t uid,
    int64_t now, int64_t ttl, char *out, size_t len)
{
	cJSON *o;
	int r = KZ_ENOMEM;

	if (run_hash == NULL || *run_hash == '\0' ||
	    strlen(run_hash) > PB_RUN_MAX || ttl <= 0 ||
	    (uid != PB_UID_NONE && (uid < 0 || uid > PB_UID_MAX)))
		return KZ_EINVAL;
	if ((o = kz_signed_body_new(run_hash, now, ttl)) != NULL &&
	    cJSON_AddStringToObject(o, "aud", AUD) != NULL &&
	    (uid == PB_UID_NONE ||
	        cJSON_AddNumberToObject(o, "uid", (double)uid) != NULL))
		r = kz_signed_make(sk, o, out, len);
	cJSON_Delete(o);
	return r;
}

/* The token's own fields, read once the signature has verified. */
static enum pb_tok
parse_claims(const cJSON *o, struct pb_claims *cl)
{
	static const char *const fields[] = {"v", "aud", "run", "uid", "iat",
	    "nbf", "exp", NULL};
	const char *run, *aud;
	char why[128];

	if (kz_json_int_opt(o, "uid", 0, PB_UID_MAX, PB_UID_NONE, &cl->uid, why,
	        sizeof(why)) != 0)
		return PB_TOK_MALFORMED;
	if (kz_json_only(o, fields, why, sizeof(why)) != 0 ||
	    kz_json_str(o, "aud", 32, &aud, why, sizeof(why)) != 0 ||
	    kz_json_str(o, "run", PB_RUN_MAX, &run, why, sizeof(why)) != 0 ||
	    kz_json_get(o, "nbf") == NULL || strcmp(aud, AUD) != 0 ||
	    *run == '\0')
		return PB_TOK_MALFORMED;
	snprintf(cl->run, sizeof(cl->run), "%s", run);
	return PB_TOK_OK;
}

static const enum pb_tok from_signed[] = {
    [KZ_SIGNED_OK] = PB_TOK_OK,
    [KZ_SIGNED_MALFORMED] = PB_TOK_MALFORMED,
    [KZ_SIGNED_FORGED] = PB_TOK_FORGED,
    [KZ_SIGNED_NOT_YET] = PB_TOK_NOT_YET,
    [KZ_SIGNED_EXPIRED] = PB_TOK_EXPIRED,
    [KZ_SIGNED_LIFETIME] = PB_TOK_LIFETIME,
};

enum pb_tok
pb_token_verify(const unsigned char pk[32], const char *tok, size_t len,
    int64_t now, int64_t max_ttl, struct pb_claims *cl)
{
	struct kz_signed_times t;
	enum kz_signed_res sr;
	enum pb_tok r;
	cJSON *o;

	memset(cl, 0, sizeof(*cl));
	cl->uid = PB_UID_NONE;
	if (len == 0)
		return PB_TOK_MISSING;
	if ((sr = kz_signed_open(pk, tok, len, PB_TOKEN_MAX, &o, &t)) !=
	    KZ_SIGNED_OK)
		return from_signed[sr];
	r = parse_claims(o, cl);
	cJSON_Delete(o);
	if (r != PB_TOK_OK) {
		memset(cl, 0, sizeof(*cl));
		cl->uid = PB_UID_NONE;
		return r;
	}
	cl->iat = t.iat;
	cl->nbf = t.nbf;
	cl->exp = t.exp;
	return from_signed[kz_signed_current(&t, now, max_ttl)];
}

enum pb_tok
pb_token_peer(const struct pb_claims *cl, int64_t peer_uid)
{
	/* The TCP listener cannot tell who presents: a token bound to a
	 * worker is good only where its uid can be checked. */
	if (peer_uid < 0)
		return cl->uid == PB_UID_NONE ? PB_TOK_OK : PB_TOK_WRONG_PEER;
	if (cl->uid == PB_UID_NONE)
		return PB_TOK_UNBOUND;
	return cl->uid == peer_uid ? PB_TOK_OK : PB_TOK_WRONG_PEER;
}

enum pb_tok
pb_token_run(const struct pb_claims *cl, const char *conn_run)
{
	/* The next tenant of a worker has its uid: only the run its
	 * forward bound the connection to tells a leaked token from the
	 * run's own. */
	if (conn_run == NULL || *conn_run == '\0' || cl->run[0] == '\0')
		return PB_TOK_OTHER_RUN;
	return strcmp(cl->run, conn_run) == 0 ? PB_TOK_OK : PB_TOK_OTHER_RUN;
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
