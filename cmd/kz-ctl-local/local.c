/*
 * The local controller: kz-sandbox workers on this host.  Each worker has
 * WORKERS/ID/ (lib/pool.c's layout) with its socket, a pid file written
 * here and the agent's own state.  The inventory is the set of those
 * directories: a worker whose directory exists is counted until it has
 * been stopped and its directory removed, so a create that died half-way
 * is found and deleted by reconciliation, never forgotten.
 *
 * This file holds the create: the worker's environment and command line,
 * its directories, its id claimed and its files recorded, and its start.
 * The inventory, a worker found exited and the delete are in inventory.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_log.h"
#include "kz_pool.h"
#include "ctl.h"
#include "banned.h"

static int
split_args(char *s, char **av, int max)
{
	int n = 0;
	char *p = s;

	while (*p != '\0' && n < max) {
		while (*p == ' ')
			*p++ = '\0';
		if (*p == '\0')
			break;
		av[n++] = p;
		while (*p != '\0' && *p != ' ')
			p++;
	}
	return n;
}

/*
 * The worker's environment: the controller's (kz-lease's), with
 * KZ_PEER_UIDS and KZ_PEER_GIDS set to kz-lease's own peer policy, so that
 * whoever may lease a worker may also run on it, whether the policy came
 * from the file or the environment, and SANDBOX_RUNTIME set to the
 * runtime the create asked for (kz-sandbox's key: its environment
 * overrides the worker's config file).  Built before the fork (it
 * allocates).
 */
#define ENV_OURS 3

static bool
env_replaced(const char *e)
{
	return strncmp(e, "KZ_PEER_UIDS=", 13) == 0 ||
	    strncmp(e, "KZ_PEER_GIDS=", 13) == 0 ||
	    strncmp(e, "SANDBOX_RUNTIME=", 16) == 0;
}

char **
ctl_worker_env(const struct ctl_conf *c, const char *runtime)
{
	extern char **environ;
	size_t n = 0, k = 0, rl = strlen(runtime) + 17;
	char **env;

	while (environ[n] != NULL)
		n++;
	if ((env = calloc(n + ENV_OURS + 1, sizeof(*env))) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!env_replaced(environ[i]))
			env[k++] = environ[i];
	env[k] = kz_peer_policy_env(&c->peers, false);
	env[k + 1] = kz_peer_policy_env(&c->peers, true);
	if ((env[k + 2] = malloc(rl)) != NULL)
		snprintf(env[k + 2], rl, "SANDBOX_RUNTIME=%s", runtime);
	if (env[k] == NULL || env[k + 1] == NULL || env[k + 2] == NULL) {
		for (int i = 0; i < ENV_OURS; i++)
			free(env[k + i]);
		free(env);
		return NULL;
	}
	return env;
}

void
ctl_worker_env_free(char **env)
{
	size_t n = 0;

	while (env[n] != NULL)
		n++;
	/* Only the last ENV_OURS entries are ours. */
	for (int i = 1; i <= ENV_OURS; i++)
		free(env[n - (size_t)i]);
	free(env);
}

/*
 * The worker's command line for kz-sandbox's subcommand sub (serve, reap,
 * files): the same settings whichever, so that reap and files see the
 * configuration the worker runs with.  -1 when a path does not fit.
 */
