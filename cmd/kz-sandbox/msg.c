/*
 * The messages between the agent and its run init, over their
 * SOCK_SEQPACKET pair: the agent's setup (the seccomp filter, a pidfd of
 * the agent and the run cgroup's descriptors), each run's job (argv, env,
 * cwd and the run's descriptors), the check request, and the init's fixed
 * size reports back.  The init trusts the agent, but a message that does
 * not parse exactly is refused, never half used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sbx.h"
#include "banned.h"

/* The highest descriptor number a passed descriptor may take in the
 * code. */
#define HIGH_FD 1100

int64_t
sbx_cpu_ms(const struct rusage *ru)
{
	return (int64_t)ru->ru_utime.tv_sec * 1000 +
	    ru->ru_utime.tv_usec / 1000 + ru->ru_stime.tv_sec * 1000 +
	    ru->ru_stime.tv_usec / 1000;
}

void
sbx_msg_report(int fd, int kind, int status, const char *step, const char *why)
{
	struct report r;

	memset(&r, 0, sizeof(r));
	r.kind = kind;
	r.status = status;
	snprintf(r.step, sizeof(r.step), "%s", step ? step : "");
	snprintf(r.why, sizeof(r.why), "%s", why ? why : "");
	(void)!write(fd, &r, sizeof(r));
}

/*
 * The agent's setup message: the compiled seccomp filter, then, as
 * SCM_RIGHTS, a pidfd of the agent (whose network, IPC and UTS namespaces
 * the init joins) and the run cgroup's tasks (v1: one per hierarchy) or
 * cgroup.procs (v2) file the code joins through.  The agent makes all of
 * them while the init builds the root view.
 */
struct setup_hdr {
	char magic[4];
	uint32_t nfd;
	uint32_t len; /* bytes of filter that follow */
};

int
sbx_msg_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfd)
{
	char cb[CMSG_SPACE(sizeof(int) * (ZFDS + SBX_PASS_MAX))];
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;

	if (nfd < 0 || nfd > ZFDS + SBX_PASS_MAX)
		return KZ_EINVAL;
	if (nfd > 0) {
		memset(cb, 0, sizeof(cb));
		mh.msg_control = cb;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfd);
	}
	return sock >= 0 && sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ?
	    0 :
	    KZ_ESYS;
}

ssize_t
sbx_msg_recv_fd(int sock, void *buf, size_t len, int flags, int *fd)
{
	char cb[CMSG_SPACE(sizeof(int) * 2)];
	struct iovec iov = {buf, len};
	struct msghdr mh = {.msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = cb,
	    .msg_controllen = sizeof(cb)};
	struct cmsghdr *c;
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
	int nfd = 0;

	*fd = -1;
	c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (c != NULL && c->cmsg_level == SOL_SOCKET &&
	    c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(0))
		nfd = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	if (nfd == 1 && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0) {
		memcpy(fd, CMSG_DATA(c), sizeof(int));
		return n;
	}
	/* More than one, or a message cut short: none is kept. */
	for (int i = 0; i < nfd; i++) {
		int x;

		memcpy(&x, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
		close(x);
	}
	return n > 0 &&
	        (nfd != 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) ?
	    -1 :
	    n;
}

/*
 * Sends the setup message; true when all of it went.  fds: self (the
 * agent's pidfd) and the ncg run cgroup descriptors.
 */
bool
sbx_msg_setup_send(int sock, const struct sock_fprog *prog, int self,
    const int *cgfd, int ncg)
{
	struct setup_hdr h = {{'S', 'E', 'T', 'U'}, 0, 0};
	char cb[CMSG_SPACE(sizeof(int) * SBX_SETUP_FDS)];
	struct iovec iov[2];
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = cb};
	struct cmsghdr *c;
	int nfd = 1 + ncg;

	h.nfd = (uint32_t)nfd;
	h.len = (uint32_t)(prog->len * sizeof(struct sock_filter));
	iov[0] = (struct iovec){&h, sizeof(h)};
	iov[1] = (struct iovec){prog->filter, h.len};
	memset(cb, 0, sizeof(cb));
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
	memcpy(CMSG_DATA(c), &self, sizeof(int));
	memcpy(CMSG_DATA(c) + sizeof(int), cgfd, sizeof(int) * (size_t)ncg);
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)(sizeof(h) + h.len);
}

