/*
 * One warm worker's process and what it leaves on the host (warm.c's
 * pool decides when): its directory beneath the state directory, the
 * `kz-sandbox serve` started in it, the reaping of that process once it
 * has ended and the removal of its directory, mount point and cgroups;
 * and, at serve's start, the same removal for every worker a previous
 * daemon left.  A worker is started and reaped by the pool's thread
 * alone (its parent-death signal is that thread's end) while it is
 * starting or stopping, when no invocation touches it, so nothing here
 * takes the pool's lock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_log.h"
#include "kz_tree.h"
#include "pkgrun.h"
#include "warm.h"
#include "banned.h"

#define START_MS 20000 /* a worker not ready by then is stopped */
#define TRACES_MS 2000 /* for a stopped worker's cgroups to empty */
#define ARGV_MAX 64

static int
pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/*
 * What a stopped worker leaves: its directory (socket, pid file, the
 * staged projection), the mount point of its root view and, when it had
 * to be killed, its cgroups (kz-sandbox(8): <parent>/<id> with init and
 * run below it, agent too on v2).  rmdir refuses a cgroup still in use.
 */
static void
remove_traces(const struct pr_conf *c, const char *name, const char *id)
{
	static const char *const ctrl[] = {"memory/", "pids/", "cpu/",
	    "freezer/", "blkio/", "", NULL};
	static const char *const sub[] = {"/run", "/init", "/agent", "", NULL};
	char p[PATH_MAX + 128];
	int64_t deadline = kz_now_ms() + TRACES_MS;
	int sfd;

	if ((sfd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >=
	    0) {
		snprintf(p, sizeof(p), "sandbox/%s", id);
		(void)unlinkat(sfd, p, AT_REMOVEDIR);
		snprintf(p, sizeof(p), "sandbox/%s.runsc", id);
		(void)unlinkat(sfd, p, AT_REMOVEDIR);
		if (kz_tree_remove(sfd, name) != 0)
			kz_log(KZ_LOG_WARN, "pkgrun.cleanup", KZ_ESYS,
			    "a worker's staging directory could not be removed",
			    NULL);
		close(sfd);
	}
	for (int i = 0; ctrl[i] != NULL; i++)
		for (int k = 0; sub[k] != NULL; k++) {
			snprintf(p, sizeof(p),
			    "/sys/fs/cgroup/%skz-pkgrun/%s%s", ctrl[i], id,
			    sub[k]);
			/* A killed worker's last processes may still be
			 * leaving the cgroup (EBUSY): wait for them, within
			 * one bound for the whole removal. */
			while (rmdir(p) != 0 && errno == EBUSY &&
			    kz_now_ms() < deadline)
				usleep(10000);
		}
}

/* Reaps a worker that has ended and removes what it left. */
void
pr_warm_reap(struct pr_pool *p, struct pr_worker *w)
{
	int st;

	if (w->pid > 0)
		while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
			;
	if (w->pidfd >= 0)
		close(w->pidfd);
	if (w->name[0] != '\0')
		remove_traces(p->c, w->name, w->id);
	w->pid = -1, w->pidfd = -1;
}

/* The worker's directory: NAME/{proj/{pkg,files}}, NAME 0700 and the
 * rest 0755 whatever the umask: the code's uid must traverse proj. */
static int
make_dirs(struct pr_pool *p, struct pr_worker *w)
{
	const struct pr_conf *c = p->c;
	static const char *const sub[] = {"proj", "proj/" PR_PKG_DIR,
	    "proj/" PR_FILES_DIR, NULL};
	char q[128], name[sizeof(w->name)];
	int sfd, r = KZ_ESYS;

	if (mkdir(c->state_dir, 0755) != 0 && errno != EEXIST)
		return KZ_ESYS;
	if ((sfd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return KZ_ESYS;
	if (mkdirat(sfd, "sandbox", 0755) != 0 && errno != EEXIST)
		goto out;
	if ((r = pr_mkdir_fresh(sfd, "warm", 0700, name, sizeof(name))) != 0)
		goto out;
	memcpy(w->name, name, sizeof(name));
	r = KZ_ESYS;
	for (int i = 0; sub[i] != NULL; i++) {
		snprintf(q, sizeof(q), "%s/%s", name, sub[i]);
		if (mkdirat(sfd, q, 0755) != 0 ||
		    fchmodat(sfd, q, 0755, AT_SYMLINK_NOFOLLOW) != 0)
			goto out;
	}
	snprintf(w->id, sizeof(w->id), "pkgrun-%s", name);
	snprintf(w->proj, sizeof(w->proj), "%s/%s/proj", c->state_dir, name);
	snprintf(w->pidf, sizeof(w->pidf), "%s/%s/pid", c->state_dir, name);
	if ((size_t)snprintf(w->sock, sizeof(w->sock), "%s/%s/sock",
	        c->state_dir, name) >= sizeof(w->sock)) {
		r = KZ_EPATH_LEN;
		goto out;
	}
	r = 0;
out:
	close(sfd);
	return r;
}

/* Starts kz-sandbox serve for w; it is ready once its pid file exists. */
int
pr_warm_spawn(struct pr_pool *p, struct pr_worker *w, char *why, size_t wlen)
{
	const struct pr_conf *c = p->c;
	const char *argv[ARGV_MAX];
	struct pr_exec x;
	int nul = -1, r;

	w->pid = -1, w->pidfd = -1, w->name[0] = '\0', w->killed = false;
	if ((r = make_dirs(p, w)) != 0) {
		kz_why(why, wlen, "cannot make a warm worker's directory");
		goto out;
	}
	memset(&x, 0, sizeof(x));
	x.staging = w->proj, x.id = w->id;
	x.uid = c->uid + w->slot, x.gid = c->gid + w->slot;
	if ((r = pr_serve_argv(c, &x, w->sock, w->pidf, argv, ARGV_MAX)) != 0 ||
	    (nul = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0 ||
	    (r = pr_exec_spawn(argv, nul, 2, -1, SIGTERM, &w->pid)) != 0 ||
	    (w->pidfd = pidfd_of(w->pid)) < 0) {
		kz_why(why, wlen, "cannot start kz-sandbox serve");
		r = r != 0 ? r : KZ_ESYS;
		goto out;
	}
	w->deadline_ms = kz_now_ms() + START_MS;
out:
	if (nul >= 0)
		close(nul);
	if (r != 0) {
		if (w->pid > 0)
			(void)kill(w->pid, SIGKILL);
		pr_warm_reap(p, w);
	}
	return r;
}

/* Whether pid is the kz-sandbox of sandbox id (not a recycled pid). */
static bool
is_worker(pid_t pid, const char *id)
{
	char p[64], buf[4096];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
	if ((n = kz_read_small(p, buf, sizeof(buf))) <= 0)
		return false;
	for (ssize_t i = 0; i + 1 < n; i += (ssize_t)strlen(buf + i) + 1)
		if (strcmp(buf + i, "--id") == 0 &&
		    i + 5 + (ssize_t)strlen(id) < n &&
		    strcmp(buf + i + 5, id) == 0)
			return true;
	return false;
}

/*
 * A daemon that was killed left its workers (they got SIGTERM as their
 * parent-death signal and stop by themselves) and their directories.
 * One daemon owns a state directory, so every warm-* in it is stale.
 */
void
pr_pool_sweep(const struct pr_conf *c)
{
	struct dirent *de;
	char p[PATH_MAX + 64], buf[32], id[48];
	int64_t v;
	DIR *d;

	if ((d = opendir(c->state_dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "warm-", 5) != 0 ||
		    strlen(de->d_name) > 24)
			continue;
		snprintf(id, sizeof(id), "pkgrun-%.24s", de->d_name);
		snprintf(p, sizeof(p), "%s/%.24s/pid", c->state_dir,
		    de->d_name);
		if (kz_read_small(p, buf, sizeof(buf)) > 0 &&
		    (buf[strcspn(buf, "\n")] = '\0',
		        kz_parse_int(buf, 2, 1 << 22, &v) == 0) &&
		    is_worker((pid_t)v, id)) {
			(void)kill((pid_t)v, SIGTERM);
			for (int i = 0; i < 100 && is_worker((pid_t)v, id); i++)
				usleep(50000);
			if (is_worker((pid_t)v, id))
				(void)kill((pid_t)v, SIGKILL);
			for (int i = 0; i < 100 && is_worker((pid_t)v, id); i++)
				usleep(50000);
		}
		remove_traces(c, de->d_name, id);
		kz_log(KZ_LOG_INFO, "pkgrun.sweep", 0,
		    "removed a warm worker a previous daemon left", NULL);
	}
	closedir(d);
}
