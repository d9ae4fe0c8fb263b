/*
 * cgroup v2: one hierarchy, every controller delegated down the layout
 * (v2 allows no process in a cgroup that delegates, hence the agent's own
 * leaf); cgroup.kill kills the run cgroup at once.
 */
#include <stdio.h>
#include <string.h>

#include "cgroup.h"
#include "sbx_gvisor.h"
#include "banned.h"

/* Whether the v2 root offers memory, pids and cpu; missing lists the
 * ones it does not offer. */
bool
sbx_cg_v2_usable(const struct sbx_cg *g, char *missing, size_t mlen)
{
	static const char *const need[] = {"memory", "pids", "cpu"};
	char buf[512], word[16];

	snprintf(missing, mlen, "%s", "");
	if (sbx_cg_rfile(g->root, "cgroup.controllers", buf, sizeof(buf)) < 0)
		buf[0] = '\0';
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		bool have = false;

		for (char *p = buf; *p != '\0';) {
			size_t n = strcspn(p, " \n");

			snprintf(word, sizeof(word), "%.*s", (int)n, p);
			have |= strcmp(word, need[i]) == 0;
			p += n + (p[n] != '\0');
		}
		if (!have) {
			size_t l = strlen(missing);

			snprintf(missing + l, mlen - l, "%s%s", l ? " " : "",
			    need[i]);
		}
	}
	return missing[0] == '\0';
}

/* Whether dir/file, a list of words, holds word. */
static bool
has_word(const char *dir, const char *file, const char *word)
{
	char buf[512];
	size_t wl = strlen(word);

	if (sbx_cg_rfile(dir, file, buf, sizeof(buf)) < 0)
		return false;
	for (char *p = buf; *p != '\0';) {
		size_t n = strcspn(p, " \n");

		if (n == wl && memcmp(p, word, n) == 0)
			return true;
		p += n + (p[n] != '\0');
	}
	return false;
}

static bool
io_offered(const struct sbx_cg *g)
{
	return has_word(g->root, "cgroup.controllers", "io");
}

/* The v2 controllers each level delegates to the next. */
static const char *
v2_ctrl(const struct sbx_cg *g)
{
	return g->io[0] != '\0' ? "+memory +pids +cpu +io" :
	                          "+memory +pids +cpu";
}

void
sbx_cg_v2_delegate(const struct sbx_cg *g, const char *dir)
{
	(void)sbx_cg_wfile(dir, "cgroup.subtree_control", v2_ctrl(g));
}

static int
limits(struct sbx_cg *g, const struct sbx_conf *c)
{
	char v[96];
	int r = 0;

	snprintf(v, sizeof(v), "%llu", (unsigned long long)c->memory);
	r |= sbx_cg_wfile(g->run[0], "memory.max", v);
	(void)sbx_cg_wfile(g->run[0], "memory.swap.max", "0");
	snprintf(v, sizeof(v), "%lld", (long long)sbx_cg_pids(c));
	r |= sbx_cg_wfile(g->run[0], "pids.max", v);
	snprintf(v, sizeof(v), "%lld 100000", (long long)c->cpu_milli * 100);
	r |= sbx_cg_wfile(g->run[0], "cpu.max", v);
	if (g->io[0] != '\0') {
		char rb[24] = "max", wb[24] = "max";

		if (c->io_rbps > 0)
			snprintf(rb, sizeof(rb), "%llu",
			    (unsigned long long)c->io_rbps);
		if (c->io_wbps > 0)
			snprintf(wb, sizeof(wb), "%llu",
			    (unsigned long long)c->io_wbps);
		snprintf(v, sizeof(v), "%s rbps=%s wbps=%s", g->io, rb, wb);
		r |= sbx_cg_wfile(g->run[0], "io.max", v);
	}
	return r ? KZ_ESYS : 0;
}

static void
kill_run(const struct sbx_cg *g)
{
	if (sbx_cg_wfile(g->run[0], "cgroup.kill", "1") != 0)
		(void)sbx_cg_each_pid(g->run[0], sbx_cg_kill9);
}

/*
 * The peak resets (6.12+) on a write of "reset" to an open descriptor,
 * which then reports the peak since the reset; memory.peak itself is
 * optional (kernels before 5.19).  memory.reclaim reclaims the amount
 * written.
 */
const struct sbx_cg_ver sbx_cg_v2 = {
    .mem = 0,
    .pids = 0,
    .join = "cgroup.procs",
    .peak = "memory.peak",
    .peak_reset = "reset",
    .peak_optional = true,
    .oom = "memory.events",
    .usage = "memory.current",
    .reclaim = "memory.reclaim",
    .io_offered = io_offered,
    .limits = limits,
    .kill = kill_run,
};
