/*
 * The egress policy's decisions (policy.c loads it): a destination's name
 * and port before resolution, each resolved or literal address after it,
 * whether the kernel routes an address to this host, and the policy as
 * status reports it.
 */
#include <errno.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cJSON.h>
#include <libmnl/libmnl.h>

#include "egress.h"
#include "kz_json.h"
#include "banned.h"

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

bool
eg_policy_is_own(const struct eg_policy *p, const struct eg_addr *a)
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
	if (eg_policy_is_own(p, a) || eg_policy_is_own(p, &eff))
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
