/*
 * libFuzzer harness for the grant and TURN credential code (grant.c): the
 * grant a sandboxed client presents in Proxy-Authorization.  The first
 * byte chooses what the rest is:
 *   0: a grant as sent, verified against a fixed public key (nearly all
 *      are malformed or badly signed: this is the decoder's outer layer);
 *   1: the claims text, encoded and signed here with the matching secret
 *      key, so that the claims parser behind the signature is reached;
 *   2: a TURN user name and secret (split at the first NUL) for
 *      eg_turn_credential, whose username must be "expiry:user".
 * A verified grant must satisfy every bound verify promises.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "egress.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define NOW INT64_C(1000001) /* the time check_grant.c tests at */
#define MAX_TTL 14400

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned char pk[32], sk[64];

static void
verify(const char *g, size_t len)
{
	struct eg_claims cl;
	enum eg_reason r = eg_grant_verify(pk, g, len, NOW, MAX_TTL, &cl);

	if (r != EG_R_NONE)
		return;
	if (cl.run[0] == '\0' || memchr(cl.run, '\0', sizeof(cl.run)) == NULL ||
	    cl.exp <= NOW || cl.exp - cl.iat > MAX_TTL ||
	    cl.exp - cl.nbf > MAX_TTL || (cl.caps & ~EG_CAP_TURN) != 0)
		abort();
}

static void
signed_claims(const uint8_t *p, size_t n)
{
	char g[EG_GRANT_MAX * 2 + 128];
	unsigned char sig[crypto_sign_BYTES];
	size_t el;

	if (sodium_base64_ENCODED_LEN(n, B64URL) + 100 > sizeof(g))
		return;
	sodium_bin2base64(g, sizeof(g), p, n, B64URL);
	el = strlen(g);
	crypto_sign_detached(sig, NULL, (unsigned char *)g, el, sk);
	g[el] = '.';
	sodium_bin2base64(g + el + 1, sizeof(g) - el - 1, sig, sizeof(sig),
	    B64URL);
	verify(g, strlen(g));
}

static void
turn(const uint8_t *p, size_t n)
{
	const uint8_t *nul = memchr(p, '\0', n);
	char user[300], uname[256], pass[64], want[300];

	if (nul == NULL || (size_t)(nul - p) >= sizeof(user))
		return;
	memcpy(user, p, (size_t)(nul - p) + 1);
	if (eg_turn_credential(nul + 1, n - (size_t)(nul - p) - 1, user, NOW,
	        uname, sizeof(uname), pass, sizeof(pass)) != 0)
		return;
	snprintf(want, sizeof(want), "%lld:%s", (long long)NOW, user);
	if (strcmp(uname, want) != 0 || strlen(pass) != 28)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	char *g;

	if (!init) {
		unsigned char seed[32] = {1};

		if (sodium_init() < 0)
			abort();
		crypto_sign_seed_keypair(pk, sk, seed);
		init = true;
	}
	if (size < 1 || size > 4096)
		return 0;
	switch (data[0] % 3) {
	case 0:
		/* An exact-size copy: ASan sees any read past the grant. */
		if ((g = malloc(size - 1 ? size - 1 : 1)) == NULL)
			return 0;
		memcpy(g, data + 1, size - 1);
		verify(g, size - 1);
		free(g);
		break;
	case 1:
		signed_claims(data + 1, size - 1);
		break;
	default:
		turn(data + 1, size - 1);
		break;
	}
	return 0;
}
