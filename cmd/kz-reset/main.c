/*
 * kz-reset --worker ID --token T: the fenced reset of one worker that left
 * its owner.  It refuses to touch a worker whose reset token is not the
 * current one, collects positive evidence that the worker is clean, and
 * only with every item in hand publishes it warm; anything missing
 * retires it.  Evidence goes to stdout as one JSON object and to kz-audit.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_audit.h"
#include "kz_conf.h"
#include "kz_exit.h"
#include "kz_evidence.h"
#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_pool.h"
#include "kz_store.h"
#include "reset.h"
#include "banned.h"

static const char *const known[] = {KZ_STORE_CONF_KEYS, "KZ_AUDIT_SOCKET",
    "KZ_AUDIT", "KZ_RUN_DIR", "KZ_DEPLOYMENT", "LEASE_WORKERS_DIR",
    "RESET_IO_TIMEOUT_MS", "RESET_STORE_TIMEOUT_MS", NULL};

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: kz-reset --worker ID --token T [--rid RUN] "
	    "[--config FILE]\n"
	    "       kz-reset --help | --version\n");
}

static int
load_conf(struct reset_conf *c, const char *path, char *why, size_t wlen)
{
	struct kz_conf *k = NULL;
	char rd[PATH_MAX], d[PATH_MAX + 16];
	int e;

	if ((e = kz_conf_load(path, known, &k, why, wlen)) != 0)
		return e;
	/* Every socket's default is KZ_RUN_DIR/NAME.sock, the rule of
	 * kaizen.conf(5)'s DEFAULTS. */
	if ((e = kz_run_dir(k, rd, sizeof(rd), why, wlen)) != 0 ||
	    (e = kz_store_conf(k, rd, c->store_sock, sizeof(c->store_sock), why,
	         wlen)) != 0 ||
	    (e = kz_conf_audit(k, rd, c->audit_sock, sizeof(c->audit_sock), why,
	         wlen)) != 0)
		goto out;
	snprintf(c->dep, sizeof(c->dep), "%s",
	    kz_conf_str(k, "KZ_DEPLOYMENT", "default"));
	snprintf(d, sizeof(d), "%s/workers", rd);
	snprintf(c->workers_dir, sizeof(c->workers_dir), "%s",
	    kz_conf_str(k, "LEASE_WORKERS_DIR", d));
	if ((e = kz_conf_int(k, "RESET_IO_TIMEOUT_MS", 5000, 10, 600000,
	         &c->io_timeout_ms, why, wlen)) == 0)
		e = kz_conf_int(k, "RESET_STORE_TIMEOUT_MS", 2000, 10, 60000,
		    &c->store_timeout_ms, why, wlen);
out:
	kz_conf_free(k);
	return e;
}

/* Reads the worker's record; 1 when it is not resetting under token. */
static int
fetch(struct kz_store *s, const char *id, const char *token,
    struct worker_rec *w, char *why, size_t wlen)
{
	const char *av[1] = {id}, *v;
	cJSON *res = NULL;
	int e;

	if ((e = kz_pool_call(s, KZ_POOL_GET, 1, av, &res, why, wlen)) != 0)
		return e;
	e = 1;
	if (kz_pool_errcode(res) != NULL)
		goto out;
#define GET(f, k)                                                              \
	if (kz_json_str_opt(res, k, sizeof(w->f) - 1, "", &v, NULL, 0) != 0)   \
		goto out;                                                      \
	snprintf(w->f, sizeof(w->f), "%s", v);
	GET(state, "state");
	GET(token, "token");
	GET(endpoint, "endpoint");
	GET(gen, "gen");
#undef GET
	snprintf(w->id, sizeof(w->id), "%s", id);
	if (strcmp(w->state, "resetting") == 0 && strcmp(w->token, token) == 0)
		e = 0;
out:
	cJSON_Delete(res);
	return e;
}

/* One script with one retry under the same op id: a first call whose
 * reply was lost may have been applied, and the retry then reports it. */
static int
transition(const struct reset_conf *c, struct kz_store **s,
    enum kz_pool_script which, int argc, const char **av, cJSON **res)
{
	char why[128];
	int e, i;

	for (i = 0; i < 2; i++) {
		if (*s == NULL &&
		    kz_store_open(c->store_sock, c->dep,
		        (int)c->store_timeout_ms, s, why, sizeof(why)) != 0)
			continue;
		if ((e = kz_pool_call(*s, which, argc, av, res, why,
		         sizeof(why))) != KZ_EUNAVAIL)
			return e;
		kz_store_free(*s);
		*s = NULL;
	}
	return KZ_EUNAVAIL;
}

/* The record of a reset that happened; KZ_EXIT_UNAVAIL when the sink did
 * not take it (the reset stands: undoing it would be the weaker
 * boundary). */
static enum kz_exit
report(const struct reset_conf *c, const char *kind, const char *id,
    const char *token, cJSON *out, int64_t t0)
{
	int64_t ms = kz_now_ms() - t0;
	char why[128] = "", *s;
	cJSON *a;
	int e;

	cJSON_AddNumberToObject(out, "duration_ms", (double)ms);
	if ((s = kz_json_print(out)) != NULL)
		printf("%s\n", s);
	free(s);
	fflush(stdout);
	if (c->audit_sock[0] == '\0')
		return KZ_EXIT_OK;
	e = KZ_ENOMEM;
	if ((a = kz_evidence_record(out, id, token, c->rid, ms)) == NULL ||
	    (e = kz_audit_send(c->audit_sock, kind, a, KZ_AUDIT_TIMEOUT_MS, why,
	         sizeof(why))) != 0) {
		kz_log(KZ_LOG_WARN, "audit.fail", e,
		    a == NULL ? "out of memory" : why, "socket", c->audit_sock,
		    NULL);
		fprintf(stderr,
		    "kz-reset: the audit sink %s did not record the %s\n",
		    c->audit_sock, kind);
	}
	cJSON_Delete(a);
	return e == 0 ? KZ_EXIT_OK : KZ_EXIT_UNAVAIL;
}

