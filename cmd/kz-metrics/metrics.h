/* kz-metrics: the exposition (expo.c) and the daemons' status (collect.c). */
#ifndef KZ_METRICS_H
#define KZ_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <cJSON.h>

#include "kz_err.h"

/* Bounds on what one scrape may hold. */
#define MX_FAMILIES_MAX 128
#define MX_BYTES_MAX (1024u * 1024u)
#define MX_NAME_MAX 96

enum mx_type { MX_COUNTER, MX_GAUGE };

struct mx;

KZ_WUR int mx_new(struct mx **out);
void mx_free(struct mx *m);

/* A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) and a label name
 * ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__"). */
bool mx_name_ok(const char *name);
bool mx_label_name_ok(const char *name);
/* A label value escaped for the text format (\\, \" and \n) into out;
 * KZ_ENOSPC when it does not fit in cap with its NUL. */
KZ_WUR int mx_escape(const char *v, bool help, char *out, size_t cap);

/*
 * One sample of family name (created on first use with type and help; a
 * counter's name ends in _total).  labels: name, value pairs, then NULL.
 * KZ_EINVAL for a bad name, a bad label name, a counter without _total, a
 * family's type or help changed, or a value that is not finite (counters:
 * negative); KZ_ETOOBIG past the bounds.
 */
KZ_WUR int mx_add(struct mx *m, const char *name, enum mx_type type,
    const char *help, const char *const *labels, double v);

/* The text exposition format (version 0.0.4), families in the order they
 * were first added; the caller frees *out. */
KZ_WUR int mx_text(const struct mx *m, char **out, size_t *len);

/* collect.c: one daemon's status reply as metrics. */
struct mx_daemon {
	const char *name; /* kz-audit, kz-lease, kz-project, kz-egress */
	char sock[108];
};
extern const char *const mx_daemons[]; /* NULL-terminated */
/* kz_up and the daemon's metrics from its status reply (NULL: down). */
KZ_WUR int mx_collect(struct mx *m, const char *daemon, const cJSON *st);

#endif
