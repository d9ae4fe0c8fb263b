/* The audit client against a scripted sink: acknowledgements, refusals,
 * unavailability and malformed replies map to distinct results. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kz_audit.h"
#include "kz_frame.h"
#include "kz_json.h"
#include "kz_sock.h"
#include "kz_check.h"
#include "banned.h"

static char dir[64], path[128];
static const char *canned; /* the reply the sink sends */
static const char *want = "append"; /* to the one op it answers */
static int lfd = -1;

static int batch_n; /* > 0: the append must be a batch of this many */

/* One record (kind and event), or a batch of batch_n of them. */
static bool
well_formed(const cJSON *req)
{
	const cJSON *recs = kz_json_get(req, "records"), *it;

	if (batch_n == 0)
		return recs == NULL &&
		    cJSON_IsObject(kz_json_get(req, "event"));
	if (kz_json_get(req, "event") != NULL || !cJSON_IsArray(recs) ||
	    cJSON_GetArraySize(recs) != batch_n)
		return false;
	cJSON_ArrayForEach(it, recs)
	{
		if (!cJSON_IsString(kz_json_get(it, "kind")) ||
		    !cJSON_IsObject(kz_json_get(it, "event")))
			return false;
	}
	return true;
}

static void *
sink(void *arg)
{
	cJSON *req = NULL, *rep;
	char why[128];
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (kz_fd_nonblock(fd, false) == 0 &&
	    kz_frame_read(fd, 1 << 20, 2000, &req, why, sizeof(why)) == 0) {
		/* The request must be a well-formed append. */
		const cJSON *op = kz_json_get(req, "op");

		if (cJSON_IsString(op) && strcmp(op->valuestring, want) == 0 &&
		    (strcmp(want, "ping") == 0 || well_formed(req)) &&
		    (rep = cJSON_Parse(canned)) != NULL) {
			if (kz_frame_write(fd, rep, 1 << 20, 2000) != 0)
				arg = NULL;
			cJSON_Delete(rep);
		}
	}
	cJSON_Delete(req);
	close(fd);
	return arg;
}

static int
send_with(const char *reply, char *why, size_t wlen)
{
	cJSON *ev = cJSON_Parse("{\"worker_id\":\"w\"}");
	pthread_t th;
	int r;

	canned = reply;
	ck_assert_int_eq(pthread_create(&th, NULL, sink, NULL), 0);
	r = kz_audit_send(path, "lease", ev, 2000, why, wlen);
	pthread_join(th, NULL);
	cJSON_Delete(ev);
	return r;
}

/* A ping answered with reply, in one call (split: in two halves). */
static int
ping_with(const char *reply, bool split, char *why, size_t wlen)
{
	pthread_t th;
	int r, fd = -1;

	canned = reply, want = "ping";
	ck_assert_int_eq(pthread_create(&th, NULL, sink, NULL), 0);
	if (!split)
		r = kz_audit_ping(path, 2000, why, wlen);
	else if ((r = kz_audit_ping_send(path, 2000, &fd, why, wlen)) == 0)
		r = kz_audit_ping_wait(fd, 2000, why, wlen);
	pthread_join(th, NULL);
	want = "append";
	return r;
}

/* A batch of n lease records answered with reply, in two halves. */
static int
batch_with(const char *reply, int n, char *why, size_t wlen)
{
	cJSON *ev = cJSON_Parse("{\"worker_id\":\"w\"}");
	const char *kinds[KZ_AUDIT_BATCH_MAX];
	const cJSON *evs[KZ_AUDIT_BATCH_MAX];
	pthread_t th;
	int r, fd = -1;

	for (int i = 0; i < n; i++)
		kinds[i] = "lease", evs[i] = ev;
	canned = reply, batch_n = n;
	ck_assert_int_eq(pthread_create(&th, NULL, sink, NULL), 0);
	if ((r = kz_audit_batch_send(path, (size_t)n, kinds, evs, 2000, &fd,
	         why, wlen)) == 0)
		r = kz_audit_batch_wait(fd, (size_t)n, 2000, why, wlen);
	pthread_join(th, NULL);
	batch_n = 0;
	cJSON_Delete(ev);
	return r;
}

static void
setup(void)
{
	char why[128];

	snprintf(dir, sizeof(dir), "/tmp/kzaud.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a.sock", dir);
	ck_assert_int_eq(kz_sock_listen(path, 4, &lfd, why, sizeof(why)), 0);
	ck_assert_int_eq(kz_fd_nonblock(lfd, false), 0);
}

static void
teardown(void)
{
	close(lfd);
	unlink(path);
	rmdir(dir);
}

START_TEST(test_ack)
{
	char why[128] = "";

	ck_assert_int_eq(send_with("{\"v\":1,\"id\":\"x\",\"ok\":true,"
	                           "\"seq\":5}",
	                     why, sizeof(why)),
	    0);
}
END_TEST

