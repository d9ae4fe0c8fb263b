#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "kz_sock.h"
#include "banned.h"

static int
fill_addr(const char *path, struct sockaddr_un *sa, char *why, size_t wlen)
{
	size_t n = strlen(path);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n == 0 || n >= sizeof(sa->sun_path)) {
		kz_why(why, wlen, "socket path empty or longer than %zu bytes",
		    sizeof(sa->sun_path) - 1);
		return KZ_EINVAL;
	}
	memcpy(sa->sun_path, path, n + 1);
	return 0;
}

int
kz_fd_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return KZ_ESYS;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) < 0 ? KZ_ESYS : 0;
}

int
kz_sock_timeouts(int fd, int timeout_ms)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000,
	    .tv_usec = (timeout_ms % 1000) * 1000};

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return KZ_ESYS;
	return 0;
}

int
kz_sock_connect(const char *path, int timeout_ms, int *out_fd, char *why,
    size_t wlen)
{
	struct sockaddr_un sa;
	int64_t deadline = timeout_ms < 0 ? INT64_MAX :
	                                    kz_now_ms() + timeout_ms;
	int fd, r, e, pause_ms = 1;

	if ((r = fill_addr(path, &sa, why, wlen)) != 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return KZ_ESYS;
	/*
	 * A Unix socket's connect never goes on in the background: EAGAIN
	 * means the listener's backlog is full and nothing was connected
	 * (polling the socket then says writable, and the first write
	 * fails).  So a full backlog, a daemon that is only busy, is tried
	 * again until the deadline.
	 */
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int64_t left = deadline - kz_now_ms();

		e = errno;
		if (e == EINTR)
			continue;
		if (e != EAGAIN || left <= 0) {
			close(fd);
			kz_why(why, wlen, "cannot connect to socket: %s",
			    e == EAGAIN ? "its backlog stayed full" :
			                  strerror(e));
			errno = e;
			return KZ_EUNAVAIL;
		}
		(void)poll(NULL, 0, pause_ms < left ? pause_ms : (int)left);
		if (pause_ms < 16)
			pause_ms *= 2;
	}
	*out_fd = fd;
	return 0;
}

/* Removes path only if it is a socket nobody answers on. */
static int
clear_stale(const char *path, char *why, size_t wlen)
{
	struct stat st;
	int fd;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : KZ_ESYS;
	if (!S_ISSOCK(st.st_mode)) {
		kz_why(why, wlen, "socket path exists and is not a socket");
		return KZ_EEXIST;
	}
	if (kz_sock_connect(path, 200, &fd, NULL, 0) == 0) {
		close(fd);
		kz_why(why, wlen, "another process is listening on the socket");
		return KZ_EEXIST;
	}
	/* A socket whose backlog stayed full belongs to a daemon that is
	 * busy, not gone. */
	if (errno == EAGAIN) {
		kz_why(why, wlen,
		    "another process is listening on the socket (its backlog "
		    "is full)");
		return KZ_EEXIST;
	}
	if (unlink(path) < 0 && errno != ENOENT)
		return KZ_ESYS;
	return 0;
}

int
kz_sock_listen(const char *path, int backlog, int *out_fd, char *why,
    size_t wlen)
{
	struct sockaddr_un sa;
	int fd, r;

	if ((r = fill_addr(path, &sa, why, wlen)) != 0)
		return r;
	if ((r = clear_stale(path, why, wlen)) != 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return KZ_ESYS;
	/* Created 0660 from the start: no window with a wider mode.  bind
	 * gives the node the socket inode's mode less the umask, so the
	 * mode is set on the socket first; the umask is process state that
	 * another thread may be creating files under, and is not touched. */
	if (fchmod(fd, 0660) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0660) < 0 || listen(fd, backlog) < 0) {
		int e = errno;

		kz_why(why, wlen, "cannot listen on socket: %s", strerror(e));
		close(fd);
		errno = e;
		return KZ_ESYS;
	}
	*out_fd = fd;
	return 0;
}

