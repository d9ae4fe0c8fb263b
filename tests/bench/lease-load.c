/*
 * Load client for tests/bench/lease.sh: N threads, each on its own
 * connection to kz-lease, doing lease+release cycles for S seconds.
 * Prints "cycles/s busy/s".  Built by the benchmark against libkz.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cJSON.h>

#include "kz_frame.h"
#include "kz_json.h"
#include "kz_sock.h"

static const char *path;
static int64_t end_ms;
static long cycles[256], busy[256];

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

static void *
client(void *arg)
{
	long k = (long)arg;
	char actor[32];
	int fd;

	snprintf(actor, sizeof(actor), "a%ld", k);
	if (kz_sock_connect(path, 5000, &fd, NULL, 0) != 0)
		return NULL;
	while (kz_now_ms() < end_ms) {
		cJSON *q = cJSON_CreateObject(), *r, *s;

		/* KZ_LOAD_STATUS=1: status only, the daemon and store path
		 * without leases or resets. */
		if (getenv("KZ_LOAD_STATUS") != NULL) {
			cJSON_AddNumberToObject(q, "v", 1);
			cJSON_AddStringToObject(q, "op", "status");
			cJSON_AddStringToObject(q, "id", "s");
			if ((r = call(fd, q)) == NULL)
				break;
			cycles[k]++;
			cJSON_Delete(r);
			continue;
		}

		cJSON_AddNumberToObject(q, "v", 1);
		cJSON_AddStringToObject(q, "op", "lease");
		cJSON_AddStringToObject(q, "id", "l");
		cJSON_AddStringToObject(q, "actor", actor);
		cJSON_AddStringToObject(q, "conversation", "c");
		if ((r = call(fd, q)) == NULL)
			break;
		if (!cJSON_IsTrue(kz_json_get(r, "ok"))) {
			busy[k]++;
			cJSON_Delete(r);
			usleep(500);
			continue;
		}
		q = cJSON_CreateObject();
		cJSON_AddNumberToObject(q, "v", 1);
		cJSON_AddStringToObject(q, "op", "release");
		cJSON_AddStringToObject(q, "id", "r");
		cJSON_AddItemToObject(q, "lease_id", cJSON_Duplicate(
		    kz_json_get(r, "lease_id"), 1));
		cJSON_AddItemToObject(q, "token", cJSON_Duplicate(
		    kz_json_get(r, "token"), 1));
		cJSON_Delete(r);
		if ((s = call(fd, q)) == NULL)
			break;
		if (cJSON_IsTrue(kz_json_get(s, "ok")))
			cycles[k]++;
		cJSON_Delete(s);
	}
	close(fd);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[256];
	long i, n, c = 0, b = 0;
	int64_t t0;
	double el;

	if (argc != 4)
		return 2;
	path = argv[1];
	n = strtol(argv[2], NULL, 10);
	if (n < 1 || n > 256)
		return 2;
	t0 = kz_now_ms();
	end_ms = t0 + (int64_t)(strtod(argv[3], NULL) * 1000);
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, client, (void *)i);
	for (i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		c += cycles[i];
		b += busy[i];
	}
	el = (double)(kz_now_ms() - t0) / 1000.0;
	printf("%.0f %.0f\n", (double)c / el, (double)b / el);
	return 0;
}
