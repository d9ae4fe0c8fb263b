/*
 * What the parent observes itself, never through the child: the Node
 * version (by running the configured node --version with an empty
 * environment), the pinned Pi version (from its package.json), and that
 * the child script and kz-sandbox are there.  Anything missing or too old
 * is exit 3: nothing authored runs.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_json.h"
#include "pv.h"
#include "banned.h"

static int
num(const char **p, long *out)
{
	char *end;

	if (**p < '0' || **p > '9')
		return KZ_EINVAL;
	*out = strtol(*p, &end, 10);
	if (*out < 0 || *out > 100000)
		return KZ_EINVAL;
	*p = end;
	return 0;
}

static int
node_version(const char *v, long *maj, long *min)
{
	long patch;
	const char *p = v;

	if (p == NULL || *p++ != 'v' || num(&p, maj) != 0 || *p++ != '.' ||
	    num(&p, min) != 0 || *p++ != '.' || num(&p, &patch) != 0 ||
	    (*p != '\0' && *p != '-'))
		return KZ_EINVAL;
	return 0;
}

int
pv_node_version_ok(const char *v, bool *ok)
{
	long maj, min;

	if (node_version(v, &maj, &min) != 0)
		return KZ_EINVAL;
	*ok = maj > PV_NODE_MIN_MAJOR ||
	    (maj == PV_NODE_MIN_MAJOR && min >= PV_NODE_MIN_MINOR);
	return 0;
}

/* Runs a trusted host binary (node --version) and keeps its first line. */
static int
host_line(char *const argv[], char *out, size_t olen)
{
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	int p[2], st = 0;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) != 0)
		return KZ_ESYS;
	if ((pid = fork()) == 0) {
		dup2(p[1], 1);
		execve(argv[0], argv, env);
		_exit(127);
	}
	close(p[1]);
	n = pid > 0 ? read(p[0], out, olen - 1) : -1;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	if (pid < 0 || n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return KZ_EUNAVAIL;
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

/* What the pinned Pi package says its version is, read by the parent. */
static int
pi_version(const struct pv_conf *c, char *out, size_t olen)
{
	char p[PATH_MAX], buf[65536];
	cJSON *o = NULL;
	const char *v;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/@mariozechner/pi-coding-agent/package.json",
	    c->modules);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return KZ_EUNAVAIL;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n <= 0 || kz_json_parse_object(buf, (size_t)n, &o, NULL, 0) != 0)
		return KZ_EUNAVAIL;
	if (kz_json_str(o, "version", 64, &v, NULL, 0) != 0) {
		cJSON_Delete(o);
		return KZ_EUNAVAIL;
	}
	snprintf(out, olen, "%s", v);
	cJSON_Delete(o);
	return 0;
}

static int
node_check(struct pv_job *j, char *nodev, size_t len)
{
	char *argv[] = {(char *)j->c->node, "--version", NULL};
	bool ok = false;

	if (access(j->c->node, X_OK) != 0 || host_line(argv, nodev, len) != 0) {
		kz_why(j->why, sizeof(j->why), "node is not available");
		return KZ_EXIT_UNAVAIL;
	}
	if (pv_node_version_ok(nodev, &ok) != 0 || !ok ||
	    node_version(nodev, &j->node_major, &j->node_minor) != 0) {
		kz_why(j->why, sizeof(j->why),
		    "node %.32s is too old: the "
		    "pinned Pi loader needs Node %d.%d or later",
		    nodev, PV_NODE_MIN_MAJOR, PV_NODE_MIN_MINOR);
		return KZ_EXIT_UNAVAIL;
	}
	return 0;
}

int
pv_runtime(struct pv_job *j)
{
	char nodev[64], piv[64];
	cJSON *rt;
	int rc;

	if ((rc = node_check(j, nodev, sizeof(nodev))) != 0)
		return rc;
	if (access(j->c->child_js, R_OK) != 0 ||
	    pi_version(j->c, piv, sizeof(piv)) != 0 ||
	    strcmp(piv, j->c->pi_version) != 0) {
		kz_why(j->why, sizeof(j->why),
		    "the pinned Pi loader %s is not installed",
		    j->c->pi_version);
		return KZ_EXIT_UNAVAIL;
	}
	if (j->c->iso == PV_ISO_SANDBOX && access(j->c->sandbox_bin, X_OK)) {
		kz_why(j->why, sizeof(j->why), "kz-sandbox is not available");
		return KZ_EXIT_UNAVAIL;
	}
	if ((rt = cJSON_AddObjectToObject(j->body, "runtime")) == NULL)
		return KZ_EXIT_INTERNAL;
	cJSON_AddStringToObject(rt, "node", nodev);
	cJSON_AddStringToObject(rt, "pi", piv);
	cJSON_AddStringToObject(rt, "isolation",
	    j->c->iso == PV_ISO_SANDBOX ? "kz-sandbox" : "unshare");
	return 0;
}
