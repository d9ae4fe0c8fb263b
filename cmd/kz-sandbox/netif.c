/*
 * The browser's network namespace holds loopback and one more interface:
 * a veth pair whose both ends stay in that namespace, 192.0.2.1/32 on one
 * (TEST-NET-1, RFC 5737), no route anywhere.  Chromium's WebRTC does not
 * start gathering at all in a namespace that has only loopback; with this
 * interface it gathers, and under WebRtcIPHandling disable_non_proxied_udp
 * the only candidate it can make is a relay reached over TCP through the
 * proxy (the egress relay, then kz-egress).  The interface reaches
 * nothing: its peer is in the same namespace and nothing listens there.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sbx.h"
#include "banned.h"

#define IF_A "kzrtc0"
#define IF_B "kzrtc1"
#define IF_ADDR "192.0.2.1"

struct nlreq {
	struct nlmsghdr n;
	struct ifinfomsg i;
	char buf[256];
};

static struct rtattr *
put(struct nlreq *r, int type, const void *d, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)&r->n +
	    NLMSG_ALIGN(r->n.nlmsg_len));

	a->rta_type = (unsigned short)type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len > 0)
		memcpy(RTA_DATA(a), d, len);
	r->n.nlmsg_len = NLMSG_ALIGN(r->n.nlmsg_len) + RTA_ALIGN(a->rta_len);
	return a;
}

static void
end(struct nlreq *r, struct rtattr *a)
{
	a->rta_len = (unsigned short)((char *)&r->n + r->n.nlmsg_len -
	    (char *)a);
}

/* RTM_NEWLINK for the veth pair; 0 once the kernel acknowledged it. */
static int
make_pair(void)
{
	struct nlreq r;
	struct rtattr *info, *data, *peer;
	struct ifinfomsg pi;
	char ack[512];
	struct nlmsghdr *h = (struct nlmsghdr *)ack;
	int fd, e = -1;
	ssize_t n;

	memset(&r, 0, sizeof(r));
	memset(&pi, 0, sizeof(pi));
	r.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
	r.n.nlmsg_type = RTM_NEWLINK;
	r.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
	r.i.ifi_family = AF_UNSPEC;
	put(&r, IFLA_IFNAME, IF_A, sizeof(IF_A));
	info = put(&r, IFLA_LINKINFO, NULL, 0);
	put(&r, IFLA_INFO_KIND, "veth", 4);
	data = put(&r, IFLA_INFO_DATA, NULL, 0);
	peer = put(&r, VETH_INFO_PEER, &pi, sizeof(pi));
	put(&r, IFLA_IFNAME, IF_B, sizeof(IF_B));
	end(&r, peer);
	end(&r, data);
	end(&r, info);
	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) <
	    0)
		return -1;
	if (send(fd, &r, r.n.nlmsg_len, 0) == (ssize_t)r.n.nlmsg_len &&
	    (n = recv(fd, ack, sizeof(ack), 0)) >=
	        (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) &&
	    h->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr *ne = NLMSG_DATA(h);

		e = ne->error == 0 ? 0 : -1;
		errno = -ne->error;
	}
	close(fd);
	return e;
}

static int
up(int fd, const char *name, bool addr)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (addr) {
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, IF_ADDR, &sin->sin_addr);
		if (ioctl(fd, SIOCSIFADDR, &ifr) < 0)
			return -1;
		inet_pton(AF_INET, "255.255.255.255", &sin->sin_addr);
		if (ioctl(fd, SIOCSIFNETMASK, &ifr) < 0)
			return -1;
	}
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -1 : 0;
}

int
sbx_webrtc_if(char *why, size_t wlen)
{
	int fd, e;

	if (make_pair() != 0) {
		kz_why(why, wlen, "no interface for WebRTC: veth: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return KZ_ESYS;
	e = up(fd, IF_A, true) == 0 && up(fd, IF_B, false) == 0 ? 0 : KZ_ESYS;
	if (e != 0)
		kz_why(why, wlen, "no interface for WebRTC: %s",
		    strerror(errno));
	close(fd);
	return e;
}
