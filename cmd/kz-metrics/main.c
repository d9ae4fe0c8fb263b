/*
 * kz-metrics: asks every daemon of a deployment for its status and prints
 * the counters and gauges in the Prometheus text format, for
 * node_exporter's textfile collector or kz-supervise status --prometheus.
 * A daemon that does not answer is kz_up 0; the text is still written.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_call.h"
#include "kz_conf.h"
#include "kz_exit.h"
#include "kz_io.h"
#include "kz_json.h"
#include "metrics.h"
#include "banned.h"

#define NDAEMONS 6

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kz-metrics [--run-dir DIR] [--socket DAEMON=PATH]... "
	    "[-t SECONDS]\n"
	    "                  [-o FILE]\n"
	    "       kz-metrics --help | --version\n"
	    "Prints every daemon's status as Prometheus text metrics.\n"
	    "  --run-dir DIR          the daemons' sockets (default "
	    "$KZ_RUN_DIR, else\n"
	    "                         /run/kaizen)\n"
	    "  --socket DAEMON=PATH   one daemon's socket (kz-audit, kz-lease, "
	    "kz-project,\n"
	    "                         kz-pkgrun, kz-browser, kz-egress: its "
	    "status socket)\n"
	    "  -t, --timeout SECONDS  per daemon (default 2)\n"
	    "  -o, --output FILE      write FILE.tmp, then rename it to FILE\n"
	    "Exit: 0 written (a daemon down is kz_up 0), 2 usage, 4 internal "
	    "or the\noutput cannot be written.\n");
}

/* The environment variable that names a daemon's socket, where its
 * clients have one (kz-pkgrun's and kz-browser's are their own KZ_SOCKET:
 * --socket or the run dir). */
static const char *const sock_env[NDAEMONS] = {"KZ_AUDIT_SOCKET",
    "KZ_LEASE_SOCKET", "KZ_PROJECT_SOCKET", "KZ_EGRESS_STATUS_SOCKET", NULL,
    NULL};
/* Each found by the one rule of kaizen.conf(5), DEFAULTS: in the daemon's
 * own directory of the run dir when it has one. */
static const char *const sock_dir[NDAEMONS] = {"kz-audit", "kz-lease",
    "kz-project", "kz-egress", "kz-pkgrun", "kz-browser"};
static const char *const sock_file[NDAEMONS] = {"kz-audit.sock",
    "kz-lease.sock", "kz-project.sock", "kz-egress-status.sock",
    "kz-pkgrun.sock", "kz-browser.sock"};

struct opts {
	const char *run, *out, *sock[NDAEMONS];
	int64_t timeout;
};

static int
set_sock(struct opts *o, const char *arg)
{
	const char *eq = strchr(arg, '=');

	for (int i = 0; eq != NULL && i < NDAEMONS; i++)
		if (strlen(mx_daemons[i]) == (size_t)(eq - arg) &&
		    strncmp(arg, mx_daemons[i], (size_t)(eq - arg)) == 0 &&
		    eq[1] != '\0') {
			o->sock[i] = eq + 1;
			return 0;
		}
	fprintf(stderr,
	    "kz-metrics: --socket wants DAEMON=PATH, DAEMON "
	    "one of kz-audit, kz-lease, kz-project, kz-egress\n");
	return KZ_EXIT_USAGE;
}

static int
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
	    {"run-dir", required_argument, NULL, 'r'},
	    {"socket", required_argument, NULL, 's'},
	    {"timeout", required_argument, NULL, 't'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "t:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'r':
			o->run = optarg;
			break;
		case 's':
			if (set_sock(o, optarg) != 0)
				return KZ_EXIT_USAGE;
			break;
		case 't':
			if (kz_parse_int(optarg, 1, 60, &o->timeout) != 0)
				return KZ_EXIT_USAGE;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(KZ_EXIT_OK);
		case 'V':
			printf("kz-metrics " KZ_VERSION "\n");
			exit(KZ_EXIT_OK);
		default:
			return KZ_EXIT_USAGE;
		}
	}
	return optind == argc ? KZ_EXIT_OK : KZ_EXIT_USAGE;
}

