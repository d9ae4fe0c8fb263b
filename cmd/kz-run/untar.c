/*
 * The declared outputs out of the workspace archive the worker made (a
 * tar of /workspace written by tar inside the sandbox, save.c).  Only the
 * members named by a declared path are written, each only when it is a
 * regular file within the bound: a symlink, hard link, directory or device
 * under a declared name is refused, never followed, and nothing else of
 * the archive is ever written to the host.  The archive is hostile input:
 * every size is checked before it is used, and a header that cannot be
 * read ends the walk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kz_io.h"
#include "kz_path.h"
#include "run.h"
#include "banned.h"

#define BLOCK 512
#define LONGNAME_MAX 4096

/* The archive is a local file the worker wrote; a read never waits long. */
static int
rd(int fd, void *b, size_t n)
{
	return kz_read_full(fd, b, n, kz_now_ms() + 30000);
}

static int
octal(const unsigned char *f, size_t len, uint64_t *v)
{
	size_t i = 0;

	*v = 0;
	/* Base-256 sizes are for members far over any bound here. */
	if (f[0] & 0x80)
		return KZ_EPROTO;
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (*v >> 60)
			return KZ_EPROTO;
		*v = *v * 8 + (uint64_t)(f[i] - '0');
	}
	return 0;
}

/* Skips or copies len bytes of member data and its padding. */
static int
data(int fd, uint64_t len, int out, uint64_t max, bool *over)
{
	unsigned char b[BLOCK * 16];
	uint64_t left = (len + BLOCK - 1) / BLOCK * BLOCK, keep = len;
	size_t n;
	int e;

	*over = len > max;
	while (left > 0) {
		n = left < sizeof(b) ? (size_t)left : sizeof(b);
		if ((e = rd(fd, b, n)) != 0)
			return e;
		if (out >= 0 && !*over && keep > 0) {
			size_t w = keep < n ? (size_t)keep : n;

			if (kz_write_full(out, b, w, kz_now_ms() + 30000) != 0)
				return KZ_ESYS;
			keep -= w;
		}
		left -= n;
	}
	return 0;
}

/* The member's name without a leading "./" or a trailing '/'. */
static void
member_name(const unsigned char *h, const char *longname, char *name,
    size_t len)
{
	const char *p;
	size_t n;

	if (longname[0] != '\0') {
		/* A name too long to hold is no declared output's: cut, it
		 * could pass for one. */
		if ((n = strlen(longname)) >= len) {
			name[0] = '\0';
			return;
		}
		memcpy(name, longname, n + 1);
	} else if (memcmp(h + 257, "ustar\0", 6) == 0 && h[345] != '\0')
		snprintf(name, len, "%.155s/%.100s", (const char *)h + 345,
		    (const char *)h);
	else
		snprintf(name, len, "%.100s", (const char *)h);
	p = strncmp(name, "./", 2) == 0 ? name + 2 : name;
	memmove(name, p, strlen(p) + 1);
	n = strlen(name);
	while (n > 0 && name[n - 1] == '/')
		name[--n] = '\0';
}

static int
want(const char *name, const char *const *paths, size_t n, const int *res)
{
	for (size_t i = 0; i < n; i++)
		if (res[i] == KZ_ENOENT && strcmp(name, paths[i]) == 0)
			return (int)i;
	return -1;
}

/* Opens the declared path for writing beneath dirfd, its parents made. */
static int
create(int dirfd, const char *rel)
{
	const char *base;
	int pfd, fd;

	if (kz_path_mkparent(dirfd, rel, 0750, (uid_t)-1, (gid_t)-1, &pfd,
	        &base, NULL) != 0)
		return -1;
	fd = openat(pfd, base,
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	close(pfd);
	return fd;
}

/* One member: written when declared and a regular file, else skipped. */
static int
member(int fd, const unsigned char *h, const char *longname,
    const char *const *paths, size_t n, int dirfd, uint64_t max, int *res)
{
	char name[LONGNAME_MAX + 8];
	uint64_t size;
	bool over;
	int i, out = -1, e;

	if ((e = octal(h + 124, 12, &size)) != 0)
		return e;
	member_name(h, longname, name, sizeof(name));
	if ((i = want(name, paths, n, res)) >= 0 && h[156] != '0' &&
	    h[156] != '\0') {
		res[i] = KZ_EPATH_NOTREG;
		i = -1;
	}
	if (i >= 0 && (out = create(dirfd, paths[i])) < 0) {
		res[i] = KZ_ESYS;
		i = -1;
	}
	e = data(fd, size, out, max, &over);
	if (out >= 0)
		close(out);
	if (i >= 0)
		res[i] = e != 0 ? e : over ? KZ_ETOOBIG : 0;
	return e;
}

int
run_untar(int fd, const char *const *paths, size_t n, int dirfd, uint64_t max,
    int *res)
{
	unsigned char h[BLOCK];
	char longname[LONGNAME_MAX + BLOCK] = "";
	uint64_t size;
	int e;

	for (size_t i = 0; i < n; i++)
		res[i] = KZ_ENOENT;
	for (;;) {
		if ((e = rd(fd, h, sizeof(h))) != 0)
			return e == KZ_EEOF ? KZ_EPROTO : e;
		if (h[0] == '\0')
			return 0; /* the end-of-archive block */
		if (h[156] != 'L') {
			if ((e = member(fd, h, longname, paths, n, dirfd, max,
			         res)) != 0)
				return e;
			longname[0] = '\0';
			continue;
		}
		/* A GNU long name: the data is the next member's name. */
		if ((e = octal(h + 124, 12, &size)) != 0 || size == 0 ||
		    size > LONGNAME_MAX)
			return KZ_EPROTO;
		if (rd(fd, longname,
		        (size_t)(size + BLOCK - 1) / BLOCK * BLOCK) != 0)
			return KZ_EPROTO;
		longname[size] = '\0';
	}
}
