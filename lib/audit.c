/*
 * The audit client: one connection, one append, one reply.  The sink
 * answers only once the record is fsync'd, so a 0 here means durable.
 */
#include <string.h>
#include <sodium.h>

#include "kz_audit.h"
#include "kz_call.h"
#include "kz_json.h"
#include "kz_key.h"
#include "banned.h"

/* kind and event into o (the request, or one record of a batch). */
static bool
add_record(cJSON *o, const char *kind, const cJSON *event)
{
	return cJSON_AddStringToObject(o, "kind", kind) &&
	    cJSON_AddItemToObject(o, "event", cJSON_Duplicate(event, true));
}

/* An append with a random id: one record (kind and event beside the
 * envelope), or with batch n of them under records. */
static cJSON *
build_request(size_t n, const char *const kinds[], const cJSON *const events[],
    bool batch)
{
	unsigned char rnd[8];
	char id[sizeof(rnd) * 2 + 1];
	cJSON *req = cJSON_CreateObject(), *a = NULL, *r;

	if (req == NULL || sodium_init() < 0)
		goto fail;
	randombytes_buf(rnd, sizeof(rnd));
	kz_hex(rnd, sizeof(rnd), id);
	if (!cJSON_AddNumberToObject(req, "v", 1) ||
	    !cJSON_AddStringToObject(req, "op", "append") ||
	    !cJSON_AddStringToObject(req, "id", id) ||
	    (batch && (a = cJSON_AddArrayToObject(req, "records")) == NULL))
		goto fail;
	if (!batch && !add_record(req, kinds[0], events[0]))
		goto fail;
	for (size_t i = 0; batch && i < n; i++)
		if ((r = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddItemToArray(a, r) ||
		    !add_record(r, kinds[i], events[i]))
			goto fail;
	return req;
fail:
	cJSON_Delete(req);
	return NULL;
}

/* A batch's reply names one seq per record. */
static bool
has_seqs(const cJSON *rep, size_t n)
{
	const cJSON *a = kz_json_get(rep, "seqs"), *it;

	if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) != n)
		return false;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsNumber(it))
			return false;
	}
	return true;
}

/* Maps the sink's reply to 0 or an error, with its reason in why; n is
 * the batch's size, 0 for a single append. */
static int
read_reply(const cJSON *rep, size_t n, char *why, size_t wlen)
{
	const cJSON *ok = kz_json_get(rep, "ok");
	const cJSON *err = kz_json_get(rep, "error");
	const cJSON *reason = kz_json_get(rep, "reason");

	if (cJSON_IsTrue(ok) && cJSON_IsNumber(kz_json_get(rep, "seq")) &&
	    (n == 0 || has_seqs(rep, n)))
		return 0;
	if (!cJSON_IsFalse(ok) || !cJSON_IsString(err)) {
		kz_why(why, wlen, "audit sink sent a malformed reply");
		return KZ_EPROTO;
	}
	kz_why(why, wlen, "%.200s",
	    cJSON_IsString(reason) ? reason->valuestring : err->valuestring);
	if (strcmp(err->valuestring, KZ_WE_REFUSED) == 0 ||
	    strcmp(err->valuestring, KZ_WE_BAD_REQUEST) == 0)
		return KZ_EDENIED;
	if (strcmp(err->valuestring, KZ_WE_UNAVAILABLE) == 0 ||
	    strcmp(err->valuestring, KZ_WE_BUSY) == 0)
		return KZ_EUNAVAIL;
	return KZ_EPROTO;
}

/* Unreachable, silent or cut off: not acknowledged. */
static int
unreachable(int r, char *why, size_t wlen)
{
	if (r == KZ_ENOMEM)
		return r;
	kz_why(why, wlen, "audit sink unavailable (%s)", kz_strerror(r));
	return KZ_EUNAVAIL;
}

