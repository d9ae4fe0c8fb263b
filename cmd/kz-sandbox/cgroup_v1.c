/*
 * cgroup v1: one hierarchy per controller (memory, pids, cpu, freezer and,
 * under an I/O limit, blkio), each holding the same layout; the freezer
 * stops the run cgroup while it is killed.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "sbx_gvisor.h"
#include "banned.h"

const char *const sbx_cg_v1_name[SBX_CG_N] = {"memory", "pids", "cpu",
    "freezer", "blkio"};

static bool
io_offered(const struct sbx_cg *g)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/blkio", g->root);
	return stat(p, &st) == 0;
}

static int
limits(struct sbx_cg *g, const struct sbx_conf *c)
{
	char v[96];
	int r = 0;

	snprintf(v, sizeof(v), "%llu", (unsigned long long)c->memory);
	r |= sbx_cg_wfile(g->run[SBX_CG_MEM], "memory.limit_in_bytes", v);
	/* v1 does not count socket buffers against the limit above: a run
	 * could otherwise pin hundreds of MiB of TCP buffers on its own
	 * loopback.  Their own limit, at the same figure, bounds them. */
	r |= sbx_cg_wfile(g->run[SBX_CG_MEM], "memory.kmem.tcp.limit_in_bytes",
	    v);
	/* With swap accounting, swap must not extend the limit. */
	(void)sbx_cg_wfile(g->run[SBX_CG_MEM], "memory.memsw.limit_in_bytes",
	    v);
	(void)sbx_cg_wfile(g->run[SBX_CG_MEM], "memory.swappiness", "0");
	snprintf(v, sizeof(v), "%lld", (long long)sbx_cg_pids(c));
	r |= sbx_cg_wfile(g->run[SBX_CG_PIDS], "pids.max", v);
	r |= sbx_cg_wfile(g->run[SBX_CG_CPU], "cpu.cfs_period_us", "100000");
	snprintf(v, sizeof(v), "%lld", (long long)c->cpu_milli * 100);
	r |= sbx_cg_wfile(g->run[SBX_CG_CPU], "cpu.cfs_quota_us", v);
	if (g->n > SBX_CG_IO) {
		snprintf(v, sizeof(v), "%s %llu", g->io,
		    (unsigned long long)c->io_rbps);
		if (c->io_rbps > 0)
			r |= sbx_cg_wfile(g->run[SBX_CG_IO],
			    "blkio.throttle.read_bps_device", v);
		snprintf(v, sizeof(v), "%s %llu", g->io,
		    (unsigned long long)c->io_wbps);
		if (c->io_wbps > 0)
			r |= sbx_cg_wfile(g->run[SBX_CG_IO],
			    "blkio.throttle.write_bps_device", v);
	}
	return r ? KZ_ESYS : 0;
}

/* Freezes the run cgroup so nothing forks while it is being killed, kills
 * every member, and thaws so the kills land. */
static void
kill_run(const struct sbx_cg *g)
{
	(void)sbx_cg_wfile(g->run[SBX_CG_FRZ], "freezer.state", "FROZEN");
	(void)sbx_cg_each_pid(g->run[SBX_CG_FRZ], sbx_cg_kill9);
	(void)sbx_cg_each_pid(g->run[SBX_CG_PIDS], sbx_cg_kill9);
	(void)sbx_cg_wfile(g->run[SBX_CG_FRZ], "freezer.state", "THAWED");
}

/*
 * The code process joins by writing 0 to "tasks" while it is
 * single-threaded, which moves it alone without the cgroup-wide
 * threadgroup lock that a cgroup.procs write takes (and its RCU grace
 * period, milliseconds on a quiet host).  The peak resets on any write;
 * force_empty (of an empty cgroup) reclaims everything.
 */
const struct sbx_cg_ver sbx_cg_v1 = {
    .mem = SBX_CG_MEM,
    .pids = SBX_CG_PIDS,
    .join = "tasks",
    .peak = "memory.max_usage_in_bytes",
    .peak_reset = "0",
    .oom = "memory.oom_control",
    .usage = "memory.usage_in_bytes",
    .reclaim = "memory.force_empty",
    .reclaim_all = true,
    .io_offered = io_offered,
    .limits = limits,
    .kill = kill_run,
};
