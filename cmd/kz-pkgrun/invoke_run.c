/*
 * The run step of one invocation (invoke.c): the tool's environment and
 * command, the grant handed to the sandbox beside the projection, the run
 * itself (a one-shot through exec.c, or the taken warm worker through
 * wrun.c), and the tool's output, sanitized and bounded, into the result.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_io.h"
#include "kz_path.h"
#include "kz_wire.h"
#include "pkgrun.h"
#include "invoke_int.h"
#include "banned.h"

/* The tool's whole environment: these names and kz-sandbox's safe set.
 * The identity is the invocation's: the tool acts for the initiating
 * actor, in its conversation (and room), and is told so. */
#define ENV_MAX 12
#define ENV_LEN (PR_IDENT_MAX + 32)
static int
build_env(const struct pr_tool *t, const struct pr_inv *iv,
    char env[ENV_MAX][ENV_LEN], const char **out)
{
	bool shared = iv->room != NULL;
	int n = 0;

	snprintf(env[n++], ENV_LEN, "KZ_PKG_DIR=%s", PR_SANDBOX_PKG);
	snprintf(env[n++], ENV_LEN, "KZ_PKG_FILES=%s", PR_SANDBOX_FILES);
	snprintf(env[n++], ENV_LEN, "KZ_PKG_TOOL=%s", t->name);
	snprintf(env[n++], ENV_LEN, "KZ_PKG_CLASS=%s", pr_class_name(t->cls));
	snprintf(env[n++], ENV_LEN, "KZ_PKG_SHARED=%d", shared ? 1 : 0);
	snprintf(env[n++], ENV_LEN, "KZ_PKG_ACTOR=%s", iv->actor);
	snprintf(env[n++], ENV_LEN, "KZ_PKG_CONVERSATION=%s", iv->conversation);
	if (shared)
		snprintf(env[n++], ENV_LEN, "KZ_PKG_ROOM=%s", iv->room);
	snprintf(env[n++], ENV_LEN, "HOME=/workspace");
	snprintf(env[n++], ENV_LEN, "LANG=C.UTF-8");
	for (int i = 0; i < n; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)strcspn(env[i], "="),
		    env[i]);
		/* The guard: no name of ours may ever look like a secret. */
		if (pr_env_name_secret(name))
			return KZ_EINTERNAL;
		out[i] = env[i];
	}
	out[n] = NULL;
	return 0;
}

static int
tool_argv(const struct pr_tool *t, const struct pr_inv *iv, char *cmd,
    size_t len, const char **a)
{
	int n = 0;

	if ((size_t)snprintf(cmd, len, "%s/%s", PR_SANDBOX_PKG, t->argv[0]) >=
	    len)
		return KZ_ETOOBIG;
	a[n++] = cmd;
	for (int i = 1; i < t->argc; i++)
		a[n++] = t->argv[i];
	for (int i = 0; i < iv->nargs; i++)
		a[n++] = iv->args[i];
	a[n] = NULL;
	return 0;
}

static int
write_grant(const char *path, const char *grant)
{
	int fd = open(path,
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r;

	if (fd < 0)
		return KZ_ESYS;
	r = kz_write_full(fd, grant, strlen(grant), -1);
	if (close(fd) != 0 || r != 0) {
		(void)unlink(path);
		return KZ_ESYS;
	}
	return 0;
}

/* Runs the tool on the taken warm worker w, or on a one-shot under id
 * slot of the range (claimed by the caller), which starts the tool only once
 * gate(gate_arg) returns 0. */
void
pr_run_tool(const struct pr_conf *c, const struct pr_inv *iv,
    const struct pr_tool *t, const char *staging, const char *id, int slot,
    struct pr_worker *w, int (*gate)(void *), void *gate_arg,
    struct pr_result *res)
{
	const char *env[ENV_MAX + 1], *argv[PR_CMD_ARGS_MAX + PR_ARGS_MAX + 2];
	char envbuf[ENV_MAX][ENV_LEN], cmd[KZ_PATH_MAX + 32],
	    gfile[PATH_MAX + 96] = "";
	bool shared = iv->room != NULL;
	struct pr_exec x = {staging, 0, 0, id, NULL, env, argv, gate, gate_arg};
	struct pr_exec_out o;
	char why[256] = "";
	int r;

	/* Each invocation its own id, claimed (take_worker); a warm worker
	 * has its own, given and claimed when it was started. */
	if (w == NULL)
		x.uid = c->uid + slot, x.gid = c->gid + slot;
	if (build_env(t, iv, envbuf, env) != 0 ||
	    tool_argv(t, iv, cmd, sizeof(cmd), argv) != 0) {
		pr_set_result(res, KZ_EXIT_INTERNAL, KZ_WE_INTERNAL,
		    "cannot build the tool's command");
		return;
	}
	/* The grant goes beside the projection, never into it: kz-sandbox
	 * keeps it in its relay's memory and the tool never sees it.  A
	 * warm worker gets it in the run op, for its relay alike. */
	if (w != NULL)
		r = pr_worker_run(c, w, &x, iv->grant, iv->rid, &o, why,
		    sizeof(why));
	else if (iv->grant != NULL) {
		snprintf(gfile, sizeof(gfile), "%s.grant", staging);
		if (write_grant(gfile, iv->grant) != 0) {
			pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
			    "cannot hand the grant to the sandbox");
			return;
		}
		x.grant_file = gfile;
	}
	if (w == NULL) {
		r = pr_exec_run(c, &x, &o, why, sizeof(why));
		if (gfile[0] != '\0')
			(void)unlink(gfile);
	}
	if (r != 0) {
		pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE, why);
		return;
	}
	res->exit_status = o.exit_status;
	res->sig = o.sig;
	res->truncated = o.truncated;
	res->out = pr_sanitize(o.out, o.outlen, &res->outlen);
	/* In a shared room the room sees only the tool's normal result. */
	if (!shared)
		res->err = pr_sanitize(o.err, o.errlen, &res->errlen);
	free(o.out);
	free(o.err);
	/* Sanitizing may widen a byte to three: the bound holds on what is
	 * returned, not only on what was read. */
	if (res->out != NULL &&
	    pr_result_bound(res->out, &res->outlen, c->result_max))
		res->truncated = true;
	if (res->err != NULL)
		(void)pr_result_bound(res->err, &res->errlen, c->result_max);
	if (o.setup_failed)
		pr_set_result(res, KZ_EXIT_UNAVAIL, KZ_WE_UNAVAILABLE,
		    "the sandbox could not be set up: nothing ran");
	else if (res->out == NULL || (!shared && res->err == NULL))
		pr_set_result(res, KZ_EXIT_INTERNAL, KZ_WE_INTERNAL,
		    "out of memory");
	else if (o.exit_status < 0)
		pr_set_result(res, KZ_EXIT_REFUSED, KZ_WE_REFUSED,
		    o.sig ? "the tool was killed" :
		            "the tool was stopped at a limit");
}
