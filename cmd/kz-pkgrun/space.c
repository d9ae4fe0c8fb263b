/*
 * Room in the state directory.  Every copy into a projection (the
 * package, then the member files) first takes what it will occupy from
 * what the directory's filesystem has free, beyond PKGRUN_STAGING_FREE_MIN
 * that is always left to the host (the state directory is under /run by
 * default: memory that every daemon's sockets and pid files share).  A
 * copy that does not fit is refused before a byte is written.  With
 * PKGRUN_STAGING_FREE_MIN 0 nothing is checked; an admission's copy into
 * the cache is not (the operator's, not a caller's).
 *
 * What a copy holds is counted only while it is being written: once
 * written, the filesystem's own count has it.  So copies made at once by
 * the daemon's threads cannot each see the same free space and together
 * overrun it.
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/statvfs.h>

#include "kz_err.h"
#include "pkgrun.h"
#include "banned.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t held_bytes, held_inodes;

/* A regular file of size bytes as tmpfs holds it: whole pages. */
uint64_t
pr_space_file(uint64_t size)
{
	return (size + PR_SPACE_PAGE - 1) / PR_SPACE_PAGE * PR_SPACE_PAGE;
}

int
pr_space_take(int dirfd, uint64_t free_min, uint64_t bytes, uint64_t inodes,
    struct pr_space *sp, char *why, size_t wlen)
{
	struct statvfs v;
	uint64_t avail, favail;
	int r = 0;

	sp->bytes = sp->inodes = 0;
	if (free_min == 0)
		return 0;
	if (fstatvfs(dirfd, &v) != 0) {
		kz_why(why, wlen,
		    "cannot tell the state directory's free space");
		return KZ_ESYS;
	}
	avail = (uint64_t)v.f_bavail * v.f_frsize;
	/* A filesystem that counts no inodes (f_files 0) has no bound. */
	favail = v.f_files == 0 ? UINT64_MAX : (uint64_t)v.f_favail;
	pthread_mutex_lock(&mu);
	if (avail < held_bytes || avail - held_bytes < free_min ||
	    avail - held_bytes - free_min < bytes) {
		kz_why(why, wlen,
		    "the state directory is short of room: %llu KiB needed, "
		    "%llu KiB free beyond the %llu KiB "
		    "PKGRUN_STAGING_FREE_MIN leaves to the host",
		    (unsigned long long)(bytes >> 10),
		    (unsigned long long)(avail > held_bytes + free_min ?
		            (avail - held_bytes - free_min) >> 10 :
		            0),
		    (unsigned long long)(free_min >> 10));
		r = KZ_EUNAVAIL;
	} else if (favail < held_inodes ||
	    favail - held_inodes < inodes + PR_SPACE_INODES_MIN) {
		kz_why(why, wlen,
		    "the state directory is short of inodes: %llu needed",
		    (unsigned long long)inodes);
		r = KZ_EUNAVAIL;
	} else {
		held_bytes += bytes, held_inodes += inodes;
		sp->bytes = bytes, sp->inodes = inodes;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

void
pr_space_give(struct pr_space *sp)
{
	pthread_mutex_lock(&mu);
	held_bytes -= sp->bytes, held_inodes -= sp->inodes;
	pthread_mutex_unlock(&mu);
	sp->bytes = sp->inodes = 0;
}
