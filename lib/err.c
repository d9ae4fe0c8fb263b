#include <stdarg.h>
#include <stdio.h>

#include "kz_err.h"
#include "banned.h"

struct errdesc {
	const char *name;
	const char *text;
};

static const struct errdesc errs[] = {
#define KZ_ERR_DESC(n, t) {#n, t},
    KZ_ERRORS(KZ_ERR_DESC)
#undef KZ_ERR_DESC
};

static const struct errdesc *
lookup(int err)
{
	int i = err - KZ_ERR_BASE_ - 1;

	if (err >= 0 || i < 0 || (size_t)i >= sizeof(errs) / sizeof(errs[0]))
		return NULL;
	return &errs[i];
}

const char *
kz_errname(int err)
{
	const struct errdesc *d = lookup(err);

	if (err == 0)
		return "KZ_OK";
	return d ? d->name : "KZ_E?";
}

const char *
kz_strerror(int err)
{
	const struct errdesc *d = lookup(err);

	if (err == 0)
		return "success";
	return d ? d->text : "unknown error";
}

void
kz_why(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}
