/*
 * The resource envelope.  Each served worker has a cgroup <parent>/<id>
 * holding the agent alone, a child <parent>/<id>/init holding the run
 * namespace's init, and a child <parent>/<id>/run holding every process of
 * the code, with the memory, pids and cpu limits on it.  A one-shot run
 * (whose agent and init stay where they were started) has only
 * <parent>/<id>, which is its run cgroup: a third of the cgroups to make and
 * remove, in each hierarchy.  cgroup v2 is
 * used when its root offers memory, pids and cpu; otherwise the v1
 * hierarchies memory, pids, cpu and freezer must all be mounted.  Anything
 * else fails closed.  This file holds the layout, the selection of the
 * version and the agent's use of the cgroups; each version's controller
 * files, limits and kill are in cgroup_v1.c and cgroup_v2.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sbx.h"
#include "cgroup.h"
#include "kz_io.h"
#include "banned.h"

/* The version's controller files, limits and kill (cgroup_v1.c,
 * cgroup_v2.c); the layout and its life are common. */
static const struct sbx_cg_ver *
ver(const struct sbx_cg *g)
{
	return g->v2 ? &sbx_cg_v2 : &sbx_cg_v1;
}

int
sbx_cg_wfile(const char *dir, const char *file, const char *val)
{
	char p[PATH_MAX];
	int fd, r = 0;
	size_t n = strlen(val);

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p))
		return KZ_ETOOBIG;
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
		return KZ_ESYS;
	if (write(fd, val, n) != (ssize_t)n)
		r = KZ_ESYS;
	close(fd);
	return r;
}

ssize_t
sbx_cg_rfile(const char *dir, const char *file, char *buf, size_t len)
{
	char p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p))
		return -1;
	return kz_read_small(p, buf, len);
}

/* Reads a kept descriptor from the start; -1 when closed or failing. */
static ssize_t
rfd(int fd, char *buf, size_t len)
{
	ssize_t n;

	if (fd < 0 || (n = pread(fd, buf, len - 1, 0)) < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The value after "key " in a flat-keyed file; 0 when absent. */
static uint64_t
keyed_fd(int fd, const char *key)
{
	char buf[4096], *p;
	size_t kl = strlen(key);

	if (rfd(fd, buf, sizeof(buf)) < 0)
		return 0;
	for (p = buf; p != NULL && *p != '\0';
	     p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoull(p + kl + 1, NULL, 10);
	return 0;
}

void
sbx_cg_init(struct sbx_cg *g)
{
	memset(g, 0, sizeof(*g));
	for (int i = 0; i < SBX_CG_N; i++)
		g->procs_fd[i] = -1;
	g->peak_fd = g->oom_fd = g->pev_fd = g->count_fd = -1;
}

static int
open_at(const char *dir, const char *file, int flags)
{
	char p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p))
		return -1;
	return open(p, flags | O_CLOEXEC);
}

/* The descriptors of the agent's per-run accounting. */
static int
stat_fds(struct sbx_cg *g)
{
	const struct sbx_cg_ver *v = ver(g);

	g->peak_fd = open_at(g->run[v->mem], v->peak, O_RDWR);
	g->oom_fd = open_at(g->run[v->mem], v->oom, O_RDONLY);
	g->pev_fd = open_at(g->run[v->pids], "pids.events", O_RDONLY);
	g->count_fd = open_at(g->run[v->pids], "pids.current", O_RDONLY);
	return (g->peak_fd < 0 && !v->peak_optional) || g->oom_fd < 0 ||
	        g->pev_fd < 0 || g->count_fd < 0 ?
	    KZ_ESYS :
	    0;
}

/* The agent's current cgroup in hierarchy i, from /proc/self/cgroup. */
static int
own_cgroup(const struct sbx_cg *g, bool v2, int i, char *out, size_t len)
{
	char buf[4096], *line, *save = NULL;
	int fd;
	ssize_t n;

	if ((fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC)) < 0)
		return KZ_ESYS;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return KZ_ESYS;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'),
		     *c2 = c1 ? strchr(c1 + 1, ':') : 0;
		bool hit;

		if (c2 == NULL)
			continue;
		*c2 = '\0';
		hit = v2 ? strcmp(c1 + 1, "") == 0 :
		           strcmp(c1 + 1, sbx_cg_v1_name[i]) == 0 ||
		        (i == SBX_CG_CPU && strcmp(c1 + 1, "cpu,cpuacct") == 0);
		if (hit) {
			int w = v2 ?
			    snprintf(out, len, "%s%s", g->root, c2 + 1) :
			    snprintf(out, len, "%s/%s%s", g->root, c1 + 1,
			        c2 + 1);

			return w >= 0 && (size_t)w < len ? 0 : KZ_ETOOBIG;
		}
	}
	return KZ_ENOENT;
}

