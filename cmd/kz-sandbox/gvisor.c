/*
 * SANDBOX_RUNTIME=gvisor: the code runs in runsc's user-space kernel.
 * Everything around it is the native worker's: the run init builds the
 * same root view in its own mount namespace and joins the worker's
 * network, IPC and UTS namespaces; the agent keeps the cgroups, the wall
 * clock, the output limits and the relay.  What changes is the code
 * process: instead of dropping its privileges and executing the code it
 * joins the run cgroup and executes runsc, which starts a new gVisor
 * sandbox (its gofer and its kernel, the Sentry) in that cgroup, on the
 * view, with an OCI spec generated here from the same configuration
 * (sbx_gv_spec).  The view stays where the init built it (the init does
 * not pivot: the code sees only what the spec names), and the runsc state
 * and bundle live on a tmpfs of the init's own mount namespace, gone with
 * the init at the next reset.
 *
 * The sandbox's first process is the loader, kz-gvisor-loader, a static
 * binary (gvloader/): it takes each run's job (argv, env, cwd and the run's
 * descriptors, passed into gVisor over the control socket that is its
 * standard input), starts the code, and at the end of the run kills
 * whatever the code left, inside gVisor, before it answers.  The run
 * init keeps the sandbox (gvisor_box.c).  A served worker keeps it for
 * the lease, as it keeps one run init: booted once the previous lease's
 * reset is proven (SANDBOX_GVISOR_PREBOOT) or at the lease's first run, it
 * serves every run of the lease.  A run the agent stops (wall clock, output,
 * pids) kills the run cgroup, the sandbox with it, and the next run boots
 * another; the reset kills the init and the run cgroup: no sandbox outlives its
 * lease.  A one-shot run is a sandbox of its own, gone with the run's teardown.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_path.h"
#include "sbx.h"
#include "sbx_gvisor.h"
#include "banned.h"

#define GV_TMPFS "size=8m,nr_inodes=256,mode=0700"

bool
sbx_gvisor(const struct sbx_conf *c)
{
	return strcmp(c->runtime, "gvisor") == 0;
}

int
sbx_gv_dir(const struct sbx_conf *c, const char *leaf, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.runsc%s%s", c->state_dir, c->id,
	    leaf ? "/" : "", leaf ? leaf : "");

	return n < 0 || (size_t)n >= len ? KZ_ETOOBIG : 0;
}

int
sbx_gv_binary(const struct sbx_conf *c, char *why, size_t wlen)
{
	struct stat st;

	if (stat(c->runsc, &st) < 0) {
		kz_why(why, wlen, "gvisor: runsc %s: %s", c->runsc,
		    strerror(errno));
		return KZ_EUNAVAIL;
	}
	if (!S_ISREG(st.st_mode) || access(c->runsc, X_OK) < 0) {
		kz_why(why, wlen, "gvisor: runsc %s is not an executable file",
		    c->runsc);
		return KZ_EUNAVAIL;
	}
	return 0;
}

/*
 * The loader (pid 1, gVisor's root) gets what it needs to become the
 * sandbox uid and gid and empty every set, as the native code process
 * does (sbx_caps_drop): CAP_SETUID, CAP_SETGID and CAP_SETPCAP, and
 * nothing inheritable or ambient, and CAP_KILL, to end what a run left
 * (processes of another uid).  The code itself has none.
 */
static bool
add_caps(cJSON *proc)
{
	static const char *const sets[] = {"bounding", "effective", "permitted",
	    "inheritable", "ambient", NULL};
	static const char *const need[] = {"CAP_SETUID", "CAP_SETGID",
	    "CAP_SETPCAP", "CAP_KILL"};
	cJSON *caps = cJSON_AddObjectToObject(proc, "capabilities"), *a, *s;

	for (int i = 0; caps != NULL && sets[i] != NULL; i++) {
		if ((a = cJSON_AddArrayToObject(caps, sets[i])) == NULL)
			return false;
		for (size_t k = 0; i < 3 && k < sizeof(need) / sizeof(need[0]);
		     k++)
			if ((s = cJSON_CreateString(need[k])) == NULL ||
			    !cJSON_AddItemToArray(a, s))
				return false;
	}
	return caps != NULL;
}