/* The socket of daemon i: --socket, its variable, else the run dir's. */
static int
sock_path(const struct opts *o, int i, char *out, size_t cap)
{
	const char *e = sock_env[i] != NULL ? getenv(sock_env[i]) : NULL;
	int n;

	if (o->sock[i] != NULL)
		n = snprintf(out, cap, "%s", o->sock[i]);
	else if (e != NULL && *e != '\0')
		n = snprintf(out, cap, "%s", e);
	else
		return kz_sock_in(o->run, sock_dir[i], sock_file[i], out, cap);
	return n > 0 && (size_t)n < cap ? 0 : KZ_ETOOBIG;
}

/* The status reply of one daemon, or NULL when it did not answer ok. */
static cJSON *
status_of(const char *path, int timeout_ms)
{
	cJSON *req = cJSON_CreateObject(), *rep = NULL;
	char why[200] = "";

	if (req == NULL || !cJSON_AddNumberToObject(req, "v", 1) ||
	    !cJSON_AddStringToObject(req, "op", "status") ||
	    !cJSON_AddStringToObject(req, "id", "kz-metrics") ||
	    kz_frame_call(path, req, timeout_ms, &rep, why, sizeof(why)) != 0)
		fprintf(stderr, "kz-metrics: %s: %s\n", path,
		    why[0] ? why : "no status");
	else if (!cJSON_IsTrue(kz_json_get(rep, "ok"))) {
		fprintf(stderr, "kz-metrics: %s: status refused\n", path);
		cJSON_Delete(rep);
		rep = NULL;
	}
	cJSON_Delete(req);
	return rep;
}

/* FILE.tmp, then rename: a collector never reads half a scrape. */
static int
emit(const char *out, const char *text, size_t len)
{
	char tmp[4096];
	int fd;

	if (out == NULL)
		return fwrite(text, 1, len, stdout) == len &&
		        fflush(stdout) == 0 ?
		    0 :
		    -1;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", out) >= sizeof(tmp))
		return -1;
	if ((fd = open(tmp,
	         O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)) <
	    0)
		return -1;
	if (kz_write_full(fd, text, len, -1) != 0 || fsync(fd) != 0) {
		close(fd);
		(void)unlink(tmp);
		return -1;
	}
	if (close(fd) != 0 || rename(tmp, out) != 0) {
		(void)unlink(tmp);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = {.timeout = 2};
	struct mx *m = NULL;
	char path[4096], *text = NULL;
	size_t len;
	int ex = KZ_EXIT_INTERNAL;

	if (parse_opts(argc, argv, &o) != 0) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (o.run == NULL)
		o.run = getenv("KZ_RUN_DIR");
	if (o.run == NULL || *o.run == '\0')
		o.run = "/run/kaizen";
	if (mx_new(&m) != 0)
		return KZ_EXIT_INTERNAL;
	for (int i = 0; i < NDAEMONS; i++) {
		cJSON *st = NULL;
		int r;

		if (sock_path(&o, i, path, sizeof(path)) == 0)
			st = status_of(path, (int)o.timeout * 1000);
		r = mx_collect(m, mx_daemons[i], st);
		cJSON_Delete(st);
		if (r != 0) {
			fprintf(stderr, "kz-metrics: %s: %s\n", mx_daemons[i],
			    kz_strerror(r));
			goto out;
		}
	}
	if (mx_text(m, &text, &len) != 0)
		goto out;
	if (emit(o.out, text, len) != 0) {
		fprintf(stderr, "kz-metrics: cannot write %s\n",
		    o.out ? o.out : "standard output");
		goto out;
	}
	ex = KZ_EXIT_OK;
out:
	free(text);
	mx_free(m);
	return ex;
}
