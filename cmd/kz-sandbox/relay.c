/*
 * The egress relay.  When the worker has an egress socket, each run that
 * carries a grant gets a relay process listening on the sandbox loopback.
 * It takes one HTTP proxy request head per connection (CONNECT host:port or
 * an absolute-form http:// URL), drops whatever Proxy-Authorization the
 * code sent, adds the run's grant, and forwards the connection to kz-egress
 * over its Unix socket, which decides.  The grant lives only in the relay's
 * memory: never in the code's environment, files or argv.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "kz_io.h"
#include "banned.h"

#define RELAY_CONNS 64
#define RELAY_HEAD_MS 10000
#define RELAY_IDLE_MS 300000

static bool
token_ok(const char *s, size_t n, bool allow_slash)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~' || (!allow_slash && s[i] == '/'))
			return false;
	return true;
}

static int
request_line(const char *l, size_t n)
{
	const char *sp1 = memchr(l, ' ', n), *sp2;

	if (sp1 == NULL)
		return KZ_EPROTO;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(l + n - sp1 - 1));
	if (sp2 == NULL || (size_t)(l + n - sp2 - 1) != 8 ||
	    memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    !token_ok(l, (size_t)(sp1 - l), false) ||
	    !token_ok(sp1 + 1, (size_t)(sp2 - sp1 - 1), true))
		return KZ_EPROTO;
	if ((size_t)(sp1 - l) == 7 && memcmp(l, "CONNECT", 7) == 0)
		return memchr(sp1 + 1, '/', (size_t)(sp2 - sp1 - 1)) == NULL &&
		        memchr(sp1 + 1, ':', (size_t)(sp2 - sp1 - 1)) != NULL ?
		    0 :
		    KZ_EPROTO;
	return (size_t)(sp2 - sp1 - 1) > 7 &&
	        strncasecmp(sp1 + 1, "http://", 7) == 0 ?
	    0 :
	    KZ_EPROTO;
}

static int
append(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
	if (*len + n > cap)
		return KZ_ETOOBIG;
	memcpy(out + *len, s, n);
	*len += n;
	return 0;
}

/* Whether the header line p..p+n names one of the hop-by-hop fields that
 * would keep a plain-HTTP proxy connection open for a second request. */
static bool
keeps_alive(const char *p, size_t n)
{
	static const char *const names[] = {"Connection", "Proxy-Connection",
	    "Keep-Alive", NULL};

	for (size_t i = 0; names[i] != NULL; i++) {
		size_t k = strlen(names[i]);

		if (n > k && p[k] == ':' && strncasecmp(p, names[i], k) == 0)
			return true;
	}
	return false;
}

int
sbx_relay_head(const char *in, size_t inlen, const char *grant, char *out,
    size_t cap, size_t *outlen)
{
	const char *p = in, *end = in + inlen, *eol;
	size_t len = 0;
	bool tunnel;
	int r;

	if (inlen < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0 ||
	    !token_ok(grant, strlen(grant), true))
		return KZ_EPROTO;
	eol = memmem(p, (size_t)(end - p), "\r\n", 2);
	if ((r = request_line(p, (size_t)(eol - p))) != 0)
		return r;
	tunnel = strncmp(p, "CONNECT ", 8) == 0;
	if ((r = append(out, cap, &len, p, (size_t)(eol - p) + 2)) != 0 ||
	    (r = append(out, cap, &len, "Proxy-Authorization: Bearer ", 28)) ||
	    (r = append(out, cap, &len, grant, strlen(grant))) ||
	    (r = append(out, cap, &len, "\r\n", 2)))
		return r;
	for (p = eol + 2; p < end - 2; p = eol + 2) {
		const char *colon;

		eol = memmem(p, (size_t)(end - p), "\r\n", 2);
		colon = memchr(p, ':', (size_t)(eol - p));
		if (colon == NULL || colon == p ||
		    memchr(p, '\n', (size_t)(eol - p)) ||
		    memchr(p, '\r', (size_t)(eol - p)) ||
		    memchr(p, '\0', (size_t)(eol - p)))
			return KZ_EPROTO;
		if ((size_t)(colon - p) == 19 &&
		    strncasecmp(p, "Proxy-Authorization", 19) == 0)
			continue;
		if (!tunnel && keeps_alive(p, (size_t)(eol - p)))
			continue;
		if ((r = append(out, cap, &len, p, (size_t)(eol - p) + 2)) != 0)
			return r;
	}
	/* The grant is added to the first head only: a plain-HTTP client that
	 * reused the connection would send its next request without one, so
	 * the connection carries exactly one request and the client opens a
	 * new one (with a new head and the grant) for the next. */
	if (!tunnel &&
	    (r = append(out, cap, &len, "Connection: close\r\n", 19)) != 0)
		return r;
	if ((r = append(out, cap, &len, "\r\n", 2)) != 0)
		return r;
	*outlen = len;
	return 0;
}

/*
 * Under native the code shares the worker's loopback, and the relay (or
 * the forward) listens there.  Under gvisor the code has gVisor's network
 * only, and the loader listens on its loopback for it; the listener here
 * is then an abstract Unix socket of the worker's network namespace, which
 * the run init connects to for the loader (gvisor_net.c): no TCP port of
 * the host's is open for anything.
 */