/* rlimit.c's limits, under their OCI names. */
static bool
add_rlimits(cJSON *proc, const struct sbx_conf *c)
{
	struct sbx_rlimit l[SBX_RLIMIT_N];
	cJSON *a = cJSON_AddArrayToObject(proc, "rlimits"), *o;
	char type[32];

	sbx_rlimit_list(c, l);
	for (int i = 0; a != NULL && i < SBX_RLIMIT_N; i++) {
		snprintf(type, sizeof(type), "RLIMIT_%s", l[i].name);
		if ((o = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddItemToArray(a, o) ||
		    cJSON_AddStringToObject(o, "type", type) == NULL ||
		    cJSON_AddNumberToObject(o, "hard", (double)l[i].v) ==
		        NULL ||
		    cJSON_AddNumberToObject(o, "soft", (double)l[i].v) == NULL)
			return false;
	}
	return a != NULL;
}

static bool
add_strings(cJSON *o, const char *name, char *const *v)
{
	cJSON *a = cJSON_AddArrayToObject(o, name), *s;

	for (int i = 0; a != NULL && v[i] != NULL; i++)
		if ((s = cJSON_CreateString(v[i])) == NULL ||
		    !cJSON_AddItemToArray(a, s))
			return false;
	return a != NULL;
}

/* The serving loader (sbx_gv_serve) and the ids it starts the code as. */
static bool
add_args(cJSON *p, const struct sbx_conf *c)
{
	char uid[24], gid[24];
	char *const args[] = {SBX_GV_LOADER, "gvisor-serve", uid, gid, NULL};

	snprintf(uid, sizeof(uid), "%lld", (long long)c->uid);
	snprintf(gid, sizeof(gid), "%lld", (long long)c->gid);
	return add_strings(p, "args", args);
}

/* The loader's process: its environment is a PATH only (each job brings
 * its own), its directory the workspace. */
static cJSON *
process(const struct sbx_conf *c)
{
	static char *const env[] = {SBX_GV_PATH, NULL};
	cJSON *p = cJSON_CreateObject(), *u;

	if (p == NULL || cJSON_AddFalseToObject(p, "terminal") == NULL ||
	    (u = cJSON_AddObjectToObject(p, "user")) == NULL ||
	    cJSON_AddNumberToObject(u, "uid", 0) == NULL ||
	    cJSON_AddNumberToObject(u, "gid", 0) == NULL || !add_args(p, c) ||
	    !add_strings(p, "env", env) ||
	    cJSON_AddStringToObject(p, "cwd", SBX_WS) == NULL || !add_caps(p) ||
	    cJSON_AddTrueToObject(p, "noNewPrivileges") == NULL ||
	    !add_rlimits(p, c)) {
		cJSON_Delete(p);
		return NULL;
	}
	return p;
}

static bool
add_mount(cJSON *a, const char *dst, const char *type, const char *src,
    const char *opts)
{
	cJSON *m = cJSON_CreateObject(), *o, *s;
	char buf[128], *tok, *save = NULL;

	if (m == NULL || !cJSON_AddItemToArray(a, m) ||
	    cJSON_AddStringToObject(m, "destination", dst) == NULL ||
	    cJSON_AddStringToObject(m, "type", type) == NULL ||
	    cJSON_AddStringToObject(m, "source", src) == NULL ||
	    (o = cJSON_AddArrayToObject(m, "options")) == NULL)
		return false;
	snprintf(buf, sizeof(buf), "%s", opts);
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save))
		if ((s = cJSON_CreateString(tok)) == NULL ||
		    !cJSON_AddItemToArray(o, s))
			return false;
	return true;
}

