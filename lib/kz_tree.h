/*
 * Removing a directory tree that something else wrote: a sandboxed run, a
 * package, a child being validated, or this process before it failed.
 *
 * The walk is by descriptor only: each directory is opened O_NOFOLLOW
 * beneath its parent's descriptor, so a directory swapped for a symlink is
 * removed as a link, never followed.  A directory its owner sealed (mode
 * 0555, as kz-project and kz-pkgrun leave what they deliver) is made
 * writable before it is emptied, so an owner that is not root can remove
 * it.  At most KZ_TREE_DEPTH directories are open at once: a directory
 * deeper than that is moved up beneath the top under a name of its own
 * (".kz-deep.N") and removed by the next pass, so a tree of any depth goes
 * whole and none of it is left behind.
 *
 * Thread-safe: no state.
 */
#ifndef KZ_TREE_H
#define KZ_TREE_H

#include "kz_err.h"

#define KZ_TREE_DEPTH 128 /* directories open at once in one walk */

/*
 * Removes name beneath the directory pfd (AT_FDCWD: name is a path) and
 * everything in it; a name that is not a directory is unlinked.  0 once
 * name is gone, or was never there; KZ_ESYS (errno kept) when something
 * could not be removed, KZ_EPATH_LEN when a writer still at work kept
 * making the tree deeper through a million passes.
 */
KZ_WUR int kz_tree_remove(int pfd, const char *name);

/* Removes everything in the directory open at dfd, which stays. */
KZ_WUR int kz_tree_empty(int dfd);

#endif
