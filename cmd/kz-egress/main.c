/*
 * kz-egress: the sandbox egress proxy.  main parses the subcommand and its
 * options, loads the config and hands over; policy lives in the modules.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sodium.h>
#include <cJSON.h>
#include <event2/event.h>

#include "egress.h"
#include "kz_exit.h"
#include "kz_json.h"
#include "kz_key.h"
#include "kz_log.h"
#include "kz_signed.h"
#include "banned.h"

static const char usage[] =
    "usage: kz-egress serve [--config FILE] [--socket PATH]\n"
    "       kz-egress check [--config FILE] [--cap turn] HOST PORT\n"
    "       kz-egress status [--config FILE] [--json]\n"
    "       kz-egress pubkey --field-key FILE\n"
    "       kz-egress grant --field-key FILE --run ID [--ttl S] [--cap turn]"
    " [--config FILE]\n"
    "       kz-egress turn-credential --secret-file FILE --user NAME"
    " [--ttl S]\n"
    "       kz-egress --help | --version\n";

struct opts {
	const char *config, *socket, *field_key, *run, *secret, *user;
	int64_t ttl;
	unsigned caps;
	bool json;
	int argc;
	char **argv;
};

static enum kz_exit
bad_usage(const char *msg)
{
	if (msg != NULL)
		fprintf(stderr, "kz-egress: %s\n", msg);
	fputs(usage, stderr);
	return KZ_EXIT_USAGE;
}

static enum kz_exit
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"socket", required_argument, NULL, 's'},
	    {"field-key", required_argument, NULL, 'k'},
	    {"run", required_argument, NULL, 'r'},
	    {"ttl", required_argument, NULL, 't'},
	    {"cap", required_argument, NULL, 'a'},
	    {"json", no_argument, NULL, 'j'},
	    {"secret-file", required_argument, NULL, 'f'},
	    {"user", required_argument, NULL, 'u'},
	    {NULL, 0, NULL, 0},
	};
	int ch;

	memset(o, 0, sizeof(*o));
	o->ttl = -1;
	o->config = getenv("KZ_CONFIG");
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->config = optarg;
			break;
		case 's':
			o->socket = optarg;
			break;
		case 'k':
			o->field_key = optarg;
			break;
		case 'r':
			o->run = optarg;
			break;
		case 'f':
			o->secret = optarg;
			break;
		case 'u':
			o->user = optarg;
			break;
		case 'j':
			o->json = true;
			break;
		case 't':
			if (kz_parse_int(optarg, 1, INT32_MAX, &o->ttl) != 0)
				return bad_usage("--ttl: expected seconds");
			break;
		case 'a':
			if (strcmp(optarg, "turn") != 0)
				return bad_usage("--cap: only 'turn' exists");
			o->caps |= EG_CAP_TURN;
			break;
		default:
			return bad_usage(NULL);
		}
	}
	o->argc = argc - optind;
	o->argv = argv + optind;
	return KZ_EXIT_OK;
}

/* The config in force; an unusable file leaves the policy isolated. */
static enum kz_exit
load_policy(const struct opts *o, struct eg_policy **out)
{
	struct kz_conf *c = NULL;
	char why[160] = "";
	int r;

	if (kz_conf_load(o->config, eg_conf_keys, &c, why, sizeof(why)) != 0) {
		kz_log(KZ_LOG_ERROR, "egress.config", KZ_ECONF, why, NULL);
		c = NULL;
	}
	r = eg_policy_load(c, c == NULL ? why : NULL, o->socket, out);
	kz_conf_free(c);
	if (r != 0)
		fprintf(stderr, "kz-egress: %s\n", kz_strerror(r));
	return r == 0 ? KZ_EXIT_OK : KZ_EXIT_INTERNAL;
}

/* SIGHUP's load: the same file and socket, the same fail-closed rules. */
static int
reload_policy(void *arg, struct eg_policy **out)
{
	return load_policy(arg, out) == 0 ? 0 : KZ_ENOMEM;
}