int
ctl_worker_argv(const struct ctl_conf *c, const char *sub, const char *id,
    int64_t hid, struct ctl_argv *a)
{
	int64_t gv;
	int n = 0;

	if (kz_pool_wpath(c->workers_dir, id, "sock", a->sock,
	        sizeof(a->sock)) ||
	    kz_pool_wpath(c->workers_dir, id, "state", a->state,
	        sizeof(a->state)) ||
	    kz_pool_wpath(c->workers_dir, id, "projection", a->proj,
	        sizeof(a->proj)))
		return -1;
	snprintf(a->extra, sizeof(a->extra), "%s", c->worker_args);
	a->av[n++] = (char *)c->worker_bin;
	a->av[n++] = (char *)sub;
	a->av[n++] = "--id";
	a->av[n++] = (char *)id;
	a->av[n++] = "--socket";
	a->av[n++] = a->sock;
	a->av[n++] = "--state-dir";
	a->av[n++] = a->state;
	/* kz-run fills the projection from the host; the code sees it
	 * read-only at /projection, outside its workspace. */
	a->av[n++] = "--projection";
	a->av[n++] = a->proj;
	if (c->egress_sock[0] != '\0') {
		a->av[n++] = "--egress-socket";
		a->av[n++] = (char *)c->egress_sock;
	}
	if (c->broker_sock[0] != '\0') {
		a->av[n++] = "--broker-socket";
		a->av[n++] = (char *)c->broker_sock;
	}
	n += split_args(a->extra, a->av + n, ARGS_MAX);
	/* Last, so that LEASE_WORKER_ARGS cannot give two workers one id:
	 * the code runs as the worker's own uid and gid, in a user
	 * namespace or not, and a gvisor worker's runsc as its second.  (A
	 * worker that never got an id never ran.) */
	if (hid > 0) {
		snprintf(a->ids, sizeof(a->ids), "%lld", (long long)hid);
		a->av[n++] = "--uid", a->av[n++] = a->ids;
		a->av[n++] = "--gid", a->av[n++] = a->ids;
		a->av[n++] = "--userns-host-uid", a->av[n++] = a->ids;
		a->av[n++] = "--userns-host-gid", a->av[n++] = a->ids;
		if ((gv = ctl_gvisor_id(c, id)) > 0) {
			snprintf(a->gvids, sizeof(a->gvids), "%lld",
			    (long long)gv);
			a->av[n++] = "--gvisor-uid", a->av[n++] = a->gvids;
			a->av[n++] = "--gvisor-gid", a->av[n++] = a->gvids;
		}
	}
	a->av[n] = NULL;
	return 0;
}

/* The grandchild: a session of its own, so kz-lease can come and go. */
static void
exec_worker(const struct ctl_conf *c, const char *id, int64_t hid, char **env)
{
	static struct ctl_argv a;
	char log[PATH_MAX];
	int fd;

	if (kz_pool_wpath(c->workers_dir, id, "log", log, sizeof(log)) ||
	    ctl_worker_argv(c, "serve", id, hid, &a) != 0)
		_exit(127);
	if ((fd = open("/dev/null", O_RDWR)) >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
	}
	if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) >=
	    0)
		dup2(fd, 2);
	execve(a.av[0], a.av, env);
	_exit(127);
}

static int
write_pid(const char *dir, pid_t pid)
{
	char p[PATH_MAX + 8], buf[32];
	int fd, n;

	snprintf(p, sizeof(p), "%s/pid", dir);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);
	n = write(fd, buf, (size_t)n) == n ? 0 : -1;
	close(fd);
	return n;
}

/*
 * Modes are set explicitly, whatever the umask (the unit's is 0077); the
 * group is kz-lease's own (the unit's Group=, the deployment's group).
 * The workers directory and each worker's are traversable by that group
 * (its callers reach the worker's socket); the projection directory is
 * writable by it too (kz-project and kz-run --file fill it), sticky, and
 * readable by others: the code reads it, read-only, at /projection.
 */
