/*
 * The administrator's egress policy.  Only the config file and the
 * environment choose the mode; nothing in a request or a grant can.  Any
 * value that cannot be read or parsed, and any prerequisite that is missing,
 * leaves the mode in force at isolated, with the reason kept for status.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cJSON.h>
#include <libmnl/libmnl.h>

#include "egress.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_srv.h"
#include "banned.h"

const char *const eg_conf_keys[] = {
    "SANDBOX_EGRESS_ENABLED",
    "SANDBOX_EGRESS_MODE",
    "SANDBOX_EGRESS_HOST_ALLOWLIST",
    "SANDBOX_EGRESS_PRIVATE_CIDRS",
    "SANDBOX_EGRESS_ALLOWED_PORTS",
    "SANDBOX_EGRESS_TOKEN_TTL_SECONDS",
    "SANDBOX_EGRESS_RESOLVER",
    "SANDBOX_EGRESS_CONTROL_PLANE_CIDRS",
    "SANDBOX_EGRESS_LISTEN",
    "SANDBOX_EGRESS_PUBLIC_KEY_FILE",
    "SANDBOX_EGRESS_TURN",
    "SANDBOX_EGRESS_AUDIT_SOCKET",
    "SANDBOX_EGRESS_MAX_CONNECTIONS",
    "SANDBOX_EGRESS_THREADS",
    "SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS",
    "SANDBOX_EGRESS_CONNECT_TIMEOUT_SECONDS",
    "SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS",
    "SANDBOX_EGRESS_STATUS_SOCKET",
    KZ_SRV_PEER_KEYS,
    "KZ_SOCKET",
    "KZ_RUN_DIR",
    "KZ_AUDIT_SOCKET",
    "KZ_FIELD_KEY_FILE",
    "KZ_LOG_LEVEL",
    "KZ_AUDIT",
    NULL,
};

#define DEFAULT_PRIVATE "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"

static const char *const mode_names[] = {
    "isolated",
    "public_internet",
    "private_networks",
    "host_allowlist",
};

const char *
eg_mode_name(enum eg_mode m)
{
	return mode_names[m];
}

static void
isolate(struct eg_policy *p, const char *why)
{
	/* The first reason is the one status reports. */
	if (p->isolated_why[0] == '\0')
		snprintf(p->isolated_why, sizeof(p->isolated_why), "%s", why);
	p->mode = EG_MODE_ISOLATED;
}

/* Calls fn on each comma- or space-separated item; stops at an error. */
static int
each_item(const char *list, int (*fn)(struct eg_policy *, const char *),
    struct eg_policy *p)
{
	char item[EG_HOST_MAX + 8];
	size_t i = 0;

	while (list[i] != '\0') {
		size_t n = strcspn(list + i, ", \t");

		if (n >= sizeof(item))
			return KZ_EINVAL;
		if (n > 0) {
			int r;

			memcpy(item, list + i, n);
			item[n] = '\0';
			if ((r = fn(p, item)) != 0)
				return r;
		}
		i += n;
		i += strspn(list + i, ", \t");
	}
	return 0;
}

static int
add_allow(struct eg_policy *p, const char *s)
{
	char name[EG_HOST_MAX + 1];
	struct eg_addr a;
	int lit = eg_addr_parse_literal(s, &a);

	if (p->nallow == EG_LIST_MAX || lit < 0)
		return KZ_EINVAL;
	if (lit == 1)
		eg_addr_str(&a, name, sizeof(name));
	else if (eg_name_normalize(s, name, sizeof(name)) != 0)
		return KZ_EINVAL;
	if ((p->allow[p->nallow] = strdup(name)) == NULL)
		return KZ_ENOMEM;
	p->nallow++;
	return 0;
}

static int
add_priv(struct eg_policy *p, const char *s)
{
	if (p->npriv == EG_LIST_MAX)
		return KZ_EINVAL;
	return eg_cidr_parse(s, &p->priv[p->npriv++]);
}

static int
add_cp(struct eg_policy *p, const char *s)
{
	if (p->ncp == EG_LIST_MAX)
		return KZ_EINVAL;
	return eg_cidr_parse(s, &p->cp[p->ncp++]);
}

static int
add_port(struct eg_policy *p, const char *s)
{
	int64_t v;

	if (p->nports == EG_LIST_MAX || kz_parse_int(s, 1, 65535, &v) != 0)
		return KZ_EINVAL;
	p->ports[p->nports++] = (uint16_t)v;
	return 0;
}

