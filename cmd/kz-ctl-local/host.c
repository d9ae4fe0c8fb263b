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
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_pool.h"
#include "kz_proc.h"
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

/*
 * The host's record of worker uids (LEASE_HOST_DIR), one for every
 * deployment of the host: LEASE_WORKER_IDS ranges may overlap (the
 * default is the same for all), and one uid given to two workers would
 * let their tenants share per-uid limits and signal each other, and the
 * delete of one kill the other's processes.  HOST/<uid> claims the uid
 * for its owner, the worker's directory (resolved), and records the
 * worker's bound on open files: "OWNER\nFILES\n".  A claim is live while
 * its owner's "ids" file names the uid, or its "gvids" file (a gvisor
 * worker's second uid, runsc's: its FILES is 0, the worker's bound is its
 * first uid's); one whose worker directory is gone is stale, and the next
 * create removes it.  All under HOST/.lock.
 */
#define CLAIMS_MAX 8192
#define OWNER_MAX (PATH_MAX + 80)

static struct claim {
	int64_t uid;
	uint64_t files; /* 0: not recorded */
	bool here; /* a worker of this workers directory */
	bool second; /* a gvisor worker's second uid: no files of its own */
} claims[CLAIMS_MAX];
static size_t nclaims;

/* The number path holds, one line; -1 when none. */
static int64_t
num_at(const char *path)
{
	char buf[32];
	int64_t v;

	if (kz_read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return kz_parse_int(buf, 0, INT64_MAX, &v) == 0 ? v : -1;
}

int
ctl_host_lock(const struct ctl_conf *c, char *why, size_t wlen)
{
	char p[PATH_MAX + 8];
	struct stat st;
	int fd;

	if (mkdir(c->host_dir, 0700) != 0 && errno != EEXIST) {
		kz_why(why, wlen, "cannot make LEASE_HOST_DIR");
		return KZ_EUNAVAIL;
	}
	/* Ours alone, like the workers directory (local.c). */
	if (lstat(c->host_dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
		kz_why(why, wlen,
		    "LEASE_HOST_DIR is not ours alone (owner, or writable by "
		    "others)");
		return KZ_EDENIED;
	}
	snprintf(p, sizeof(p), "%s/.lock", c->host_dir);
	if ((fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) <
	        0 ||
	    flock(fd, LOCK_EX) != 0) {
		if (fd >= 0)
			close(fd);
		kz_why(why, wlen, "cannot lock LEASE_HOST_DIR");
		return KZ_EUNAVAIL;
	}
	return fd;
}

/* The owner worker id is (or would be) in a claim; -1 when the workers
 * directory cannot be resolved. */
static int
owner_of(const struct ctl_conf *c, const char *id, char *out, size_t len)
{
	char rp[PATH_MAX];
	int n;

	if (realpath(c->workers_dir, rp) == NULL)
		return -1;
	n = snprintf(out, len, "%s/%s", rp, id);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The claim on uid: 1 when live as its owner's uid, 2 as its second
 * (gvids), 0 when stale (owner and files filled for all), -1 when there
 * is none (or it is not one). */
static int
claim_get(const struct ctl_conf *c, int64_t uid, char *owner, uint64_t *files)
{
	char p[OWNER_MAX + 8], buf[OWNER_MAX + 32], *nl;
	struct stat st;
	int64_t v;

	snprintf(p, sizeof(p), "%s/%lld", c->host_dir, (long long)uid);
	if (kz_read_small(p, buf, sizeof(buf)) <= 0 ||
	    (nl = strchr(buf, '\n')) == NULL)
		return -1;
	*nl++ = '\0';
	nl[strcspn(nl, "\n")] = '\0';
	if (buf[0] != '/' || strlen(buf) >= OWNER_MAX ||
	    kz_parse_int(nl, 0, INT64_MAX, &v) != 0)
		return -1;
	memcpy(owner, buf, strlen(buf) + 1);
	*files = (uint64_t)v;
	/* A worker directory is the controller's own (local.c): what
	 * another user made at a vanished owner's path does not keep its
	 * claim alive. */
	if (lstat(owner, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid())
		return 0;
	snprintf(p, sizeof(p), "%s/ids", owner);
	if (num_at(p) == uid)
		return 1;
	snprintf(p, sizeof(p), "%s/gvids", owner);
	return num_at(p) == uid ? 2 : 0;
}

static int
claim_put(const struct ctl_conf *c, int64_t uid, const char *owner,
    uint64_t files)
{
	char p[PATH_MAX + 32], buf[OWNER_MAX + 32];
	int fd, n, r;

	snprintf(p, sizeof(p), "%s/%lld", c->host_dir, (long long)uid);
	n = snprintf(buf, sizeof(buf), "%s\n%llu\n", owner,
	    (unsigned long long)files);
	(void)unlink(p);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	         0600)) < 0)
		return KZ_ESYS;
	r = write(fd, buf, (size_t)n) == n ? 0 : KZ_ESYS;
	close(fd);
	if (r != 0)
		(void)unlink(p);
	return r;
}

void
ctl_host_release(const struct ctl_conf *c, const char *id, int64_t uid)
{
	char me[OWNER_MAX], owner[OWNER_MAX], p[PATH_MAX + 32];
	uint64_t files;
	int fd;

	if ((fd = ctl_host_lock(c, NULL, 0)) < 0)
		return;
	if (owner_of(c, id, me, sizeof(me)) == 0 &&
	    claim_get(c, uid, owner, &files) >= 0 && strcmp(owner, me) == 0) {
		snprintf(p, sizeof(p), "%s/%lld", c->host_dir, (long long)uid);
		(void)unlink(p);
	}
	close(fd);
}

/*
 * Whether worker id may kill as uid: the host's record gives it the uid,
 * or gives it to no live worker (one made before the record: the claim
 * is taken then, so that no create hands the uid out while its processes
 * are being killed).
 */
static int
own_uid(const struct ctl_conf *c, const char *id, int64_t uid, char *why,
    size_t wlen)
{
	char me[OWNER_MAX], owner[OWNER_MAX];
	uint64_t files;
	int fd, r = 0;

	if ((fd = ctl_host_lock(c, why, wlen)) < 0)
		return fd;
	if (owner_of(c, id, me, sizeof(me)) != 0) {
		kz_why(why, wlen, "cannot resolve the workers directory");
		r = KZ_EUNAVAIL;
	} else if (claim_get(c, uid, owner, &files) < 1) {
		if (claim_put(c, uid, me, 0) != 0) {
			kz_why(why, wlen, "cannot claim uid %lld",
			    (long long)uid);
			r = KZ_EUNAVAIL;
		}
	} else if (strcmp(owner, me) != 0) {
		kz_why(why, wlen,
		    "uid %lld is another worker's (%s): its processes are not "
		    "killed",
		    (long long)uid, owner);
		r = KZ_EDENIED;
	}
	close(fd);
	return r;
}

int
ctl_uid_kill(const struct ctl_conf *c, const char *id, int64_t hid, char *why,
    size_t wlen)
{
	int64_t end = kz_now_ms() + UID_WAIT_MS;
	int n;

	if ((n = own_uid(c, id, hid, why, wlen)) != 0)
		return n;
	while ((n = kz_proc_uid_live(hid, INT_MAX)) > 0 && kz_now_ms() < end) {
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
	char p[PATH_MAX];

	if (kz_pool_wpath(c->workers_dir, w, "files", p, sizeof(p)) != 0)
		return -1;
	return num_at(p);
}

/*
 * Whether the workers of this directory (their WORKERS/<w>/files records,
 * each unknown one counted as files), those of the host's other
 * deployments (others) and a new one holding files stay within
 * LEASE_FILES_SHARE of fs.file-max.
 */
static int
files_fit(const struct ctl_conf *c, const char *self, uint64_t files,
    uint64_t others, char *why, size_t wlen)
{
	static struct ctl_inv inv;
	char buf[32];
	int64_t max;
	uint64_t sum = files + others, cap;

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
		    "the workers of the host could hold %llu open files, more "
		    "than LEASE_FILES_SHARE %lld%% of fs.file-max (%lld): "
		    "raise fs.file-max or lower SANDBOX_MEMORY",
		    (unsigned long long)sum, (long long)c->files_share,
		    (long long)max);
		return KZ_EDENIED;
	}
	return 0;
}

