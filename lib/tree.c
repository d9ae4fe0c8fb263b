/*
 * Tree removal by descriptor (kz_tree.h).  Most entries are files, so
 * each is unlinked first and opened only when the kernel says it is a
 * directory (EISDIR).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_tree.h"
#include "banned.h"

#define TREE_PASSES (1u << 20)

struct walk {
	int top; /* where a directory deeper than the walk goes */
	unsigned moved, seq;
};

/* A sealed directory opens for reading but cannot be emptied by an owner
 * that is not root until it is writable again. */
static void
unseal(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700)
		(void)fchmod(fd, (st.st_mode & 07777) | 0700);
}

/* A directory as deep as the walk goes, moved up beneath the top (an
 * owner that is not root moves a directory to another parent only when
 * it may write it: it is unsealed first). */
static int
hoist(int pfd, const char *name, struct walk *w)
{
	char to[32];
	int fd = openat(pfd, name,
	    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0) {
		unseal(fd);
		close(fd);
	}

	for (int i = 0; i < 64; i++) {
		snprintf(to, sizeof(to), ".kz-deep.%u", w->seq++);
		if (renameat2(pfd, name, w->top, to, RENAME_NOREPLACE) == 0) {
			w->moved++;
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	return KZ_ESYS;
}

static int remove_at(int pfd, const char *name, int depth, struct walk *w);

/* Empties the directory open at fd, which the DIR takes over. */
static int
empty_fd(int fd, int depth, struct walk *w)
{
	struct dirent *e;
	DIR *d;
	int r = 0;

	unseal(fd);
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return KZ_ESYS;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0 &&
		    remove_at(dirfd(d), e->d_name, depth + 1, w) != 0)
			r = KZ_ESYS;
	closedir(d);
	return r;
}

static int
remove_at(int pfd, const char *name, int depth, struct walk *w)
{
	int fd, r;

	if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return KZ_ESYS;
	if (depth > KZ_TREE_DEPTH)
		return hoist(pfd, name, w);
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : KZ_ESYS;
	r = empty_fd(fd, depth, w);
	if (r == 0 && unlinkat(pfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		r = KZ_ESYS;
	return r;
}

/* Each pass removes KZ_TREE_DEPTH of every branch, or fails; the bound
 * ends pass after pass against a writer still at work. */
static int
empty_passes(int top)
{
	struct walk w = {.top = top};
	int fd, r;

	for (unsigned pass = 0;; pass++) {
		w.moved = 0;
		if ((fd = fcntl(top, F_DUPFD_CLOEXEC, 0)) < 0)
			return KZ_ESYS;
		/* The DIR reads from the start of the directory each pass. */
		(void)lseek(fd, 0, SEEK_SET);
		if ((r = empty_fd(fd, 0, &w)) != 0 || w.moved == 0)
			return r;
		if (pass == TREE_PASSES)
			return KZ_EPATH_LEN;
	}
}

int
kz_tree_empty(int dfd)
{
	return empty_passes(dfd);
}

int
kz_tree_remove(int pfd, const char *name)
{
	int fd, r;

	if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return KZ_ESYS;
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : KZ_ESYS;
	r = empty_passes(fd);
	close(fd);
	if (r == 0 && unlinkat(pfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		r = KZ_ESYS;
	return r;
}
