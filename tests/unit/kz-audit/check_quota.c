/* The writer's queue and each peer uid's share of it: a uid is held to
 * AUD_UID_SHARE records, past it that uid alone is told so while another
 * uid still gets in, the whole queue is bounded, and the writer taking
 * the queue gives every uid its share back. */
#include <check.h>
#include <stdlib.h>

#include "kz_audit.h"
#include "audit.h"
#include "kz_check.h"
#include "banned.h"

static struct aud_quota *
quota_new(void)
{
	struct aud_quota *q = calloc(1, sizeof(*q));

	ck_assert_ptr_nonnull(q);
	aud_quota_clear(q);
	return q;
}

/* Fills uid's share with batches of the largest size, then single ones. */
static void
fill_share(struct aud_quota *q, uid_t uid)
{
	size_t n = 0;

	while (n + KZ_AUDIT_BATCH_MAX <= AUD_UID_SHARE) {
		ck_assert_int_eq(aud_quota_admit(q, uid, KZ_AUDIT_BATCH_MAX),
		    AUD_Q_OK);
		n += KZ_AUDIT_BATCH_MAX;
	}
	for (; n < AUD_UID_SHARE; n++)
		ck_assert_int_eq(aud_quota_admit(q, uid, 1), AUD_Q_OK);
	ck_assert_uint_eq(aud_quota_held(q, uid), AUD_UID_SHARE);
}

START_TEST(test_share)
{
	struct aud_quota *q = quota_new();

	fill_share(q, 65534);
	ck_assert_int_eq(aud_quota_admit(q, 65534, 1), AUD_Q_SHARE);
	ck_assert_int_eq(aud_quota_admit(q, 65534, KZ_AUDIT_BATCH_MAX),
	    AUD_Q_SHARE);
	ck_assert_uint_eq(aud_quota_held(q, 65534), AUD_UID_SHARE);
	/* Another uid is not touched by the first one's share. */
	ck_assert_int_eq(aud_quota_admit(q, 0, 1), AUD_Q_OK);
	ck_assert_int_eq(aud_quota_admit(q, 0, KZ_AUDIT_BATCH_MAX), AUD_Q_OK);
	ck_assert_uint_eq(aud_quota_held(q, 0), KZ_AUDIT_BATCH_MAX + 1);
	ck_assert_uint_eq(q->queued, AUD_UID_SHARE + KZ_AUDIT_BATCH_MAX + 1);
	free(q);
}
END_TEST

/* A batch that would carry a uid past its share is refused whole. */
START_TEST(test_batch_over_share)
{
	struct aud_quota *q = quota_new();

	for (size_t n = 0; n < AUD_UID_SHARE - 1; n++)
		ck_assert_int_eq(aud_quota_admit(q, 7, 1), AUD_Q_OK);
	ck_assert_int_eq(aud_quota_admit(q, 7, 2), AUD_Q_SHARE);
	ck_assert_uint_eq(aud_quota_held(q, 7), AUD_UID_SHARE - 1);
	ck_assert_int_eq(aud_quota_admit(q, 7, 1), AUD_Q_OK);
	free(q);
}
END_TEST

/* Enough uids at their share fill the queue: the next is told full. */
START_TEST(test_full)
{
	struct aud_quota *q = quota_new();
	uid_t u = 1000;

	for (; q->queued < AUD_QUEUE_MAX; u++)
		fill_share(q, u);
	ck_assert_uint_eq(q->queued, AUD_QUEUE_MAX);
	ck_assert_int_eq(aud_quota_admit(q, u, 1), AUD_Q_FULL);
	ck_assert_uint_eq(aud_quota_held(q, u), 0);
	free(q);
}
END_TEST

/* As many uids as the queue has records, one record each: the table
 * holds them all. */
START_TEST(test_many_uids)
{
	struct aud_quota *q = quota_new();

	for (uid_t u = 0; u < AUD_QUEUE_MAX; u++)
		ck_assert_int_eq(aud_quota_admit(q, u, 1), AUD_Q_OK);
	ck_assert_int_eq(aud_quota_admit(q, AUD_QUEUE_MAX, 1), AUD_Q_FULL);
	ck_assert_uint_eq(q->nuids, AUD_QUEUE_MAX);
	free(q);
}
END_TEST

/* The writer took the queue: every uid has its whole share again. */
START_TEST(test_clear)
{
	struct aud_quota *q = quota_new();

	fill_share(q, 5);
	ck_assert_int_eq(aud_quota_admit(q, 5, 1), AUD_Q_SHARE);
	aud_quota_clear(q);
	ck_assert_uint_eq(aud_quota_held(q, 5), 0);
	fill_share(q, 5);
	free(q);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-audit quota");
	TCase *tc = tcase_create("quota");

	tcase_add_test(tc, test_share);
	tcase_add_test(tc, test_batch_over_share);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_many_uids);
	tcase_add_test(tc, test_clear);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