static enum kz_exit
cmd_serve(const struct opts *o)
{
	struct eg_policy *p;
	int r;

	if (o->argc != 0)
		return bad_usage("serve takes no arguments");
	if ((r = load_policy(o, &p)) != 0)
		return r;
	if (p->mode == EG_MODE_ISOLATED)
		kz_log(KZ_LOG_WARN, "egress.isolated", 0, p->isolated_why,
		    NULL);
	if (p->nlisten == 0) {
		fprintf(stderr, "kz-egress: no listen address\n");
		eg_policy_free(p);
		return KZ_EXIT_USAGE;
	}
	r = eg_proxy_run(p, reload_policy, (void *)o);
	eg_policy_free(p);
	/* Peer lists that cannot be parsed are bad config, not a missing
	 * dependency. */
	if (r == KZ_ECONF)
		return KZ_EXIT_USAGE;
	return r == 0 ? KZ_EXIT_OK : KZ_EXIT_UNAVAIL;
}

/*
 * The scope in force: the running daemon's answer when a status socket is
 * configured and answers there, else the one computed from the config,
 * and the first line says which.  Exit 1 when it is isolation.
 */
#define FROM_CONF "scope from the configuration"

static enum kz_exit
cmd_status(const struct opts *o)
{
	struct eg_policy *p;
	char src[300], why[160] = "";
	cJSON *st = NULL;
	int r;

	if (o->argc != 0)
		return bad_usage("status takes no arguments");
	if ((r = load_policy(o, &p)) != 0)
		return r;
	if (p->status_sock[0] != '\0')
		r = eg_status_query(p->status_sock, &st, why, sizeof(why));
	if (p->status_sock[0] != '\0' && r == 0) {
		snprintf(src, sizeof(src),
		    "scope in force (running daemon, %s)", p->status_sock);
		cJSON_DeleteItemFromObjectCaseSensitive(st, "v");
		cJSON_DeleteItemFromObjectCaseSensitive(st, "id");
		cJSON_DeleteItemFromObjectCaseSensitive(st, "ok");
		cJSON_AddStringToObject(st, "source", "running_daemon");
	} else {
		/* Something that listens but does not answer is no daemon's
		 * scope either; the line says what it did. */
		if (p->status_sock[0] != '\0' && r == KZ_EUNAVAIL)
			snprintf(src, sizeof(src),
			    "%s (no running daemon at %s)", FROM_CONF,
			    p->status_sock);
		else if (p->status_sock[0] != '\0')
			snprintf(src, sizeof(src),
			    "%s (the daemon at %s did not answer: %s)",
			    FROM_CONF, p->status_sock, why);
		else
			snprintf(src, sizeof(src),
			    "%s (no status socket configured)", FROM_CONF);
		if ((st = eg_policy_status_json(p)) != NULL)
			cJSON_AddStringToObject(st, "source", "configuration");
	}
	if (st != NULL && p->status_sock[0] != '\0')
		cJSON_AddStringToObject(st, "status_socket", p->status_sock);
	eg_policy_free(p);
	if (st == NULL)
		return KZ_EXIT_INTERNAL;
	r = eg_policy_status(st, src, o->json);
	cJSON_Delete(st);
	return r;
}

struct check_ctx {
	struct eg_verdict v;
	bool done;
};

static void
check_done(const struct eg_verdict *v, void *arg)
{
	struct check_ctx *cx = arg;

	cx->v = *v;
	cx->done = true;
}

static enum kz_exit
print_verdict(const struct eg_dest *d, const struct eg_verdict *v)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char s[64];
	char *txt;

	cJSON_AddStringToObject(o, "verdict",
	    v->reason != EG_R_NONE ? "refuse" : "allow");
	if (v->reason != EG_R_NONE)
		cJSON_AddStringToObject(o, "reason", eg_reason_str(v->reason));
	cJSON_AddStringToObject(o, "host", d->host[0] ? d->host : "-");
	cJSON_AddNumberToObject(o, "port", d->port);
	if (v->reason == EG_R_NONE) {
		eg_addr_str(&v->pinned, s, sizeof(s));
		cJSON_AddStringToObject(o, "pinned", s);
	}
	a = cJSON_AddArrayToObject(o, "answers");
	for (size_t i = 0; i < v->nanswers && a != NULL; i++) {
		eg_addr_str(&v->answers[i], s, sizeof(s));
		cJSON_AddItemToArray(a, cJSON_CreateString(s));
	}
	if ((txt = kz_json_print(o)) != NULL)
		printf("%s\n", txt);
	free(txt);
	cJSON_Delete(o);
	return v->reason != EG_R_NONE ? KZ_EXIT_REFUSED : KZ_EXIT_OK;
}

