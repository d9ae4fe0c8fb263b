/*
 * The workers that exist on this host: the inventory (ctl_list, the
 * worker directories of ours), a worker whose agent has exited (ctl_gone,
 * a start that failed), and the delete, which stops every process of the
 * worker found by its command line, reaps what a killed one left behind
 * and removes its directory.  The create is in local.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_pool.h"
#include "kz_proc.h"
#include "kz_tree.h"
#include "ctl.h"
#include "banned.h"

static pid_t
read_pid(const char *dir)
{
	return (pid_t)ctl_read_num(dir, "pid", 2, 1 << 22);
}

/* Whether pid is still this worker's agent (not a recycled pid). */
static bool
is_worker(pid_t pid, const char *id)
{
	char p[64], buf[4096];
	ssize_t n, i;

	snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
	if ((n = kz_read_small(p, buf, sizeof(buf))) <= 0)
		return false;
	for (i = 0; i + 1 < n; i += (ssize_t)strlen(buf + i) + 1)
		if (strcmp(buf + i, "--id") == 0 && i + 5 < n &&
		    strcmp(buf + i + 5, id) == 0)
			return true;
	return false;
}

/*
 * The last non-empty line of the worker's log: the one line a worker that
 * could not start writes last (kz-sandbox: "isolation setup failed: ...").
 */