static int
parse_ids(const char *list, bool group, unsigned *ids, size_t *n, char *why,
    size_t wlen)
{
	char *dup, *save = NULL, *tok;
	int r = 0;

	*n = 0;
	if (list == NULL || *list == '\0')
		return 0;
	if ((dup = strdup(list)) == NULL)
		return KZ_ENOMEM;
	for (tok = strtok_r(dup, ", ", &save); tok != NULL;
	     tok = strtok_r(NULL, ", ", &save)) {
		int64_t v;

		if (*n == KZ_PEER_MAX) {
			kz_why(why, wlen, "more than %d peer ids", KZ_PEER_MAX);
			r = KZ_ERANGE;
			break;
		}
		if (kz_parse_int(tok, 0, 0x7fffffff, &v) != 0) {
			struct passwd *pw = group ? NULL : getpwnam(tok);
			struct group *gr = group ? getgrnam(tok) : NULL;

			if (pw == NULL && gr == NULL) {
				kz_why(why, wlen, "unknown %s '%.64s'",
				    group ? "group" : "user", tok);
				r = KZ_ECONF;
				break;
			}
			v = pw ? (int64_t)pw->pw_uid : (int64_t)gr->gr_gid;
		}
		ids[(*n)++] = (unsigned)v;
	}
	free(dup);
	return r;
}

int
kz_peer_policy_parse(const char *uids, const char *gids,
    struct kz_peer_policy *out, char *why, size_t wlen)
{
	struct kz_peer_policy p;
	int r;

	memset(&p, 0, sizeof(p));
	if ((r = parse_ids(uids, false, p.uids, &p.nuids, why, wlen)) != 0 ||
	    (r = parse_ids(gids, true, p.gids, &p.ngids, why, wlen)) != 0)
		return r;
	*out = p;
	return 0;
}

char *
kz_peer_policy_env(const struct kz_peer_policy *p, bool gids)
{
	const char *key = gids ? "KZ_PEER_GIDS" : "KZ_PEER_UIDS";
	size_t n = gids ? p->ngids : p->nuids;
	size_t len = strlen(key) + 2 + n * 11, o;
	char *s = malloc(len);

	if (s == NULL)
		return NULL;
	o = (size_t)snprintf(s, len, "%s=", key);
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(s + o, len - o, "%s%u", i ? "," : "",
		    gids ? (unsigned)p->gids[i] : (unsigned)p->uids[i]);
	return s;
}

/*
 * Whether the peer's supplementary groups (SO_PEERGROUPS, as they were at
 * connect) hold one of the policy's gids: an operator is usually a member
 * of the deployment's group, not a user whose primary group it is.  A peer
 * with more groups than fit is matched on its primary gid only.
 */
static bool
peer_groups_allowed(int fd, const struct kz_peer_policy *pol)
{
	gid_t g[KZ_PEER_GROUPS_MAX];
	socklen_t len = sizeof(g);

	if (pol->ngids == 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0)
		return false;
	for (size_t k = 0; k < len / sizeof(g[0]); k++)
		for (size_t i = 0; i < pol->ngids; i++)
			if (g[k] == pol->gids[i])
				return true;
	return false;
}

int
kz_peer_check(int fd, const struct kz_peer_policy *pol, struct kz_peer *out)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	bool ok;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return KZ_ESYS;
	ok = uc.uid == 0 || uc.uid == geteuid();
	for (size_t i = 0; !ok && i < pol->nuids; i++)
		ok = uc.uid == pol->uids[i];
	for (size_t i = 0; !ok && i < pol->ngids; i++)
		ok = uc.gid == pol->gids[i];
	if (!ok)
		ok = peer_groups_allowed(fd, pol);
	if (out != NULL) {
		out->pid = uc.pid;
		out->uid = uc.uid;
		out->gid = uc.gid;
	}
	return ok ? 0 : KZ_EPEER;
}