const char *
sbx_cg_relpath(const struct sbx_conf *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", c->cg_parent, c->id);
	return buf;
}

/* Whether <id> has the children of a served worker. */
static bool
served_layout(const struct sbx_cg *g)
{
	char p[PATH_MAX + 8];
	struct stat st;

	snprintf(p, sizeof(p), "%s/run", g->worker[0]);
	return stat(p, &st) == 0;
}

/* Makes a directory; *fresh is cleared when it was there already. */
static int
mk(const char *p, bool *fresh)
{
	if (mkdir(p, 0755) == 0)
		return 0;
	*fresh = false;
	return errno == EEXIST ? 0 : KZ_ESYS;
}

/*
 * The block device the root view is read from, as "MAJOR:MINOR" of the
 * whole disk (the throttle takes no partition), when I/O limits are set,
 * the controller is there and the root is on a block device; else "".
 * A root on a virtual file system (tmpfs, overlay: major 0) has no
 * device to throttle.
 */
static int
io_device(struct sbx_cg *g, const struct sbx_conf *c, char *why, size_t wlen)
{
	char p[PATH_MAX], buf[512];
	struct stat st;
	unsigned ma, mi;

	g->io[0] = '\0';
	if (c->io_rbps == 0 && c->io_wbps == 0)
		return 0;
	if (!ver(g)->io_offered(g))
		return 0;
	/* A root that is not there fails at the mount step, which names it;
	 * one on a virtual file system has no disk to throttle. */
	if (stat(c->root, &st) != 0 || major(st.st_dev) == 0)
		return 0;
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u", major(st.st_dev),
	    minor(st.st_dev));
	snprintf(buf, sizeof(buf), "/sys/dev/block/%u:%u/partition",
	    major(st.st_dev), minor(st.st_dev));
	if (access(buf, F_OK) == 0)
		snprintf(p + strlen(p), sizeof(p) - strlen(p), "/..");
	if (sbx_cg_rfile(p, "dev", buf, sizeof(buf)) <= 0 ||
	    sscanf(buf, "%u:%u", &ma, &mi) != 2) {
		kz_why(why, wlen,
		    "cgroup: cannot find the disk of the root "
		    "view for the I/O limit");
		return KZ_EUNAVAIL;
	}
	snprintf(g->io, sizeof(g->io), "%u:%u", ma, mi);
	return 0;
}