/*
 * The root is the view itself, read-only, with everything mounted in it
 * (the allowlisted directories, the synthesized /etc, the masks, the extra
 * directories, the projection); gVisor's kernel provides /proc, /dev and
 * /dev/pts of its own, /sys is empty (as in the view, where it is an
 * empty directory; runsc would otherwise add its own sysfs), and the three
 * writable places are the view's own size-bounded tmpfs instances, bound
 * read-write, so the reset checks the very directories the code wrote to.
 * The projection is a mount of its own, read-only: gVisor revalidates
 * what it caches of a mount other than the root (runsc's default
 * --file-access-mounts=shared), so a sandbox kept for the lease sees what
 * the host projects while it runs, as the native code does.
 */
static cJSON *
mounts(const struct sbx_conf *c, const char *rootfs, const char *filter)
{
	static const char *const rw[] = {SBX_WS, "/tmp", "/dev/shm", NULL};
	cJSON *a = cJSON_CreateArray();
	char src[SBX_PBUF];
	bool ok = a != NULL &&
	    add_mount(a, "/proc", "proc", "proc", "nosuid,nodev,noexec") &&
	    add_mount(a, "/dev", "tmpfs", "tmpfs", "nosuid,mode=755") &&
	    add_mount(a, "/dev/pts", "devpts", "devpts",
	        "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620") &&
	    add_mount(a, "/sys", "tmpfs", "tmpfs",
	        "ro,nosuid,nodev,noexec,size=4k");

	ok = ok &&
	    add_mount(a, SBX_GV_FILTER, "bind", filter,
	        "bind,ro,nosuid,nodev,noexec");
	for (int i = 0; ok && rw[i] != NULL; i++) {
		snprintf(src, sizeof(src), "%s%s", rootfs, rw[i]);
		ok = add_mount(a, rw[i], "bind", src, "rbind,rw,nosuid,nodev");
	}
	if (ok && c->projection[0] != '\0') {
		snprintf(src, sizeof(src), "%s%s", rootfs, SBX_PROJ);
		ok = add_mount(a, SBX_PROJ, "bind", src,
		    "rbind,ro,nosuid,nodev");
	}
	if (!ok) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

/*
 * The gofer's user namespace, which runsc makes inside its own (ns.c,
 * gv_maps) from these maps: root is runsc's (SANDBOX_GVISOR_UID, or the
 * host's root without it), and the sandbox ids are runsc's nobody there,
 * that is the host's sandbox ids, so the gofer sees and makes the code's
 * files as the sandbox ids, as the code does.  Its capabilities hold over
 * no other host id.
 */
static bool
add_idmap(cJSON *l, const char *name, int64_t id)
{
	cJSON *a = cJSON_AddArrayToObject(l, name), *o;
	const int64_t in[] = {0, id}, out[] = {0, SBX_GV_NOBODY};

	for (int i = 0; a != NULL && i < 2; i++)
		if ((o = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddItemToArray(a, o) ||
		    cJSON_AddNumberToObject(o, "containerID", (double)in[i]) ==
		        NULL ||
		    cJSON_AddNumberToObject(o, "hostID", (double)out[i]) ==
		        NULL ||
		    cJSON_AddNumberToObject(o, "size", 1) == NULL)
			return false;
	return a != NULL;
}

/* A network namespace of gVisor's own, always (runsc --network=none):
 * its loopback holds only what the loader listens on (gvisor_net.c). */
static cJSON *
linux_part(const struct sbx_conf *c)
{
	static const char *const ns[] = {"pid", "ipc", "uts", "mount", "user",
	    "network", NULL};
	cJSON *l = cJSON_CreateObject(), *a, *o;

	if (l == NULL || (a = cJSON_AddArrayToObject(l, "namespaces")) == NULL)
		goto bad;
	for (int i = 0; ns[i] != NULL; i++) {
		if ((o = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddItemToArray(a, o) ||
		    cJSON_AddStringToObject(o, "type", ns[i]) == NULL)
			goto bad;
	}
	if (!add_idmap(l, "uidMappings", c->uid) ||
	    !add_idmap(l, "gidMappings", c->gid))
		goto bad;
	return l;
bad:
	cJSON_Delete(l);
	return NULL;
}

/*
 * The root is not marked read-only in the spec: runsc would remount the
 * view read-only, which the gofer's user namespace may not do (the view's
 * nosuid and nodev are locked there, and that remount drops them).  The
 * view is read-only on the host, and locked so for the gofer, so every
 * write to it fails there.
 */
cJSON *
sbx_gv_spec(const struct sbx_conf *c, const char *rootfs, const char *filter)
{
	cJSON *s = cJSON_CreateObject(), *r, *p = process(c),
	      *m = mounts(c, rootfs, filter), *l = linux_part(c);

	if (s == NULL || p == NULL || m == NULL || l == NULL)
		goto bad;
	cJSON_AddItemToObject(s, "process", p);
	cJSON_AddItemToObject(s, "mounts", m);
	cJSON_AddItemToObject(s, "linux", l);
	p = m = l = NULL;
	if (cJSON_AddStringToObject(s, "ociVersion", "1.0.2") == NULL ||
	    (r = cJSON_AddObjectToObject(s, "root")) == NULL ||
	    cJSON_AddStringToObject(r, "path", rootfs) == NULL ||
	    cJSON_AddFalseToObject(r, "readonly") == NULL ||
	    cJSON_AddStringToObject(s, "hostname", c->hostname) == NULL)
		goto bad;
	return s;
bad:
	cJSON_Delete(s);
	cJSON_Delete(p);
	cJSON_Delete(m);
	cJSON_Delete(l);
	return NULL;
}

int
sbx_gv_chown(const struct sbx_conf *c, int fd, const char *p)
{
	if (c->gv_uid == 0)
		return 0;
	return fchownat(fd, p, (uid_t)c->gv_uid, (gid_t)c->gv_gid,
	    p[0] == '\0' ? AT_EMPTY_PATH : 0);
}

/*
 * The highest directory on the way to SANDBOX_STATE_DIR (itself included)
 * that others may not search, in top (its length); 0 when there is none.
 */
static size_t
gv_closed(const char *dir, char *top, size_t len)
{
	struct stat st;
	size_t n = strlen(dir);

	if (n >= len)
		return 0;
	memcpy(top, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (top[i] != '/' && top[i] != '\0')
			continue;
		top[i] = '\0';
		if (stat(top, &st) == 0 && (st.st_mode & S_IXOTH) == 0)
			return i;
		top[i] = dir[i];
	}
	return 0;
}

/*
 * SANDBOX_STATE_DIR is root's, 0700, and may lie below directories others
 * may not search (kz-ctl-local's WORKERS/ID/state): runsc's uid could not
 * reach its own state and the view below it.  In the init's mount
 * namespace alone (the host's directories stay as they are) a tmpfs
 * searchable by all but listable by none covers the highest such
 * directory, holding the way down to this worker's two places, the stage
 * and runsc's state, bound back at their paths; nothing else of what it
 * covers is there.  The init uses nothing else below it once the view is
 * built.
 */
static int
gv_reach(const struct sbx_worker *w, char *why, size_t wlen)
{
	char top[SBX_PBUF], gp[SBX_PBUF], fp[64];
	const char *place[2] = {w->mnt.stage, gp}, *base;
	int fd[2] = {-1, -1}, tfd = -1, pfd = -1, r = KZ_ESYS;
	size_t n;

	if (w->c->gv_uid == 0)
		return 0;
	if (sbx_gv_dir(w->c, NULL, gp, sizeof(gp)) != 0)
		return KZ_ETOOBIG;
	if ((n = gv_closed(w->c->state_dir, top, sizeof(top))) == 0)
		return 0;
	if ((fd[0] = open(place[0], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (fd[1] = open(gp, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	        "size=16k,nr_inodes=64,mode=0711") < 0 ||
	    (tfd = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto out;
	/* The way down to each place (both lie below top), then the place. */
	for (int i = 0; i < 2; i++) {
		if (strncmp(place[i], top, n) != 0 || place[i][n] != '/') {
			errno = EXDEV;
			goto out;
		}
		if (kz_path_mkparent(tfd, place[i] + n + 1, 0711, (uid_t)-1,
		        (gid_t)-1, &pfd, &base, NULL) != 0 ||
		    mkdirat(pfd, base, 0700) < 0)
			goto out;
		close(pfd);
		pfd = -1;
		snprintf(fp, sizeof(fp), "/proc/self/fd/%d", fd[i]);
		if (mount(fp, place[i], NULL, MS_BIND | MS_REC, NULL) < 0)
			goto out;
	}
	r = 0;
out:
	if (r != 0)
		kz_why(why, wlen, "gvisor: cannot show runsc its state: %s",
		    strerror(errno));
	if (pfd >= 0)
		close(pfd);
	if (tfd >= 0)
		close(tfd);
	for (int i = 0; i < 2; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	return r;
}

int
sbx_gv_enter(const struct sbx_worker *w, char *why, size_t wlen)
{
	char p[SBX_PBUF];

	/* runsc re-executes itself through /proc/self/exe, which needs a
	 * /proc of the init's pid namespace. */
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	        NULL) < 0) {
		kz_why(why, wlen, "gvisor: cannot mount /proc: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	if (sbx_gv_dir(w->c, NULL, p, sizeof(p)) != 0 ||
	    mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	        GV_TMPFS) < 0) {
		kz_why(why, wlen, "gvisor: cannot mount the runsc state: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	if (sbx_gv_chown(w->c, AT_FDCWD, p) != 0 ||
	    sbx_gv_dir(w->c, "root", p, sizeof(p)) != 0 || mkdir(p, 0700) < 0 ||
	    sbx_gv_chown(w->c, AT_FDCWD, p) != 0 ||
	    sbx_gv_dir(w->c, "bundle", p, sizeof(p)) != 0 ||
	    mkdir(p, 0700) < 0 || sbx_gv_chown(w->c, AT_FDCWD, p) != 0) {
		kz_why(why, wlen, "gvisor: cannot make the runsc state: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	return gv_reach(w, why, wlen);
}

/*
 * The start's real probe: /bin/true run through runsc exactly as a
 * tenant's code would be (same spec, same cgroup, same namespaces).  A
 * runsc that is broken, or refuses part of the spec, fails it, and the
 * worker does not start.
 */
int
sbx_gv_probe(struct sbx_worker *w, char *why, size_t wlen)
{
	static char *const argv[] = {"/bin/true", NULL};
	struct sbx_req rq;
	struct sbx_res rs;
	int r = KZ_EUNAVAIL;

	memset(&rq, 0, sizeof(rq));
	sbx_env_init(&rq.env);
	rq.argv = (char **)argv;
	rq.stdin_fd = rq.out_fd[0] = rq.out_fd[1] = -1;
	rq.timeout_ms = 60000;
	rq.out_max[0] = w->c->stdout_max, rq.out_max[1] = w->c->stderr_max;
	if (sbx_env_finish(&rq.env, 0, why, wlen) != 0 ||
	    sbx_run(w, &rq, &rs) != 0) {
		sbx_env_release(&rq.env);
		kz_why(why, wlen, "gvisor: the probe could not run");
		return KZ_EUNAVAIL;
	}
	/* The probe's sandbox is the first lease's, unless none is kept
	 * between leases. */
	if (!w->c->gv_preboot)
		(void)sbx_cg_kill_run(&w->cg);
	if (rs.setup_failed)
		kz_why(why, wlen, "gvisor: probe: %s: %s", rs.step, rs.why);
	else if (!rs.exited || rs.code != 0) {
		rs.buf[1][rs.len[1]] = '\0';
		rs.buf[1][strcspn((char *)rs.buf[1], "\n")] = '\0';
		kz_why(why, wlen,
		    "gvisor: probe: /bin/true under runsc ended with %s %d: "
		    "%.120s",
		    rs.exited ? "status" : "signal",
		    rs.exited ? rs.code : rs.sig, (char *)rs.buf[1]);
	} else
		r = 0;
	sbx_res_release(&rs);
	sbx_env_release(&rq.env);
	return r;
}

int64_t
sbx_cg_pids(const struct sbx_conf *c)
{
	return c->pids + (sbx_gvisor(c) ? SBX_GV_PIDS : 0);
}
