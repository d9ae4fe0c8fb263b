/*
 * The kernel's share of an honest lease cycle, for tests/bench/lease.sh
 * (b): what any reset that gives the next tenant fresh namespaces must pay
 * on this machine, with nothing of kz in it.  Each cycle makes new net,
 * IPC, UTS, mount and pid namespaces (the set kz-sandbox makes per lease),
 * brings the new loopback up, mounts the three fresh tmpfs instances
 * (workspace, /tmp, /dev/shm) and a proc for the new pid namespace, and
 * exits, so the namespaces are torn down again (the network namespace in
 * a kernel worker, which is why the whole machine's CPU is counted).
 * P processes run N cycles each, side by side.  Prints the cycles per
 * second and the machine's CPU per cycle in milliseconds.  Built by the
 * bench script; not part of the project's binaries.
 */
#define _GNU_SOURCE
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static double
now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Busy clock ticks of the whole machine (everything but idle and iowait). */
static unsigned long long
busy(void)
{
	unsigned long long v[10] = {0};
	FILE *f = fopen("/proc/stat", "r");

	if (f == NULL ||
	    fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
	        &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
		perror("nsfloor: /proc/stat");
		exit(3);
	}
	fclose(f);
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

static int
lo_up(void)
{
	struct ifreq r;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), e;

	memset(&r, 0, sizeof(r));
	snprintf(r.ifr_name, sizeof(r.ifr_name), "lo");
	e = s < 0 || ioctl(s, SIOCGIFFLAGS, &r) < 0 ? -1 : 0;
	r.ifr_flags |= IFF_UP;
	if (e == 0 && ioctl(s, SIOCSIFFLAGS, &r) < 0)
		e = -1;
	if (s >= 0)
		close(s);
	return e;
}

/* pid 1 of the new pid namespace: its mounts, then exit. */
static int
init_mounts(void)
{
	static const char *const sub[] = {"w", "t", "s"};
	char p[128];

	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, sub[i]);
		if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV,
		        "size=64m,mode=0755") < 0)
			return -1;
	}
	snprintf(p, sizeof(p), "%s/p", dir);
	return mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static int
cycle(void)
{
	pid_t pid = fork(), in;
	int st;

	if (pid == 0) {
		if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
		        CLONE_NEWNS | CLONE_NEWPID) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    sethostname("sandbox", 7) < 0 || lo_up() < 0)
			_exit(1);
		if ((in = fork()) == 0)
			_exit(init_mounts() < 0 ? 1 : 0);
		if (in < 0 || waitpid(in, &st, 0) < 0)
			_exit(1);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
	int procs = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 2;
	int n = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 500;
	static const char *const sub[] = {"w", "t", "s", "p"};
	unsigned long long b0, b1;
	double t0, t1;
	int st, bad = 0;
	char p[128];

	snprintf(dir, sizeof(dir), "/tmp/kz-nsfloor.XXXXXX");
	if (procs < 1 || n < 1 || mkdtemp(dir) == NULL) {
		fprintf(stderr, "usage: nsfloor [PROCS [N]]\n");
		return 3;
	}
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, sub[i]);
		mkdir(p, 0755);
	}
	b0 = busy();
	t0 = now_s();
	for (int i = 0; i < procs; i++)
		if (fork() == 0) {
			for (int k = 0; k < n; k++)
				if (cycle() != 0)
					_exit(1);
			_exit(0);
		}
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	t1 = now_s();
	/* The last network namespaces are torn down after their owners
	 * exit: a second for the kernel's workers to finish. */
	sleep(1);
	b1 = busy();
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, sub[i]);
		rmdir(p);
	}
	rmdir(dir);
	if (bad) {
		fprintf(stderr, "nsfloor: a cycle failed (run as root)\n");
		return 1;
	}
	printf("%.0f %.3f\n", procs * n / (t1 - t0),
	    (double)(b1 - b0) / sysconf(_SC_CLK_TCK) * 1000 / (procs * n));
	return 0;
}
