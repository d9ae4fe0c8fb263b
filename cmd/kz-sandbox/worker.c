/*
 * The worker's life: its start (the stage, the namespaces, the cgroups,
 * the filter, the first run init), the refresh that gives each lease a
 * run init of its own in namespaces no earlier lease had, and its
 * release.  run.c runs the code on it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

/*
 * The stage, where the init assembles the root view in its own mount
 * namespace.  A worker has a directory of its own under the state
 * directory; a one-shot run mounts its stage over the state directory
 * itself (only in its private mount namespace), so it has no host
 * directory to make and remove.
 */
static int
state_dir(struct sbx_mnt *m, const struct sbx_conf *c, bool serve, char *why,
    size_t wlen)
{
	if (mkdir(c->state_dir, 0700) < 0 && errno != EEXIST) {
		kz_why(why, wlen,
		    "state: cannot create the state directory: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	if (strlen(c->state_dir) + strlen(c->id) + 2 > 1024) {
		kz_why(why, wlen,
		    "state: the state directory path is too long");
		return KZ_ETOOBIG;
	}
	memcpy(m->stage, c->state_dir, strlen(c->state_dir) + 1);
	/* Under gvisor even a one-shot run has a directory of its own: the
	 * runsc state's mount point must stay outside the stage. */
	if (!serve && !sbx_gvisor(c))
		return 0;
	m->stage[strlen(c->state_dir)] = '/';
	memcpy(m->stage + strlen(c->state_dir) + 1, c->id, strlen(c->id) + 1);
	/* A stale empty directory from a crashed worker is removed; a busy
	 * one means another worker has this id. */
	if (mkdir(m->stage, 0700) < 0 &&
	    (errno != EEXIST || rmdir(m->stage) < 0 ||
	        mkdir(m->stage, 0700) < 0)) {
		kz_why(why, wlen, "state: worker directory in use: %s",
		    strerror(errno));
		return KZ_EEXIST;
	}
	m->made_dir = true;
	return 0;
}

/* Records the kernel ids of this lease's namespaces; false when the
 * record is full (SANDBOX_LEASES_MAX) or out of memory. */
static bool
note_ids(struct sbx_worker *w, const struct sbx_nsid *cur)
{
	size_t cap = (size_t)w->c->leases_max * SBX_NS_N;

	if (w->ns_n + SBX_NS_N > cap)
		return false;
	if (w->ns_n + SBX_NS_N > w->ns_cap) {
		size_t nc = w->ns_cap ? w->ns_cap * 2 : 64 * SBX_NS_N;
		uint64_t *h;

		if (nc > cap)
			nc = cap;
		if ((h = realloc(w->ns_hist, nc * sizeof(*h))) == NULL)
			return false;
		w->ns_hist = h, w->ns_cap = nc;
	}
	for (int i = 0; i < SBX_NS_N; i++)
		if (cur->id[i] != 0)
			w->ns_hist[w->ns_n++] = cur->id[i];
	return true;
}

/* Notes the namespaces of a new init as this lease's; false when they
 * cannot be read, are not all new or cannot be recorded. */
static bool
note_ns(struct sbx_worker *w)
{
	struct sbx_nsid cur;
	bool fresh;

	w->leases++;
	if (sbx_ns_ids(w->zpid, &cur) != 0)
		return false;
	fresh = sbx_ns_new(&cur, &w->ns_cur, w->ns_hist, w->ns_n);
	w->ns_cur = cur;
	return note_ids(w, &cur) && fresh;
}

/* The runsc state's mount point, a host directory each run init mounts
 * a tmpfs of its own on. */
static int
gv_dir_make(struct sbx_worker *w, char *why, size_t wlen)
{
	char p[SBX_PBUF];

	if (sbx_gv_dir(w->c, NULL, p, sizeof(p)) != 0) {
		kz_why(why, wlen,
		    "gvisor: the state directory path is too long");
		return KZ_ETOOBIG;
	}
	if (mkdir(p, 0700) < 0 &&
	    (errno != EEXIST || rmdir(p) < 0 || mkdir(p, 0700) < 0)) {
		kz_why(why, wlen, "gvisor: runsc state directory in use: %s",
		    strerror(errno));
		return KZ_EEXIST;
	}
	w->gv_dir = true;
	return 0;
}

int
sbx_worker_init(struct sbx_worker *w, struct sbx_conf *c, bool serve, char *why,
    size_t wlen)
{
	int r;

	memset(w, 0, sizeof(*w));
	w->c = c;
	w->serve = serve;
	w->zsock = -1;
	w->zpidfd = -1;
	w->userns_fd = -1;
	w->tmpl_fd = -1;
	w->tar_fd = -1;
	sbx_cg_init(&w->cg);
	if (c->id[0] == '\0')
		snprintf(c->id, sizeof(c->id), "run-%d", (int)getpid());
	if (sbx_gvisor(c) && (r = sbx_gv_binary(c, why, wlen)) != 0)
		return r;
	if ((r = state_dir(&w->mnt, c, serve, why, wlen)) != 0)
		return r;
	if (sbx_gvisor(c) && (r = gv_dir_make(w, why, wlen)) != 0)
		return r;
	/* The agent execs nothing, so its bounding and ambient sets are
	 * emptied once, here: every init it clones, for every lease, and
	 * every code process inherit them empty.  Under gvisor the code
	 * process executes runsc, which needs its privileges to build the
	 * sandbox; the code inside gets none (the spec's empty sets). */
	if (!sbx_gvisor(c) && (r = sbx_caps_bound(why, wlen)) != 0)
		return r;
	if (serve && !sbx_gvisor(c) &&
	    (r = sbx_snapshot_open(w, why, wlen)) != 0)
		return r;
	if (serve && (r = sbx_template_make(w, why, wlen)) != 0)
		return r;
	if ((r = sbx_init_start(w, why, wlen)) != 0)
		return r;
	/* While the init builds the root view, the agent makes the network,
	 * IPC and UTS namespaces and the cgroups and copies the filter;
	 * the init runs nothing before it has joined the namespaces and has
	 * the filter and the cgroups. */
	if ((r = sbx_ns_enter_worker(c, why, wlen)) != 0)
		return r;
	if ((r = sbx_cg_setup(&w->cg, c, serve, why, wlen)) != 0)
		return r;
	if ((r = sbx_seccomp_build(&w->prog, false, why, wlen)) != 0)
		return r;
	if ((r = sbx_init_go(w, why, wlen)) != 0)
		return r;
	if (serve && !note_ns(w)) {
		kz_why(why, wlen, "namespaces: cannot read the run namespaces");
		return KZ_EUNAVAIL;
	}
	/* A one-shot run is its own probe: the code runs only if runsc
	 * made its container. */
	if (serve && sbx_gvisor(c) && (r = sbx_gv_probe(w, why, wlen)) != 0)
		return r;
	return 0;
}

/* Waits (bounded) until a killed init is reaped; false if it could not
 * be in time (it stays a zombie of ours, and the worker is not reused). */
static bool
reap_init(pid_t pid, int pidfd, int wait_ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};

	if (pid <= 0)
		return true;
	if (pidfd >= 0 && poll(&p, 1, wait_ms) != 1)
		return false;
	return waitpid(pid, NULL, pidfd >= 0 ? WNOHANG : 0) == pid;
}

