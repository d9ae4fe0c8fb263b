/*
 * Positive evidence that a worker is clean (kz_evidence.h): the agent wipes
 * on request and reports, and the host checks independently what it can
 * see.  Each item is recorded true only when a check ran and passed.  No
 * static buffers: kz-lease runs several resets at once in threads.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_evidence.h"
#include "kz_frame.h"
#include "kz_json.h"
#include "kz_pool.h"
#include "kz_sock.h"
#include "kz_tree.h"
#include "banned.h"

#define TEXT_MAX 65536

/*
 * One agent call on an open connection; the reply must answer this very
 * request (its id), so a late reply to an earlier call is never taken for
 * this one.  NULL when the call failed or (unless any) was refused.
 */
static cJSON *
call(int fd, const char *op, int timeout_ms, bool any)
{
	cJSON *req = cJSON_CreateObject(), *rep = NULL;
	const cJSON *id;
	char rid[32];

	if (req == NULL || fd < 0) {
		cJSON_Delete(req);
		return NULL;
	}
	snprintf(rid, sizeof(rid), "kz-reset.%s", op);
	cJSON_AddNumberToObject(req, "v", 1);
	cJSON_AddStringToObject(req, "op", op);
	cJSON_AddStringToObject(req, "id", rid);
	if (kz_frame_write(fd, req, KZ_FRAME_MAX_DEFAULT, timeout_ms) != 0 ||
	    kz_frame_read(fd, KZ_FRAME_MAX_DEFAULT, timeout_ms, &rep, NULL,
	        0) != 0)
		rep = NULL;
	cJSON_Delete(req);
	id = kz_json_get(rep, "id");
	if (rep != NULL &&
	    ((!any && !cJSON_IsTrue(kz_json_get(rep, "ok"))) ||
	        !cJSON_IsString(id) || strcmp(id->valuestring, rid) != 0)) {
		cJSON_Delete(rep);
		rep = NULL;
	}
	return rep;
}

/*
 * Whether the process answering on fd is the worker's own agent, the pid
 * its controller recorded: what the wipe and health answers prove is then
 * the agent's word, not that of another listener at a path a controller
 * named.
 */
static bool
endpoint_is(int fd, pid_t pid)
{
	struct ucred uc;
	socklen_t n = sizeof(uc);

	return fd >= 0 && pid > 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &n) == 0 &&
	    uc.pid == pid;
}

static int
agent_open(const char *endpoint, int timeout_ms)
{
	int fd;

	return kz_sock_connect(endpoint, timeout_ms, &fd, NULL, 0) == 0 ? fd :
	                                                                  -1;
}

static ssize_t
read_text(const char *path, char *buf, size_t len)
{
	ssize_t n = 0, t = 0;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	while ((size_t)t < len - 1 &&
	    (n = read(fd, buf + t, len - 1 - (size_t)t)) > 0)
		t += n;
	close(fd);
	if (n < 0)
		return -1;
	buf[t] = '\0';
	return t;
}

bool
kz_evidence_procs_only(const char *text, pid_t pid)
{
	char want[32];

	snprintf(want, sizeof(want), "%d\n", (int)pid);
	return strcmp(text, want) == 0;
}