int
sbx_msg_setup_take(int sock, char *buf, size_t cap, int fds[SBX_SETUP_FDS],
    int *nfdp, struct sock_fprog *prog)
{
	char cb[CMSG_SPACE(sizeof(int) * SBX_SETUP_FDS)];
	struct iovec iov = {buf, cap};
	struct msghdr mh = {.msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = cb,
	    .msg_controllen = sizeof(cb)};
	struct cmsghdr *c;
	struct setup_hdr h;
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	int nfd = 0;
	struct sock_filter *f = NULL;

	if (n <= 0)
		return -2;
	c = CMSG_FIRSTHDR(&mh);
	if (c != NULL && c->cmsg_level == SOL_SOCKET &&
	    c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(0)) {
		nfd = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		/* The control buffer's padding has room for one more. */
		if (nfd > SBX_SETUP_FDS) {
			for (int i = 0; i < nfd; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int),
				    sizeof(int));
				close(fd);
			}
			return -1;
		}
		memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)nfd);
	}
	memcpy(&h, buf, (size_t)n < sizeof(h) ? (size_t)n : sizeof(h));
	if ((size_t)n < sizeof(h) ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    memcmp(h.magic, "SETU", 4) != 0 || h.nfd != (uint32_t)nfd ||
	    (nfd != 2 && nfd != SBX_SETUP_FDS && nfd != SBX_SETUP_FDS - 1) ||
	    h.len == 0 || h.len % sizeof(struct sock_filter) != 0 ||
	    h.len / sizeof(struct sock_filter) > BPF_MAXINSNS ||
	    (size_t)n != sizeof(h) + h.len || (f = malloc(h.len)) == NULL) {
		for (int i = 0; i < nfd; i++)
			close(fds[i]);
		return -1;
	}
	memcpy(f, buf + sizeof(h), h.len);
	prog->filter = f;
	prog->len = (unsigned short)(h.len / sizeof(struct sock_filter));
	*nfdp = nfd;
	return 0;
}

/* A request of one four-letter word, no descriptor. */
static int
word_send(int sock, const char word[4])
{
	return send(sock, word, 4, MSG_NOSIGNAL) == 4 ? 0 : -1;
}

int
sbx_msg_check_send(int sock)
{
	return word_send(sock, "CHCK");
}

int
sbx_msg_boot_send(int sock)
{
	return word_send(sock, "BOOT");
}

static int
add_str(char *buf, size_t cap, size_t *len, const char *s)
{
	size_t n = strlen(s) + 1;

	if (*len + n > cap)
		return KZ_ETOOBIG;
	memcpy(buf + *len, s, n);
	*len += n;
	return 0;
}

/* Hands the job to the init: argv, env, cwd and four descriptors. */
int
sbx_msg_job_send(int sock, const struct sbx_req *rq, const int fds[ZFDS])
{
	static char buf[ZMSG_MAX];
	char targets[SBX_PASS_MAX * 8] = "", net[2] = "";
	int all[ZFDS + SBX_PASS_MAX];
	size_t len = 0;
	int r = 0;

	for (size_t i = 0; r == 0 && rq->argv[i] != NULL; i++)
		r = add_str(buf, sizeof(buf), &len, rq->argv[i]);
	r |= add_str(buf, sizeof(buf), &len, "");
	for (size_t i = 0; r == 0 && i < rq->env.n; i++)
		r = add_str(buf, sizeof(buf), &len, rq->env.v[i]);
	r |= add_str(buf, sizeof(buf), &len, "");
	r |= add_str(buf, sizeof(buf), &len, rq->cwd ? rq->cwd : "");
	for (int i = 0; i < rq->npass; i++) {
		size_t tl = strlen(targets);

		snprintf(targets + tl, sizeof(targets) - tl, "%s%d",
		    i ? "," : "", rq->pass_fd[i]);
	}
	r |= add_str(buf, sizeof(buf), &len, targets);
	r |= add_str(buf, sizeof(buf), &len, rq->npmrc);
	net[0] = (char)('0' + (rq->net & (SBX_NET_RELAY | SBX_NET_BROKER)));
	r |= add_str(buf, sizeof(buf), &len, net);
	if (r != 0)
		return KZ_ETOOBIG;
	memcpy(all, fds, sizeof(int) * ZFDS);
	memcpy(all + ZFDS, rq->pass_fd, sizeof(int) * (size_t)rq->npass);
	return sbx_msg_send_fds(sock, buf, len, all, ZFDS + rq->npass);
}

