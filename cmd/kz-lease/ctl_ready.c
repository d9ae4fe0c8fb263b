/*
 * The health poll of a worker being created.  It stays in kz-lease, not
 * in the controller: health is the worker's own protocol (kz-sandbox(8)),
 * the same on every controller, and the check that the worker at the
 * endpoint names the id kz-lease asked for is what keeps a controller
 * from handing one worker to two owners (kz-controller(7)).
 */
#include <stdio.h>
#include <string.h>

#include "kz_call.h"
#include "kz_json.h"
#include "lease.h"
#include "banned.h"

int
ctl_ready(const char *endpoint, const char *id, int timeout_ms, char *gen,
    size_t glen, char *why, size_t wlen)
{
	cJSON *req, *rep = NULL;
	const cJSON *v;
	const char *wid = NULL;
	int e;

	if ((req = cJSON_CreateObject()) == NULL)
		return KZ_ENOMEM;
	cJSON_AddNumberToObject(req, "v", 1);
	cJSON_AddStringToObject(req, "op", "health");
	cJSON_AddStringToObject(req, "id", "kz-lease");
	e = kz_frame_call(endpoint, req, timeout_ms, &rep, why, wlen);
	cJSON_Delete(req);
	if (e != 0)
		return e;
	e = KZ_EPROTO;
	if (!cJSON_IsTrue(kz_json_get(rep, "ok")))
		goto out;
	if (kz_json_str_opt(rep, "worker", 64, NULL, &wid, NULL, 0) != 0 ||
	    wid == NULL)
		if (kz_json_str_opt(rep, "worker_id", 64, NULL, &wid, NULL,
		        0) != 0)
			wid = NULL;
	if (wid == NULL || strcmp(wid, id) != 0)
		goto out;
	v = kz_json_get(rep, "generation");
	if (cJSON_IsNumber(v))
		snprintf(gen, glen, "%.0f", v->valuedouble);
	else if (cJSON_IsString(v))
		snprintf(gen, glen, "%s", v->valuestring);
	else
		snprintf(gen, glen, "0");
	e = 0;
out:
	if (e != 0)
		kz_why(why, wlen, "worker health did not name it");
	cJSON_Delete(rep);
	return e;
}
