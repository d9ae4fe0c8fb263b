/*
 * The floor of a warm kz-run for tests/bench/lease.sh: what any dispatch
 * that runs a program and makes two records durable must pay, measured on
 * this machine in the same run: one bare fork and exec of /bin/true, then
 * two appends each made durable with fdatasync(2) in DIR (the audit
 * directory's disk).  Prints the p50 and p99 of N rounds in milliseconds.
 * Built by the bench script; not part of the project's binaries.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
	static const char rec[] = "{\"kind\":\"dispatch\",\"floor\":true}\n";
	char path[4096];
	int n = argc > 2 ? atoi(argv[2]) : 200, fd;
	double *t;

	if (argc < 2 || n < 1 || (t = calloc((size_t)n, sizeof(*t))) == NULL)
		return 2;
	snprintf(path, sizeof(path), "%s/floor.%d", argv[1], (int)getpid());
	if ((fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) <
	    0)
		return 3;
	for (int i = 0; i < n; i++) {
		double s = now_ms();
		pid_t p = fork();
		int st;

		if (p == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (p < 0 || waitpid(p, &st, 0) != p || st != 0)
			return 4;
		for (int k = 0; k < 2; k++)
			if (write(fd, rec, sizeof(rec) - 1) !=
			        (ssize_t)sizeof(rec) - 1 ||
			    fdatasync(fd) != 0)
				return 5;
		t[i] = now_ms() - s;
	}
	close(fd);
	unlink(path);
	qsort(t, (size_t)n, sizeof(*t), cmp);
	printf("%.3f %.3f\n", t[n / 2], t[n * 99 / 100]);
	return 0;
}