/* Splits "argv\0...\0\0env\0...\0\0cwd\0targets\0npmrc\0net\0" into
 * the job; targets is a comma-separated list of descriptor numbers, one
 * for each passed descriptor, and net one digit, the run's SBX_NET_*. */
int
sbx_msg_unpack(char *b, size_t n, struct sbx_job *j)
{
	char *p = b, *end = b + n;
	size_t k = 0;

	if (n == 0 || b[n - 1] != '\0')
		return -1;
	for (; p < end && *p != '\0' && k < SBX_ARGV_MAX; p += strlen(p) + 1)
		j->argv[k++] = p;
	j->argv[k] = NULL;
	if (k == 0 || p >= end || *p != '\0')
		return -1;
	p++;
	for (k = 0; p < end && *p != '\0' && k < SBX_ENV_SLOTS;
	     p += strlen(p) + 1)
		j->env[k++] = p;
	j->env[k] = NULL;
	if (p >= end || *p != '\0' || ++p >= end)
		return -1;
	j->cwd = p;
	p += strlen(p) + 1;
	if (p >= end)
		return -1;
	for (k = 0; *p != '\0'; k++) {
		char *e;
		long v = strtol(p, &e, 10);

		if ((int)k >= j->npass || e == p || v < 3 || v >= HIGH_FD ||
		    (*e != ',' && *e != '\0'))
			return -1;
		j->target[k] = (int)v;
		p = *e == ',' ? e + 1 : e;
	}
	if ((int)k != j->npass || ++p >= end)
		return -1;
	j->npmrc = p;
	p += strlen(p) + 1;
	if (p + 2 != end || *p < '0' || *p > '3')
		return -1;
	j->net = *p - '0';
	return 0;
}

int
sbx_msg_take(int sock, char *buf, size_t cap, struct sbx_job *j)
{
	char cb[CMSG_SPACE(sizeof(int) * (ZFDS + SBX_PASS_MAX))];
	struct iovec iov = {buf, cap};
	struct msghdr mh = {.msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = cb,
	    .msg_controllen = sizeof(cb)};
	struct cmsghdr *c;
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

	if (n <= 0)
		return -2;
	if (n == 4 && memcmp(buf, "CHCK", 4) == 0 && mh.msg_controllen == 0)
		return 1;
	if (n == 4 && memcmp(buf, "BOOT", 4) == 0 && mh.msg_controllen == 0)
		return 2;
	c = CMSG_FIRSTHDR(&mh);
	if (c == NULL || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len < CMSG_LEN(sizeof(int) * ZFDS) ||
	    (c->cmsg_len - CMSG_LEN(0)) % sizeof(int) != 0)
		return -1;
	j->npass = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) - ZFDS;
	memcpy(j->fd, CMSG_DATA(c), sizeof(int) * (size_t)(ZFDS + j->npass));
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    sbx_msg_unpack(buf, (size_t)n, j) != 0) {
		for (int i = 0; i < ZFDS + j->npass; i++)
			close(j->fd[i]);
		return -1;
	}
	j->len = (size_t)n;
	return 0;
}
