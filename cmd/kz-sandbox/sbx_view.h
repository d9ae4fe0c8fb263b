/*
 * The root view's contents: what view.c, view_path.c and view_etc.c
 * declare for one another and for the two modules that call them, mount.c
 * (which fills the view it mounts) and conf.c (which checks the config's
 * lists and hostname); the mounts themselves are mount.c's, in sbx.h.
 */
#ifndef SBX_VIEW_H
#define SBX_VIEW_H

#include "sbx.h"

/* view.c: what the read-only root view holds (kz-sandbox(8), Mount layout);
 * view_path.c: its path grammar and the config's checks; view_etc.c: the
 * /etc of the allowlisted view. */
/* Fills the view's root tmpfs at root: the allowlisted system directories
 * and a synthesized /etc (SANDBOX_ROOT /) or the image, the extra
 * directories, then the masks; refuses anything not applicable exactly. */
KZ_WUR int sbx_view_fill(const struct sbx_conf *c, const char *root, char *why,
    size_t wlen);
/* What the config alone can get wrong: the lists and the hostname. */
KZ_WUR int sbx_view_check(const struct sbx_conf *c, char *why, size_t wlen);
/* The text of a synthesized /etc file (passwd, group, hosts, hostname,
 * nsswitch.conf): its length, KZ_ENOENT or KZ_ETOOBIG. */
KZ_WUR int sbx_view_etc_text(const struct sbx_conf *c, const char *name,
    char *buf, size_t len);
/* An absolute path of at least one segment, without '.', '..' or empty
 * segments. */
KZ_WUR bool sbx_view_path_ok(const char *p);
/* p is dir or lies beneath it (lexical). */
KZ_WUR bool sbx_view_under(const char *p, const char *dir);
/* A top-level link's target stays within the allowlisted entries. */
KZ_WUR bool sbx_view_link_ok(const char *target);
/* The next item of a comma-separated list, trimmed; false at its end. */
bool sbx_view_next(const char **p, char *buf, size_t len);
/* The allowlisted system directories and the view's own places
 * (NULL-terminated), and whether s[0..n) is one of list's names. */
extern const char *const sbx_view_sysdirs[];
extern const char *const sbx_view_places[];
bool sbx_view_in_list(const char *s, size_t n, const char *const *list);
/* Where a forbidden directory's canonical path is kept while building. */
enum { SBX_VIEW_F_RUN, SBX_VIEW_F_STATE, SBX_VIEW_F_KAIZEN, SBX_VIEW_F_N };
/* sbx_view_fill's state while it builds the view (view.c, view_etc.c). */
struct sbx_view_fill {
	const struct sbx_conf *c;
	const char *root; /* the view's root, under the stage */
	int viewfd; /* the view's root tmpfs */
	int emptyfd; /* the stage's empty directory (mount.c) */
	const char *forbid[SBX_VIEW_F_N]; /* canonical, or "" */
	char *owned[SBX_VIEW_F_N + 1]; /* what canon() allocated */
	int nowned;
	char *why;
	size_t wlen;
};
/* view.c's steps that view_etc.c takes too: KZ_ESYS, naming what failed
 * on path with errno's text (kept); a descriptor (O_PATH) of path below
 * dirfd, never through a symlink; the host directory open at src shown
 * read-only at dst through an overlay of the worker's own; a copy of the
 * file open at src as a new file rel below dir, with mode (-1 if it could
 * not be made whole, or is over 256 KiB). */
KZ_WUR int sbx_view_sys(struct sbx_view_fill *f, const char *what,
    const char *path);
KZ_WUR int sbx_view_open_exact(int dirfd, const char *path,
    unsigned long long resolve);
KZ_WUR int sbx_view_ro_layer(const struct sbx_view_fill *f, int src,
    const char *dst);
KZ_WUR int sbx_view_copy_at(int src, int dir, const char *rel, mode_t mode);
/* view_etc.c: the allowlisted view's /etc, on a tmpfs of its own. */
KZ_WUR int sbx_view_etc(struct sbx_view_fill *f);

#endif
