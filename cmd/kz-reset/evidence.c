/*
 * Positive evidence that a worker is clean: the agent wipes on request and
 * reports, and this program checks independently what it can see from the
 * host.  Each item is recorded true only when a check ran and passed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_frame.h"
#include "kz_json.h"
#include "kz_pool.h"
#include "reset.h"
#include "banned.h"

#define TEXT_MAX 65536

static cJSON *
call(const struct worker_rec *w, const char *op, int timeout_ms)
{
	cJSON *req = cJSON_CreateObject(), *rep = NULL;

	if (req == NULL)
		return NULL;
	cJSON_AddNumberToObject(req, "v", 1);
	cJSON_AddStringToObject(req, "op", op);
	cJSON_AddStringToObject(req, "id", "kz-reset");
	if (kz_frame_call(w->endpoint, req, timeout_ms, &rep, NULL, 0) != 0)
		rep = NULL;
	cJSON_Delete(req);
	if (rep != NULL && !cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		cJSON_Delete(rep);
		rep = NULL;
	}
	return rep;
}

static ssize_t
read_text(const char *path, char *buf, size_t len)
{
	ssize_t n = 0, t = 0;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	while ((size_t)t < len - 1 && (n = read(fd, buf + t, len - 1 -
	    (size_t)t)) > 0)
		t += n;
	close(fd);
	if (n < 0)
		return -1;
	buf[t] = '\0';
	return t;
}

bool
evidence_procs_only(const char *text, pid_t pid)
{
	char want[32];

	snprintf(want, sizeof(want), "%d\n", (int)pid);
	return strcmp(text, want) == 0;
}

static pid_t
agent_pid(const struct reset_conf *c, const char *id)
{
	char p[PATH_MAX], buf[32];
	int64_t v;

	if (kz_pool_wpath(c->workers_dir, id, "pid", p, sizeof(p)) != 0 ||
	    read_text(p, buf, sizeof(buf)) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return kz_parse_int(buf, 2, 1 << 22, &v) == 0 ? (pid_t)v : -1;
}

/*
 * The agent's own cgroup (per v1 controller that exists) must list only
 * the agent, and its "run" child, where code ran, must list nothing.  At
 * least one hierarchy must have been checked.
 */
static bool
cgroup_only_agent(pid_t pid)
{
	static char text[TEXT_MAX], procs[TEXT_MAX];
	char p[64], path[PATH_MAX + 64], *line, *save = NULL, *ctl, *rel;
	int checked = 0;
	bool ok = true;

	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	if (read_text(p, text, sizeof(text)) <= 0)
		return false;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if ((ctl = strchr(line, ':')) == NULL ||
		    (rel = strchr(ctl + 1, ':')) == NULL)
			return false;
		*rel++ = '\0';
		ctl++;
		if (strcmp(ctl, "memory") != 0 && strcmp(ctl, "pids") != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s/cgroup.procs",
		    ctl, rel);
		if (read_text(path, procs, sizeof(procs)) < 0 ||
		    !evidence_procs_only(procs, pid))
			ok = false;
		snprintf(path, sizeof(path),
		    "/sys/fs/cgroup/%s%s/run/cgroup.procs", ctl, rel);
		if (read_text(path, procs, sizeof(procs)) < 0) {
			if (errno != ENOENT)
				ok = false;
		} else if (procs[0] != '\0')
			ok = false;
		checked++;
	}
	return ok && checked > 0;
}

/*
 * Empties the directory open at dfd without following a symlink: entries
 * are removed by name relative to their parent's descriptor and only real
 * directories are descended into.  depth bounds a hostile tree.
 */
static int
empty_at(int dfd, int depth)
{
	struct dirent *de;
	struct stat sb;
	DIR *d;
	int fd, r = 0;

	if (depth > 32 || (fd = dup(dfd)) < 0)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
			r = -1;
			continue;
		}
		if (S_ISDIR(sb.st_mode)) {
			fd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0 || empty_at(fd, depth + 1) != 0)
				r = -1;
			if (fd >= 0)
				close(fd);
			if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) != 0)
				r = -1;
		} else if (unlinkat(dfd, de->d_name, 0) != 0)
			r = -1;
	}
	closedir(d);
	return r;
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

/*
 * The projection directory is filled from the host by the dispatch client
 * and bound read-only into the worker: the host wipes it and lists it.
 */
bool
evidence_projection(const char *path)
{
	int dfd;
	bool ok;

	if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return false;
	ok = empty_at(dfd, 0) == 0 && lists_empty(dfd);
	close(dfd);
	return ok;
}

static bool
flag(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(kz_json_get(o, k));
}

/* Copies the agent's own wipe evidence (booleans only) under "agent_". */
static bool
agent_places(const cJSON *wipe, cJSON *ev)
{
	const cJSON *e = kz_json_get(wipe, "evidence"), *x;
	char name[64];
	bool all = cJSON_IsObject(e) && e->child != NULL;

	cJSON_ArrayForEach(x, e) {
		snprintf(name, sizeof(name), "agent_%.40s", x->string);
		cJSON_AddBoolToObject(ev, name, cJSON_IsTrue(x));
		all = all && cJSON_IsTrue(x);
	}
	return all;
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
evidence_collect(const struct reset_conf *c, const struct worker_rec *w,
    cJSON *ev, char *gen, size_t glen)
{
	cJSON *wipe, *health;
	char hgen[32] = "", proj[PATH_MAX];
	const char *hid = NULL;
	pid_t pid = agent_pid(c, w->id);

	gen[0] = '\0';
	wipe = call(w, "wipe", (int)c->io_timeout_ms);
	cJSON_AddBoolToObject(ev, "wipe_ok", wipe != NULL);
	cJSON_AddBoolToObject(ev, "places_empty", wipe != NULL &&
	    agent_places(wipe, ev));
	cJSON_AddBoolToObject(ev, "mounts_baseline", wipe != NULL &&
	    (flag(wipe, "baseline") || flag(kz_json_get(wipe, "evidence"),
	    "mounts_baseline")));
	if (wipe != NULL)
		gen_of(wipe, gen, glen);
	cJSON_AddBoolToObject(ev, "cgroup_only_agent", pid > 0 &&
	    cgroup_only_agent(pid));
	cJSON_AddBoolToObject(ev, "projection_empty",
	    kz_pool_wpath(c->workers_dir, w->id, "projection", proj,
	    sizeof(proj)) == 0 && evidence_projection(proj));
	health = call(w, "health", (int)c->io_timeout_ms);
	if (health != NULL) {
		gen_of(health, hgen, sizeof(hgen));
		if (kz_json_str_opt(health, "worker", 64, NULL, &hid, NULL,
		    0) != 0 || hid == NULL)
			if (kz_json_str_opt(health, "worker_id", 64, NULL, &hid,
			    NULL, 0) != 0)
				hid = NULL;
	}
	cJSON_AddBoolToObject(ev, "health_id", hid != NULL &&
	    strcmp(hid, w->id) == 0);
	cJSON_AddBoolToObject(ev, "health_generation", gen[0] != '\0' &&
	    strcmp(hgen, gen) == 0);
	cJSON_Delete(wipe);
	cJSON_Delete(health);
}

cJSON *
evidence_missing(const cJSON *ev)
{
	cJSON *m = cJSON_CreateArray();
	const cJSON *x;

	cJSON_ArrayForEach(x, ev)
		if (cJSON_IsBool(x) && !cJSON_IsTrue(x))
			cJSON_AddItemToArray(m, cJSON_CreateString(x->string));
	return m;
}