static int
make_dirs(const struct ctl_conf *c, const char *dir, const char *proj)
{
	struct stat st;

	if (mkdir(c->workers_dir, 0750) == 0 &&
	    chmod(c->workers_dir, 0750) != 0)
		return -1;
	/* Ours alone: in a directory others may write, what the controller
	 * creates (as root, under kz-lease) could be their symlink. */
	if (lstat(c->workers_dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
		errno = EPERM;
		return -1;
	}
	if (mkdir(dir, 0750) != 0)
		return -1;
	if (chmod(dir, 0750) != 0 || mkdir(proj, 0700) != 0 ||
	    chmod(proj, CTL_PROJECTION_MODE) != 0) {
		rmdir(proj);
		rmdir(dir);
		return -1;
	}
	return 0;
}

/* The number in dir/leaf, one line, within [min, max]; -1 when none. */
int64_t
ctl_read_num(const char *dir, const char *leaf, int64_t min, int64_t max)
{
	char p[PATH_MAX + 16], buf[32];
	int64_t v;

	snprintf(p, sizeof(p), "%s/%s", dir, leaf);
	if (kz_read_small(p, buf, sizeof(buf)) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return kz_parse_int(buf, min, max, &v) == 0 ? v : -1;
}

/* The id another worker holds, from WORKERS/<w>/ids, or its second
 * (gvids); -1 when none. */
static int64_t
held_id(const struct ctl_conf *c, const char *w, const char *leaf)
{
	char dir[PATH_MAX];

	if (kz_pool_wpath(c->workers_dir, w, "", dir, sizeof(dir)) != 0)
		return -1;
	return ctl_read_num(dir, leaf, 1, INT64_MAX);
}

int64_t
ctl_gvisor_id(const struct ctl_conf *c, const char *id)
{
	return held_id(c, id, "gvids");
}

static int
unlink_ids(const char *dir)
{
	char p[PATH_MAX + 8];

	snprintf(p, sizeof(p), "%s/gvids", dir);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/ids", dir);
	return unlink(p);
}

/* Writes the one number of dir/leaf, which must not exist. */
static int
write_id(const char *dir, const char *leaf, int64_t v)
{
	char p[PATH_MAX + 16], buf[24];
	int fd, n;

	snprintf(p, sizeof(p), "%s/%s", dir, leaf);
	n = snprintf(buf, sizeof(buf), "%lld\n", (long long)v);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	         0640)) < 0)
		return KZ_ESYS;
	n = write(fd, buf, (size_t)n) == n ? 0 : KZ_ESYS;
	close(fd);
	return n;
}

/* Records the worker's bound on open files in dir/files. */
static int
write_files(const char *dir, uint64_t files)
{
	char p[PATH_MAX + 16], buf[32];
	int fd, n;

	snprintf(p, sizeof(p), "%s/files", dir);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	         0640)) < 0)
		return KZ_ESYS;
	n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)files);
	n = write(fd, buf, (size_t)n) == n ? 0 : KZ_ESYS;
	close(fd);
	return n;
}

/*
 * Gives the new worker dir (WORKERS/<id>) the lowest id of
 * LEASE_WORKER_IDS that no other worker directory holds, no worker of the
 * host's other deployments is given and no process runs as, recorded in
 * its "ids" file and claimed in the host's record (host.c); a gvisor
 * worker gets a second one the same way, for runsc (kz-sandbox's
 * SANDBOX_GVISOR_UID), in its "gvids" file.  A lock on
 * the workers directory, then the host's, makes the choice and the
 * records one step for every controller of this host; a worker's id is
 * free again once its directory is gone.
 */
static int
claim_id(const struct ctl_conf *c, const char *id, const char *dir,
    uint64_t files, bool gvisor, int64_t *out, char *why, size_t wlen)
{
	static int64_t held[2 * CTL_INV_MAX];
	static struct ctl_inv inv;
	char p[PATH_MAX + 16];
	int64_t want = 0, second = 0;
	size_t nh = 0;
	int lfd, hfd = -1, r = KZ_EUNAVAIL;

	snprintf(p, sizeof(p), "%s/.ids.lock", c->workers_dir);
	if ((lfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) <
	    0)
		return KZ_ESYS;
	if (flock(lfd, LOCK_EX) != 0 || ctl_list(c, &inv, NULL, 0) != 0)
		goto out;
	for (size_t i = 0; i < inv.n; i++) {
		if (strcmp(inv.id[i], id) == 0)
			continue;
		if ((held[nh] = held_id(c, inv.id[i], "ids")) > 0)
			nh++;
		if ((held[nh] = held_id(c, inv.id[i], "gvids")) > 0)
			nh++;
	}
	/* Under the same locks: two creates cannot both fit in the room
	 * that fits one. */
	if ((r = hfd = ctl_host_lock(c, why, wlen)) < 0 ||
	    (r = ctl_host_claim(c, id, held, nh, files, &want, why, wlen)) != 0)
		goto out;
	if (files > 0 && write_files(dir, files) != 0) {
		kz_why(why, wlen, "cannot record the worker's files");
		r = KZ_EDENIED;
		goto out;
	}
	/* Until this is written the claim is stale: a failure here leaves
	 * the uid free. */
	if ((r = write_id(dir, "ids", want)) != 0)
		goto out;
	/* The second, once the first's claim is live (so it is taken): a
	 * failure unclaims both. */
	if (gvisor &&
	    ((r = ctl_host_claim(c, id, held, nh, 0, &second, why, wlen)) !=
	            0 ||
	        (r = write_id(dir, "gvids", second)) != 0)) {
		(void)unlink_ids(dir);
		if (*why == '\0')
			kz_why(why, wlen, "cannot record the worker's uids");
		goto out;
	}
	*out = want;
out:
	if (hfd >= 0)
		close(hfd);
	close(lfd);
	return r;
}

