/*
 * The host's processes from /proc (kz_proc.h).
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_proc.h"
#include "banned.h"

int
kz_proc_pids(bool (*match)(pid_t, const void *), const void *arg, pid_t *out,
    int max)
{
	struct dirent *de;
	DIR *d = opendir("/proc");
	int64_t v;
	int n = 0;

	if (d == NULL)
		return -1;
	while (n < max && (de = readdir(d)) != NULL)
		if (kz_parse_int(de->d_name, 1, INT32_MAX, &v) == 0 &&
		    match((pid_t)v, arg)) {
			if (out != NULL)
				out[n] = (pid_t)v;
			n++;
		}
	closedir(d);
	return n;
}

/* Whether /proc/<pid>/status shows a live process with uid (an int64_t
 * at uidp) in any of its four user ids. */
static bool
runs_as(pid_t pid, const void *uidp)
{
	int64_t uid = *(const int64_t *)uidp;
	char p[64], buf[2048], *l;
	unsigned long long u[4];

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	if (kz_read_small(p, buf, sizeof(buf)) <= 0)
		return false;
	if ((l = strstr(buf, "\nState:\t")) != NULL && l[8] == 'Z')
		return false;
	if ((l = strstr(buf, "\nUid:\t")) == NULL ||
	    sscanf(l + 6, "%llu %llu %llu %llu", &u[0], &u[1], &u[2], &u[3]) !=
	        4)
		return false;
	for (int i = 0; i < 4; i++)
		if (u[i] == (unsigned long long)uid)
			return true;
	return false;
}

int
kz_proc_uid_live(int64_t uid, int max)
{
	return kz_proc_pids(runs_as, &uid, NULL, max);
}
