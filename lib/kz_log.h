/*
 * Structured logging: one JSON object per line on stderr with ts, level, bin,
 * event, context fields, err (the kz_err name) and msg last.  Only binaries
 * log; libraries return errors.  Never pass secrets, file bytes, stdout, env
 * values, raw member ids or URL paths.
 */
#ifndef KZ_LOG_H
#define KZ_LOG_H

#include <cJSON.h>

enum kz_log_level { KZ_LOG_DEBUG, KZ_LOG_INFO, KZ_LOG_WARN, KZ_LOG_ERROR };

/* Sets the bin field and the minimum level (KZ_LOG_LEVEL env overrides). */
void kz_log_init(const char *bin, enum kz_log_level min);
/* Sets the request id carried by following lines of this thread (or NULL). */
void kz_log_set_rid(const char *rid);

/*
 * kz_log(level, event, err, msg, key1, val1, ..., NULL): values are strings
 * (NULL values are skipped).  err is a kz_err (0 for none).
 */
void kz_log(enum kz_log_level lvl, const char *event, int err, const char *msg,
    ...) __attribute__((sentinel));
/* Same with the context fields in a cJSON object (not consumed). */
void kz_log_obj(enum kz_log_level lvl, const char *event, int err,
    const cJSON *fields, const char *msg);

#endif