bool
ctl_runtime_ok(const char *runtime)
{
	return strcmp(runtime, "native") == 0 || strcmp(runtime, "gvisor") == 0;
}

/* A refusal: nothing of the worker is left behind. */
static int
undo(const char *dir, const char *proj, int ids)
{
	char p[PATH_MAX + 8];

	snprintf(p, sizeof(p), "%s/files", dir);
	(void)unlink(p);
	if (ids)
		(void)unlink_ids(dir);
	rmdir(proj);
	rmdir(dir);
	return KZ_EDENIED;
}

/*
 * The open files one run of this worker can hold, as kz-sandbox computes
 * it from the settings the worker will be started with (LEASE_WORKER_ARGS
 * and the environment over its file); 0 when it cannot tell.
 */
static uint64_t
worker_files(const struct ctl_conf *c, const char *id, const char *runtime)
{
	char out[64];
	int64_t v;

	if (ctl_sandbox(c, "files", id, 0, runtime, out, sizeof(out)) != 0 ||
	    kz_parse_int(out, 1, INT64_MAX, &v) != 0)
		return 0;
	return (uint64_t)v;
}

int
ctl_create(const struct ctl_conf *c, const char *id, const char *runtime,
    char *endpoint, size_t elen, char *why, size_t wlen)
{
	int64_t hid = 0;
	uint64_t files = 0;
	char dir[PATH_MAX], proj[PATH_MAX], **env;
	pid_t mid, w;
	int st;

	if (!ctl_runtime_ok(runtime)) {
		kz_why(why, wlen, "unknown runtime (native or gvisor)");
		return KZ_EDENIED;
	}
	if (kz_pool_wpath(c->workers_dir, id, "", dir, sizeof(dir)) != 0 ||
	    kz_pool_wpath(c->workers_dir, id, "sock", endpoint, elen) != 0 ||
	    kz_pool_wpath(c->workers_dir, id, "projection", proj,
	        sizeof(proj)) != 0) {
		kz_why(why, wlen, "bad worker id");
		return KZ_EDENIED;
	}
	if (make_dirs(c, dir, proj) != 0) {
		kz_why(why, wlen,
		    errno == EPERM ? "the workers directory is not ours alone "
		                     "(owner, or writable by others)" :
		                     "cannot make the worker directory");
		return KZ_EDENIED;
	}
	if (c->files_share > 0 && (files = worker_files(c, id, runtime)) == 0) {
		kz_why(why, wlen,
		    "cannot learn the worker's bound on open files "
		    "(kz-sandbox files)");
		return undo(dir, proj, 0);
	}
	if (claim_id(c, id, dir, files, strcmp(runtime, "gvisor") == 0, &hid,
	        why, wlen) != 0) {
		if (*why == '\0')
			kz_why(why, wlen, "worker inventory unreadable");
		return undo(dir, proj, 0);
	}
	if ((env = ctl_worker_env(c, runtime)) == NULL || (mid = fork()) < 0) {
		if (env != NULL)
			ctl_worker_env_free(env);
		kz_why(why, wlen, "fork failed");
		return undo(dir, proj, 1);
	}
	if (mid == 0) {
		setsid();
		if ((w = fork()) < 0)
			_exit(1);
		if (w == 0)
			exec_worker(c, id, hid, env);
		_exit(write_pid(dir, w) == 0 ? 0 : 1);
	}
	ctl_worker_env_free(env);
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		/* The worker may exist without a pid file: the outcome is
		 * unknown, and reconcile finds it by its directory. */
		kz_why(why, wlen, "worker start failed");
		return KZ_EUNAVAIL;
	}
	return 0;
}
