/*
 * Unix sockets with peer credentials.  Listening sockets are created 0660;
 * a stale socket file is replaced only when nothing answers on it.  Every
 * accepted peer is checked with SO_PEERCRED against a policy before any op.
 */
#ifndef KZ_SOCK_H
#define KZ_SOCK_H

#include <stdbool.h>
#include <sys/types.h>

#include "kz_err.h"

#define KZ_PEER_MAX 16
/* Supplementary groups of a peer looked at (SO_PEERGROUPS). */
#define KZ_PEER_GROUPS_MAX 256

/*
 * Peers allowed: uid 0 and the daemon's own uid always; plus these uids,
 * and these gids as the peer's primary or one of its supplementary groups.
 */
struct kz_peer_policy {
	uid_t uids[KZ_PEER_MAX];
	size_t nuids;
	gid_t gids[KZ_PEER_MAX];
	size_t ngids;
};

struct kz_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/* Parses comma-separated uids/user names and gids/group names. */
KZ_WUR int kz_peer_policy_parse(const char *uids, const char *gids,
    struct kz_peer_policy *out, char *why, size_t wlen);
/*
 * "KZ_PEER_UIDS=1,2" and "KZ_PEER_GIDS=..." (as the process environment
 * of a child that must admit the same peers): malloc'd, NULL when out of
 * memory.
 */
char *kz_peer_policy_env(const struct kz_peer_policy *p, bool gids);
/* Reads SO_PEERCRED and checks it; KZ_EPEER when not allowed. */
KZ_WUR int kz_peer_check(int fd, const struct kz_peer_policy *pol,
    struct kz_peer *out);

/* Binds and listens (non-blocking, CLOEXEC, mode 0660). */
KZ_WUR int kz_sock_listen(const char *path, int backlog, int *out_fd, char *why,
    size_t wlen);
/* Connects with a timeout; KZ_EUNAVAIL when nothing listens. */
KZ_WUR int kz_sock_connect(const char *path, int timeout_ms, int *out_fd,
    char *why, size_t wlen);
/* SO_RCVTIMEO and SO_SNDTIMEO. */
KZ_WUR int kz_sock_timeouts(int fd, int timeout_ms);
KZ_WUR int kz_fd_nonblock(int fd, bool on);

#endif