static enum kz_exit
resolve_check(struct eg_policy *p, const struct eg_dest *d,
    struct check_ctx *cx)
{
	struct event_base *base = event_base_new();
	struct eg_dns *dns = NULL;
	char why[160];
	int r = KZ_EXIT_OK;

	if (base == NULL)
		return KZ_EXIT_INTERNAL;
	if (eg_dns_new(base, p->resolver, &dns, why, sizeof(why)) != 0 ||
	    eg_dns_check(dns, p, d, check_done, cx) == NULL) {
		fprintf(stderr, "kz-egress: %s\n", why);
		r = KZ_EXIT_UNAVAIL;
		goto out;
	}
	while (!cx->done && event_base_loop(base, EVLOOP_ONCE) == 0)
		;
	if (!cx->done)
		r = KZ_EXIT_INTERNAL;
out:
	eg_dns_free(dns);
	event_base_free(base);
	return r;
}

static enum kz_exit
cmd_check(const struct opts *o)
{
	struct check_ctx cx;
	struct eg_policy *p;
	struct eg_dest d;
	int64_t port;
	int r;

	if (o->argc != 2 || kz_parse_int(o->argv[1], 1, 65535, &port) != 0)
		return bad_usage("check takes HOST PORT");
	if ((r = load_policy(o, &p)) != 0)
		return r;
	memset(&cx, 0, sizeof(cx));
	cx.v.reason = eg_dest_init(&d, o->argv[0], (uint16_t)port,
	    (o->caps & EG_CAP_TURN) != 0, o->caps);
	if (cx.v.reason == EG_R_NONE)
		cx.v.reason = eg_policy_check_dest(p, &d);
	if (cx.v.reason == EG_R_NONE && d.literal) {
		cx.v.reason = eg_policy_check_addr(p, &d, &d.lit);
		cx.v.pinned = d.lit;
		cx.v.answers[cx.v.nanswers++] = d.lit;
	} else if (cx.v.reason == EG_R_NONE &&
	    (r = resolve_check(p, &d, &cx)) != 0) {
		eg_policy_free(p);
		return r;
	}
	r = print_verdict(&d, &cx.v);
	eg_policy_free(p);
	return r;
}

static const char *
field_key_path(const struct opts *o)
{
	return o->field_key ? o->field_key : getenv("KZ_FIELD_KEY_FILE");
}