/* "host:port" or "[v6]:port" with a literal address (listen, resolver). */
static int
parse_hostport(const char *s, struct eg_addr *a, uint16_t *port)
{
	char host[EG_HOST_MAX + 1];

	if (eg_http_authority(s, strlen(s), 0, host, sizeof(host), port) != 0 ||
	    *port == 0)
		return KZ_EINVAL;
	return eg_addr_parse_literal(host, a) == 1 ? 0 : KZ_EINVAL;
}

static int
add_listen(struct eg_policy *p, const char *s)
{
	struct eg_listen *l;

	if (p->nlisten == sizeof(p->listen) / sizeof(p->listen[0]))
		return KZ_EINVAL;
	l = &p->listen[p->nlisten];
	memset(l, 0, sizeof(*l));
	if (strncmp(s, "unix:", 5) == 0) {
		if (s[5] != '/' || strlen(s + 5) >= sizeof(l->path))
			return KZ_EINVAL;
		l->is_unix = true;
		snprintf(l->path, sizeof(l->path), "%s", s + 5);
	} else if (parse_hostport(s, &l->a, &l->port) != 0) {
		return KZ_EINVAL;
	} else if (p->nown < EG_OWN_MAX) {
		p->own[p->nown++] = l->a;
	}
	p->nlisten++;
	return 0;
}

static bool is_own(const struct eg_policy *p, const struct eg_addr *a);

/* The eg_addr of an AF_INET or AF_INET6 sockaddr: false for another. */
static bool
sa_addr(const struct sockaddr *sa, struct eg_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (sa != NULL && sa->sa_family == AF_INET) {
		a->fam = 4;
		memcpy(a->b,
		    &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
		    4);
		return true;
	}
	if (sa != NULL && sa->sa_family == AF_INET6) {
		a->fam = 6;
		memcpy(a->b,
		    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
		    16);
		return true;
	}
	return false;
}

/*
 * Every address of the host's interfaces is the proxy's own too, whatever
 * it listens on: a service on the host's public address (or on all of
 * them) is the deployment's, not the Internet's.  Taken when the policy
 * is loaded at start (a reload keeps the list of the start); a host with
 * more addresses than the proxy can hold is isolated, never partly known.
 * An address the host gains later is caught at connect by
 * eg_addr_is_local.
 */
static void
add_local(struct eg_policy *p)
{
	struct ifaddrs *ifa, *i;
	struct eg_addr a;

	if (getifaddrs(&ifa) != 0) {
		isolate(p, "the host's own addresses cannot be read");
		return;
	}
	for (i = ifa; i != NULL; i = i->ifa_next) {
		if (!sa_addr(i->ifa_addr, &a) || is_own(p, &a))
			continue;
		if (p->nown == EG_OWN_MAX) {
			isolate(p,
			    "the host has more addresses than the "
			    "proxy can hold");
			break;
		}
		p->own[p->nown++] = a;
	}
	freeifaddrs(ifa);
}

/* The route's type, from the kernel's answer (mnl_cb_run). */
static int
route_type(const struct nlmsghdr *h, void *arg)
{
	if (mnl_nlmsg_get_payload_len(h) < sizeof(struct rtmsg))
		return MNL_CB_ERROR;
	*(int *)
	    arg = ((const struct rtmsg *)mnl_nlmsg_get_payload(h))->rtm_type;
	return MNL_CB_OK;
}

