/*
 * The kz-sandbox command line of one child run, and the small shell step
 * that runs first inside the sandbox.
 *
 * kz-sandbox gives the code a read-only root, a read-only /projection (the
 * fresh copy the parent materialized) and a writable tmpfs /workspace that
 * is thrown away with the run.  The step copies /projection into
 * /workspace/pkg, so tests may write their own tree, optionally reinstalls
 * the package's dependencies from its lock out of an offline cache, and
 * then runs the command there.  The copy is exact: the projection is
 * read-only and was proven equal to the artifact by the parent.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "kz_io.h"
#include "pv.h"
#include "banned.h"

/*
 * $1 deps (none, try, strict), $2 npm, $3 offline cache, $4 the loader
 * script or "-"; the command follows.  Before anything of the package is
 * touched, the step checks that the command (node) and the loader script
 * are there in the sandbox's root view: if not, the validator's own
 * environment is broken, not the package, and it exits 87 saying which
 * path.  The reinstall never sees the channel (3 and 4 closed) and runs
 * no package script.  The command's exits 2, 3, 86, 87, 125 and 126
 * become 1, so the parent can trust that 2 and 3 come from kz-sandbox
 * itself (nothing ran), 86 and 87 from this step (preparation failed, a
 * loader out of reach), and that authored code cannot pass for an
 * unavailable sandbox or loader.
 */
static const char step[] =
    "d=$1 npm=$2 cache=$3 loader=$4; shift 4\n"
    "gone() {\n"
    "  echo \"kz-pi: $1 is not reachable in the sandbox's root view\" >&2\n"
    "  exit 87; }\n"
    "n=$(command -v \"$1\") || gone \"$1\"\n"
    "case $n in /*) [ -f \"$n\" ] && [ -x \"$n\" ] || gone \"$n\";; esac\n"
    "[ \"$loader\" = - ] || { [ -f \"$loader\" ] && [ -r \"$loader\" ]; } ||\n"
    "  gone \"$loader\"\n"
    "cp -R /projection/. " PV_SANDBOX_PKG " && cd " PV_SANDBOX_PKG " || {\n"
    "  echo 'kz-pi: the disposable copy could not be made' >&2; exit 86; }\n"
    "if [ \"$d\" != none ]; then\n"
    "  if \"$npm\" ci --offline --ignore-scripts --no-audit --no-fund \\\n"
    "      --no-update-notifier --cache \"$cache\" \\\n"
    "      --logs-dir /tmp/npm-logs </dev/null >&2 3<&- 4>&-; then :\n"
    "  elif [ \"$d\" = strict ]; then\n"
    "    echo 'kz-pi: dependency reinstall from the lock failed' >&2\n"
    "    exit 86\n"
    "  else\n"
    "    echo 'kz-pi: dependencies not installed for the tests' >&2\n"
    "  fi\n"
    "fi\n"
    "\"$@\"; r=$?\n"
    "case $r in 2|3|86|87|125|126) r=1;; esac\n"
    "exit $r\n";

static const char *const deps_word[] = {"none", "try", "strict"};

/* Appends one argument; the caller checks the count once at the end. */
#define ADD(x)                                                                 \
	do {                                                                   \
		if (n < max - 1)                                               \
			a[n] = (char *)(x);                                    \
		n++;                                                           \
	} while (0)

int
pv_sandbox_argv(const struct pv_run *r, char **a, size_t max)
{
	static char tmo[32], uid[32], gv[32];
	int64_t left = (r->deadline_ms - kz_now_ms()) / 1000 + 1;
	size_t n = 0;

	snprintf(tmo, sizeof(tmo), "%lld", (long long)(left > 0 ? left : 1));
	snprintf(uid, sizeof(uid), "%u", (unsigned)r->uid);
	ADD(r->sandbox_bin);
	ADD("run");
	if (r->sandbox_conf != NULL) {
		ADD("--config");
		ADD(r->sandbox_conf);
	}
	ADD("--projection");
	ADD(r->cwd);
	ADD("--timeout");
	ADD(tmo);
	ADD("--uid");
	ADD(uid);
	ADD("--gid");
	ADD(uid);
	if (r->gv_uid != 0) {
		/* Read only when the sandbox runs gvisor. */
		snprintf(gv, sizeof(gv), "%u", (unsigned)r->gv_uid);
		ADD("--gvisor-uid");
		ADD(gv);
		ADD("--gvisor-gid");
		ADD(gv);
	}
	ADD("--env");
	ADD("HOME=/tmp");
	ADD("--env");
	ADD("LANG=C.UTF-8");
	ADD("--env");
	ADD("NO_COLOR=1");
	if (r->channel) {
		ADD("--env");
		ADD("KZ_PI_NONCE_FD=3");
		ADD("--env");
		ADD("KZ_PI_RESULT_FD=4");
		ADD("--pass-fd");
		ADD("3");
		ADD("--pass-fd");
		ADD("4");
	}
	ADD("--");
	ADD("/bin/sh");
	ADD("-c");
	ADD(step);
	ADD("kz-pi-step");
	ADD(deps_word[r->deps]);
	ADD(r->npm);
	ADD(r->npm_cache != NULL ? r->npm_cache : "-");
	ADD(r->loader != NULL ? r->loader : "-");
	for (int i = 0; r->argv[i] != NULL; i++)
		ADD(r->argv[i]);
	if (n >= max)
		return KZ_ETOOBIG;
	a[n] = NULL;
	return 0;
}

/*
 * kz-sandbox's usage (2) and failed-closed (3) exits: isolation was not
 * set up and nothing ran.  The step maps the command's own 2 and 3 to 1.
 */
bool
pv_sandbox_failed(int status)
{
	return WIFEXITED(status) &&
	    (WEXITSTATUS(status) == KZ_EXIT_USAGE ||
	        WEXITSTATUS(status) == KZ_EXIT_UNAVAIL);
}
