/*
 * The code's environment: only what the request names, plus a fixed safe
 * set for the names it did not.  Nothing of the worker's own environment
 * is ever copied.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "sbx.h"
#include "banned.h"

bool
sbx_env_name_ok(const char *n)
{
	size_t len = strlen(n);

	if (len == 0 || len > 128 || (n[0] >= '0' && n[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((n[i] >= 'A' && n[i] <= 'Z') ||
		        (n[i] >= 'a' && n[i] <= 'z') ||
		        (n[i] >= '0' && n[i] <= '9') || n[i] == '_'))
			return false;
	return true;
}

void
sbx_env_init(struct sbx_env *e)
{
	memset(e, 0, sizeof(*e));
}

static bool
has(const struct sbx_env *e, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, n) == 0 && e->v[i][n] == '=')
			return true;
	return false;
}

static int
put(struct sbx_env *e, const char *name, const char *value, size_t max,
    char *why, size_t wlen)
{
	size_t len = strlen(name) + strlen(value) + 2;
	char *s;

	if (e->n >= max || e->bytes + len > SBX_ENV_BYTES) {
		kz_why(why, wlen, "env: too many variables or bytes");
		return KZ_ETOOBIG;
	}
	if ((s = malloc(len)) == NULL)
		return KZ_ENOMEM;
	snprintf(s, len, "%s=%s", name, value);
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	e->bytes += len;
	return 0;
}

int
sbx_env_add(struct sbx_env *e, const char *name, const char *value, char *why,
    size_t wlen)
{
	if (!sbx_env_name_ok(name)) {
		kz_why(why, wlen, "env: bad variable name");
		return KZ_EINVAL;
	}
	if (has(e, name)) {
		kz_why(why, wlen, "env: duplicate variable");
		return KZ_EINVAL;
	}
	return put(e, name, value, SBX_ENV_MAX, why, wlen);
}

int
sbx_env_finish(struct sbx_env *e, int port, char *why, size_t wlen)
{
	static const char *const safe[][2] = {
	    {"PATH", "/usr/local/bin:/usr/bin:/bin"},
	    {"HOME", SBX_WS},
	    {"TMPDIR", "/tmp"},
	    {"LANG", "C.UTF-8"},
	    {"USER", "sandbox"},
	    {"LOGNAME", "sandbox"},
	    {"SHELL", "/bin/sh"},
	    {"PWD", SBX_WS},
	};
	static const char *const proxy[] = {"HTTP_PROXY", "HTTPS_PROXY",
	    "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"};
	char url[64];
	int r;

	for (size_t i = 0; i < sizeof(safe) / sizeof(safe[0]); i++)
		if (!has(e, safe[i][0]) &&
		    (r = put(e, safe[i][0], safe[i][1], SBX_ENV_SLOTS, why,
		         wlen)) != 0)
			return r;
	if (port <= 0)
		return 0;
	/* The relay is the only way out, whatever the request said. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	for (size_t i = 0; i < sizeof(proxy) / sizeof(proxy[0]); i++) {
		size_t nl = strlen(proxy[i]);

		for (size_t j = 0; j < e->n; j++)
			if (strncmp(e->v[j], proxy[i], nl) == 0 &&
			    e->v[j][nl] == '=') {
				size_t len = nl + strlen(url) + 2;
				char *s = malloc(len);

				if (s == NULL)
					return KZ_ENOMEM;
				snprintf(s, len, "%s=%s", proxy[i], url);
				free(e->v[j]);
				e->v[j] = s;
			}
		if (!has(e, proxy[i]) &&
		    (r = put(e, proxy[i], url, SBX_ENV_SLOTS, why, wlen)) != 0)
			return r;
	}
	return 0;
}

bool
sbx_broker_token_ok(const char *t)
{
	size_t n = strlen(t);

	return n > 0 && n <= SBX_BROKER_TOKEN_MAX &&
	    strspn(t,
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	        "0123456789-_.") == n;
}

/*
 * The package installers' ordinary settings, pointed at the run's broker
 * forward (forward.c): pip's index with the token as the password of the
 * URL, and npm's user configuration, a file (SBX_NPMRC, npmrc here) that
 * names the registry and its token.  npm's per-registry token key is not
 * a shell name, and dash drops such names from what it runs, so npm gets
 * a file; npm sends a password of the registry URL only for the package
 * documents, not for their tarballs.  The forward's address is kept off
 * any proxy the run was given.  A name the request set itself stays as the
 * request set it.  The token is the run's own: it opens the broker's
 * registry paths for minutes, and nothing else.
 */
int
sbx_env_broker(struct sbx_env *e, int port, const char *token, char *npmrc,
    char *why, size_t wlen)
{
	char pip[SBX_BROKER_TOKEN_MAX + 64];
	const char *set[][2] = {
	    {"NPM_CONFIG_USERCONFIG", SBX_NPMRC},
	    {"PIP_INDEX_URL", pip},
	    {"NO_PROXY", "127.0.0.1,localhost"},
	    {"no_proxy", "127.0.0.1,localhost"},
	};
	int r = 0;

	if (!sbx_broker_token_ok(token)) {
		kz_why(why, wlen, "the broker token is malformed");
		return KZ_EINVAL;
	}
	snprintf(npmrc, SBX_NPMRC_MAX,
	    "registry=http://127.0.0.1:%d/\n//127.0.0.1:%d/:_authToken=%s\n",
	    port, port, token);
	snprintf(pip, sizeof(pip), "http://__token__:%s@127.0.0.1:%d/simple/",
	    token, port);
	for (size_t i = 0; r == 0 && i < sizeof(set) / sizeof(set[0]); i++)
		if (!has(e, set[i][0]) &&
		    !(i == 0 && has(e, "npm_config_userconfig")))
			r = put(e, set[i][0], set[i][1], SBX_ENV_SLOTS, why,
			    wlen);
	sodium_memzero(pip, sizeof(pip));
	return r;
}

void
sbx_env_release(struct sbx_env *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i]);
	sbx_env_init(e);
}
