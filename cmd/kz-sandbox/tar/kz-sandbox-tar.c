/*
 * kz-sandbox-tar: the archiver of workspace snapshots.  A served worker
 * runs it as an ordinary run in the sandbox (the code's uid, no
 * capabilities, the code's seccomp filter and limits), through a
 * descriptor of this file it opened at start, so nothing of kz is in the
 * sandbox's view.  "save" writes the tree of the working directory (the
 * workspace) to stdout as a GNU tar archive; "restore" extracts a tar
 * archive from stdin into it.  Exit 0 done, 1 failed (one line on
 * stderr), 2 usage.
 *
 * It is a static binary on libarchive: a snapshot of a small workspace
 * is mostly the archiver's start, and GNU tar's (three more shared
 * libraries to map and relocate) costs twice this one's.
 *
 * The archive names no owner (uid and gid 0, no user or group name): a
 * restore never sets owners, and so the archive of a workspace is the
 * same from every worker, which a save that finds the workspace as it
 * was restored relies on.  It holds no set-user-ID or set-group-ID bit,
 * which a restore would not set either.  No ACLs, extended attributes or
 * file flags; sockets are left out, as GNU tar leaves them.  The walk takes
 * each directory's entries in the byte order of their names, so the archive of
 * a tree is the same whatever order the file system lists them in.  The
 * workspace's own directory is neither saved nor restored: its mode and times
 * are the fresh workspace's.  A restore refuses absolute names, "..", and
 * writing through a symlink, and fails on the first entry it cannot extract.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK (64 * 1024)

static char buf[BLOCK];

/* The one-line reason on stderr; 1, the failed exit. */
static int
say(const char *what, const char *why)
{
	fprintf(stderr, "kz-sandbox-tar: %s: %s\n", what, why);
	return 1;
}

static int
fail(struct archive *a, const char *what)
{
	const char *e = a != NULL ? archive_error_string(a) : NULL;

	return say(what, e != NULL ? e : "out of memory");
}

/* ".", "./", "././": the workspace's own directory. */
static bool
top(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return p[0] == '\0' || (p[0] == '.' && p[1] == '\0');
}

/* The file's bytes, exactly as many as its header announced: a file
 * that changed size as it was read fails the save (as GNU tar does). */