static int
paths(struct sbx_cg *g, const struct sbx_conf *c, bool join, char *why,
    size_t wlen)
{
	for (int i = 0; i < g->n; i++) {
		char base[PATH_MAX], wk[PATH_MAX + 256];
		struct stat st;

		if (g->v2)
			snprintf(base, sizeof(base), "%s", g->root);
		else
			snprintf(base, sizeof(base), "%s/%s", g->root,
			    sbx_cg_v1_name[i]);
		if (stat(base, &st) < 0 &&
		    !(i == SBX_CG_CPU &&
		        snprintf(base, sizeof(base), "%s/cpu,cpuacct",
		            g->root) &&
		        stat(base, &st) == 0)) {
			kz_why(why, wlen, "cgroup: no %s controller",
			    sbx_cg_v1_name[i]);
			return KZ_EUNAVAIL;
		}
		/* One-shot: <id> is the run cgroup and there is no init. */
		if ((size_t)snprintf(wk, sizeof(wk), "%s/%s/%s", base,
		        c->cg_parent, c->id) >= SBX_CG_PATH ||
		    (size_t)snprintf(g->run[i], SBX_CG_PATH, "%s%s", wk,
		        join ? "/run" : "") >= SBX_CG_PATH ||
		    (size_t)snprintf(g->init[i], SBX_CG_PATH, "%s%s",
		        join ? wk : "", join ? "/init" : "") >= SBX_CG_PATH) {
			kz_why(why, wlen, "cgroup: path too long");
			return KZ_ETOOBIG;
		}
		memcpy(g->worker[i], wk, strlen(wk) + 1);
		/* v2 allows no process in a cgroup that delegates controllers
		 * to a child, so there the agent sits in a leaf of its own. */
		if (i == 0 &&
		    (size_t)snprintf(g->agent, SBX_CG_PATH, "%s%s", wk,
		        g->v2 ? "/agent" : "") >= SBX_CG_PATH) {
			kz_why(why, wlen, "cgroup: path too long");
			return KZ_ETOOBIG;
		}
		/* Only an agent that joins has to move back. */
		if (join &&
		    own_cgroup(g, g->v2, i, g->orig[i], SBX_CG_PATH) != 0) {
			kz_why(why, wlen, "cgroup: cannot read own cgroup");
			return KZ_EUNAVAIL;
		}
	}
	return 0;
}

int
sbx_cg_setup(struct sbx_cg *g, const struct sbx_conf *c, bool join, char *why,
    size_t wlen)
{
	char pid[32], missing[64];
	bool fresh = true;
	int r;

	snprintf(g->root, sizeof(g->root), "%s", c->cg_root);
	g->v2 = sbx_cg_v2_usable(g, missing, sizeof(missing));
	if (strcmp(c->cg_version, "v1") == 0)
		g->v2 = false;
	else if (strcmp(c->cg_version, "v2") == 0 && !g->v2) {
		kz_why(why, wlen,
		    "cgroup: v2 is configured but its root does not offer %s",
		    missing);
		return KZ_EUNAVAIL;
	}
	if ((r = io_device(g, c, why, wlen)) != 0)
		return r;
	g->n = g->v2 ? 1 : g->io[0] != '\0' ? SBX_CG_N : SBX_CG_IO;
	if ((r = paths(g, c, join, why, wlen)) != 0)
		return r;
	if (g->v2)
		sbx_cg_v2_delegate(g, g->root);
	for (int i = 0; i < g->n; i++) {
		char parent[PATH_MAX];
		bool dummy = true;

		snprintf(parent, sizeof(parent), "%s", g->worker[i]);
		*strrchr(parent, '/') = '\0';
		if (mk(parent, &dummy) != 0 || mk(g->worker[i], &fresh) != 0) {
			kz_why(why, wlen,
			    "cgroup: cannot create the worker cgroup: %s",
			    strerror(errno));
			return KZ_EUNAVAIL;
		}
		g->made = true;
		if (g->v2)
			sbx_cg_v2_delegate(g, parent);
		if (!join)
			continue;
		if (g->v2)
			sbx_cg_v2_delegate(g, g->worker[i]);
		if (g->v2 && mk(g->agent, &fresh) != 0) {
			kz_why(why, wlen,
			    "cgroup: cannot create the agent cgroup: %s",
			    strerror(errno));
			return KZ_EUNAVAIL;
		}
		if (mk(g->run[i], &fresh) != 0 || mk(g->init[i], &fresh) != 0) {
			kz_why(why, wlen,
			    "cgroup: cannot create the run cgroup: %s",
			    strerror(errno));
			return KZ_EUNAVAIL;
		}
	}
	/* A worker that crashed may have left processes behind under the
	 * same id: none of them survives into the new worker.  Cgroups this
	 * call has just made hold no process.  A one-shot run never takes
	 * over a served worker's cgroup (its agent sits in <id>). */
	if (!fresh && !join && served_layout(g)) {
		kz_why(why, wlen, "cgroup: the id belongs to a worker");
		g->made = false;
		return KZ_EEXIST;
	}
	if (!fresh && sbx_cg_kill_run(g) != 0) {
		kz_why(why, wlen, "cgroup: cannot empty a stale run cgroup");
		return KZ_EUNAVAIL;
	}
	for (int i = 0; !fresh && join && i < g->n; i++)
		(void)sbx_cg_each_pid(g->init[i], sbx_cg_kill9);
	if (ver(g)->limits(g, c) != 0) {
		kz_why(why, wlen, "cgroup: cannot set the limits: %s",
		    strerror(errno));
		return KZ_EUNAVAIL;
	}
	for (int i = 0; i < g->n; i++) {
		char p[PATH_MAX];

		/* The file the code joins through: on v1 "tasks", for the
		 * reason cgroup_v1.c gives. */
		snprintf(p, sizeof(p), "%s/%s", g->run[i], ver(g)->join);
		if ((g->procs_fd[i] = open(p, O_WRONLY | O_CLOEXEC)) < 0) {
			kz_why(why, wlen, "cgroup: cannot open the run cgroup");
			return KZ_EUNAVAIL;
		}
	}
	if (stat_fds(g) != 0) {
		kz_why(why, wlen,
		    "cgroup: cannot open the run cgroup's accounting files");
		return KZ_EUNAVAIL;
	}
	if (join) {
		/* Set first: a join that fails half-way (e.g. a real-time
		 * agent refused by the cpu hierarchy) is undone by the
		 * teardown, which can then remove the cgroups. */
		g->joined = true;
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		for (int i = 0; i < g->n; i++)
			if (sbx_cg_wfile(i == 0 ? g->agent : g->worker[i],
			        "cgroup.procs", pid) != 0) {
				kz_why(why, wlen,
				    "cgroup: cannot join the worker cgroup");
				return KZ_EUNAVAIL;
			}
	}
	return 0;
}