static enum kz_exit
cmd_pubkey(const struct opts *o)
{
	char why[160], hex[65];

	if (o->argc != 0 || field_key_path(o) == NULL)
		return bad_usage("pubkey needs --field-key FILE");
	if (kz_signed_pubkey_hex(field_key_path(o), KZ_SUBKEY_GRANT, hex, why,
	        sizeof(why)) != 0) {
		fprintf(stderr, "kz-egress: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	printf("%s\n", hex);
	return KZ_EXIT_OK;
}

static enum kz_exit
cmd_grant(const struct opts *o)
{
	unsigned char pk[32], sk[64];
	char why[160] = "", rh[KZ_IDHASH_HEX + 1], g[EG_GRANT_MAX + 1];
	struct eg_policy *p;
	int64_t ttl;
	int r;

	if (o->argc != 0 || field_key_path(o) == NULL || o->run == NULL ||
	    *o->run == '\0')
		return bad_usage("grant needs --field-key FILE --run ID");
	if ((r = load_policy(o, &p)) != 0)
		return r;
	ttl = o->ttl > 0 ? o->ttl : p->ttl;
	if (ttl > p->ttl) {
		fprintf(stderr, "kz-egress: --ttl clamped to %lld s\n",
		    (long long)p->ttl);
		ttl = p->ttl;
	}
	eg_policy_free(p);
	if (eg_grant_keypair(field_key_path(o), pk, sk, why, sizeof(why)) ||
	    kz_signed_run_hash(field_key_path(o), o->run, rh, why,
	        sizeof(why))) {
		sodium_memzero(sk, sizeof(sk));
		fprintf(stderr, "kz-egress: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	r = eg_grant_mint(sk, rh, (int64_t)time(NULL), ttl, o->caps, g,
	    sizeof(g));
	sodium_memzero(sk, sizeof(sk));
	if (r != 0)
		return KZ_EXIT_INTERNAL;
	printf("%s\n", g);
	return KZ_EXIT_OK;
}

static bool
has_ctrl(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return true;
	return false;
}

/* The credential as one JSON object, built with cJSON so that any user
 * name is quoted and escaped the one correct way. */
static enum kz_exit
print_turn(const char *uname, const char *pass, int64_t ttl)
{
	cJSON *o = cJSON_CreateObject();
	char *txt = NULL;
	int r = KZ_EXIT_INTERNAL;

	if (o == NULL || !cJSON_AddStringToObject(o, "username", uname) ||
	    !cJSON_AddStringToObject(o, "password", pass) ||
	    !cJSON_AddNumberToObject(o, "ttl", (double)ttl) ||
	    (txt = kz_json_print(o)) == NULL)
		goto out;
	printf("%s\n", txt);
	r = KZ_EXIT_OK;
out:
	if (txt != NULL)
		sodium_memzero(txt, strlen(txt));
	free(txt);
	cJSON_Delete(o);
	return r;
}

static enum kz_exit
cmd_turn(const struct opts *o)
{
	unsigned char secret[4096];
	char uname[256], pass[64];
	int64_t ttl = o->ttl > 0 ? o->ttl : 3600;
	size_t n;
	FILE *f;
	int r;

	/* The name goes into a JSON string and a TURN username: one line of
	 * UTF-8, no ':' (the username's separator) and no spaces. */
	if (o->argc != 0 || o->secret == NULL || o->user == NULL ||
	    *o->user == '\0' || strlen(o->user) > 128 ||
	    strpbrk(o->user, ": \t\r\n") != NULL ||
	    !kz_utf8_valid(o->user, strlen(o->user)) || has_ctrl(o->user))
		return bad_usage("turn-credential needs --secret-file FILE "
		                 "--user NAME (UTF-8, no ':', spaces or "
		                 "control characters)");
	if (ttl > 3600)
		return bad_usage("--ttl: TURN credentials live at most 3600 s");
	if ((f = fopen(o->secret, "re")) == NULL) {
		fprintf(stderr, "kz-egress: cannot read the secret file\n");
		return KZ_EXIT_USAGE;
	}
	n = fread(secret, 1, sizeof(secret), f);
	fclose(f);
	while (n > 0 && (secret[n - 1] == '\n' || secret[n - 1] == '\r'))
		n--;
	if (n == 0 || n == sizeof(secret)) {
		fprintf(stderr, "kz-egress: secret file empty or too large\n");
		return KZ_EXIT_USAGE;
	}
	r = eg_turn_credential(secret, n, o->user, (int64_t)time(NULL) + ttl,
	    uname, sizeof(uname), pass, sizeof(pass));
	sodium_memzero(secret, sizeof(secret));
	if (r != 0)
		return KZ_EXIT_USAGE;
	r = print_turn(uname, pass, ttl);
	sodium_memzero(pass, sizeof(pass));
	return r;
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		enum kz_exit (*fn)(const struct opts *);
	} cmds[] = {
	    {"serve", cmd_serve},
	    {"status", cmd_status},
	    {"check", cmd_check},
	    {"pubkey", cmd_pubkey},
	    {"grant", cmd_grant},
	    {"turn-credential", cmd_turn},
	};
	struct opts o;
	int r;

	kz_log_init("kz-egress", KZ_LOG_INFO);
	if (argc < 2)
		return bad_usage(NULL);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, stdout);
		return KZ_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("kz-egress %s\n", KZ_VERSION);
		return KZ_EXIT_OK;
	}
	if (sodium_init() < 0)
		return KZ_EXIT_INTERNAL;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name) != 0)
			continue;
		if ((r = parse_opts(argc - 1, argv + 1, &o)) != 0)
			return r;
		return cmds[i].fn(&o);
	}
	return bad_usage("unknown subcommand");
}