/* The live claims of the host in claims[]; stale ones are removed. */
static int
claims_scan(const struct ctl_conf *c, char *why, size_t wlen)
{
	char here[OWNER_MAX], owner[OWNER_MAX];
	struct dirent *de;
	uint64_t files;
	int64_t uid;
	size_t hl;
	int live;
	DIR *d;

	nclaims = 0;
	if (owner_of(c, "", here, sizeof(here)) != 0 ||
	    (d = opendir(c->host_dir)) == NULL) {
		kz_why(why, wlen, "LEASE_HOST_DIR unreadable");
		return KZ_EUNAVAIL;
	}
	hl = strlen(here);
	while ((de = readdir(d)) != NULL) {
		if (kz_parse_int(de->d_name, 1, INT64_MAX, &uid) != 0)
			continue;
		if ((live = claim_get(c, uid, owner, &files)) < 1) {
			(void)unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		/* More than fit: an uncounted claim's uid would be given
		 * out twice. */
		if (nclaims == CLAIMS_MAX) {
			closedir(d);
			kz_why(why, wlen,
			    "more than %d claims in LEASE_HOST_DIR",
			    CLAIMS_MAX);
			return KZ_EUNAVAIL;
		}
		claims[nclaims].uid = uid;
		claims[nclaims].files = files;
		claims[nclaims].second = live == 2;
		claims[nclaims++].here = strncmp(owner, here, hl) == 0 &&
		    strchr(owner + hl, '/') == NULL;
	}
	closedir(d);
	return 0;
}

static int
cmp_uid(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The lowest uid of the range in neither taken (sorted) nor any process's;
 * 0 when none, -1 when /proc cannot tell. */
static int64_t
free_uid(const struct ctl_conf *c, const int64_t *taken, size_t nt)
{
	size_t i = 0;
	int k;

	for (int64_t u = c->ids_first; u <= c->ids_last; u++) {
		while (i < nt && taken[i] < u)
			i++;
		if (i < nt && taken[i] == u)
			continue;
		/* A user of the host, or a worker made before the record:
		 * a uid in use is skipped, never shared. */
		if ((k = kz_proc_uid_live(u, INT_MAX)) <= 0)
			return k < 0 ? -1 : u;
	}
	return 0;
}

int
ctl_host_claim(const struct ctl_conf *c, const char *id, const int64_t *held,
    size_t nh, uint64_t files, int64_t *out, char *why, size_t wlen)
{
	static int64_t taken[2 * CTL_INV_MAX + CLAIMS_MAX];
	char me[OWNER_MAX];
	uint64_t others = 0;
	int64_t u;
	int r;

	if (owner_of(c, id, me, sizeof(me)) != 0 || nh > 2 * CTL_INV_MAX) {
		kz_why(why, wlen, "cannot resolve the workers directory");
		return KZ_EUNAVAIL;
	}
	if ((r = claims_scan(c, why, wlen)) != 0)
		return r;
	memcpy(taken, held, nh * sizeof(*held));
	for (size_t j = 0; j < nclaims; j++) {
		taken[nh + j] = claims[j].uid;
		/* Unrecorded: the settings of now, as for this directory's. */
		if (!claims[j].here && !claims[j].second)
			others += claims[j].files > 0 ? claims[j].files : files;
	}
	qsort(taken, nh + nclaims, sizeof(taken[0]), cmp_uid);
	if ((u = free_uid(c, taken, nh + nclaims)) <= 0) {
		kz_why(why, wlen,
		    u < 0 ? "cannot tell which uids are in use" :
		            "no free worker id in LEASE_WORKER_IDS");
		return u < 0 ? KZ_EUNAVAIL : KZ_EDENIED;
	}
	if (files > 0 && (r = files_fit(c, id, files, others, why, wlen)) != 0)
		return r;
	if (claim_put(c, u, me, files) != 0) {
		kz_why(why, wlen, "cannot record the worker's uid");
		return KZ_EUNAVAIL;
	}
	*out = u;
	return 0;
}