int
kz_audit_send(const char *sock, const char *kind, const cJSON *event,
    int timeout_ms, char *why, size_t wlen)
{
	cJSON *req = NULL, *rep = NULL;
	int r;

	if (sock == NULL || sock[0] == '\0' || kind == NULL ||
	    !cJSON_IsObject(event)) {
		kz_why(why, wlen, "no audit socket, kind or event");
		return KZ_EINVAL;
	}
	if ((req = build_request(1, &kind, &event, false)) == NULL)
		return KZ_ENOMEM;
	r = kz_frame_call(sock, req, timeout_ms, &rep, why, wlen);
	r = r == 0 ? read_reply(rep, 0, why, wlen) : unreachable(r, why, wlen);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return r;
}

int
kz_audit_batch_send(const char *sock, size_t n, const char *const kinds[],
    const cJSON *const events[], int timeout_ms, int *fd, char *why,
    size_t wlen)
{
	cJSON *req;
	int r;

	*fd = -1;
	if (sock == NULL || sock[0] == '\0' || n == 0 ||
	    n > KZ_AUDIT_BATCH_MAX) {
		kz_why(why, wlen, "no audit socket, or a batch of %zu records",
		    n);
		return KZ_EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (kinds[i] == NULL || !cJSON_IsObject(events[i])) {
			kz_why(why, wlen, "record %zu has no kind or event", i);
			return KZ_EINVAL;
		}
	if ((req = build_request(n, kinds, events, true)) == NULL)
		return KZ_ENOMEM;
	r = kz_frame_send(sock, req, timeout_ms, fd, why, wlen);
	cJSON_Delete(req);
	return r == 0 ? 0 : unreachable(r, why, wlen);
}

int
kz_audit_batch_wait(int fd, size_t n, int timeout_ms, char *why, size_t wlen)
{
	cJSON *rep = NULL;
	int r;

	r = kz_frame_recv(fd, timeout_ms, &rep, why, wlen);
	r = r == 0 ? read_reply(rep, n, why, wlen) : unreachable(r, why, wlen);
	cJSON_Delete(rep);
	return r;
}

/* A sink that did not answer the ping as it should: KZ_EUNAVAIL, why. */
static int
ping_reply(int r, const cJSON *rep, char *why, size_t wlen)
{
	const char *reason;

	if (r == 0 && !cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		reason = cJSON_GetStringValue(kz_json_get(rep, "reason"));
		kz_why(why, wlen, "the sink refused a ping: %.160s",
		    reason != NULL ? reason : "?");
		return KZ_EUNAVAIL;
	}
	if (r != 0 && r != KZ_ENOMEM) {
		/* The frame layer's own reason (a refused connect says why). */
		if (why != NULL && wlen > 0 && why[0] == '\0')
			kz_why(why, wlen, "%s", kz_strerror(r));
		return KZ_EUNAVAIL;
	}
	return r;
}

static cJSON *
ping_request(void)
{
	cJSON *req = cJSON_CreateObject();

	if (req == NULL || !cJSON_AddNumberToObject(req, "v", 1) ||
	    !cJSON_AddStringToObject(req, "op", "ping") ||
	    !cJSON_AddStringToObject(req, "id", "ping")) {
		cJSON_Delete(req);
		return NULL;
	}
	return req;
}

int
kz_audit_ping(const char *sock, int timeout_ms, char *why, size_t wlen)
{
	int fd, r;

	if ((r = kz_audit_ping_send(sock, timeout_ms, &fd, why, wlen)) != 0)
		return r;
	return kz_audit_ping_wait(fd, timeout_ms, why, wlen);
}

int
kz_audit_ping_send(const char *sock, int timeout_ms, int *out_fd, char *why,
    size_t wlen)
{
	cJSON *req = ping_request();
	int r;

	if (req == NULL)
		return KZ_ENOMEM;
	r = kz_frame_send(sock, req, timeout_ms, out_fd, why, wlen);
	cJSON_Delete(req);
	return r == 0 ? 0 : ping_reply(r, NULL, why, wlen);
}

int
kz_audit_ping_wait(int fd, int timeout_ms, char *why, size_t wlen)
{
	cJSON *rep = NULL;
	int r;

	r = kz_frame_recv(fd, timeout_ms, &rep, why, wlen);
	r = ping_reply(r, rep, why, wlen);
	cJSON_Delete(rep);
	return r;
}
