/*
 * Package documents and index pages, rewritten.  An npm package document
 * is rebuilt from the fields npm install reads (everything else, authors,
 * readmes, maintainers' addresses, upstream URLs, stays behind), every
 * tarball URL pointing back at the broker.  A PEP 503 page is read for
 * its anchors only and a fresh page (or PEP 691 JSON) is written from
 * them: no upstream markup, script or link reaches the client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cJSON.h>

#include "pkgbroker.h"
#include "banned.h"

/* The version fields npm's resolver and installer read. */
static const char *const version_keep[] = {"name", "version", "dependencies",
    "optionalDependencies", "peerDependencies", "peerDependenciesMeta",
    "bundleDependencies", "bundledDependencies", "bin", "directories",
    "engines", "os", "cpu", "libc", "deprecated", "hasInstallScript",
    "_hasShrinkwrap", NULL};
static const char *const dist_keep[] = {"integrity", "shasum", "fileCount",
    "unpackedSize", NULL};

static bool
copy_fields(cJSON *to, const cJSON *from, const char *const *keep)
{
	for (int i = 0; keep[i] != NULL; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(from,
		    keep[i]);
		cJSON *d;

		if (v == NULL)
			continue;
		if ((d = cJSON_Duplicate(v, true)) == NULL ||
		    !cJSON_AddItemToObject(to, keep[i], d)) {
			cJSON_Delete(d);
			return false;
		}
	}
	return true;
}

/* The broker's URL for an upstream tarball URL, or false when the
 * tarball is not on the upstream or not a tarball path. */
static bool
tarball_url(const char *u, const struct pb_upstream *up, const char *base,
    char *out, size_t len)
{
	size_t o = pb_upstream_origin(up, u), n = strlen(up->prefix);
	struct pb_route r;
	char why[64];
	int k;

	/* On the upstream's origin (https://registry.npmjs.org/x/-/x.tgz
	 * as well as https://registry.npmjs.org:443/...), below its prefix. */
	if (o == 0 || strncmp(u + o, up->prefix, n) != 0)
		return false;
	n += o;
	if (u[n] != '/' || pb_route(u + n, &r, why, sizeof(why)) != 0 ||
	    r.kind != PB_NPM_TARBALL)
		return false;
	k = snprintf(out, len, "%s%s", base, u + n);
	return k > 0 && (size_t)k < len;
}

static bool
has_install_script(const cJSON *v)
{
	static const char *const s[] = {"preinstall", "install", "postinstall",
	    NULL};
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(v, "scripts");

	for (int i = 0; s[i] != NULL && cJSON_IsObject(sc); i++)
		if (cJSON_GetObjectItemCaseSensitive(sc, s[i]) != NULL)
			return true;
	return false;
}

/* One version, cut down; NULL when it cannot be offered. */
static cJSON *
one_version(const cJSON *v, const struct pb_upstream *up, const char *base)
{
	const cJSON *dist = cJSON_GetObjectItemCaseSensitive(v, "dist"), *tb;
	char url[PB_URL_MAX];
	cJSON *o, *d;

	tb = cJSON_GetObjectItemCaseSensitive(dist, "tarball");
	if (!cJSON_IsString(tb) ||
	    !tarball_url(tb->valuestring, up, base, url, sizeof(url)))
		return NULL;
	if ((o = cJSON_CreateObject()) == NULL ||
	    !copy_fields(o, v, version_keep))
		goto fail;
	if (has_install_script(v) &&
	    cJSON_GetObjectItemCaseSensitive(o, "hasInstallScript") == NULL &&
	    !cJSON_AddTrueToObject(o, "hasInstallScript"))
		goto fail;
	if ((d = cJSON_AddObjectToObject(o, "dist")) == NULL ||
	    !cJSON_AddStringToObject(d, "tarball", url) ||
	    !copy_fields(d, dist, dist_keep))
		goto fail;
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

static bool
add_versions(cJSON *out, const cJSON *vs, const struct pb_upstream *up,
    const char *base)
{
	cJSON *to = cJSON_AddObjectToObject(out, "versions");
	const cJSON *v;

	if (to == NULL || !cJSON_IsObject(vs))
		return false;
	cJSON_ArrayForEach(v, vs)
	{
		cJSON *o;

		if (!cJSON_IsObject(v) ||
		    (o = one_version(v, up, base)) == NULL)
			continue;
		if (!cJSON_AddItemToObject(to, v->string, o)) {
			cJSON_Delete(o);
			return false;
		}
	}
	return true;
}

/* dist-tags that name a version still offered. */
static bool
add_tags(cJSON *out, const cJSON *tags)
{
	const cJSON *vs = cJSON_GetObjectItemCaseSensitive(out, "versions");
	cJSON *to = cJSON_AddObjectToObject(out, "dist-tags");
	const cJSON *t;

	if (to == NULL)
		return false;
	cJSON_ArrayForEach(t, tags)
	{
		if (!cJSON_IsString(t) ||
		    cJSON_GetObjectItemCaseSensitive(vs, t->valuestring) ==
		        NULL)
			continue;
		if (!cJSON_AddStringToObject(to, t->string, t->valuestring))
			return false;
	}
	return true;
}

cJSON *
pb_npm_rewrite(const cJSON *doc, const char *name, const struct pb_upstream *up,
    const char *base, char *why, size_t wlen)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "name");
	const cJSON *mod = cJSON_GetObjectItemCaseSensitive(doc, "modified");
	cJSON *out;

	if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0) {
		kz_why(why, wlen,
		    "the upstream document is not that package's");
		return NULL;
	}
	if ((out = cJSON_CreateObject()) == NULL ||
	    !cJSON_AddStringToObject(out, "name", name) ||
	    !add_versions(out,
	        cJSON_GetObjectItemCaseSensitive(doc, "versions"), up, base) ||
	    !add_tags(out,
	        cJSON_GetObjectItemCaseSensitive(doc, "dist-tags")) ||
	    (cJSON_IsString(mod) &&
	        !cJSON_AddStringToObject(out, "modified", mod->valuestring))) {
		kz_why(why, wlen,
		    "the upstream document has no usable versions");
		cJSON_Delete(out);
		return NULL;
	}
	return out;
}