static pid_t
agent_pid(const char *workers_dir, const char *id)
{
	char p[PATH_MAX], buf[32];
	int64_t v;

	if (kz_pool_wpath(workers_dir, id, "pid", p, sizeof(p)) != 0 ||
	    read_text(p, buf, sizeof(buf)) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return kz_parse_int(buf, 2, 1 << 22, &v) == 0 ? (pid_t)v : -1;
}

/* Whether rel (a path of /proc/PID/cgroup) ends in "/<tail>". */
static bool
ends_in(const char *rel, const char *tail)
{
	size_t r = strlen(rel), t = strlen(tail);

	return r > t && rel[r - t - 1] == '/' && strcmp(rel + r - t, tail) == 0;
}

/*
 * Where the cgroup2 hierarchy's root is mounted (its root field "/"), from
 * this process's mountinfo; false when it is not, or only under a path
 * mountinfo escapes.
 */
static bool
cgroup2_root(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *sep, *save, *root, *mp;
	size_t cap = 0;
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint ... - fstype source ... */
		if ((sep = strstr(line, " - ")) == NULL ||
		    strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		*sep = '\0';
		save = NULL;
		if (strtok_r(line, " ", &save) == NULL ||
		    strtok_r(NULL, " ", &save) == NULL ||
		    strtok_r(NULL, " ", &save) == NULL ||
		    (root = strtok_r(NULL, " ", &save)) == NULL ||
		    (mp = strtok_r(NULL, " ", &save)) == NULL)
			continue;
		if (strcmp(root, "/") == 0 && strchr(mp, '\\') == NULL &&
		    (size_t)snprintf(out, len, "%s", mp) < len)
			found = true;
	}
	free(line);
	fclose(f);
	return found;
}

/* Whether a cgroup.events text says no process is in the cgroup or
 * beneath it. */
static bool
unpopulated(const char *events)
{
	return strncmp(events, "populated 0\n", 12) == 0 ||
	    strstr(events, "\npopulated 0\n") != NULL;
}

/*
 * Every child cgroup of the worker's w but the agent's leaf and the next
 * tenant's init (run, a browser session's, any other) holds no process:
 * on v2 none in it or beneath it (cgroup.events), on v1 none in it.
 */
static bool
children_clean(const char *w, bool v2, char *buf)
{
	char path[2 * PATH_MAX + 64];
	struct dirent *e;
	DIR *d = opendir(w);
	bool ok = d != NULL;

	while (ok && (e = readdir(d)) != NULL) {
		if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 ||
		    strcmp(e->d_name, "..") == 0 ||
		    strcmp(e->d_name, "init") == 0 ||
		    (v2 && strcmp(e->d_name, "agent") == 0))
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", w, e->d_name,
		    v2 ? "cgroup.events" : "cgroup.procs");
		ok = read_text(path, buf, TEXT_MAX) >= 0 &&
		    (v2 ? unpopulated(buf) : buf[0] == '\0');
	}
	if (d != NULL)
		closedir(d);
	return ok;
}

/* v1: the cgroup <ctl><rel> lists only the agent, its children nothing. */
static bool
v1_clean(const char *ctl, const char *rel, pid_t pid, char *procs)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s/cgroup.procs", ctl,
	    rel);
	if (read_text(path, procs, TEXT_MAX) < 0 ||
	    !kz_evidence_procs_only(procs, pid))
		return false;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s", ctl, rel);
	return children_clean(path, false, procs);
}

/*
 * v2 (the agent in <id>/agent): that leaf lists only the agent, <id>
 * itself none, and <id>/run exists; run and every other child but init
 * are unpopulated, so no process of the code is left however deep.
 */
static bool
v2_clean(const char *rel, pid_t pid, char *procs)
{
	char root[PATH_MAX], path[2 * PATH_MAX + 64], w[PATH_MAX + 32];
	int wl = (int)(strlen(rel) - strlen("/agent"));

	if (!cgroup2_root(root, sizeof(root)) ||
	    (size_t)snprintf(w, sizeof(w), "%s%.*s", root, wl, rel) >=
	        sizeof(w))
		return false;
	snprintf(path, sizeof(path), "%s/agent/cgroup.procs", w);
	if (read_text(path, procs, TEXT_MAX) < 0 ||
	    !kz_evidence_procs_only(procs, pid))
		return false;
	snprintf(path, sizeof(path), "%s/cgroup.procs", w);
	if (read_text(path, procs, TEXT_MAX) < 0 || procs[0] != '\0')
		return false;
	snprintf(path, sizeof(path), "%s/run/cgroup.events", w);
	return read_text(path, procs, TEXT_MAX) >= 0 &&
	    children_clean(w, true, procs);
}

/*
 * The agent's own cgroups hold the agent alone and its run cgroup no
 * process.  Which hierarchy holds the worker is read from where the agent
 * sits, by the worker's id (kz-sandbox(8)): on v1, the memory and pids
 * hierarchies at <parent>/<id>, each checked; on v2, <parent>/<id>/agent.
 * Every v1 line that names the worker is checked, and at least one
 * hierarchy must have been; a v1 memory or pids cgroup elsewhere is taken
 * as v2's only when the v2 line names the worker.
 */
bool
kz_evidence_cgroup(pid_t pid, const char *id)
{
	char p[64], sub[KZ_POOL_ID_MAX + 16], *line, *save = NULL, *ctl, *rel;
	char *text = malloc(TEXT_MAX), *procs = malloc(TEXT_MAX);
	int v1 = 0, v1_other = 0;
	bool v2 = false,
	     ok = text != NULL && procs != NULL && id != NULL &&
	    kz_pool_id_ok(id);

	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	if (!ok || pid <= 0 || read_text(p, text, TEXT_MAX) <= 0) {
		ok = false;
		goto out;
	}
	snprintf(sub, sizeof(sub), "%s/agent", id);
	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if ((ctl = strchr(line, ':')) == NULL ||
		    (rel = strchr(ctl + 1, ':')) == NULL) {
			ok = false;
			break;
		}
		*rel++ = '\0';
		ctl++;
		if (*ctl == '\0') {
			/* The v2 line ("0::<rel>"). */
			if (ends_in(rel, sub)) {
				v2 = true;
				ok = ok && v2_clean(rel, pid, procs);
			}
			continue;
		}
		if (strcmp(ctl, "memory") != 0 && strcmp(ctl, "pids") != 0)
			continue;
		if (!ends_in(rel, id)) {
			v1_other++;
			continue;
		}
		ok = ok && v1_clean(ctl, rel, pid, procs);
		v1++;
	}
	/* v1 and v2 both, or neither, or v1 for one controller only: not a
	 * layout kz-sandbox makes. */
	if (v2 ? v1 > 0 : v1 == 0 || v1_other > 0)
		ok = false;
