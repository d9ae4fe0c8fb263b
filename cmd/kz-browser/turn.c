/*
 * WebRTC in a session goes only through the operator's TURN server, over
 * TCP through the worker's relay and kz-egress (a CONNECT the grant's
 * "turn" capability allows to exactly SANDBOX_EGRESS_TURN).  The
 * credentials are TURN REST ones minted by "kz-egress turn-credential"
 * (the one implementation of the scheme) for the session's keyed hash, the
 * same hash the session's grant carries as its run, so coturn's log and
 * kz-egress's records name the same session.  The script made here is
 * what every page and frame target runs before any page script (cdp.c):
 * each RTCPeerConnection gets that one server and iceTransportPolicy
 * "relay", whatever the page passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <cJSON.h>

#include "kz_conf.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_signed.h"
#include "kz_wire.h"
#include "kzb.h"
#include "banned.h"

#define TURN_TTL_MAX 3600 /* kz-egress turn-credential's own bound */

/* A host as it may stand in a turn: URL: a name or IPv4 literal, or an
 * IPv6 literal (given in brackets, kept without). */
static int
turn_authority(const char *v, char *host, size_t hlen, int *port)
{
	const char *colon, *h = v, *he;
	int64_t p;

	if (v[0] == '[') {
		h = v + 1;
		if ((he = strchr(h, ']')) == NULL || he[1] != ':')
			return KZ_EINVAL;
		colon = he + 1;
	} else {
		if ((colon = strrchr(v, ':')) == NULL)
			return KZ_EINVAL;
		he = colon;
	}
	if (he == h || (size_t)(he - h) >= hlen ||
	    kz_parse_int(colon + 1, 1, 65535, &p) != 0)
		return KZ_EINVAL;
	for (const char *q = h; q < he; q++)
		if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
		        (*q >= '0' && *q <= '9') || *q == '.' || *q == '-' ||
		        (v[0] == '[' && *q == ':')))
			return KZ_EINVAL;
	memcpy(host, h, (size_t)(he - h));
	host[he - h] = '\0';
	*port = (int)p;
	return 0;
}

int
kzb_turn_conf(struct kzb_conf *c, const struct kz_conf *k, char *why,
    size_t wlen)
{
	const char *v = kz_conf_str(k, "SANDBOX_EGRESS_TURN", "");
	const char *sec = kz_conf_str(k, "BROWSER_TURN_SECRET_FILE", "");
	int e;

	if ((e = kz_conf_int(k, "BROWSER_TURN_TTL", 600, 60, TURN_TTL_MAX,
	         &c->turn_ttl, why, wlen)) != 0)
		return e;
	/* Both or neither: a server without a secret (or the reverse) is a
	 * half-made configuration, refused rather than run without TURN. */
	if ((*v == '\0') != (*sec == '\0')) {
		kz_why(why, wlen,
		    "SANDBOX_EGRESS_TURN and BROWSER_TURN_SECRET_FILE are set "
		    "together or not at all");
		return KZ_ECONF;
	}
	if (*v == '\0')
		return 0;
	if (turn_authority(v, c->turn_host, sizeof(c->turn_host),
	        &c->turn_port) != 0) {
		kz_why(why, wlen,
		    "SANDBOX_EGRESS_TURN is host:port or [v6]:port");
		return KZ_ECONF;
	}
	if (strlen(sec) >= sizeof(c->turn_secret)) {
		kz_why(why, wlen, "BROWSER_TURN_SECRET_FILE is too long");
		return KZ_ECONF;
	}
	snprintf(c->turn_secret, sizeof(c->turn_secret), "%s", sec);
	return 0;
}

