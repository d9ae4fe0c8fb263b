/*
 * The deployment's field key and what is derived from it.  One 32-byte
 * secret in a 0600 file; subkeys from libsodium's KDF, one context each.
 * Key material is wiped with sodium_memzero before it is released.
 */
#ifndef KZ_KEY_H
#define KZ_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kz_err.h"

#define KZ_KEY_BYTES 32
#define KZ_IDHASH_BYTES 16
#define KZ_IDHASH_HEX (KZ_IDHASH_BYTES * 2)

/* KDF contexts (8 bytes each) and subkey ids, one per purpose. */
#define KZ_KDF_CTX "kaizenkz"
enum kz_subkey {
	KZ_SUBKEY_IDHASH = 1, /* keyed BLAKE2b of identifiers */
	KZ_SUBKEY_GRANT = 2, /* Ed25519 seed for egress grants */
	KZ_SUBKEY_AUDIT = 3, /* audit MAC chain */
	KZ_SUBKEY_RECEIPT = 4, /* Ed25519 seed for validation receipts */
	KZ_SUBKEY_PKGTOKEN = 5, /* Ed25519 seed for package-broker tokens */
};

struct kz_key {
	unsigned char k[KZ_KEY_BYTES];
};

/* Loads a field key: a regular file of exactly 32 bytes, mode 0600 or
 * 0400 (a systemd credential), owned by us unless we are root. */
KZ_WUR int kz_key_load(const char *path, struct kz_key *out, char *why,
    size_t wlen);
/* Creates a new random key file (O_EXCL, 0600). */
KZ_WUR int kz_key_generate(const char *path, char *why, size_t wlen);
/* Derives a 32-byte subkey for purpose id. */
KZ_WUR int kz_key_derive(const struct kz_key *master, enum kz_subkey id,
    struct kz_key *out);
/* Loads the field key at path, derives subkey id from it into out and
 * wipes the field key: the one way a binary gets a subkey. */
KZ_WUR int kz_key_load_subkey(const char *path, enum kz_subkey id,
    struct kz_key *out, char *why, size_t wlen);
/* Wipes key material. */
void kz_key_wipe(struct kz_key *k);

/*
 * Keyed BLAKE2b identifier hash, hex, KZ_IDHASH_HEX chars + NUL.  kind
 * separates namespaces ("actor", "conversation", "member", ...), so the same
 * raw string hashes differently per kind.  idkey is the IDHASH subkey.
 */
KZ_WUR int kz_key_idhash(const struct kz_key *idkey, const char *kind,
    const char *id, char out[KZ_IDHASH_HEX + 1]);
/* Hash of an ordered pair (e.g. the workspace key H(actor, conversation)). */
KZ_WUR int kz_key_idhash2(const struct kz_key *idkey, const char *kind,
    const char *a, const char *b, char out[KZ_IDHASH_HEX + 1]);

/* Constant-time equality of n bytes. */
bool kz_ct_equal(const void *a, const void *b, size_t n);
/* Lowercase hex encoding into out (2n+1 bytes). */
void kz_hex(const unsigned char *in, size_t n, char *out);
/* Strict hex decoding of exactly 2n chars. */
KZ_WUR int kz_unhex(const char *in, unsigned char *out, size_t n);

#endif