int
eg_addr_is_local(const struct eg_addr *a)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	struct sockaddr_storage ss;
	struct mnl_socket *nl;
	struct rtmsg *rt;
	unsigned int seq = 1;
	int type = -1, r = KZ_ESYS;
	ssize_t n;

	h->nlmsg_type = RTM_GETROUTE;
	h->nlmsg_flags = NLM_F_REQUEST;
	h->nlmsg_seq = seq;
	rt = mnl_nlmsg_put_extra_header(h, sizeof(*rt));
	/* The address connected to: an IPv4-mapped one as IPv4. */
	if (eg_addr_sockaddr(a, 0, &ss) == sizeof(struct sockaddr_in)) {
		rt->rtm_family = AF_INET;
		rt->rtm_dst_len = 32;
		mnl_attr_put(h, RTA_DST, 4,
		    &((struct sockaddr_in *)&ss)->sin_addr);
	} else {
		rt->rtm_family = AF_INET6;
		rt->rtm_dst_len = 128;
		mnl_attr_put(h, RTA_DST, 16,
		    &((struct sockaddr_in6 *)&ss)->sin6_addr);
	}
	/* Non-blocking: the kernel answers a route lookup before the send
	 * returns, and one that has not is no answer (refused). */
	if ((nl = mnl_socket_open2(NETLINK_ROUTE,
	         SOCK_CLOEXEC | SOCK_NONBLOCK)) == NULL)
		return KZ_ESYS;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == 0 &&
	    mnl_socket_sendto(nl, h, h->nlmsg_len) == (ssize_t)h->nlmsg_len &&
	    (n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) > 0) {
		if (mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl),
		        route_type, &type) >= 0)
			r = type == RTN_LOCAL;
		else if (errno == ENETUNREACH || errno == EHOSTUNREACH)
			/* No route at all: nowhere, so not here either. */
			r = 0;
	}
	mnl_socket_close(nl);
	return r;
}

static void
load_lists(struct eg_policy *p, const struct kz_conf *c)
{
	const char *v;

	v = kz_conf_str(c, "SANDBOX_EGRESS_HOST_ALLOWLIST", "");
	if (each_item(v, add_allow, p) != 0)
		isolate(p, "SANDBOX_EGRESS_HOST_ALLOWLIST cannot be parsed");
	v = kz_conf_str(c, "SANDBOX_EGRESS_PRIVATE_CIDRS", DEFAULT_PRIVATE);
	if (each_item(v, add_priv, p) != 0)
		isolate(p, "SANDBOX_EGRESS_PRIVATE_CIDRS cannot be parsed");
	v = kz_conf_str(c, "SANDBOX_EGRESS_CONTROL_PLANE_CIDRS", "");
	if (each_item(v, add_cp, p) != 0)
		isolate(p,
		    "SANDBOX_EGRESS_CONTROL_PLANE_CIDRS cannot be parsed");
	v = kz_conf_str(c, "SANDBOX_EGRESS_ALLOWED_PORTS", "80,443");
	if (each_item(v, add_port, p) != 0 || p->nports == 0)
		isolate(p, "unusable port list (SANDBOX_EGRESS_ALLOWED_PORTS)");
	v = kz_conf_str(c, "SANDBOX_EGRESS_LISTEN", "");
	if (each_item(v, add_listen, p) != 0)
		isolate(p, "SANDBOX_EGRESS_LISTEN cannot be parsed");
	add_local(p);
}

static void
load_mode(struct eg_policy *p, const struct kz_conf *c)
{
	const char *v = kz_conf_str(c, "SANDBOX_EGRESS_MODE",
	    "public_internet");
	char why[160];
	bool on;

	p->configured = EG_MODE_ISOLATED;
	for (int m = 0; m < 4; m++)
		if (strcmp(v, mode_names[m]) == 0)
			p->configured = (enum eg_mode)m;
	if (p->configured == EG_MODE_ISOLATED && strcmp(v, "isolated") != 0)
		isolate(p, "SANDBOX_EGRESS_MODE is not a known mode");
	else if (p->configured == EG_MODE_ISOLATED)
		isolate(p, "configured isolated");
	if (kz_conf_bool(c, "SANDBOX_EGRESS_ENABLED", true, &on, why,
	        sizeof(why)) != 0)
		isolate(p, "SANDBOX_EGRESS_ENABLED cannot be parsed");
	else if (!on)
		isolate(p, "egress disabled (SANDBOX_EGRESS_ENABLED=off)");
}

