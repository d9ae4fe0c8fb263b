/*
 * The Prometheus text exposition format (0.0.4): per family one HELP and
 * one TYPE line, then its samples, families contiguous.  Names are
 * checked, label values and help text escaped; the whole text is bounded.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "banned.h"

struct fam {
	char name[MX_NAME_MAX + 1];
	char *help;
	enum mx_type type;
	char *buf; /* the samples' lines */
	size_t len, cap;
};

struct mx {
	struct fam f[MX_FAMILIES_MAX];
	size_t n;
	size_t bytes; /* all samples, for MX_BYTES_MAX */
};

int
mx_new(struct mx **out)
{
	struct mx *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return KZ_ENOMEM;
	*out = m;
	return 0;
}

void
mx_free(struct mx *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->f[i].help);
		free(m->f[i].buf);
	}
	free(m);
}

static bool
name_char(char c, bool first, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	    (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

static bool
ident_ok(const char *s, bool colon)
{
	if (s == NULL || *s == '\0' || strlen(s) > MX_NAME_MAX)
		return false;
	for (const char *p = s; *p; p++)
		if (!name_char(*p, p == s, colon))
			return false;
	return true;
}

bool
mx_name_ok(const char *name)
{
	return ident_ok(name, true);
}

bool
mx_label_name_ok(const char *name)
{
	return ident_ok(name, false) && strncmp(name, "__", 2) != 0;
}

int
mx_escape(const char *v, bool help, char *out, size_t cap)
{
	size_t o = 0;

	for (const char *p = v; *p; p++) {
		const char *e = NULL;

		if (*p == '\\')
			e = "\\\\";
		else if (*p == '\n')
			e = "\\n";
		else if (*p == '"' && !help)
			e = "\\\"";
		if (o + (e ? 2 : 1) >= cap)
			return KZ_ENOSPC;
		if (e != NULL) {
			memcpy(out + o, e, 2);
			o += 2;
		} else
			out[o++] = *p;
	}
	if (o >= cap)
		return KZ_ENOSPC;
	out[o] = '\0';
	return 0;
}

static struct fam *
family(struct mx *m, const char *name, enum mx_type type, const char *help)
{
	size_t l = strlen(name);

	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->f[i].name, name) == 0)
			return m->f[i].type == type &&
			        strcmp(m->f[i].help, help) == 0 ?
			    &m->f[i] :
			    NULL;
	if (!mx_name_ok(name) || m->n == MX_FAMILIES_MAX ||
	    (type == MX_COUNTER &&
	        (l < 7 || strcmp(name + l - 6, "_total") != 0)))
		return NULL;
	if ((m->f[m->n].help = strdup(help)) == NULL)
		return NULL;
	snprintf(m->f[m->n].name, sizeof(m->f[m->n].name), "%s", name);
	m->f[m->n].type = type;
	return &m->f[m->n++];
}

/* Appends printf output to f's samples, within the scrape's bound. */
static int
put(struct mx *m, struct fam *f, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return KZ_EINVAL;
	if (m->bytes + (size_t)n > MX_BYTES_MAX)
		return KZ_ETOOBIG;
	if (f->len + (size_t)n + 1 > f->cap) {
		size_t cap = f->cap ? f->cap : 256;
		char *nb;

		while (cap < f->len + (size_t)n + 1)
			cap *= 2;
		if ((nb = realloc(f->buf, cap)) == NULL)
			return KZ_ENOMEM;
		f->buf = nb;
		f->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(f->buf + f->len, f->cap - f->len, fmt, ap);
	va_end(ap);
	f->len += (size_t)n;
	m->bytes += (size_t)n;
	return 0;
}

int
mx_add(struct mx *m, const char *name, enum mx_type type, const char *help,
    const char *const *labels, double v)
{
	char esc[512];
	struct fam *f;
	int r;

	if (!isfinite(v) || (type == MX_COUNTER && v < 0))
		return KZ_EINVAL;
	for (size_t i = 0; labels != NULL && labels[i] != NULL; i += 2)
		if (!mx_label_name_ok(labels[i]) || labels[i + 1] == NULL)
			return KZ_EINVAL;
	if ((f = family(m, name, type, help)) == NULL)
		return m->n == MX_FAMILIES_MAX ? KZ_ETOOBIG : KZ_EINVAL;
	if ((r = put(m, f, "%s", name)) != 0)
		return r;
	for (size_t i = 0; labels != NULL && labels[i] != NULL; i += 2) {
		if ((r = mx_escape(labels[i + 1], false, esc, sizeof(esc))) !=
		        0 ||
		    (r = put(m, f, "%s%s=\"%s\"", i == 0 ? "{" : ",", labels[i],
		         esc)) != 0)
			return r;
	}
	if (labels != NULL && labels[0] != NULL && (r = put(m, f, "}")) != 0)
		return r;
	/* Integers as integers; %.17g keeps every double exact. */
	if (v == floor(v) && fabs(v) < 1e15)
		return put(m, f, " %.0f\n", v);
	return put(m, f, " %.17g\n", v);
}

int
mx_text(const struct mx *m, char **out, size_t *len)
{
	size_t cap = m->bytes + 1, o = 0;
	char *buf, esc[1024];

	for (size_t i = 0; i < m->n; i++)
		cap += 2 * strlen(m->f[i].name) + 2 * strlen(m->f[i].help) + 32;
	if ((buf = malloc(cap)) == NULL)
		return KZ_ENOMEM;
	for (size_t i = 0; i < m->n; i++) {
		const struct fam *f = &m->f[i];

		if (mx_escape(f->help, true, esc, sizeof(esc)) != 0) {
			free(buf);
			return KZ_ETOOBIG;
		}
		o += (size_t)snprintf(buf + o, cap - o,
		    "# HELP %s %s\n# TYPE %s %s\n", f->name, esc, f->name,
		    f->type == MX_COUNTER ? "counter" : "gauge");
		if (f->len > 0) {
			memcpy(buf + o, f->buf, f->len);
			o += f->len;
		}
	}
	buf[o] = '\0';
	*out = buf;
	*len = o;
	return 0;
}
