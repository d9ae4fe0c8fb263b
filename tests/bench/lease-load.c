/*
 * Load client for tests/bench/lease.sh: N threads, each on its own
 * connection to kz-lease, doing lease+release cycles for S seconds.
 *
 * Only honest cycles count: a lease counts when its worker was proven
 * clean by a reset since its previous lease, which the lease reply shows
 * as "clean_token" (the reset token under which the reset published it
 * warm; every reset has its own).  A lease of a worker fresh from creation
 * (no clean_token) is not counted, and a clean_token seen twice would mean
 * a worker was handed out twice on one reset: it is counted as "reused"
 * and the benchmark reports it.  A client told "busy" backs off (1 ms,
 * doubling to 16 ms), as a real client would, instead of spinning.
 *
 * Prints "cycles/s busy/s fresh reused".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cJSON.h>

#include "kz_frame.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_sock.h"

#define TOKENS_MAX (1 << 20)

static const char *path;
static int64_t end_ms;
static long cycles[256], busy[256], fresh[256];
static char **tokens;
static long ntokens;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static cJSON *
call(int fd, cJSON *req)
{
	cJSON *rep = NULL;

	if (kz_frame_write(fd, req, 1 << 20, 5000) != 0 ||
	    kz_frame_read(fd, 1 << 20, 5000, &rep, NULL, 0) != 0)
		rep = NULL;
	cJSON_Delete(req);
	return rep;
}

static cJSON *
request(const char *op)
{
	cJSON *q = cJSON_CreateObject();

	cJSON_AddNumberToObject(q, "v", 1);
	cJSON_AddStringToObject(q, "op", op);
	cJSON_AddStringToObject(q, "id", op);
	return q;
}

/* Keeps the lease's clean token; false for a fresh worker. */
static bool
keep_clean(const cJSON *r)
{
	const cJSON *c = kz_json_get(r, "clean_token");

	if (!cJSON_IsString(c))
		return false;
	pthread_mutex_lock(&mu);
	if (ntokens < TOKENS_MAX)
		tokens[ntokens++] = strdup(c->valuestring);
	pthread_mutex_unlock(&mu);
	return true;
}

static void *
client(void *arg)
{
	long k = (long)arg;
	useconds_t nap = 1000;
	char actor[32];
	bool clean;
	int fd;

	snprintf(actor, sizeof(actor), "a%ld", k);
	if (kz_sock_connect(path, 5000, &fd, NULL, 0) != 0)
		return NULL;
	while (kz_now_ms() < end_ms) {
		cJSON *q = request("lease"), *r, *s;

		/* KZ_LOAD_STATUS=1: status only, the daemon and store path
		 * without leases or resets. */
		if (getenv("KZ_LOAD_STATUS") != NULL) {
			cJSON_Delete(q);
			if ((r = call(fd, request("status"))) == NULL)
				break;
			cycles[k]++;
			cJSON_Delete(r);
			continue;
		}
		cJSON_AddStringToObject(q, "actor", actor);
		cJSON_AddStringToObject(q, "conversation", "c");
		if ((r = call(fd, q)) == NULL)
			break;
		if (!cJSON_IsTrue(kz_json_get(r, "ok"))) {
			busy[k]++;
			cJSON_Delete(r);
			usleep(nap);
			nap = nap < 16000 ? nap * 2 : nap;
			continue;
		}
		nap = 1000;
		clean = keep_clean(r);
		q = request("release");
		cJSON_AddItemToObject(q, "lease_id",
		    cJSON_Duplicate(kz_json_get(r, "lease_id"), 1));
		cJSON_AddItemToObject(q, "token",
		    cJSON_Duplicate(kz_json_get(r, "token"), 1));
		cJSON_Delete(r);
		if ((s = call(fd, q)) == NULL)
			break;
		if (cJSON_IsTrue(kz_json_get(s, "ok"))) {
			if (clean)
				cycles[k]++;
			else
				fresh[k]++;
		}
		cJSON_Delete(s);
	}
	close(fd);
	return NULL;
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
main(int argc, char **argv)
{
	pthread_t t[256];
	long i, n, c = 0, b = 0, f = 0, dup = 0;
	int64_t t0;
	double el;

	if (argc != 4)
		return 2;
	path = argv[1];
	n = strtol(argv[2], NULL, 10);
	if (n < 1 || n > 256 ||
	    (tokens = calloc(TOKENS_MAX, sizeof(*tokens))) == NULL)
		return 2;
	t0 = kz_now_ms();
	end_ms = t0 + (int64_t)(strtod(argv[3], NULL) * 1000);
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, client, (void *)i);
	for (i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		c += cycles[i];
		b += busy[i];
		f += fresh[i];
	}
	el = (double)(kz_now_ms() - t0) / 1000.0;
	qsort(tokens, (size_t)ntokens, sizeof(*tokens), cmp);
	for (i = 1; i < ntokens; i++)
		if (strcmp(tokens[i], tokens[i - 1]) == 0)
			dup++;
	/* A reused token's leases are not honest cycles either. */
	printf("%.0f %.0f %ld %ld\n", (double)(c - dup) / el, (double)b / el, f,
	    dup);
	return 0;
}
