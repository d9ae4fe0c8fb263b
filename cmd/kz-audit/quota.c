/*
 * The writer's queue, shared by every peer, and each peer uid's share of
 * it.  Without a share one client allowed on the socket (any daemon of
 * the group, any caller of kz-run) could keep the queue full, and since
 * auditing is mandatory, every other daemon refused "busy" would refuse
 * to act.  A uid may hold at most AUD_UID_SHARE of the records queued;
 * past it that uid alone is told busy while the others still get in.
 * The writer takes the whole queue at once, so the counts are cleared
 * together (aud_quota_clear) rather than record by record.
 */
#include <string.h>

#include "kz_audit.h"
#include "audit.h"
#include "banned.h"

/* A share always holds the largest batch, and is never a whole queue. */
_Static_assert(AUD_UID_SHARE >= KZ_AUDIT_BATCH_MAX,
    "a uid's share must hold one whole batch");
_Static_assert(AUD_UID_SHARE < AUD_QUEUE_MAX,
    "one uid must not be able to fill the queue");

void
aud_quota_clear(struct aud_quota *q)
{
	q->queued = 0;
	q->nuids = 0;
}

/*
 * Whether uid may queue n more records: AUD_Q_OK (and counted),
 * AUD_Q_SHARE when uid would hold more than its share, AUD_Q_FULL when
 * the queue has no room.  The share is checked first: a uid past it is
 * told so even when the queue is also full.
 */
enum aud_quota_res
aud_quota_admit(struct aud_quota *q, uid_t uid, size_t n)
{
	size_t i;

	for (i = 0; i < q->nuids && q->by_uid[i].uid != uid; i++)
		;
	if ((i < q->nuids ? q->by_uid[i].held : 0) + n > AUD_UID_SHARE)
		return AUD_Q_SHARE;
	if (q->queued + n > AUD_QUEUE_MAX)
		return AUD_Q_FULL;
	/* Every uid in the table holds at least one queued record, so the
	 * table, as long as the queue, cannot overflow. */
	if (i == q->nuids) {
		q->by_uid[i].uid = uid;
		q->by_uid[i].held = 0;
		q->nuids++;
	}
	q->by_uid[i].held += n;
	q->queued += n;
	return AUD_Q_OK;
}

size_t
aud_quota_held(const struct aud_quota *q, uid_t uid)
{
	for (size_t i = 0; i < q->nuids; i++)
		if (q->by_uid[i].uid == uid)
			return q->by_uid[i].held;
	return 0;
}