int
sbx_relay_listen(const struct sbx_conf *c, int port, int *fd, char *why,
    size_t wlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	    .sin_port = htons((uint16_t)port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_un su;
	bool gv = sbx_gvisor(c);
	socklen_t len = gv ? sbx_gv_lo_addr(port, &su) : sizeof(sa);
	struct sockaddr *a = gv ? (struct sockaddr *)&su :
	                          (struct sockaddr *)&sa;
	int s, one = 1;

	if ((s = socket(gv ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC,
	         0)) < 0 ||
	    (!gv &&
	        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) <
	            0) ||
	    bind(s, a, len) < 0 || listen(s, 64) < 0) {
		kz_why(why, wlen, "relay: cannot listen on loopback: %s",
		    strerror(errno));
		if (s >= 0)
			close(s);
		return KZ_ESYS;
	}
	*fd = s;
	return 0;
}

void
sbx_pump(int a, int b)
{
	struct pollfd p[2] = {{.fd = a, .events = POLLIN},
	    {.fd = b, .events = POLLIN}};
	char buf[65536];

	while (p[0].fd >= 0 || p[1].fd >= 0) {
		int n = poll(p, 2, RELAY_IDLE_MS);

		if (n <= 0)
			return;
		for (int i = 0; i < 2; i++) {
			ssize_t got;
			int dst = i == 0 ? b : a;

			if (p[i].fd < 0 || p[i].revents == 0)
				continue;
			got = read(p[i].fd, buf, sizeof(buf));
			if (got <= 0) {
				(void)shutdown(dst, SHUT_WR);
				p[i].fd = -1;
				continue;
			}
			/* What cannot be written has nowhere to go: that side
			 * is no longer read, and the other still passes, for
			 * it may hold the answer that explains why (kz-egress
			 * refuses a request and closes before its body is
			 * through). */
			if (kz_write_full(dst, buf, (size_t)got,
			        kz_now_ms() + RELAY_IDLE_MS) != 0)
				p[i].fd = -1;
		}
	}
}

static void
refuse(int c)
{
	static const char
	    r[] = "HTTP/1.1 400 Bad Request\r\n"
	          "Connection: close\r\nContent-Length: 0\r\n\r\n";

	(void)!kz_write_full(c, r, sizeof(r) - 1, kz_now_ms() + 1000);
}

static void
handle(int c, const char *egress, const char *grant)
{
	char head[SBX_RELAY_HEAD_MAX], out[SBX_RELAY_HEAD_MAX + 4096];
	int64_t deadline = kz_now_ms() + RELAY_HEAD_MS;
	size_t len = 0, olen;
	char *endp = NULL;
	int up;

	while (endp == NULL && len < sizeof(head)) {
		struct pollfd p = {.fd = c, .events = POLLIN};
		int64_t left = deadline - kz_now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) != 1 ||
		    (n = read(c, head + len, sizeof(head) - len)) <= 0)
			return;
		len += (size_t)n;
		endp = memmem(head, len, "\r\n\r\n", 4);
	}
	if (endp == NULL ||
	    sbx_relay_head(head, (size_t)(endp + 4 - head), grant, out,
	        sizeof(out), &olen) != 0) {
		refuse(c);
		return;
	}
	if (kz_sock_connect(egress, 5000, &up, NULL, 0) != 0) {
		static const char
		    r[] = "HTTP/1.1 502 Bad Gateway\r\n"
		          "Connection: close\r\nContent-Length: 0\r\n\r\n";

		(void)!kz_write_full(c, r, sizeof(r) - 1, kz_now_ms() + 1000);
		return;
	}
	(void)!kz_fd_nonblock(up, false);
	/* The bytes after the head (a body, a TLS hello) follow it.  When
	 * they cannot (kz-egress answered the head and closed), nothing more
	 * of the code's goes up, but kz-egress's answer still comes down: the
	 * code sees the refusal.  Nothing follows a head not written whole,
	 * which the code's bytes would finish, nor a gap in what it sent. */
	if (kz_write_full(up, out, olen, kz_now_ms() + 5000) == 0) {
		if (kz_write_full(up, endp + 4, len - (size_t)(endp + 4 - head),
		        kz_now_ms() + 5000) != 0)
			(void)shutdown(up, SHUT_WR);
		sbx_pump(c, up);
	}
	close(up);
}

pid_t
sbx_relay_start(int lfd, const char *egress, const char *grant)
{
	pid_t pid = fork();
	int live = 0;

	if (pid != 0)
		return pid;
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Nothing of its parent's but the listener: a browser's bridge
	 * holds Chromium's pipe when it starts a pre-started session's
	 * relay (browser.c). */
	if (lfd > 3)
		(void)close_range(3, (unsigned)lfd - 1, 0);
	(void)close_range((unsigned)lfd + 1, ~0u, 0);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		while (waitpid(-1, NULL, WNOHANG) > 0)
			live--;
		if (c < 0)
			continue;
		if (live >= RELAY_CONNS) {
			close(c);
			continue;
		}
		if (fork() == 0) {
			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(lfd);
			handle(c, egress, grant);
			_exit(0);
		}
		live++;
		close(c);
	}
}
