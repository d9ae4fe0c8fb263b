/*
 * What a worker that never ran its own teardown (it was SIGKILLed) leaves
 * in the cgroup hierarchies, found and removed with the worker's own
 * configuration: the root and parent it was given, whatever they are.
 * Both layouts are looked at, v2 when the root is a cgroup2 mount and
 * each v1 hierarchy under it, so that the answer does not hang on which
 * version the worker chose.  Whatever still runs in them is killed at
 * once (cgroup.kill on v2; frozen, killed and thawed on v1) before the
 * directories are removed, deepest first.  The files limit of a run, the
 * bound kz-ctl-local holds against the host's file table, is here too:
 * it is the worker's configuration that decides it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"
#include "cgroup.h"
#include "kz_conf.h"
#include "kz_io.h"
#include "banned.h"

#define REAP_DEPTH 8
#define REAP_WAIT_MS 5000

/* Calls fn(dir, arg) on dir and every cgroup below it, deepest first;
 * -1 when any call, or the walk itself, failed. */
static int
walk(const char *dir, int depth, int (*fn)(const char *, void *), void *arg)
{
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > REAP_DEPTH)
		return -1;
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : -1;
	while ((de = readdir(d)) != NULL) {
		char p[PATH_MAX];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >=
		    sizeof(p)) {
			r = -1;
			continue;
		}
		r |= walk(p, depth + 1, fn, arg);
	}
	closedir(d);
	return fn(dir, arg) | r;
}

static int
kill_procs(const char *dir, void *arg)
{
	(void)arg;
	return sbx_cg_each_pid(dir, sbx_cg_kill9) < 0 && errno != ENOENT ? -1 :
	                                                                   0;
}

/* Adds the processes in dir to *(int *)arg (one for a cgroup that cannot
 * be read, so that it is never taken for empty). */
static int
count_procs(const char *dir, void *arg)
{
	int n = sbx_cg_each_pid(dir, NULL);

	*(int *)arg += n < 0 ? (errno == ENOENT ? 0 : 1) : n;
	return 0;
}

static int
rm_dir(const char *dir, void *arg)
{
	(void)arg;
	return rmdir(dir) == 0 || errno == ENOENT ? 0 : -1;
}

/* Adds p to dirs when it fits whole: a path cut short would name another
 * cgroup. */
static void
keep(char dirs[][PATH_MAX], int *n, const char *p)
{
	size_t l = strlen(p);

	if (l < PATH_MAX)
		memcpy(dirs[(*n)++], p, l + 1);
}

/* The worker's cgroup in each place it may be: v2 first, then each v1
 * hierarchy (cpu possibly as cpu,cpuacct).  Returns how many. */
static int
places(const struct sbx_conf *c, char dirs[][PATH_MAX], int max)
{
	static const char *const h[] = {"memory", "pids", "cpu", "cpu,cpuacct",
	    "freezer", "blkio", NULL};
	char p[PATH_MAX + 32];
	struct stat st;
	int n = 0;

	snprintf(p, sizeof(p), "%s/cgroup.controllers", c->cg_root);
	if (stat(p, &st) == 0) {
		snprintf(p, sizeof(p), "%s/%s/%s", c->cg_root, c->cg_parent,
		    c->id);
		keep(dirs, &n, p);
	}
	for (int i = 0; h[i] != NULL && n < max; i++) {
		/* cpu and cpu,cpuacct are often one mount, two names. */
		if (strcmp(h[i], "cpu,cpuacct") == 0) {
			snprintf(p, sizeof(p), "%s/cpu", c->cg_root);
			if (stat(p, &st) == 0)
				continue;
		}
		snprintf(p, sizeof(p), "%s/%s/%s/%s", c->cg_root, h[i],
		    c->cg_parent, c->id);
		keep(dirs, &n, p);
	}
	return n;
}

/* One kill of everything in the worker's cgroups: v2's cgroup.kill takes
 * a whole subtree at once; on v1 the frozen subtree cannot fork while
 * each member is killed. */
static void
kill_all(const struct sbx_conf *c, char dirs[][PATH_MAX], int n)
{
	char frz[PATH_MAX + 32];

	snprintf(frz, sizeof(frz), "%s/freezer/%s/%s", c->cg_root, c->cg_parent,
	    c->id);
	for (int i = 0; i < n; i++)
		(void)sbx_cg_wfile(dirs[i], "cgroup.kill", "1");
	(void)sbx_cg_wfile(frz, "freezer.state", "FROZEN");
	for (int i = 0; i < n; i++)
		(void)walk(dirs[i], 0, kill_procs, NULL);
	(void)sbx_cg_wfile(frz, "freezer.state", "THAWED");
}

int
sbx_reap(const struct sbx_conf *c, char *why, size_t wlen)
{
	char dirs[8][PATH_MAX];
	int n = places(c, dirs, 8), left = 0;
	int64_t end = kz_now_ms() + REAP_WAIT_MS;

	for (;;) {
		left = 0;
		for (int i = 0; i < n; i++)
			if (walk(dirs[i], 0, count_procs, &left) != 0) {
				kz_why(why, wlen,
				    "cannot read the worker's "
				    "cgroups");
				return KZ_ESYS;
			}
		if (left == 0 || kz_now_ms() >= end)
			break;
		kill_all(c, dirs, n);
		usleep(20000);
	}
	if (left != 0) {
		kz_why(why, wlen, "%d processes of the worker would not die",
		    left);
		return KZ_ESTATE;
	}
	for (int i = 0; i < n; i++)
		if (walk(dirs[i], 0, rm_dir, NULL) != 0) {
			kz_why(why, wlen,
			    "a cgroup of the worker could not be removed");
			return KZ_ESTATE;
		}
	return 0;
}

/*
 * The open files one run can hold: a descriptor each, up to nofile in each
 * of pids processes, and on top of those a mapping each (a mapping keeps
 * its file open after the descriptor is closed), up to vm.max_map_count
 * per process.  A file held by a mapping charges the run's memory cgroup
 * at least a struct file and a vm_area_struct, which bounds those by the
 * memory limit.  (Descriptors in flight over Unix sockets count against
 * nofile for the whole uid; io_uring is refused by the filter.)
 */
uint64_t
sbx_files_bound(const struct sbx_conf *c)
{
	char buf[32];
	int64_t maps = 0;
	uint64_t fds, mapped;

	if (kz_read_small("/proc/sys/vm/max_map_count", buf, sizeof(buf)) <= 0)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (kz_parse_int(buf, 0, INT32_MAX, &maps) != 0)
		maps = INT32_MAX;
	fds = (uint64_t)c->pids * (uint64_t)c->nofile;
	mapped = c->memory / (SBX_FILE_BYTES + SBX_VMA_BYTES);
	if (mapped > (uint64_t)c->pids * (uint64_t)maps)
		mapped = (uint64_t)c->pids * (uint64_t)maps;
	return fds + mapped;
}
