/*
 * The claim on one id of the runner's range.  The kernel counts some
 * limits per uid (inotify instances, queued signals, message queue bytes,
 * processes), so two tenants under one uid could starve each other: every
 * invocation, the daemon's, a warm worker's or a one-shot beside them,
 * holds an exclusive flock(2) on STATE/uids/<uid> for as long as it runs,
 * and an id is taken only when that lock is free and no host process runs
 * under the uid.  The kernel drops the lock when its holder dies, so no
 * claim outlives its process.  The descriptor is close-on-exec: kz-sandbox
 * and the tool never hold it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_proc.h"
#include "pkgrun.h"
#include "banned.h"

#define WAIT_STEP_MS 100

/* STATE/uids, root's and 0700 (made so when missing). */
static int
claims_dir(const struct pr_conf *c)
{
	struct stat sb;
	int sfd, dfd = -1;

	if (mkdir(c->state_dir, 0755) != 0 && errno != EEXIST)
		return -1;
	if ((sfd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	if ((mkdirat(sfd, "uids", 0700) == 0 || errno == EEXIST) &&
	    (dfd = openat(sfd, "uids",
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0 &&
	    (fstat(dfd, &sb) != 0 || sb.st_uid != geteuid() ||
	        ((sb.st_mode & 077) != 0 && fchmod(dfd, 0700) != 0))) {
		close(dfd);
		dfd = -1;
	}
	close(sfd);
	return dfd;
}

/* Id slot's claim, its file beneath the claims directory dfd. */
static int
claim_at(const struct pr_conf *c, int dfd, int slot, int *fd)
{
	char name[24];
	int lfd;

	*fd = -1;
	snprintf(name, sizeof(name), "%lld", (long long)(c->uid + slot));
	if ((lfd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
	         0600)) < 0)
		return KZ_ESYS;
	if (flock(lfd, LOCK_EX | LOCK_NB) != 0 ||
	    kz_proc_uid_live(c->uid + slot, 1) != 0) {
		close(lfd);
		return KZ_EUNAVAIL;
	}
	*fd = lfd;
	return 0;
}

int
pr_uid_claim(const struct pr_conf *c, int slot, int *fd)
{
	int dfd, r;

	*fd = -1;
	if ((dfd = claims_dir(c)) < 0)
		return KZ_ESYS;
	r = claim_at(c, dfd, slot, fd);
	close(dfd);
	return r;
}

int
pr_uid_pick(const struct pr_conf *c, int64_t wait_ms, int *slot, int *fd)
{
	int n = (int)c->uid_count, start, dfd, r = KZ_EUNAVAIL;
	int64_t end = kz_now_ms() + wait_ms;
	struct timespec ts = {0, WAIT_STEP_MS * 1000000L};

	*slot = -1, *fd = -1;
	if ((dfd = claims_dir(c)) < 0)
		return KZ_ESYS;
	for (;;) {
		start = (int)randombytes_uniform((uint32_t)n);
		for (int i = 0; i < n; i++) {
			if ((r = claim_at(c, dfd, (start + i) % n, fd)) == 0)
				*slot = (start + i) % n;
			if (r != KZ_EUNAVAIL)
				goto out;
		}
		if (kz_now_ms() >= end)
			break;
		(void)nanosleep(&ts, NULL);
	}
out:
	close(dfd);
	return r;
}

void
pr_uid_release(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}
