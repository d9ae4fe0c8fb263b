/*
 * The unshare mode's view of the host (kz-pi-validate(8)): the child's own
 * mount namespace, in which every host file is read-only, /tmp, /var/tmp
 * and /dev/shm are fresh tmpfs instances of its own, /proc shows only its
 * pid namespace, and the run directory is the one writable host tree.  So
 * nothing a validation's code writes outlives it outside its run directory
 * (removed afterwards), and no later validation or host service finds it.
 * A path the child reads that lay beneath one of the fresh directories (a
 * run directory or a loader under /tmp) is bound back in its place,
 * read-only but for the run directory.
 *
 * Made by the intermediate process (root, in its new namespaces) before it
 * forks the code; a step that fails fails the set-up (exit 125), never a
 * run with less.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_path.h"
#include "pv.h"
#include "banned.h"

/* Each fresh directory's bound: the mode's files are bounded as much. */
#define FRESH_OPTS "mode=1777,size=64m,nr_inodes=16384"
#define KEEP_MAX 6 /* the run directory and reads[] */

static const char *const fresh[] = {"/tmp", "/var/tmp", "/dev/shm", NULL};

/* A host path kept through the fresh directories: a detached clone. */
struct keep {
	char path[PATH_MAX];
	int tree;
	bool dir;
};

static const struct mount_attr read_only = {
    .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID};

/* A fresh directory is made only over a real one, canonical as named. */
static bool
is_fresh(const char *d)
{
	char real[PATH_MAX];
	struct stat sb;

	return lstat(d, &sb) == 0 && S_ISDIR(sb.st_mode) &&
	    realpath(d, real) != NULL && strcmp(real, d) == 0;
}

/* Whether canonical path p is, or lies beneath, a fresh directory. */
static bool
under_fresh(const char *p)
{
	for (int i = 0; fresh[i] != NULL; i++) {
		size_t n = strlen(fresh[i]);

		if (is_fresh(fresh[i]) && strncmp(p, fresh[i], n) == 0 &&
		    (p[n] == '/' || p[n] == '\0'))
			return true;
	}
	return false;
}

/* Clones path (canonical first), read-only unless rw. */
static int
keep_add(struct keep *k, const char *path, bool rw)
{
	struct stat sb;

	if (realpath(path, k->path) == NULL)
		return -1;
	k->tree = open_tree(AT_FDCWD, k->path,
	    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (k->tree < 0 || fstat(k->tree, &sb) != 0)
		return -1;
	k->dir = S_ISDIR(sb.st_mode);
	if (!rw &&
	    mount_setattr(k->tree, "", AT_EMPTY_PATH | AT_RECURSIVE,
	        (struct mount_attr *)&read_only, sizeof(read_only)) != 0)
		return -1;
	return 0;
}

/*
 * The place a kept path goes back to, beneath a fresh directory: its
 * parents as root's 0755 directories (kz_path_mkparent, never following a
 * link), and itself as an empty directory or file to mount over.
 */
static int
make_place(const struct keep *k)
{
	const char *base;
	int root, dfd = -1, fd, e;

	if ((root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	e = kz_path_mkparent(root, k->path + 1, 0755, (uid_t)-1, (gid_t)-1,
	    &dfd, &base, NULL);
	close(root);
	if (e != 0)
		return -1;
	if (k->dir)
		e = mkdirat(dfd, base, 0755) != 0 && errno != EEXIST ? -1 : 0;
	else if ((fd = openat(dfd, base,
	              O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444)) < 0)
		e = -1;
	else
		close(fd);
	close(dfd);
	return e;
}

static int
keep_place(struct keep *k)
{
	int e;

	if (under_fresh(k->path) && make_place(k) != 0)
		return -1;
	e = move_mount(k->tree, "", AT_FDCWD, k->path, MOVE_MOUNT_F_EMPTY_PATH);
	close(k->tree);
	k->tree = -1;
	return e;
}

int
pv_unshare_view(const struct pv_run *r)
{
	const char *reads[] = {r->argv[0], r->modules, r->loader, r->npm,
	    r->npm_cache};
	struct keep k[KEEP_MAX];
	char real[PATH_MAX];
	int n = 0;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    keep_add(&k[n++], r->run, true) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		if (reads[i] != NULL && realpath(reads[i], real) != NULL &&
		    under_fresh(real) &&
		    keep_add(&k[n++], reads[i], false) != 0)
			return -1;
	if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE,
	        (struct mount_attr *)&read_only, sizeof(read_only)) != 0)
		return -1;
	for (int i = 0; fresh[i] != NULL; i++)
		if (is_fresh(fresh[i]) &&
		    mount("tmpfs", fresh[i], "tmpfs", MS_NOSUID | MS_NODEV,
		        FRESH_OPTS) != 0)
			return -1;
	for (int i = 0; i < n; i++)
		if (keep_place(&k[i]) != 0)
			return -1;
	return 0;
}

int
pv_unshare_proc(void)
{
	return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL);
}
