/*
 * The administrator's egress policy: its config keys, and loading it
 * (its decisions and status report are policy_check.c's).  Only the config
 * file and the environment choose the mode; nothing in a request or a
 * grant can.  Any value that cannot be read or parsed, and any
 * prerequisite that is missing, leaves the mode in force at isolated, with
 * the reason kept for status.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress.h"
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
		if (!sa_addr(i->ifa_addr, &a) || eg_policy_is_own(p, &a))
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
