/*
 * What the next tenant will find, checked from inside the namespaces its
 * code will run in: the agent asks (sbx_check, op wipe) and the run init
 * answers (sbx_check_here) with one bit for each item it found clean.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "kz_io.h"
#include "sbx.h"
#include "banned.h"

/* Whether the directory open at fd lists nothing but . and .. */
static bool
dir_empty_fd(int fd)
{
	union {
		struct dirent64 d;
		char b[1024];
	} u;
	ssize_t n;

	while ((n = getdents64(fd, u.b, sizeof(u.b))) > 0)
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *)(u.b + off);

			off += d->d_reclen;
			if (strcmp(d->d_name, ".") != 0 &&
			    strcmp(d->d_name, "..") != 0)
				return false;
		}
	return n == 0;
}

/* Whether a /proc/sysvipc table lists no object (its header only). */
static bool
sysv_empty(const char *table)
{
	char p[64], buf[512];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/sysvipc/%s", table);
	if ((n = kz_read_small(p, buf, sizeof(buf))) <= 0)
		return false;
	return strchr(buf, '\n') == buf + n - 1;
}

/*
 * Whether the IPC namespace holds no POSIX message queue.  The queues
 * live in the namespace's mqueue file system, listed here through a
 * detached mount of it that nothing else can see.
 */
static bool
mqueue_empty(void)
{
	int fs, mnt, dir;
	bool ok = false;

	if ((fs = fsopen("mqueue", FSOPEN_CLOEXEC)) < 0)
		return false;
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0 &&
	    (mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY)) >= 0) {
		if ((dir = openat(mnt, ".",
		         O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			ok = dir_empty_fd(dir);
			close(dir);
		}
		close(mnt);
	}
	close(fs);
	return ok;
}

/*
 * Checks, from inside the namespaces the next tenant's code will run in,
 * what it will find there: the three writable places empty, the mount
 * table as recorded when the view was built, and no SysV IPC object or
 * POSIX message queue.
 */
void
sbx_check_here(const struct sbx_mnt *zm, int sock)
{
	unsigned bits = SBX_CHK_DONE;

	bits |= sbx_mnt_empty(zm, "workspace") ? SBX_CHK_WS : 0;
	bits |= sbx_mnt_empty(zm, "tmp") ? SBX_CHK_TMP : 0;
	bits |= sbx_mnt_empty(zm, "dev/shm") ? SBX_CHK_SHM : 0;
	bits |= sbx_mnt_baseline_ok(zm) ? SBX_CHK_MOUNTS : 0;
	bits |= sysv_empty("shm") && sysv_empty("msg") && sysv_empty("sem") ?
	    SBX_CHK_SYSV :
	    0;
	bits |= mqueue_empty() ? SBX_CHK_MQUEUE : 0;
	sbx_msg_report(sock, REP_CHECKED, (int)bits, "check", NULL);
}

int
sbx_check(struct sbx_worker *w, unsigned *bits)
{
	struct pollfd p = {.fd = w->zsock, .events = POLLIN};
	struct report r;

	*bits = 0;
	if (w->broken || sbx_msg_check_send(w->zsock) != 0 ||
	    poll(&p, 1, 10000) != 1 ||
	    read(w->zsock, &r, sizeof(r)) != (ssize_t)sizeof(r) ||
	    r.kind != REP_CHECKED) {
		w->broken = true;
		return KZ_EUNAVAIL;
	}
	*bits = (unsigned)r.status;
	return 0;
}