static void
load_numbers(struct eg_policy *p, const struct kz_conf *c)
{
	char why[160];
	int64_t ttl;

	if (kz_conf_int(c, "SANDBOX_EGRESS_TOKEN_TTL_SECONDS", EG_TTL_DEFAULT,
	        1, INT32_MAX, &ttl, why, sizeof(why)) != 0) {
		isolate(p, "SANDBOX_EGRESS_TOKEN_TTL_SECONDS cannot be parsed");
		ttl = EG_TTL_DEFAULT;
	}
	p->ttl_clamped = ttl > EG_TTL_MAX;
	p->ttl = p->ttl_clamped ? EG_TTL_MAX : ttl;
	/*
	 * One event loop per two CPUs: the proxy shares its host with the
	 * sandboxes it serves, and on two CPUs shared with clients and an
	 * origin a second loop cost 20-40% more CPU per request (its threads
	 * sleep and wake for every few requests) and no throughput.
	 */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN) / 2;

	ncpu = ncpu < 1 ? 1 : ncpu > 4 ? 4 : ncpu;
	if (kz_conf_int(c, "SANDBOX_EGRESS_MAX_CONNECTIONS", 8192, 1, 1000000,
	        &p->max_conns, why, sizeof(why)) != 0 ||
	    kz_conf_int(c, "SANDBOX_EGRESS_THREADS", ncpu, 1, EG_THREADS_MAX,
	        &p->threads, why, sizeof(why)) != 0 ||
	    kz_conf_int(c, "SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS", 10, 1, 3600,
	        &p->header_timeout, why, sizeof(why)) != 0 ||
	    kz_conf_int(c, "SANDBOX_EGRESS_CONNECT_TIMEOUT_SECONDS", 10, 1,
	        3600, &p->connect_timeout, why, sizeof(why)) != 0 ||
	    kz_conf_int(c, "SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS", 300, 1, 86400,
	        &p->idle_timeout, why, sizeof(why)) != 0)
		isolate(p, "a connection limit or timeout cannot be parsed");
}

/* The first nameserver of /etc/resolv.conf. */
static void
default_resolver(char *out, size_t len)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], addr[64];

	out[0] = '\0';
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, " nameserver %63s", addr) == 1) {
			if (strchr(addr, ':') != NULL)
				snprintf(out, len, "[%s]:53", addr);
			else
				snprintf(out, len, "%s:53", addr);
			break;
		}
	}
	if (f != NULL)
		fclose(f);
}

static void load_audit(struct eg_policy *p, const struct kz_conf *c);

/*
 * The status socket speaks kz frames; the proxy's do not.  Unset, it
 * follows the one socket rule (kaizen.conf(5)) when KZ_RUN_DIR names a
 * run dir, so that the daemon and `status` meet without a setting; empty,
 * there is none.
 */
static void
load_status_sock(struct eg_policy *p, const struct kz_conf *c)
{
	const char *v = kz_conf_str(c, "SANDBOX_EGRESS_STATUS_SOCKET", NULL);
	const char *run = kz_conf_str(c, "KZ_RUN_DIR", NULL);

	p->status_sock[0] = '\0';
	if (v == NULL && run != NULL && *run != '\0') {
		if (kz_sock_in(run, "kz-egress", "kz-egress-status.sock",
		        p->status_sock, sizeof(p->status_sock)) != 0) {
			p->status_sock[0] = '\0';
			isolate(p,
			    "the status socket under KZ_RUN_DIR is too long");
		}
	} else if (v != NULL && strlen(v) >= sizeof(p->status_sock)) {
		isolate(p, "SANDBOX_EGRESS_STATUS_SOCKET is too long");
	} else if (v != NULL) {
		snprintf(p->status_sock, sizeof(p->status_sock), "%s", v);
	}
}

static void
load_endpoints(struct eg_policy *p, const struct kz_conf *c)
{
	const char *v;
	struct eg_addr a;
	uint16_t port;

	/* Unset or empty: the system's resolver, as documented. */
	v = kz_conf_str(c, "SANDBOX_EGRESS_RESOLVER", NULL);
	if (v == NULL || *v == '\0')
		default_resolver(p->resolver, sizeof(p->resolver));
	else if (strlen(v) < sizeof(p->resolver))
		snprintf(p->resolver, sizeof(p->resolver), "%s", v);
	if (p->resolver[0] == '\0' || parse_hostport(p->resolver, &a, &port))
		isolate(p, "no usable resolver (SANDBOX_EGRESS_RESOLVER)");
	v = kz_conf_str(c, "SANDBOX_EGRESS_TURN", NULL);
	if (v != NULL && *v != '\0' &&
	    (eg_http_authority(v, strlen(v), 0, p->turn_host,
	         sizeof(p->turn_host), &p->turn_port) != 0 ||
	        p->turn_port == 0)) {
		p->turn_host[0] = '\0';
		isolate(p, "SANDBOX_EGRESS_TURN cannot be parsed");
	}
	load_status_sock(p, c);
	p->peers_err = kz_srv_peers_load(c, &p->peers, NULL, p->peers_why,
	    sizeof(p->peers_why));
	load_audit(p, c);
}

