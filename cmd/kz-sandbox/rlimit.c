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

void
sbx_rlimit_list(const struct sbx_conf *c, struct sbx_rlimit *l)
{
	const struct sbx_rlimit t[SBX_RLIMIT_N] = {
	    {RLIMIT_NOFILE, (uint64_t)c->nofile, "NOFILE"},
	    {RLIMIT_FSIZE, c->fsize, "FSIZE"},
	    {RLIMIT_CORE, 0, "CORE"},
	    {RLIMIT_MEMLOCK, 64 * 1024, "MEMLOCK"},
	    {RLIMIT_MSGQUEUE, c->msgqueue, "MSGQUEUE"},
	    {RLIMIT_SIGPENDING, (uint64_t)c->sigpending, "SIGPENDING"},
	};

	memcpy(l, t, sizeof(t));
}

int
sbx_rlimit_apply(const struct sbx_conf *c, char *why, size_t wlen)
{
	struct sbx_rlimit l[SBX_RLIMIT_N];

	sbx_rlimit_list(c, l);
	for (size_t i = 0; i < SBX_RLIMIT_N; i++) {
		struct rlimit rl = {(rlim_t)l[i].v, (rlim_t)l[i].v};

		if (setrlimit(l[i].res, &rl) < 0) {
			kz_why(why, wlen, "rlimit: %s: %s", l[i].name,
			    strerror(errno));
			return KZ_ESYS;
		}
	}
	return 0;
}