/* Audit on: a sink that does not answer now gets nothing touched. */
static enum kz_exit
audit_ready(const struct reset_conf *c)
{
	char why[160] = "";

	if (c->audit_sock[0] == '\0') {
		fprintf(stderr,
		    "kz-reset: audit is off (KZ_AUDIT = off): this "
		    "reset is not recorded\n");
		return KZ_EXIT_OK;
	}
	if (kz_audit_ping(c->audit_sock, KZ_AUDIT_TIMEOUT_MS, why,
	        sizeof(why)) != 0) {
		fprintf(stderr,
		    "kz-reset: audit sink %s unreachable (%s); "
		    "nothing was reset\n",
		    c->audit_sock, why);
		return KZ_EXIT_UNAVAIL;
	}
	return KZ_EXIT_OK;
}

static enum kz_exit
reset(const struct reset_conf *c, const char *id, const char *token)
{
	struct kz_store *s = NULL;
	struct worker_rec w = {0};
	struct kz_reset rs = {0};
	char why[128] = "", op[KZ_OPID_HEX + 1];
	const char *av[4] = {op, id, token, NULL}, *result;
	cJSON *res = NULL;
	int64_t t0 = kz_now_ms();
	enum kz_exit rc;
	int e;

	if ((rc = audit_ready(c)) != KZ_EXIT_OK)
		return rc;
	rc = KZ_EXIT_INTERNAL;
	if ((e = kz_store_open(c->store_sock, c->dep, (int)c->store_timeout_ms,
	         &s, why, sizeof(why))) != 0 ||
	    (e = fetch(s, id, token, &w, why, sizeof(why))) < 0) {
		fprintf(stderr, "kz-reset: store unavailable at %s: %s\n",
		    c->store_sock, why);
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	if (e == 1) {
		/* Another owner holds it, or it is gone: touch nothing. */
		if ((rs.out = cJSON_CreateObject()) == NULL)
			goto out;
		cJSON_AddStringToObject(rs.out, "worker", id);
		cJSON_AddStringToObject(rs.out, "result", "stale_token");
		(void)report(c, "retire", id, token, rs.out, t0);
		fprintf(stderr, "kz-reset: stale_token\n");
		rc = KZ_EXIT_REFUSED;
		goto out;
	}
	kz_reset_prove(&rs, c->workers_dir, w.id, w.endpoint,
	    (int)c->io_timeout_ms);
	if (rs.out == NULL)
		goto out;
	kz_store_opid(op);
	e = transition(c, &s, kz_reset_script(&rs, &av[3]), 4, av, &res);
	if (e != 0) {
		fprintf(stderr, "kz-reset: store unavailable at %s\n",
		    c->store_sock);
		rc = KZ_EXIT_UNAVAIL;
		goto out;
	}
	result = kz_reset_outcome(&rs, res);
	if (strcmp(result, "stale_token") == 0) {
		fprintf(stderr, "kz-reset: stale_token\n");
		rc = KZ_EXIT_REFUSED;
	} else if (strcmp(result, "warm") == 0)
		rc = KZ_EXIT_OK;
	else {
		fprintf(stderr, "kz-reset: retired: missing evidence: %s\n",
		    rs.miss);
		rc = KZ_EXIT_REFUSED;
	}
	if (report(c, rs.kind, id, token, rs.out, t0) != KZ_EXIT_OK &&
	    rc == KZ_EXIT_OK)
		rc = KZ_EXIT_UNAVAIL;
out:
	cJSON_Delete(res);
	kz_reset_release(&rs);
	kz_store_free(s);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"worker", required_argument, NULL, 'w'},
	    {"token", required_argument, NULL, 't'},
	    {"rid", required_argument, NULL, 'r'},
	    {"config", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *id = NULL, *token = NULL, *rid = "";
	const char *cf = getenv("KZ_CONFIG");
	struct reset_conf c = {0};
	char why[256] = "";
	int ch;

	kz_log_init("kz-reset", KZ_LOG_INFO);
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'w':
			id = optarg;
			break;
		case 't':
			token = optarg;
			break;
		case 'r':
			rid = optarg;
			break;
		case 'c':
			cf = optarg;
			break;
		case 'h':
			usage(stdout);
			return KZ_EXIT_OK;
		case 'V':
			printf("kz-reset " KZ_VERSION "\n");
			return KZ_EXIT_OK;
		default:
			usage(stderr);
			return KZ_EXIT_USAGE;
		}
	}
	if (optind != argc || id == NULL || token == NULL ||
	    !kz_pool_id_ok(id) || strlen(token) > KZ_POOL_TOKEN_MAX ||
	    strlen(rid) >= sizeof(c.rid) ||
	    strspn(rid, "0123456789abcdef") != strlen(rid)) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (load_conf(&c, cf, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-reset: config: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	snprintf(c.rid, sizeof(c.rid), "%s", rid);
	return reset(&c, id, token);
}
