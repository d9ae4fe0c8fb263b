/*
 * Signed blobs: the one form of kz's short-lived bearer credentials (egress
 * grants, package-broker tokens).  A blob is base64url(JSON body) "."
 * base64url(Ed25519 signature of the first part's text).  The signing key
 * is one subkey of the field key used as an Ed25519 seed; a verifier holds
 * only the public half, so a compromised verifier cannot mint.
 *
 * Every body carries "v":1, "iat", "exp" and optionally "nbf" (default:
 * iat), seconds since the epoch.  What else it says (the run, an audience,
 * capabilities) is the caller's, read from the body kz_signed_open returns
 * after the signature has verified: nothing is parsed before that.
 */
#ifndef KZ_SIGNED_H
#define KZ_SIGNED_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_key.h"

#define KZ_SIGNED_PK_BYTES 32
#define KZ_SIGNED_SK_BYTES 64
#define KZ_SIGNED_BODY_MAX 512 /* the JSON body's text, in bytes */
#define KZ_SIGNED_SKEW 30 /* seconds of clock difference at nbf/iat */

/* The outcomes of opening a blob, each with a one-line reason. */
#define KZ_SIGNED_RESULTS(X)                                                   \
	X(OK, "it is current")                                                 \
	X(MALFORMED, "it is malformed")                                        \
	X(FORGED, "its signature does not verify")                             \
	X(NOT_YET, "it is not valid yet")                                      \
	X(EXPIRED, "it has expired")                                           \
	X(LIFETIME, "its lifetime is over the limit")

enum kz_signed_res {
#define X(n, text) KZ_SIGNED_##n,
	KZ_SIGNED_RESULTS(X)
#undef X
};
const char *kz_signed_text(enum kz_signed_res r);

struct kz_signed_times {
	int64_t iat, nbf, exp;
};

/* The Ed25519 key pair whose seed is subkey id of a field key file.  The
 * caller wipes sk. */
KZ_WUR int kz_signed_keypair(const char *field_key_file, enum kz_subkey id,
    unsigned char pk[KZ_SIGNED_PK_BYTES], unsigned char sk[KZ_SIGNED_SK_BYTES],
    char *why, size_t wlen);
/* The public half of that pair as lowercase hex (what a verifier's
 * *_PUBLIC_KEY_FILE holds). */
KZ_WUR int kz_signed_pubkey_hex(const char *field_key_file, enum kz_subkey id,
    char hex[KZ_SIGNED_PK_BYTES * 2 + 1], char *why, size_t wlen);
/* The identifier hash ("run" kind) a blob binds: raw run ids never travel
 * in a credential. */
KZ_WUR int kz_signed_run_hash(const char *field_key_file, const char *run,
    char out[KZ_IDHASH_HEX + 1], char *why, size_t wlen);

/* A body {"v":1,"run":run_hash,"iat":now,"nbf":now,"exp":now+ttl} the
 * caller may add fields to and deletes; NULL when out of memory. */
cJSON *kz_signed_body_new(const char *run_hash, int64_t now, int64_t ttl);
/* Signs body into out (NUL-terminated); KZ_ETOOBIG when the body's text
 * is over KZ_SIGNED_BODY_MAX or out is too small. */
KZ_WUR int kz_signed_make(const unsigned char sk[KZ_SIGNED_SK_BYTES],
    const cJSON *body, char *out, size_t len);
/*
 * Opens blob (len bytes, at most max_len): its shape, its signature, then
 * its body's version and times.  On KZ_SIGNED_OK *body is the parsed body
 * (the caller deletes it) and *t its times, not yet compared with a clock:
 * the caller checks its own fields first, then kz_signed_current.
 */
enum kz_signed_res kz_signed_open(const unsigned char pk[KZ_SIGNED_PK_BYTES],
    const char *blob, size_t len, size_t max_len, cJSON **body,
    struct kz_signed_times *t);
/* Whether times t are current at now, with a lifetime of at most
 * max_ttl seconds. */
enum kz_signed_res kz_signed_current(const struct kz_signed_times *t,
    int64_t now, int64_t max_ttl);

#endif