static void
last_line(const char *log, char *out, size_t len)
{
	char buf[4096], *e, *s;
	off_t end;
	ssize_t n;
	int fd;

	*out = '\0';
	if ((fd = open(log, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	n = pread(fd, buf, sizeof(buf) - 1,
	    end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (e = buf + n;
	     e > buf && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '); e--)
		e[-1] = '\0';
	s = strrchr(buf, '\n');
	s = s != NULL ? s + 1 : buf;
	snprintf(out, len, "%s", s);
	/* Control bytes would garble the log line this goes into. */
	for (e = out; *e != '\0'; e++)
		if ((unsigned char)*e < 0x20 || *e == 0x7f)
			*e = '?';
}

int
ctl_gone(const struct ctl_conf *c, const char *id, char *why, size_t wlen)
{
	char dir[PATH_MAX], log[PATH_MAX], keep[PATH_MAX + 24];
	char tmp[PATH_MAX + 48];
	pid_t pid;

	if (kz_pool_wpath(c->workers_dir, id, "", dir, sizeof(dir)) != 0 ||
	    kz_pool_wpath(c->workers_dir, id, "log", log, sizeof(log)) != 0)
		return 0;
	if ((pid = read_pid(dir)) <= 0 || is_worker(pid, id))
		return 0;
	last_line(log, why, wlen);
	if (*why == '\0')
		kz_why(why, wlen, "the worker exited without a word");
	/* The directory goes at the next reconcile: keep its log (a second
	 * name for the same file, swapped in whole) where an operator
	 * finds it after. */
	snprintf(keep, sizeof(keep), "%s/%s", c->workers_dir, CTL_FAILED_LOG);
	snprintf(tmp, sizeof(tmp), "%s.%s", keep, id);
	(void)unlink(tmp);
	if (link(log, tmp) == 0 && rename(tmp, keep) != 0)
		(void)unlink(tmp);
	return 1;
}

/* is_worker, as kz_proc_pids calls it. */
static bool
is_worker_at(pid_t pid, const void *id)
{
	return is_worker(pid, id);
}

/*
 * Every process that is this worker by its command line, found in /proc:
 * the pid file is not proof (a worker whose start failed half-way may
 * never have written it).  -1 when /proc cannot be read: then nobody can
 * tell whether the worker runs.
 */
static int
worker_pids(const char *id, pid_t *out, int max)
{
	return kz_proc_pids(is_worker_at, id, out, max);
}

/* Signals every process of the worker, then waits up to 2 s for them to
 * go; the number still there (-1: /proc unreadable). */
static int
stop_worker(const char *id, int sig)
{
	pid_t p[64];
	int n = worker_pids(id, p, 64);

	for (int i = 0; i < n; i++)
		(void)kill(p[i], sig);
	for (int t = 0; t < 40 && n > 0; t++) {
		usleep(50000);
		n = worker_pids(id, p, 64);
	}
	return n;
}

/*
 * A worker that had to be killed never ran its own teardown: what it
 * left in the cgroups (and whatever of the code still runs there) is
 * found with its own settings, which may name any cgroup root and parent
 * and either version (kz-sandbox reap), and every process of its host
 * uid, and of its second (a gvisor worker's, runsc's), is killed.  Its
 * ids, free again once the directory is gone, must find nothing of it.
 */
static int
reap(const struct ctl_conf *c, const char *id, const char *dir, int64_t hid,
    int64_t gv, char *why, size_t wlen)
{
	char out[8];
	int r;

	if (access(dir, F_OK) != 0 && errno == ENOENT)
		return 0;
	if ((r = ctl_sandbox(c, "reap", id, hid, "native", out, sizeof(out))) !=
	    0) {
		kz_why(why, wlen,
		    r < 0 ? "cannot run kz-sandbox reap" :
		            "the worker's cgroups could not be emptied");
		return KZ_ESTATE;
	}
	if (hid > 0 && (r = ctl_uid_kill(c, id, hid, why, wlen)) != 0)
		return r;
	return gv > 0 ? ctl_uid_kill(c, id, gv, why, wlen) : 0;
}

int
ctl_delete(const struct ctl_conf *c, const char *id, char *why, size_t wlen)
{
	char dir[PATH_MAX];
	int64_t hid, gv;
	int n, e;

	if (kz_pool_wpath(c->workers_dir, id, "", dir, sizeof(dir)) != 0)
		return KZ_EINVAL;
	hid = ctl_read_num(dir, "ids", 1, INT64_MAX);
	gv = ctl_read_num(dir, "gvids", 1, INT64_MAX);
	/* Absent only once no process of it is left, whatever its pid
	 * file says (or does not). */
	if ((n = stop_worker(id, SIGTERM)) > 0)
		n = stop_worker(id, SIGKILL);
	if (n != 0) {
		kz_why(why, wlen,
		    n < 0 ? "cannot tell whether the worker runs" :
		            "worker did not stop");
		return n < 0 ? KZ_EUNAVAIL : KZ_ESTATE;
	}
	if ((e = reap(c, id, dir, hid, gv, why, wlen)) != 0)
		return e;
	if (kz_tree_remove(AT_FDCWD, dir) != 0) {
		kz_why(why, wlen, "worker directory could not be removed");
		return KZ_ESYS;
	}
	if (access(dir, F_OK) == 0)
		return KZ_ESTATE;
	/* Gone: the host's record may give its uid out again. */
	if (hid > 0)
		ctl_host_release(c, id, hid);
	if (gv > 0)
		ctl_host_release(c, id, gv);
	return 0;
}

int
ctl_list(const struct ctl_conf *c, struct ctl_inv *inv, char *why, size_t wlen)
{
	struct dirent *de;
	DIR *d;

	inv->n = 0;
	if ((d = opendir(c->workers_dir)) == NULL) {
		if (errno == ENOENT)
			return 0;
		kz_why(why, wlen, "worker inventory unreadable");
		return KZ_EUNAVAIL;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;

		/* A worker is a directory of ours (not a log, not another
		 * daemon's file in a misconfigured workers dir). */
		if (de->d_name[0] == '.' || !kz_pool_id_ok(de->d_name) ||
		    strlen(de->d_name) >= sizeof(inv->id[0]) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
		        0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		/* More than fit: a cut list would leave workers uncounted
		 * and their host ids given out twice. */
		if (inv->n == CTL_INV_MAX) {
			closedir(d);
			inv->n = 0;
			kz_why(why, wlen,
			    "more than %d workers: the inventory does not fit",
			    CTL_INV_MAX);
			return KZ_EUNAVAIL;
		}
		memcpy(inv->id[inv->n++], de->d_name, strlen(de->d_name) + 1);
	}
	closedir(d);
	return 0;
}
