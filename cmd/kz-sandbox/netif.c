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
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "sbx.h"
#include "banned.h"

#define IF_A "kzrtc0"
#define IF_B "kzrtc1"
#define IF_ADDR "192.0.2.1"

/* RTM_NEWLINK for the veth pair, both ends here (libmnl builds the
 * message); 0 once the kernel acknowledged it, else -1 with errno. */
static int
make_pair(void)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *i, *pi;
	struct nlattr *info, *data, *peer;
	struct mnl_socket *nl;
	unsigned int seq = 1;
	int e = -1;
	ssize_t n;

	h->nlmsg_type = RTM_NEWLINK;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
	h->nlmsg_seq = seq;
	i = mnl_nlmsg_put_extra_header(h, sizeof(*i));
	i->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(h, IFLA_IFNAME, IF_A);
	info = mnl_attr_nest_start(h, IFLA_LINKINFO);
	mnl_attr_put_strz(h, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(h, IFLA_INFO_DATA);
	peer = mnl_attr_nest_start(h, VETH_INFO_PEER);
	pi = mnl_nlmsg_put_extra_header(h, sizeof(*pi));
	pi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(h, IFLA_IFNAME, IF_B);
	mnl_attr_nest_end(h, peer);
	mnl_attr_nest_end(h, data);
	mnl_attr_nest_end(h, info);
	if ((nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC)) == NULL)
		return -1;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == 0 &&
	    mnl_socket_sendto(nl, h, h->nlmsg_len) == (ssize_t)h->nlmsg_len &&
	    (n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) > 0)
		e = mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl),
		        NULL, NULL) < 0 ?
		    -1 :
		    0;
	mnl_socket_close(nl);
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
