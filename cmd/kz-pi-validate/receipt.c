/*
 * Receipts: {"v":1,"body":{...},"alg":"ed25519","pubkey":HEX,"sig":HEX}.
 * The signature covers the body printed by cJSON_PrintUnformatted (the
 * body holds only strings, integers, booleans, arrays and objects, which
 * print the same after a parse).  The key is the receipt subkey of the
 * field key (KZ_SUBKEY_RECEIPT) used as an Ed25519 seed.
 */
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "kz_json.h"
#include "kz_key.h"
#include "pv.h"
#include "banned.h"

/* The events Pi 0.73.1 dispatches to extensions (ExtensionAPI.on). */
static const char *const events[] = {"resources_discover", "session_start",
    "session_before_switch", "session_before_fork", "session_before_compact",
    "session_compact", "session_shutdown", "session_before_tree",
    "session_tree", "context", "before_provider_request",
    "after_provider_response", "before_agent_start", "agent_start", "agent_end",
    "turn_start", "turn_end", "message_start", "message_update", "message_end",
    "tool_execution_start", "tool_execution_update", "tool_execution_end",
    "model_select", "thinking_level_select", "tool_call", "tool_result",
    "user_bash", "input", NULL};

bool
pv_event_supported(const char *name)
{
	for (int i = 0; events[i] != NULL; i++)
		if (strcmp(events[i], name) == 0)
			return true;
	return false;
}

static int
keypair(const char *keyfile, unsigned char pk[crypto_sign_PUBLICKEYBYTES],
    unsigned char sk[crypto_sign_SECRETKEYBYTES], char *why, size_t wlen)
{
	struct kz_key sub;
	int r;

	if ((r = kz_key_load_subkey(keyfile, KZ_SUBKEY_RECEIPT, &sub, why,
	         wlen)) != 0)
		return r;
	if (crypto_sign_seed_keypair(pk, sk, sub.k) != 0)
		r = KZ_ECRYPTO;
	kz_key_wipe(&sub);
	return r;
}

int
pv_receipt_sign(cJSON *body, const char *keyfile, char **out, char *why,
    size_t wlen)
{
	unsigned char pk[crypto_sign_PUBLICKEYBYTES];
	unsigned char sk[crypto_sign_SECRETKEYBYTES];
	unsigned char sig[crypto_sign_BYTES];
	char pkh[sizeof(pk) * 2 + 1], sigh[sizeof(sig) * 2 + 1];
	char *msg = NULL;
	cJSON *doc = NULL;
	int r;

	if ((r = keypair(keyfile, pk, sk, why, wlen)) != 0)
		return r;
	if ((msg = kz_json_print(body)) == NULL) {
		r = KZ_ENOMEM;
		goto out;
	}
	crypto_sign_detached(sig, NULL, (unsigned char *)msg, strlen(msg), sk);
	kz_hex(pk, sizeof(pk), pkh);
	kz_hex(sig, sizeof(sig), sigh);
	if ((doc = cJSON_CreateObject()) == NULL ||
	    cJSON_AddNumberToObject(doc, "v", 1) == NULL) {
		r = KZ_ENOMEM;
		goto out;
	}
	cJSON_AddItemReferenceToObject(doc, "body", body);
	if (cJSON_AddStringToObject(doc, "alg", "ed25519") == NULL ||
	    cJSON_AddStringToObject(doc, "pubkey", pkh) == NULL ||
	    cJSON_AddStringToObject(doc, "sig", sigh) == NULL ||
	    (*out = cJSON_Print(doc)) == NULL)
		r = KZ_ENOMEM;
out:
	sodium_memzero(sk, sizeof(sk));
	cJSON_Delete(doc);
	free(msg);
	return r;
}

static int
check_sig(const cJSON *doc, const cJSON *body, const char *keyfile, char *why,
    size_t wlen)
{
	unsigned char pk[crypto_sign_PUBLICKEYBYTES];
	unsigned char sk[crypto_sign_SECRETKEYBYTES];
	unsigned char sig[crypto_sign_BYTES];
	const char *sigh;
	char *msg;
	int r;

	if ((r = kz_json_str(doc, "sig", 256, &sigh, why, wlen)) != 0)
		return r;
	if (strlen(sigh) != sizeof(sig) * 2 ||
	    kz_unhex(sigh, sig, sizeof(sig)) != 0) {
		kz_why(why, wlen, "malformed signature");
		return KZ_ECRYPTO;
	}
	if ((r = keypair(keyfile, pk, sk, why, wlen)) != 0)
		return r;
	sodium_memzero(sk, sizeof(sk));
	if ((msg = kz_json_print(body)) == NULL)
		return KZ_ENOMEM;
	r = crypto_sign_verify_detached(sig, (unsigned char *)msg, strlen(msg),
	        pk) == 0 ?
	    0 :
	    KZ_ECRYPTO;
	free(msg);
	if (r != 0)
		kz_why(why, wlen,
		    "signature does not verify under this "
		    "deployment's receipt key");
	return r;
}

int
pv_receipt_verify(const char *text, size_t len, const char *keyfile,
    const char *artifact, const char *profile, const char *contract, char *why,
    size_t wlen)
{
	const char *a, *c, *p, *res;
	cJSON *doc = NULL, *body;
	int r;

	if ((r = kz_json_parse_object(text, len, &doc, why, wlen)) != 0)
		return r;
	body = kz_json_get(doc, "body");
	if (!cJSON_IsObject(body)) {
		kz_why(why, wlen, "receipt has no body");
		r = KZ_EMISSING;
		goto out;
	}
	if ((r = check_sig(doc, body, keyfile, why, wlen)) != 0)
		goto out;
	if ((r = kz_json_str(body, "artifact_sha256", 64, &a, why, wlen)) !=
	        0 ||
	    (r = kz_json_str(body, "contract_digest", 64, &c, why, wlen)) !=
	        0 ||
	    (r = kz_json_str(body, "profile_sha256", 64, &p, why, wlen)) != 0 ||
	    (r = kz_json_str(body, "result", 8, &res, why, wlen)) != 0)
		goto out;
	if (strcmp(a, artifact) != 0) {
		kz_why(why, wlen, "stale: the files changed");
		r = KZ_EDENIED;
	} else if (strcmp(c, contract) != 0) {
		kz_why(why, wlen, "stale: the contract changed");
		r = KZ_EDENIED;
	} else if (strcmp(p, profile) != 0) {
		kz_why(why, wlen,
		    "stale: validated under another profile (kind, entry "
		    "points, tests or resources)");
		r = KZ_EDENIED;
	} else if (strcmp(res, "pass") != 0) {
		kz_why(why, wlen, "current, but the validation did not pass");
		r = KZ_EDENIED;
	}
out:
	cJSON_Delete(doc);
	return r;
}
