/*
 * What a worker holds of the host beyond its directory: its processes,
 * known by its host uid, and the open files its runs may take from the
 * host's one file table (fs.file-max).  Its cgroups and the bound on its
 * files are kz-sandbox's to know (reap and files), from the same settings
 * the worker is started with.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_pool.h"
#include "ctl.h"
#include "banned.h"

#define UID_WAIT_MS 3000

int
ctl_sandbox(const struct ctl_conf *c, const char *sub, const char *id,
    int64_t hid, const char *runtime, char *out, size_t olen)
{
	static struct ctl_argv a;
	char **env;
	ssize_t n = 0, r;
	pid_t pid;
	int p[2], st, fd;

	*out = '\0';
	if (ctl_worker_argv(c, sub, id, hid, &a) != 0 ||
	    (env = ctl_worker_env(c, runtime)) == NULL)
		return -1;
	if (pipe2(p, O_CLOEXEC) != 0) {
		ctl_worker_env_free(env);
		return -1;
	}
	if ((pid = fork()) == 0) {
		if ((fd = open("/dev/null", O_RDWR)) >= 0)
			dup2(fd, 0);
		dup2(p[1], 1);
		execve(a.av[0], a.av, env);
		_exit(127);
	}
	ctl_worker_env_free(env);
	close(p[1]);
	while (pid > 0 && (size_t)n + 1 < olen &&
	    ((r = read(p[0], out + n, olen - 1 - (size_t)n)) > 0 ||
	        (r < 0 && errno == EINTR)))
		n += r > 0 ? r : 0;
	close(p[0]);
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether /proc/<pid>/status shows a live process with uid in any of
 * its four user ids. */
static bool
runs_as(const char *pid, int64_t uid)
{
	char p[64], buf[2048], *l;
	unsigned long long u[4];

	snprintf(p, sizeof(p), "/proc/%s/status", pid);
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

/* The live processes of uid on the host; -1 when /proc cannot be read. */
static int
uid_count(int64_t uid)
{
	struct dirent *de;
	DIR *d = opendir("/proc");
	int64_t v;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (kz_parse_int(de->d_name, 1, INT32_MAX, &v) == 0 &&
		    runs_as(de->d_name, uid))
			n++;
	closedir(d);
	return n;
}

/*
 * kill(-1) as the uid itself: the kernel signals every process the
 * sender may signal, all in one pass under the task list lock, so none
 * of them forks away from it.
 */
static void
kill_as(int64_t uid)
{
	pid_t pid;
	int st;

	if ((pid = fork()) == 0) {
		if (setgroups(0, NULL) != 0 ||
		    setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) != 0 ||
		    setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0)
			_exit(1);
		(void)kill(-1, SIGKILL);
		_exit(0);
	}
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}

int
ctl_uid_kill(int64_t hid, char *why, size_t wlen)
{
	int64_t end = kz_now_ms() + UID_WAIT_MS;
	int n;

	while ((n = uid_count(hid)) > 0 && kz_now_ms() < end) {
		kill_as(hid);
		usleep(20000);
	}
	if (n < 0) {
		kz_why(why, wlen, "cannot tell whether the worker runs");
		return KZ_EUNAVAIL;
	}
	if (n > 0) {
		kz_why(why, wlen,
		    "%d processes of the worker's uid would not "
		    "die",
		    n);
		return KZ_ESTATE;
	}
	return 0;
}

/* A worker's recorded bound; -1 when it has none. */
static int64_t
files_of(const struct ctl_conf *c, const char *w)
{
	char p[PATH_MAX], buf[32];
	int64_t v;

	if (kz_pool_wpath(c->workers_dir, w, "files", p, sizeof(p)) != 0 ||
	    kz_read_small(p, buf, sizeof(buf)) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return kz_parse_int(buf, 0, INT64_MAX, &v) == 0 ? v : -1;
}

int
ctl_files_fit(const struct ctl_conf *c, const char *self, uint64_t files,
    char *why, size_t wlen)
{
	static struct ctl_inv inv;
	char buf[32];
	int64_t max;
	uint64_t sum = files, cap;

	if (kz_read_small("/proc/sys/fs/file-max", buf, sizeof(buf)) <= 0 ||
	    (buf[strcspn(buf, "\n")] = '\0',
	        kz_parse_int(buf, 1, INT64_MAX, &max)) != 0) {
		kz_why(why, wlen, "cannot read fs.file-max");
		return KZ_EDENIED;
	}
	if (ctl_list(c, &inv, why, wlen) != 0)
		return KZ_EDENIED;
	for (size_t i = 0; i < inv.n; i++) {
		int64_t f;

		if (strcmp(inv.id[i], self) == 0)
			continue;
		/* One started before the record: the settings of now. */
		f = files_of(c, inv.id[i]);
		sum += f >= 0 ? (uint64_t)f : files;
	}
	cap = (uint64_t)max / 100 * (uint64_t)c->files_share;
	if (sum > cap) {
		kz_why(why, wlen,
		    "the workers could hold %llu open files, more than "
		    "LEASE_FILES_SHARE %lld%% of fs.file-max (%lld): raise "
		    "fs.file-max or lower SANDBOX_MEMORY",
		    (unsigned long long)sum, (long long)c->files_share,
		    (long long)max);
		return KZ_EDENIED;
	}
	return 0;
}
