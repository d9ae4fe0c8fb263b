/*
 * Client side of kz-audit: send one event and wait until the sink says it is
 * durable (fsync'd).  Used by every binary that audits.
 *
 * Wire: {"v":1,"op":"append","id":ID,"kind":KIND,"event":{...}} answered by
 * {"v":1,"id":ID,"ok":true,"seq":N} once the record is on disk.
 *
 * Kinds form a closed set, each with a closed field schema (kz-audit(8)):
 *   dispatch, isolation_denial, lease, release, reset, retire,
 *   egress_refusal, projection, admission, verification, validation.
 * Correlation fields any kind may carry: actor_hash, conversation_hash,
 * audience_version, capability, manifest_digest, rid, outcome, reason.
 * A trusted caller may pass raw "actor", "conversation", "member" or
 * "session" ids instead of hashes: the sink hashes them with the keyed
 * identifier hash before anything is written.
 */
#ifndef KZ_AUDIT_H
#define KZ_AUDIT_H

#include <stddef.h>
#include <cJSON.h>

#include "kz_err.h"

#define KZ_AUDIT_TIMEOUT_MS 5000
/* Records in one append (records, kz-protocol(7)). */
#define KZ_AUDIT_BATCH_MAX 16

/* Returns 0 once acknowledged; KZ_EUNAVAIL when the sink is unreachable;
 * KZ_EDENIED when the sink refused the event (why names the field). */
KZ_WUR int kz_audit_send(const char *sock, const char *kind, const cJSON *event,
    int timeout_ms, char *why, size_t wlen);

/*
 * n records (1 to KZ_AUDIT_BATCH_MAX) in one append: the sink makes them
 * durable with one fdatasync and acknowledges them together (0 only when
 * every one is on disk; an error leaves the batch unacknowledged, which
 * is all a caller may conclude).  In two halves, like the ping: _send
 * connects and writes (an unreachable sink fails here) and sets *fd;
 * _wait reads the answer, with kz_audit_send's errors, and closes fd.
 */
KZ_WUR int kz_audit_batch_send(const char *sock, size_t n,
    const char *const kinds[], const cJSON *const events[], int timeout_ms,
    int *fd, char *why, size_t wlen);
KZ_WUR int kz_audit_batch_wait(int fd, size_t n, int timeout_ms, char *why,
    size_t wlen);

/* The sink answers a ping: 0, or KZ_EUNAVAIL with why. */
KZ_WUR int kz_audit_ping(const char *sock, int timeout_ms, char *why,
    size_t wlen);
/* The ping in two halves, for a caller with something to do while the
 * sink answers: _send connects and writes it (a sink that is not there
 * fails here, KZ_EUNAVAIL with why) and sets *fd; _wait reads the answer,
 * as kz_audit_ping would, and closes fd. */
KZ_WUR int kz_audit_ping_send(const char *sock, int timeout_ms, int *fd,
    char *why, size_t wlen);
KZ_WUR int kz_audit_ping_wait(int fd, int timeout_ms, char *why, size_t wlen);

#endif