static int
copy_file(struct archive *out, const FTSENT *f, int64_t size)
{
	int fd = open(f->fts_accpath,
	    O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	ssize_t n = 0;
	int r = 0;

	if (fd < 0)
		return say(f->fts_path, strerror(errno));
	while (size > 0 && (n = read(fd, buf, sizeof(buf))) > 0 && n <= size) {
		if (archive_write_data(out, buf, (size_t)n) != (la_ssize_t)n) {
			r = fail(out, f->fts_path);
			goto out;
		}
		size -= n;
	}
	if (n < 0)
		r = say(f->fts_path, strerror(errno));
	else if (size != 0 || read(fd, buf, 1) > 0)
		r = say(f->fts_path, "file changed as we read it");
out:
	close(fd);
	return r;
}

/* One file of the walk, owners cleared, a second name of a file as a
 * hard link to the first (the tar strategy never defers an entry). */
static int
save_entry(struct archive *disk, struct archive *out,
    struct archive_entry_linkresolver *lr, struct archive_entry *e,
    const FTSENT *f)
{
	struct archive_entry *none = NULL;

	archive_entry_clear(e);
	archive_entry_copy_pathname(e, f->fts_path);
	/* Where the walk is: it reads each directory from inside it. */
	archive_entry_copy_sourcepath(e, f->fts_accpath);
	if (archive_read_disk_entry_from_file(disk, e, -1, f->fts_statp) !=
	    ARCHIVE_OK)
		return fail(disk, f->fts_path);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_uname(e, NULL);
	archive_entry_set_gname(e, NULL);
	/* No set-id bit: a restore sets none, and the archive, a file on
	 * the host, must not hold a program the code made as a set-id one
	 * of root's for whoever unpacks it there as root (GNU tar then
	 * keeps owners and modes). */
	archive_entry_set_perm(e,
	    archive_entry_perm(e) & ~(mode_t)(S_ISUID | S_ISGID));
	archive_entry_linkify(lr, &e, &none);
	if (archive_write_header(out, e) != ARCHIVE_OK)
		return fail(out, f->fts_path);
	if (archive_entry_size(e) > 0)
		return copy_file(out, f, archive_entry_size(e));
	return 0;
}

/* Siblings in byte order of their names: the archive of a tree does not
 * depend on the order its directories list them in (on tmpfs, the
 * reverse of their making, so a restore would reverse it). */
static int
by_name(const FTSENT **a, const FTSENT **b)
{
	return strcmp((*a)->fts_name, (*b)->fts_name);
}

/* The walk's next file to archive; NULL at the end (*err: a failure). */
static FTSENT *
next_file(FTS *t, bool *err)
{
	FTSENT *f;

	while ((f = fts_read(t)) != NULL) {
		switch (f->fts_info) {
		case FTS_DNR:
		case FTS_ERR:
		case FTS_NS:
			say(f->fts_path, strerror(f->fts_errno));
			*err = true;
			return NULL;
		case FTS_DP:
			continue;
		default:
			if (f->fts_level == 0 ||
			    S_ISSOCK(f->fts_statp->st_mode))
				continue;
			return f;
		}
	}
	/* fts_read sets errno to 0 at the end of the walk. */
	if (errno != 0) {
		say("the workspace", strerror(errno));
		*err = true;
	}
	return NULL;
}

static int
save(void)
{
	struct archive *disk = archive_read_disk_new(),
	               *out = archive_write_new();
	struct archive_entry_linkresolver
	    *lr = archive_entry_linkresolver_new();
	struct archive_entry *e = archive_entry_new();
	char *roots[] = {".", NULL};
	bool err = false;
	FTS *t = NULL;
	FTSENT *f;
	int r = 1;

	if (disk == NULL || out == NULL || lr == NULL || e == NULL) {
		fail(NULL, "save");
		goto out;
	}
	if (archive_read_disk_set_behavior(disk,
	        ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
	            ARCHIVE_READDISK_NO_FFLAGS | ARCHIVE_READDISK_NO_SPARSE) !=
	        ARCHIVE_OK ||
	    archive_write_set_format_gnutar(out) != ARCHIVE_OK ||
	    archive_write_open_fd(out, 1) != ARCHIVE_OK) {
		fail(out, "save");
		goto out;
	}
	archive_entry_linkresolver_set_strategy(lr, archive_format(out));
	if ((t = fts_open(roots, FTS_PHYSICAL | FTS_XDEV, by_name)) == NULL) {
		say("the workspace", strerror(errno));
		goto out;
	}
	while ((f = next_file(t, &err)) != NULL)
		if (save_entry(disk, out, lr, e, f) != 0)
			goto out;
	if (err)
		goto out;
	if (archive_write_close(out) != ARCHIVE_OK) {
		fail(out, "save");
		goto out;
	}
	r = 0;
out:
	if (t != NULL)
		fts_close(t);
	archive_entry_free(e);
	archive_entry_linkresolver_free(lr);
	archive_read_free(disk);
	archive_write_free(out);
	return r;
}

static int
restore(void)
{
	struct archive *in = archive_read_new(),
	               *disk = archive_write_disk_new();
	struct archive_entry *e;
	int r = 1, n;

	if (in == NULL || disk == NULL) {
		fail(NULL, "restore");
		goto out;
	}
	if (archive_read_support_format_tar(in) != ARCHIVE_OK ||
	    archive_write_disk_set_options(disk,
	        ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	            ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	            ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS) != ARCHIVE_OK ||
	    archive_read_open_fd(in, 0, BLOCK) != ARCHIVE_OK) {
		fail(in, "restore");
		goto out;
	}
	while ((n = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		if (top(archive_entry_pathname(e)))
			continue;
		if (archive_read_extract2(in, e, disk) != ARCHIVE_OK) {
			fail(in, archive_entry_pathname(e));
			goto out;
		}
	}
	if (n != ARCHIVE_EOF) {
		fail(in, "restore");
		goto out;
	}
	/* Directories get their modes and times last, as their entries
	 * could not be made in a directory already read-only. */
	if (archive_write_close(disk) != ARCHIVE_OK) {
		fail(disk, "restore");
		goto out;
	}
	r = 0;
out:
	archive_read_free(in);
	archive_write_free(disk);
	return r;
}

int
main(int argc, char **argv)
{
	/* The descriptor kz-sandbox executed this file by. */
	(void)close_range(3, ~0u, 0);
	if (argc == 2 && strcmp(argv[1], "save") == 0)
		return save();
	if (argc == 2 && strcmp(argv[1], "restore") == 0)
		return restore();
	fputs("usage: kz-sandbox-tar save|restore (in the workspace)\n",
	    stderr);
	return 2;
}
