/* The runner settings the kz-pkgrun suites build argv and replies from:
 * fixed, so that each value can be asserted where it lands. */
#ifndef KZ_PKGRUN_CONF_FIXTURE_H
#define KZ_PKGRUN_CONF_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "pkgrun.h"

static inline void
conf_fixture(struct pr_conf *c, uint64_t result_max)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->sandbox_bin, sizeof(c->sandbox_bin), "/opt/kz-sandbox");
	snprintf(c->state_dir, sizeof(c->state_dir), "/run/kz-pkgrun");
	c->uid = 7, c->gid = 8, c->uid_count = 16, c->pids = 64;
	c->cpu_milli = 500, c->timeout_s = 30, c->memory = 1 << 28;
	c->result_max = result_max;
}

/* The value after option opt in a (before "--"), or NULL. */
static inline const char *
argv_val(const char **a, const char *opt)
{
	for (int i = 0; a[i] != NULL && strcmp(a[i], "--") != 0; i++)
		if (strcmp(a[i], opt) == 0)
			return a[i + 1];
	return NULL;
}

#endif