/*
 * The sink of refusal records: KZ_AUDIT and the one socket rule
 * (kaizen.conf(5)), SANDBOX_EGRESS_AUDIT_SOCKET first.  A sink that
 * cannot be named isolates the proxy rather than refuse unrecorded.
 */
static void
load_audit(struct eg_policy *p, const struct kz_conf *c)
{
	const char *v = kz_conf_str(c, "SANDBOX_EGRESS_AUDIT_SOCKET", NULL);
	char run[PATH_MAX], why[160] = "";
	bool on = true;

	p->audit_sock[0] = '\0';
	if (kz_conf_bool(c, "KZ_AUDIT", true, &on, why, sizeof(why)) != 0) {
		isolate(p, "KZ_AUDIT: expected on or off");
		return;
	}
	if (!on)
		return;
	if (v != NULL && *v != '\0') {
		if ((size_t)snprintf(p->audit_sock, sizeof(p->audit_sock), "%s",
		        v) >= sizeof(p->audit_sock)) {
			p->audit_sock[0] = '\0';
			isolate(p, "SANDBOX_EGRESS_AUDIT_SOCKET is too long");
		}
		return;
	}
	if (kz_run_dir(c, run, sizeof(run), why, sizeof(why)) != 0 ||
	    kz_conf_audit(c, run, p->audit_sock, sizeof(p->audit_sock), why,
	        sizeof(why)) != 0) {
		p->audit_sock[0] = '\0';
		isolate(p, "the audit sink cannot be named (KZ_AUDIT_SOCKET)");
	}
}

