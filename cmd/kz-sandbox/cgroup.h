/*
 * Between cgroup.c (the layout, the selection of the version, the agent's
 * use of the cgroups) and the two versions' own files, cgroup_v1.c and
 * cgroup_v2.c: what each version names, limits and kills differently.
 */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include "sbx.h"

struct sbx_cg_ver {
	int mem, pids; /* the hierarchy of the memory and pids files */
	const char *join; /* the run cgroup file the code joins through */
	const char *peak; /* the run's memory peak, read through a kept
	                   * descriptor */
	const char *peak_reset; /* written to it to start a new peak */
	bool peak_optional; /* an older kernel may not have one */
	const char *oom; /* its "oom_kill N" line counts OOM kills */
	const char *usage; /* the memory charged now */
	const char *reclaim; /* a write reclaims memory */
	bool reclaim_all; /* "0" reclaims all; else the amount written */
	/* Whether the I/O controller is there to throttle with. */
	bool (*io_offered)(const struct sbx_cg *g);
	/* Writes the memory, pids, cpu (and I/O) limits on the run cgroup. */
	int (*limits)(struct sbx_cg *g, const struct sbx_conf *c);
	/* Kills every process in the run cgroup, once. */
	void (*kill)(const struct sbx_cg *g);
};
extern const struct sbx_cg_ver sbx_cg_v1, sbx_cg_v2;

/* v1: the hierarchies, in SBX_CG_* order. */
extern const char *const sbx_cg_v1_name[SBX_CG_N];
/* v2: whether the root offers memory, pids and cpu; missing lists the
 * ones it does not offer. */
bool sbx_cg_v2_usable(const struct sbx_cg *g, char *missing, size_t mlen);
/* v2: delegates the controllers from dir to its children. */
void sbx_cg_v2_delegate(const struct sbx_cg *g, const char *dir);

/* dir/file, written whole or read (NUL-terminated, at most len - 1). */
int sbx_cg_wfile(const char *dir, const char *file, const char *val);
ssize_t sbx_cg_rfile(const char *dir, const char *file, char *buf, size_t len);
/* Calls fn for each pid listed in dir/cgroup.procs; returns the count. */
int sbx_cg_each_pid(const char *dir, void (*fn)(pid_t));
void sbx_cg_kill9(pid_t p);

#endif
