/*
 * The Python pages the client gets, written from the parsed list: PEP 503
 * HTML with every value escaped, or PEP 691 JSON built with cJSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <cJSON.h>

#include "pkgbroker.h"
#include "kz_json.h"
#include "banned.h"

static void
esc(struct evbuffer *b, const char *s)
{
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '<':
			evbuffer_add(b, "&lt;", 4);
			break;
		case '>':
			evbuffer_add(b, "&gt;", 4);
			break;
		case '&':
			evbuffer_add(b, "&amp;", 5);
			break;
		case '"':
			evbuffer_add(b, "&quot;", 6);
			break;
		case '\'':
			evbuffer_add(b, "&#39;", 5);
			break;
		default:
			evbuffer_add(b, s, 1);
		}
	}
}

static char *
take(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);

	if (s != NULL) {
		evbuffer_remove(b, s, n);
		s[n] = '\0';
	}
	evbuffer_free(b);
	return s;
}

static char *
render_html(const struct pb_pylist *l, const char *project, bool index)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL)
		return NULL;
	evbuffer_add_printf(b,
	    "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-"
	    "version\" content=\"1.0\"><title>%s</title></head><body>\n",
	    index ? "Simple index" : "Links");
	for (size_t i = 0; i < l->n; i++) {
		const struct pb_pyfile *f = &l->v[i];

		evbuffer_add_printf(b, "<a href=\"");
		if (index) {
			evbuffer_add_printf(b, "/simple/");
			esc(b, f->filename);
			evbuffer_add_printf(b, "/");
		} else {
			esc(b, f->url);
			if (f->sha256[0] != '\0')
				evbuffer_add_printf(b, "#sha256=%s", f->sha256);
		}
		evbuffer_add_printf(b, "\"");
		if (f->requires_python[0] != '\0') {
			evbuffer_add_printf(b, " data-requires-python=\"");
			esc(b, f->requires_python);
			evbuffer_add_printf(b, "\"");
		}
		if (f->yanked)
			evbuffer_add_printf(b, " data-yanked=\"\"");
		evbuffer_add_printf(b, ">");
		esc(b, f->filename);
		evbuffer_add_printf(b, "</a><br>\n");
	}
	(void)project;
	evbuffer_add_printf(b, "</body></html>\n");
	return take(b);
}

static bool
json_file(cJSON *arr, const struct pb_pyfile *f)
{
	cJSON *o = cJSON_CreateObject(), *h;

	if (o == NULL || !cJSON_AddItemToArray(arr, o) ||
	    !cJSON_AddStringToObject(o, "filename", f->filename) ||
	    !cJSON_AddStringToObject(o, "url", f->url) ||
	    (h = cJSON_AddObjectToObject(o, "hashes")) == NULL ||
	    (f->sha256[0] != '\0' &&
	        !cJSON_AddStringToObject(h, "sha256", f->sha256)) ||
	    (f->requires_python[0] != '\0' &&
	        !cJSON_AddStringToObject(o, "requires-python",
	            f->requires_python)) ||
	    (f->yanked && !cJSON_AddTrueToObject(o, "yanked")))
		return false;
	return true;
}

static char *
render_json(const struct pb_pylist *l, const char *project, bool index)
{
	cJSON *o = cJSON_CreateObject(), *m, *arr;
	char *txt = NULL;

	if (o == NULL || (m = cJSON_AddObjectToObject(o, "meta")) == NULL ||
	    !cJSON_AddStringToObject(m, "api-version", "1.0") ||
	    (!index && !cJSON_AddStringToObject(o, "name", project)) ||
	    (arr = cJSON_AddArrayToObject(o, index ? "projects" : "files")) ==
	        NULL)
		goto out;
	for (size_t i = 0; i < l->n; i++) {
		cJSON *p;

		if (!index) {
			if (!json_file(arr, &l->v[i]))
				goto out;
			continue;
		}
		if ((p = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddItemToArray(arr, p) ||
		    !cJSON_AddStringToObject(p, "name", l->v[i].filename))
			goto out;
	}
	txt = kz_json_print(o);
out:
	cJSON_Delete(o);
	return txt;
}

char *
pb_py_render(const struct pb_pylist *l, const char *project, bool index,
    bool json)
{
	return json ? render_json(l, project, index) :
	              render_html(l, project, index);
}
