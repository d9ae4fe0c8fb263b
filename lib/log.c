#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "kz_err.h"
#include "kz_json.h"
#include "kz_log.h"
#include "banned.h"

static const char *log_bin = "kz";
static enum kz_log_level log_min = KZ_LOG_INFO;
static __thread char log_rid[80];

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
kz_log_init(const char *bin, enum kz_log_level min)
{
	const char *env = getenv("KZ_LOG_LEVEL");

	log_bin = bin;
	log_min = min;
	for (int i = 0; env != NULL && i < 4; i++)
		if (strcasecmp(env, level_names[i]) == 0)
			log_min = (enum kz_log_level)i;
}

void
kz_log_set_rid(const char *rid)
{
	if (rid == NULL)
		log_rid[0] = '\0';
	else
		snprintf(log_rid, sizeof(log_rid), "%s", rid);
}

static void
add_ts(cJSON *o)
{
	struct timespec ts;
	struct tm tm;
	char buf[64];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	    tm.tm_sec, ts.tv_nsec / 1000000);
	cJSON_AddStringToObject(o, "ts", buf);
}

static void
emit(cJSON *o)
{
	char *s = kz_json_print(o);

	if (s != NULL) {
		/* One write per line so concurrent writers do not interleave.
		 */
		size_t n = strlen(s);

		s[n] = '\n';
		if (write(STDERR_FILENO, s, n + 1) < 0) {
			/* Nowhere left to report a failed log write. */
		}
		free(s);
	}
}

static cJSON *
head(enum kz_log_level lvl, const char *event)
{
	cJSON *o = cJSON_CreateObject();

	if (o == NULL)
		return NULL;
	add_ts(o);
	cJSON_AddStringToObject(o, "level", level_names[lvl]);
	cJSON_AddStringToObject(o, "bin", log_bin);
	cJSON_AddStringToObject(o, "event", event);
	if (log_rid[0] != '\0')
		cJSON_AddStringToObject(o, "rid", log_rid);
	return o;
}

static void
tail(cJSON *o, int err, const char *msg)
{
	if (err != 0)
		cJSON_AddStringToObject(o, "err", kz_errname(err));
	if (msg != NULL)
		cJSON_AddStringToObject(o, "msg", msg);
}

void
kz_log(enum kz_log_level lvl, const char *event, int err, const char *msg, ...)
{
	va_list ap;
	const char *k;
	cJSON *o;

	if (lvl < log_min || (o = head(lvl, event)) == NULL)
		return;
	va_start(ap, msg);
	while ((k = va_arg(ap, const char *)) != NULL) {
		const char *v = va_arg(ap, const char *);

		if (v != NULL)
			cJSON_AddStringToObject(o, k, v);
	}
	va_end(ap);
	tail(o, err, msg);
	emit(o);
	cJSON_Delete(o);
}

void
kz_log_obj(enum kz_log_level lvl, const char *event, int err,
    const cJSON *fields, const char *msg)
{
	cJSON *o;

	if (lvl < log_min || (o = head(lvl, event)) == NULL)
		return;
	for (const cJSON *c = fields ? fields->child : NULL; c; c = c->next)
		cJSON_AddItemToObject(o, c->string, cJSON_Duplicate(c, 1));
	tail(o, err, msg);
	emit(o);
	cJSON_Delete(o);
}