int
sbx_worker_refresh(struct sbx_worker *w, bool *gone, bool *fresh, char *why,
    size_t wlen)
{
	int osock = w->zsock, opidfd = w->zpidfd, r;
	pid_t opid = w->zpid;

	*gone = *fresh = false;
	w->zsock = w->zpidfd = -1;
	w->zpid = 0;
	/* A reset costs milliseconds of CPU that a tenant's run on another
	 * worker should not wait for: it runs at a lower priority, the new
	 * init until it is ready and the previous init's teardown too. */
	(void)setpriority(PRIO_PROCESS, 0, SBX_RESET_NICE);
	(void)setpriority(PRIO_PROCESS, (id_t)opid, SBX_RESET_NICE);
	/* Every new namespace exists before the previous tenant's last
	 * process is killed, so none can reuse a freed one's number; the
	 * previous namespaces are torn down and reaped before the reply. */
	if ((r = sbx_init_start(w, why, wlen)) != 0 ||
	    (r = sbx_ns_enter_worker(w->c, why, wlen)) != 0)
		goto out;
	/* The previous init lives (its socket open: it exits when that
	 * closes) until the new one is ready, its mount namespace made too
	 * (as it starts building its view): the code sees inode numbers,
	 * not the kernel's ids, and a freed namespace gives its number
	 * back, so ending it earlier could show the next tenant the previous
	 * one's number. */
	if ((r = sbx_init_go(w, why, wlen)) != 0)
		goto out;
	*fresh = note_ns(w);
out:
	if (osock >= 0)
		close(osock);
	if (opid > 0) {
		(void)kill(opid, SIGKILL);
		*gone = reap_init(opid, opidfd, 5000);
	}
	if (opidfd >= 0)
		close(opidfd);
	if (r != 0)
		w->broken = true;
	(void)setpriority(PRIO_PROCESS, 0, 0);
	w->restored_ok = false;
	w->generation++;
	return r;
}

void
sbx_worker_release(struct sbx_worker *w)
{
	if (w->zsock >= 0)
		close(w->zsock);
	if (w->zpidfd >= 0)
		close(w->zpidfd);
	if (w->zpid > 0) {
		(void)kill(w->zpid, SIGKILL);
		/* A one-shot run's init unwinds its namespaces after we exit;
		 * the code is already dead (the run cgroup is empty). */
		if (w->serve)
			(void)waitpid(w->zpid, NULL, 0);
	}
	w->zsock = -1, w->zpid = 0, w->zpidfd = -1;
	sbx_cg_teardown(&w->cg);
	sbx_mnt_release(&w->mnt);
	if (w->gv_dir) {
		char p[SBX_PBUF];

		if (sbx_gv_dir(w->c, NULL, p, sizeof(p)) == 0)
			(void)rmdir(p);
		w->gv_dir = false;
	}
	sbx_seccomp_free(&w->prog);
	sbx_seccomp_free(&w->prog_rtc);
	if (w->tmpl_fd >= 0)
		close(w->tmpl_fd);
	w->tmpl_fd = -1;
	if (w->tar_fd >= 0)
		close(w->tar_fd);
	w->tar_fd = -1;
	free(w->ns_hist);
	w->ns_hist = NULL;
	w->ns_n = w->ns_cap = 0;
	for (int i = 0; i < 2; i++) {
		free(w->obuf[i]);
		w->obuf[i] = NULL;
		w->ocap[i] = 0;
	}
}
