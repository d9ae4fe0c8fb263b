/*
 * Warm-run client for tests/bench/sandbox.sh: sends N "run /bin/true"
 * frames (with -w: N "wipe" frames, the reset between tenants) over one
 * connection to a kz-sandbox serve socket and prints the median and mean
 * round trip in milliseconds, or with -r every round trip on a line of its
 * own.  Built by the bench script.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

static int
full(int fd, void *b, size_t n, int rd)
{
	size_t o = 0;

	while (o < n) {
		ssize_t r = rd ? read(fd, (char *)b + o, n - o) :
		                 write(fd, (char *)b + o, n - o);

		if (r <= 0)
			return -1;
		o += (size_t)r;
	}
	return 0;
}

static double
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	static const char run[] = "{\"v\":1,\"op\":\"run\",\"id\":\"b\","
	                          "\"argv\":[\"/bin/true\"]}";
	static const char wipe[] = "{\"v\":1,\"op\":\"wipe\",\"id\":\"b\"}";
	bool w = argc > 3 && strcmp(argv[argc - 1], "-w") == 0;
	const char *req = w ? wipe : run,
	           *want = w ? "\"ok\":true" : "\"exit_code\":0";
	size_t rlen = strlen(req);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = argc > 2 ? atoi(argv[2]) : 200, fd;
	double *t, sum = 0;
	static char buf[1 << 20];

	if (argc < 2 || n < 1 || (t = calloc((size_t)n, sizeof(*t))) == NULL)
		return 2;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return 3;
	for (int i = 0; i < n; i++) {
		uint32_t len = htonl((uint32_t)rlen), rl;
		double s = now_ms();

		if (full(fd, &len, 4, 0) || full(fd, (void *)req, rlen, 0) ||
		    full(fd, &rl, 4, 1) || ntohl(rl) >= sizeof(buf) ||
		    full(fd, buf, ntohl(rl), 1))
			return 4;
		t[i] = now_ms() - s;
		sum += t[i];
		buf[ntohl(rl)] = 0;
		if (strstr(buf, want) == NULL) {
			fprintf(stderr, "bad reply: %.200s\n", buf);
			return 5;
		}
	}
	if (argc > 3 && strcmp(argv[3], "-r") == 0) {
		for (int i = 0; i < n; i++)
			printf("%.4f\n", t[i]);
		return 0;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp);
	printf("%.3f %.3f\n", t[n / 2], sum / n);
	return 0;
}