int
sbx_cg_attach(const struct sbx_cg *g, pid_t pid)
{
	char v[32];
	int n = snprintf(v, sizeof(v), "%d", (int)pid);

	for (int i = 0; i < g->n; i++)
		if (write(g->procs_fd[i], v, (size_t)n) != n)
			return KZ_ESYS;
	return 0;
}

int
sbx_cg_attach_init(const struct sbx_cg *g, pid_t pid)
{
	char v[32];

	snprintf(v, sizeof(v), "%d", (int)pid);
	for (int i = 0; i < g->n; i++)
		if (sbx_cg_wfile(g->init[i], "cgroup.procs", v) != 0)
			return KZ_ESYS;
	return 0;
}

void
sbx_cg_reset_peak(const struct sbx_cg *g)
{
	const char *v = ver(g)->peak_reset;

	if (g->peak_fd >= 0)
		(void)!write(g->peak_fd, v, strlen(v));
}

void
sbx_cg_stats(const struct sbx_cg *g, struct sbx_cg_stats *st)
{
	char buf[64];

	memset(st, 0, sizeof(*st));
	if (rfd(g->peak_fd, buf, sizeof(buf)) > 0)
		st->peak = strtoull(buf, NULL, 10);
	st->oom_kills = keyed_fd(g->oom_fd, "oom_kill");
	st->pids_max_hits = keyed_fd(g->pev_fd, "max");
}

/* Calls fn for each pid listed in dir/cgroup.procs; returns the count. */
int
sbx_cg_each_pid(const char *dir, void (*fn)(pid_t))
{
	char buf[65536], *p, *end;
	int n = 0;

	if (sbx_cg_rfile(dir, "cgroup.procs", buf, sizeof(buf)) < 0)
		return -1;
	for (p = buf; *p != '\0'; p = end) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (fn != NULL)
			fn((pid_t)v);
		n++;
		while (*end == '\n')
			end++;
	}
	return n;
}

void
sbx_cg_kill9(pid_t p)
{
	(void)kill(p, SIGKILL);
}