START_TEST(test_refused)
{
	char why[128] = "";

	ck_assert_int_eq(send_with("{\"v\":1,\"id\":\"x\",\"ok\":false,"
	                           "\"error\":\"refused\",\"reason\":\"field "
	                           "'x' is bad\"}",
	                     why, sizeof(why)),
	    KZ_EDENIED);
	ck_assert_str_eq(why, "field 'x' is bad");
}
END_TEST

START_TEST(test_unavailable)
{
	char why[128] = "";

	ck_assert_int_eq(send_with("{\"v\":1,\"id\":\"x\",\"ok\":false,"
	                           "\"error\":\"unavailable\",\"reason\":"
	                           "\"disk\"}",
	                     why, sizeof(why)),
	    KZ_EUNAVAIL);
}
END_TEST

START_TEST(test_malformed)
{
	char why[128] = "";

	/* ok without a seq is not an acknowledgement. */
	ck_assert_int_eq(send_with("{\"v\":1,\"id\":\"x\",\"ok\":true}", why,
	                     sizeof(why)),
	    KZ_EPROTO);
}
END_TEST

START_TEST(test_no_sink)
{
	cJSON *ev = cJSON_CreateObject();
	char why[128] = "", p[160];

	snprintf(p, sizeof(p), "%s/none.sock", dir);
	ck_assert_int_eq(kz_audit_send(p, "lease", ev, 500, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_int_eq(kz_audit_send(NULL, "lease", ev, 500, why,
	                     sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_audit_send(p, "lease", NULL, 500, why, sizeof(why)),
	    KZ_EINVAL);
	cJSON_Delete(ev);
}
END_TEST

/* _i: 0 the one call, 1 the two halves. */
START_TEST(test_ping)
{
	char why[128] = "", p[160];
	int fd = -1;

	ck_assert_int_eq(ping_with("{\"v\":1,\"id\":\"ping\",\"ok\":true}", _i,
	                     why, sizeof(why)),
	    0);
	why[0] = '\0';
	ck_assert_int_eq(ping_with("{\"v\":1,\"id\":\"ping\",\"ok\":false,"
	                           "\"error\":\"unavailable\",\"reason\":"
	                           "\"read-only\"}",
	                     _i, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_str_eq(why, "the sink refused a ping: read-only");
	snprintf(p, sizeof(p), "%s/none.sock", dir);
	ck_assert_int_eq(_i ?
	        kz_audit_ping_send(p, 500, &fd, why, sizeof(why)) :
	        kz_audit_ping(p, 500, why, sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_int_eq(fd, -1);
}
END_TEST

START_TEST(test_batch)
{
	const char *kinds[KZ_AUDIT_BATCH_MAX + 1];
	const cJSON *evs[KZ_AUDIT_BATCH_MAX + 1];
	cJSON *ev = cJSON_CreateObject();
	char why[128] = "", p[160];
	int fd = 0;

	ck_assert_int_eq(batch_with("{\"v\":1,\"id\":\"x\",\"ok\":true,"
	                            "\"seq\":7,\"seqs\":[5,6,7]}",
	                     3, why, sizeof(why)),
	    0);
	/* An acknowledgement that does not name every record is none. */
	ck_assert_int_eq(batch_with("{\"v\":1,\"id\":\"x\",\"ok\":true,"
	                            "\"seq\":6,\"seqs\":[5,6]}",
	                     3, why, sizeof(why)),
	    KZ_EPROTO);
	ck_assert_int_eq(batch_with("{\"v\":1,\"id\":\"x\",\"ok\":true,"
	                            "\"seq\":5}",
	                     1, why, sizeof(why)),
	    KZ_EPROTO);
	ck_assert_int_eq(batch_with("{\"v\":1,\"id\":\"x\",\"ok\":false,"
	                            "\"error\":\"refused\",\"reason\":"
	                            "\"record 1: field 'x' is bad\"}",
	                     2, why, sizeof(why)),
	    KZ_EDENIED);
	ck_assert_str_eq(why, "record 1: field 'x' is bad");
	for (int i = 0; i <= KZ_AUDIT_BATCH_MAX; i++)
		kinds[i] = "lease", evs[i] = ev;
	snprintf(p, sizeof(p), "%s/none.sock", dir);
	ck_assert_int_eq(kz_audit_batch_send(p, 2, kinds, evs, 500, &fd, why,
	                     sizeof(why)),
	    KZ_EUNAVAIL);
	ck_assert_int_eq(fd, -1);
	ck_assert_int_eq(kz_audit_batch_send(path, 0, kinds, evs, 500, &fd, why,
	                     sizeof(why)),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_audit_batch_send(path, KZ_AUDIT_BATCH_MAX + 1,
	                     kinds, evs, 500, &fd, why, sizeof(why)),
	    KZ_EINVAL);
	evs[1] = NULL;
	ck_assert_int_eq(kz_audit_batch_send(path, 2, kinds, evs, 500, &fd, why,
	                     sizeof(why)),
	    KZ_EINVAL);
	cJSON_Delete(ev);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("audit client");
	TCase *tc = tcase_create("audit");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ack);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_unavailable);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_no_sink);
	tcase_add_loop_test(tc, test_ping, 0, 2);
	tcase_add_test(tc, test_batch);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
