/*
 * The scratch directory of the kz-pi-validate suites: made before each
 * test under /tmp/pv-<SCRATCH_TAG>.XXXXXX, removed after it with the
 * removal the validator uses, kz_tree_remove().  Define SCRATCH_TAG before
 * including.
 */
#ifndef PV_SCRATCH_H
#define PV_SCRATCH_H

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_tree.h"
#include "pv.h"

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/pv-%s.XXXXXX", SCRATCH_TAG);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	ck_assert_int_eq(kz_tree_remove(AT_FDCWD, dir), 0);
}

/* Writes dir/rel, making its parents. */
static void
put(const char *rel, const char *text)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	for (char *s = strchr(p + strlen(dir) + 1, '/'); s;
	     s = strchr(s + 1, '/')) {
		*s = '\0';
		(void)mkdir(p, 0755);
		*s = '/';
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

#endif