static void
load_pubkey(struct eg_policy *p, const struct kz_conf *c)
{
	const char *path = kz_conf_str(c, "SANDBOX_EGRESS_PUBLIC_KEY_FILE",
	    NULL);
	char buf[130];
	size_t n;
	FILE *f;

	if (path == NULL) {
		isolate(p,
		    "no public key to verify grants "
		    "(SANDBOX_EGRESS_PUBLIC_KEY_FILE)");
		return;
	}
	if ((f = fopen(path, "re")) == NULL) {
		isolate(p, "public key file cannot be read");
		return;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (n != 64 || kz_unhex(buf, p->pk, 32) != 0) {
		isolate(p, "public key file is not 64 hex digits");
		return;
	}
	p->have_pk = true;
}

int
eg_policy_load(const struct kz_conf *c, const char *conf_why,
    const char *sock_path, struct eg_policy **out)
{
	struct eg_policy *p = calloc(1, sizeof(*p));
	char buf[160];

	if (p == NULL)
		return KZ_ENOMEM;
	atomic_init(&p->refs, 1);
	if (conf_why != NULL) {
		snprintf(buf, sizeof(buf), "config cannot be used: %s",
		    conf_why);
		isolate(p, buf);
	}
	load_mode(p, c);
	load_lists(p, c);
	load_numbers(p, c);
	load_endpoints(p, c);
	load_pubkey(p, c);
	if (sock_path == NULL)
		sock_path = kz_conf_str(c, "KZ_SOCKET", NULL);
	if (sock_path != NULL && p->nlisten < 8) {
		snprintf(buf, sizeof(buf), "unix:%s", sock_path);
		if (add_listen(p, buf) != 0)
			isolate(p, "--socket path is unusable");
	}
	if (p->nlisten == 0)
		isolate(p, "no listen address (SANDBOX_EGRESS_LISTEN)");
	if (p->isolated_why[0] == '\0')
		p->mode = p->configured;
	*out = p;
	return 0;
}

struct eg_policy *
eg_policy_ref(struct eg_policy *p)
{
	atomic_fetch_add(&p->refs, 1);
	return p;
}

void
eg_policy_free(struct eg_policy *p)
{
	if (p == NULL || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	for (size_t i = 0; i < p->nallow; i++)
		free(p->allow[i]);
	free(p);
}

/* ---- decisions ---- */

enum eg_reason
eg_dest_init(struct eg_dest *d, const char *host, uint16_t port, bool connect,
    unsigned caps)
{
	int lit;

	memset(d, 0, sizeof(*d));
	d->port = port;
	d->connect = connect;
	d->caps = caps;
	lit = eg_addr_parse_literal(host, &d->lit);
	if (lit < 0)
		return EG_R_BAD_HOST;
	if (lit == 1) {
		d->literal = true;
		eg_addr_str(&d->lit, d->host, sizeof(d->host));
		return EG_R_NONE;
	}
	if (eg_name_normalize(host, d->host, sizeof(d->host)) != 0)
		return EG_R_BAD_HOST;
	return EG_R_NONE;
}

static bool
is_turn(const struct eg_policy *p, const struct eg_dest *d)
{
	char t[EG_HOST_MAX + 1];
	struct eg_addr a;
	int lit;

	if (p->turn_host[0] == '\0' || !d->connect ||
	    !(d->caps & EG_CAP_TURN) || d->port != p->turn_port)
		return false;
	lit = eg_addr_parse_literal(p->turn_host, &a);
	if (lit == 1)
		return d->literal && eg_addr_eq(&a, &d->lit);
	return lit == 0 && !d->literal &&
	    eg_name_normalize(p->turn_host, t, sizeof(t)) == 0 &&
	    strcmp(t, d->host) == 0;
}

enum eg_reason
eg_policy_check_dest(const struct eg_policy *p, const struct eg_dest *d)
{
	bool port_ok = false;

	if (p->mode == EG_MODE_ISOLATED)
		return EG_R_ISOLATED;
	if (is_turn(p, d))
		return EG_R_NONE;
	for (size_t i = 0; i < p->nports; i++)
		port_ok |= p->ports[i] == d->port;
	if (!port_ok)
		return EG_R_PORT_NOT_ALLOWED;
	if (p->mode == EG_MODE_ALLOWLIST) {
		for (size_t i = 0; i < p->nallow; i++)
			if (strcmp(p->allow[i], d->host) == 0)
				return EG_R_NONE;
		return EG_R_HOST_NOT_ALLOWLISTED;
	}
	return EG_R_NONE;
}

static bool
in_list(const struct eg_cidr *l, size_t n, const struct eg_addr *a)
{
	for (size_t i = 0; i < n; i++)
		if (eg_cidr_match(&l[i], a))
			return true;
	return false;
}

static bool
is_own(const struct eg_policy *p, const struct eg_addr *a)
{
	for (size_t i = 0; i < p->nown; i++)
		if (eg_addr_eq(&p->own[i], a))
			return true;
	return false;
}

enum eg_reason
eg_policy_check_addr(const struct eg_policy *p, const struct eg_dest *d,
    const struct eg_addr *a)
{
	struct eg_addr eff;
	enum eg_class c = eg_addr_classify(a, &eff);

	if (p->mode == EG_MODE_ISOLATED)
		return EG_R_ISOLATED;
	if (eg_class_protected(c))
		return eg_class_reason(c);
	if (in_list(p->cp, p->ncp, a) || in_list(p->cp, p->ncp, &eff))
		return EG_R_CONTROL_PLANE;
	if (is_own(p, a) || is_own(p, &eff))
		return EG_R_OWN_ADDRESS;
	if (c == EG_C_PUBLIC)
		return EG_R_NONE;
	/* Private ranges: only the listed ones, in private_networks mode or
	 * for the administrator's own TURN server. */
	if ((p->mode == EG_MODE_PRIVATE || is_turn(p, d)) &&
	    in_list(p->priv, p->npriv, &eff))
		return EG_R_NONE;
	return eg_class_reason(c);
}

/* ---- status ---- */

/* The TURN server as host:port ([v6]:port), or "" when none. */
static void
turn_authority(const struct eg_policy *p, char *out, size_t len)
{
	out[0] = '\0';
	if (p->turn_host[0] == '\0')
		return;
	/* An IPv6 literal is kept as written, brackets included. */
	snprintf(out, len,
	    strchr(p->turn_host, ':') && p->turn_host[0] != '[' ? "[%s]:%u" :
	                                                          "%s:%u",
	    p->turn_host, (unsigned)p->turn_port);
}

cJSON *
eg_policy_status_json(const struct eg_policy *p)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char turn[EG_HOST_MAX + 16];

	cJSON_AddStringToObject(o, "mode", eg_mode_name(p->mode));
	cJSON_AddStringToObject(o, "configured_mode",
	    eg_mode_name(p->configured));
	if (p->mode == EG_MODE_ISOLATED)
		cJSON_AddStringToObject(o, "isolated_because", p->isolated_why);
	a = cJSON_AddArrayToObject(o, "ports");
	for (size_t i = 0; i < p->nports && a; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(p->ports[i]));
	a = cJSON_AddArrayToObject(o, "denied_in_every_mode");
	for (int c = 0; c < EG_C_COUNT_ && a; c++)
		if (eg_class_protected((enum eg_class)c))
			cJSON_AddItemToArray(a,
			    cJSON_CreateString(
			        eg_class_name((enum eg_class)c)));
	cJSON_AddItemToArray(a, cJSON_CreateString("control_plane"));
	cJSON_AddItemToArray(a, cJSON_CreateString("own_address"));
	cJSON_AddNumberToObject(o, "private_cidrs", (double)p->npriv);
	cJSON_AddNumberToObject(o, "control_plane_cidrs", (double)p->ncp);
	cJSON_AddNumberToObject(o, "allowlist_entries", (double)p->nallow);
	cJSON_AddNumberToObject(o, "token_ttl_seconds", (double)p->ttl);
	cJSON_AddBoolToObject(o, "token_ttl_clamped", p->ttl_clamped);
	cJSON_AddBoolToObject(o, "turn", p->turn_host[0] != '\0');
	turn_authority(p, turn, sizeof(turn));
	if (turn[0] != '\0')
		cJSON_AddStringToObject(o, "turn_authority", turn);
	cJSON_AddBoolToObject(o, "public_key", p->have_pk);
	cJSON_AddStringToObject(o, "audit",
	    p->audit_sock[0] ? p->audit_sock : "off");
	return o;
}

static const char *
str_of(const cJSON *o, const char *key, const char *dflt)
{
	const cJSON *v = kz_json_get(o, key);

	return cJSON_IsString(v) ? v->valuestring : dflt;
}

static double
num_of(const cJSON *o, const char *key)
{
	const cJSON *v = kz_json_get(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The counters a running daemon adds to its scope. */
static void
print_counts(const cJSON *o)
{
	const cJSON *it;

	if (kz_json_get(o, "allowed") == NULL)
		return;
	printf("allowed: %.0f\nrefused: %.0f", num_of(o, "allowed"),
	    num_of(o, "refused"));
	cJSON_ArrayForEach(it,
	    kz_json_get(o, "refused_by_reason")) if (cJSON_IsNumber(it))
	    printf(" %s=%.0f", it->string, it->valuedouble);
	printf("\nbad requests: %.0f\nopen connections: %.0f\n"
	       "reloads: %.0f\n",
	    num_of(o, "bad_requests"), num_of(o, "open_conns"),
	    num_of(o, "reloads"));
}

enum kz_exit
eg_policy_status(const cJSON *o, const char *source, bool json)
{
	const char *mode = str_of(o, "mode", "isolated");
	const cJSON *it;
	char *s;

	if (json) {
		if ((s = kz_json_print(o)) != NULL)
			printf("%s\n", s);
		free(s);
	} else {
		printf("%s\nmode in force: %s\n", source, mode);
		if (strcmp(mode, "isolated") == 0)
			printf("isolated because: %s\n",
			    str_of(o, "isolated_because", "-"));
		printf("configured mode: %s\nports:",
		    str_of(o, "configured_mode", "-"));
		cJSON_ArrayForEach(it, kz_json_get(o, "ports"))
		    printf(" %d", it->valueint);
		printf("\ndenied in every mode:");
		cJSON_ArrayForEach(it,
		    kz_json_get(o,
		        "denied_in_every_mode")) if (cJSON_IsString(it))
		    printf(" %s", it->valuestring);
		printf("\ntoken ttl: %.0fs%s\n", num_of(o, "token_ttl_seconds"),
		    cJSON_IsTrue(kz_json_get(o, "token_ttl_clamped")) ?
		        " (clamped from a larger configured value)" :
		        "");
		printf("turn: %s\n", str_of(o, "turn_authority", "none"));
		printf("audit: %s\n", str_of(o, "audit", "off"));
		print_counts(o);
	}
	/* A monitor alerts on isolation: it is the refusal of all egress. */
	return strcmp(mode, "isolated") == 0 ? KZ_EXIT_REFUSED : KZ_EXIT_OK;
}
