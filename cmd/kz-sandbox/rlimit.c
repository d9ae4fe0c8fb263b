/*
 * Per-process limits the cgroups do not cover: open files, file size and
 * core dumps (none: a core would land in the workspace and could carry
 * memory of the run's init), and the per-uid counts of queued signals
 * (POSIX timers take one each) and POSIX message queue bytes; each worker
 * has a uid of its own, so those counts are its own too.  Soft and hard
 * are set equal so the code cannot raise them.
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "sbx.h"
#include "banned.h"

int
sbx_rlimit_apply(const struct sbx_conf *c, char *why, size_t wlen)
{
	const struct {
		int res;
		rlim_t v;
		const char *name;
	} l[] = {
	    {RLIMIT_NOFILE, (rlim_t)c->nofile, "NOFILE"},
	    {RLIMIT_FSIZE, (rlim_t)c->fsize, "FSIZE"},
	    {RLIMIT_CORE, 0, "CORE"},
	    {RLIMIT_MEMLOCK, 64 * 1024, "MEMLOCK"},
	    {RLIMIT_MSGQUEUE, (rlim_t)c->msgqueue, "MSGQUEUE"},
	    {RLIMIT_SIGPENDING, (rlim_t)c->sigpending, "SIGPENDING"},
	};

	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
		struct rlimit rl = {l[i].v, l[i].v};

		if (setrlimit(l[i].res, &rl) < 0) {
			kz_why(why, wlen, "rlimit: %s: %s", l[i].name,
			    strerror(errno));
			return KZ_ESYS;
		}
	}
	return 0;
}