out:
	free(text);
	free(procs);
	return ok;
}

/* Whether the directory open at dfd lists nothing. */
static bool
lists_empty(int dfd)
{
	struct dirent *de;
	bool empty = true;
	DIR *d;
	int fd;

	if ((fd = dup(dfd)) < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			empty = false;
	closedir(d);
	return empty;
}

/* Whether path is a directory (not a link to one) that lists empty and,
 * with deep, holds nothing below either. */
static bool
dir_empty(const char *path, bool deep)
{
	int dfd;
	bool ok;

	if ((dfd = open(path,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	ok = (!deep || kz_tree_empty(dfd) == 0) && lists_empty(dfd);
	close(dfd);
	return ok;
}

/*
 * The projection directory is filled from the host by the dispatch client
 * and bound read-only into the worker: the host wipes it and lists it.
 */
bool
kz_evidence_projection(const char *path)
{
	return dir_empty(path, true);
}

bool
kz_evidence_dir_empty(const char *path)
{
	return dir_empty(path, false);
}

static bool
flag(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(kz_json_get(o, k));
}

/*
 * What the agent proves from where it stands (kz-sandbox(8), op wipe), in
 * the order kz-reset(8) lists it.  Each is recorded as "agent_<item>":
 * true only when the agent's answer names it true.
 */
static const char *const agent_items[] = {"leftovers_killed", "previous_gone",
    "namespaces_new", "within_lease_limit", "workspace_empty", "tmp_empty",
    "shm_empty", "mounts_baseline", "ipc_empty", "cgroup_only_agent",
    "memory_clean", NULL};

static void
agent_evidence(const cJSON *wipe, cJSON *ev)
{
	const cJSON *e = kz_json_get(wipe, "evidence"), *m;
	char name[64];

	for (int i = 0; agent_items[i] != NULL; i++) {
		snprintf(name, sizeof(name), "agent_%s", agent_items[i]);
		cJSON_AddBoolToObject(ev, name,
		    cJSON_IsObject(e) && flag(e, agent_items[i]));
	}
	m = kz_json_get(wipe, "memory_bytes");
	if (cJSON_IsNumber(m) && m->valuedouble >= 0)
		cJSON_AddNumberToObject(ev, "agent_memory_bytes",
		    m->valuedouble);
}

static void
gen_of(const cJSON *o, char *gen, size_t glen)
{
	const cJSON *g = kz_json_get(o, "generation");

	if (cJSON_IsNumber(g))
		snprintf(gen, glen, "%.0f", g->valuedouble);
	else if (cJSON_IsString(g))
		snprintf(gen, glen, "%s", g->valuestring);
	else
		gen[0] = '\0';
}

void
kz_evidence_collect(const char *workers_dir, const char *id,
    const char *endpoint, int io_timeout_ms, cJSON *ev, char *gen, size_t glen)
{
	cJSON *wipe, *health;
	char hgen[KZ_EVIDENCE_GEN_MAX] = "", proj[PATH_MAX];
	const char *hid = NULL;
	pid_t pid = agent_pid(workers_dir, id);
	int fd = agent_open(endpoint, io_timeout_ms);
	bool ok, agent = endpoint_is(fd, pid);

	gen[0] = '\0';
	/* Wipe and health share one connection (the agent serves requests
	 * on a connection in turn); after a failed wipe, health asks on a
	 * fresh one.  A wipe the agent could not prove clean still names
	 * what it could and could not prove. */
	wipe = call(fd, "wipe", io_timeout_ms, true);
	ok = cJSON_IsTrue(kz_json_get(wipe, "ok"));
	if (wipe == NULL && fd >= 0) {
		close(fd);
		fd = agent_open(endpoint, io_timeout_ms);
		agent = agent && endpoint_is(fd, pid);
	}
	cJSON_AddBoolToObject(ev, "endpoint_agent", agent);
	cJSON_AddBoolToObject(ev, "wipe_ok", ok);
	agent_evidence(wipe, ev);
	if (ok)
		gen_of(wipe, gen, glen);
	cJSON_AddBoolToObject(ev, "cgroup_only_agent",
	    pid > 0 && kz_evidence_cgroup(pid, id));
	cJSON_AddBoolToObject(ev, "projection_empty",
	    kz_pool_wpath(workers_dir, id, "projection", proj, sizeof(proj)) ==
	            0 &&
	        kz_evidence_projection(proj));
	health = call(fd, "health", io_timeout_ms, false);
	if (fd >= 0)
		close(fd);
	if (health != NULL) {
		gen_of(health, hgen, sizeof(hgen));
		if (kz_json_str_opt(health, "worker", 64, NULL, &hid, NULL,
		        0) != 0 ||
		    hid == NULL)
			if (kz_json_str_opt(health, "worker_id", 64, NULL, &hid,
			        NULL, 0) != 0)
				hid = NULL;
	}
	cJSON_AddBoolToObject(ev, "health_id",
	    hid != NULL && strcmp(hid, id) == 0);
	cJSON_AddBoolToObject(ev, "health_generation",
	    gen[0] != '\0' && strcmp(hgen, gen) == 0);
	cJSON_Delete(wipe);
	cJSON_Delete(health);
}

cJSON *
kz_evidence_missing(const cJSON *ev, char *buf, size_t len)
{
	cJSON *m = cJSON_CreateArray();
	const cJSON *x;
	size_t n = 0;

	if (len > 0)
		buf[0] = '\0';
	if (m == NULL)
		return NULL;
	cJSON_ArrayForEach(x, ev)
	{
		if (!cJSON_IsBool(x) || cJSON_IsTrue(x))
			continue;
		cJSON_AddItemToArray(m, cJSON_CreateString(x->string));
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
			    n > 0 ? "," : "", x->string);
	}
	return m;
}

cJSON *
kz_evidence_record(const cJSON *out, const char *id, const char *token,
    const char *rid, int64_t duration_ms)
{
	static const char *const keep[] = {"evidence", "missing", "result",
	    NULL};
	cJSON *a = cJSON_CreateObject(), *x;
	size_t i;

	if (a == NULL)
		return NULL;
	for (i = 0; keep[i] != NULL; i++)
		if ((x = kz_json_get(out, keep[i])) != NULL)
			cJSON_AddItemToObject(a, keep[i],
			    cJSON_Duplicate(x, 1));
	cJSON_AddStringToObject(a, "worker_id", id);
	cJSON_AddNumberToObject(a, "token", (double)kz_pool_token_n(token));
	if (rid != NULL && *rid != '\0')
		cJSON_AddStringToObject(a, "rid", rid);
	cJSON_AddNumberToObject(a, "duration_ms", (double)duration_ms);
	return a;
}

void
kz_reset_prove(struct kz_reset *r, const char *workers_dir, const char *id,
    const char *endpoint, int io_timeout_ms)
{
	cJSON *ev = cJSON_CreateObject(), *m;

	memset(r, 0, sizeof(*r));
	if ((r->out = cJSON_CreateObject()) == NULL || ev == NULL) {
		cJSON_Delete(ev);
		snprintf(r->miss, sizeof(r->miss), "out_of_memory");
		return;
	}
	cJSON_AddStringToObject(r->out, "worker", id);
	kz_evidence_collect(workers_dir, id, endpoint, io_timeout_ms, ev,
	    r->gen, sizeof(r->gen));
	m = kz_evidence_missing(ev, r->miss, sizeof(r->miss));
	cJSON_AddItemToObject(r->out, "evidence", ev);
	if (m == NULL) {
		snprintf(r->miss, sizeof(r->miss), "out_of_memory");
		return;
	}
	r->clean = cJSON_GetArraySize(m) == 0 && r->gen[0] != '\0';
	cJSON_AddItemToObject(r->out, "missing", m);
}

enum kz_pool_script
kz_reset_script(const struct kz_reset *r, const char **arg)
{
	if (r->clean) {
		*arg = r->gen;
		return KZ_POOL_PUBLISH;
	}
	*arg = r->miss[0] != '\0' ? r->miss : "no_generation";
	return KZ_POOL_RETIRE;
}

const char *
kz_reset_outcome(struct kz_reset *r, const cJSON *res)
{
	const char *result = kz_pool_errcode(res) != NULL ? "stale_token" :
	    r->clean                                      ? "warm" :
	                                                    "retired";

	if (r->out != NULL)
		cJSON_AddStringToObject(r->out, "result", result);
	r->kind = strcmp(result, "warm") == 0 ? "reset" : "retire";
	return result;
}

void
kz_reset_release(struct kz_reset *r)
{
	cJSON_Delete(r->out);
	r->out = NULL;
}