/* The credentials for the session: {username, password} from kz-egress. */
static int
mint(const struct kzb_conf *c, const char *sid, cJSON **cred)
{
	char hash[KZ_IDHASH_HEX + 1], ttl[24], line[512], why[160];
	const char *av[] = {c->egress_bin, "turn-credential", "--secret-file",
	    c->turn_secret, "--user", hash, "--ttl", ttl, NULL};
	int r;

	*cred = NULL;
	if (kz_signed_run_hash(c->key_file, sid, hash, why, sizeof(why)) != 0)
		return KZ_EUNAVAIL;
	snprintf(ttl, sizeof(ttl), "%lld", (long long)c->turn_ttl);
	r = kzb_egress_run(av, line, sizeof(line));
	if (r == 0 &&
	    kz_json_parse_object(line, strlen(line), cred, why, sizeof(why)) !=
	        0)
		r = -1;
	sodium_memzero(line, sizeof(line));
	if (r != 0)
		return KZ_EUNAVAIL;
	return 0;
}

/* The wrapper.  It runs first in every document, keeps the page's other
 * settings and replaces the servers and the transport policy; it is a
 * convenience for the page, not the boundary (kz-browser(8), WEAK
 * POINTS): the network admits nothing else either way. */
static const char wrapper[] =
    "(() => {\n"
    "const W = globalThis, N = W.RTCPeerConnection, "
    "M = Symbol.for(\"kz.turn\");\n"
    "if (typeof N !== \"function\" || N[M]) return;\n"
    "const S = %s;\n"
    "const fix = (c) => { const o = {...(c || {})}; "
    "o.iceServers = [{...S}]; o.iceTransportPolicy = \"relay\"; "
    "return o; };\n"
    "class RTCPeerConnection extends N {\n"
    "  constructor(c, ...r) { super(fix(c), ...r); }\n"
    "  setConfiguration(c) { return super.setConfiguration(fix(c)); }\n"
    "}\n"
    "Object.defineProperty(RTCPeerConnection, M, {value: true});\n"
    "for (const k of [\"RTCPeerConnection\", \"webkitRTCPeerConnection\"])\n"
    "  if (k in W) Object.defineProperty(W, k, {value: RTCPeerConnection, "
    "writable: true, configurable: true, enumerable: false});\n"
    "})();\n";

static char *
script(const struct kzb_conf *c, const cJSON *cred)
{
	const char *u = NULL, *p = NULL;
	char url[320], *cfg = NULL, *out = NULL;
	cJSON *s = NULL;
	size_t n;

	if (kz_json_str(cred, "username", 256, &u, NULL, 0) != 0 ||
	    kz_json_str(cred, "password", 128, &p, NULL, 0) != 0)
		return NULL;
	snprintf(url, sizeof(url),
	    strchr(c->turn_host, ':') ? "turn:[%s]:%d?transport=tcp" :
	                                "turn:%s:%d?transport=tcp",
	    c->turn_host, c->turn_port);
	if ((s = cJSON_CreateObject()) == NULL ||
	    !cJSON_AddStringToObject(s, "urls", url) ||
	    !cJSON_AddStringToObject(s, "username", u) ||
	    !cJSON_AddStringToObject(s, "credential", p) ||
	    (cfg = kz_json_print(s)) == NULL)
		goto out;
	n = sizeof(wrapper) + strlen(cfg);
	if ((out = malloc(n)) != NULL)
		snprintf(out, n, wrapper, cfg);
out:
	if (cfg != NULL)
		sodium_memzero(cfg, strlen(cfg));
	free(cfg);
	cJSON_Delete(s);
	return out;
}

int
kzb_turn_script(const struct kzb_conf *c, const char *sid, char **out,
    struct kzb_out *o)
{
	cJSON *cred = NULL;
	cJSON *pw;
	int e;

	*out = NULL;
	if (c->turn_host[0] == '\0')
		return 0;
	if ((e = mint(c, sid, &cred)) != 0) {
		o->code = KZ_WE_UNAVAILABLE;
		snprintf(o->why, sizeof(o->why),
		    "no TURN credentials could be made for the session");
		return e;
	}
	*out = script(c, cred);
	pw = kz_json_get(cred, "password");
	if (cJSON_IsString(pw))
		sodium_memzero(pw->valuestring, strlen(pw->valuestring));
	cJSON_Delete(cred);
	if (*out == NULL) {
		o->code = KZ_WE_INTERNAL;
		snprintf(o->why, sizeof(o->why),
		    "the TURN credentials came back malformed");
		return KZ_EPROTO;
	}
	return 0;
}