/*
 * The number of processes in the run cgroup.  pids.current (read fresh
 * through the kept descriptor) answers the common case, an empty cgroup,
 * without listing it; a v1 cgroup.procs must be opened anew each time,
 * since an open descriptor keeps serving the pid list it first built.
 */
int
sbx_cg_count_run(const struct sbx_cg *g)
{
	char buf[32];

	if (rfd(g->count_fd, buf, sizeof(buf)) > 0 &&
	    strtoll(buf, NULL, 10) == 0)
		return 0;
	return sbx_cg_each_pid(g->run[ver(g)->pids], NULL);
}

/*
 * Kills every member of the run cgroup at once, so that nothing forks
 * while it is being killed (the version's kill), and waits briefly for it
 * to empty.
 */
int
sbx_cg_kill_run(const struct sbx_cg *g)
{
	int left = 0;

	if (sbx_cg_count_run(g) == 0)
		return 0;
	ver(g)->kill(g);
	for (int i = 0; i < 200; i++) {
		if ((left = sbx_cg_count_run(g)) <= 0)
			return left < 0 ? -1 : 0;
		usleep(5000);
		(void)sbx_cg_each_pid(g->run[ver(g)->pids], sbx_cg_kill9);
	}
	return left;
}

/*
 * What the empty run cgroup is still charged for after a tenant is the
 * page cache its code read and kernel objects in its name; the shared
 * memory, sockets and tmpfs pages of its namespaces are released as those
 * are torn down, some of it asynchronously.  Reclaim what can be and wait
 * for the rest to go.
 */
bool
sbx_cg_settle(const struct sbx_cg *g, uint64_t max, int wait_ms,
    uint64_t *usage)
{
	const struct sbx_cg_ver *v = ver(g);
	const char *dir = g->run[v->mem];
	int64_t end = kz_now_ms() + wait_ms;
	char buf[32];

	for (;;) {
		*usage = sbx_cg_rfile(dir, v->usage, buf, sizeof(buf)) > 0 ?
		    strtoull(buf, NULL, 10) :
		    UINT64_MAX;
		if (*usage <= max)
			return true;
		if (*usage == UINT64_MAX || kz_now_ms() >= end)
			return false;
		(void)sbx_cg_wfile(dir, v->reclaim, v->reclaim_all ? "0" : buf);
		usleep(1000);
	}
}

bool
sbx_cg_only(const struct sbx_cg *g, pid_t pid)
{
	char buf[128];

	for (int i = 0; i < g->n; i++) {
		char want[32];

		snprintf(want, sizeof(want), "%d\n", (int)pid);
		if (sbx_cg_rfile(i == 0 ? g->agent : g->worker[i],
		        "cgroup.procs", buf, sizeof(buf)) < 0 ||
		    strcmp(buf, want) != 0)
			return false;
		if (sbx_cg_each_pid(g->run[i], NULL) != 0)
			return false;
	}
	return true;
}

void
sbx_cg_close_stats(struct sbx_cg *g)
{
	int *fds[] = {&g->peak_fd, &g->oom_fd, &g->pev_fd, &g->count_fd};

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

void
sbx_cg_teardown(struct sbx_cg *g)
{
	char pid[32];

	for (int i = 0; i < SBX_CG_N; i++)
		if (g->procs_fd[i] >= 0) {
			close(g->procs_fd[i]);
			g->procs_fd[i] = -1;
		}
	if (!g->made) {
		sbx_cg_close_stats(g);
		return;
	}
	(void)sbx_cg_kill_run(g);
	sbx_cg_close_stats(g);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	for (int i = 0; i < g->n; i++) {
		if (g->joined)
			(void)sbx_cg_wfile(g->orig[i], "cgroup.procs", pid);
		(void)rmdir(g->run[i]);
		if (g->init[i][0] != '\0')
			(void)rmdir(g->init[i]);
		if (g->v2 && strcmp(g->worker[i], g->run[i]) != 0)
			(void)rmdir(g->agent);
		if (strcmp(g->worker[i], g->run[i]) != 0)
			(void)rmdir(g->worker[i]);
	}
	g->made = false;
}
