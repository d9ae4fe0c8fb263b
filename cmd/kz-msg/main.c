/*
 * kz-msg: send one framed JSON request to a kz daemon's socket and print the
 * reply.  For operators and scripts: exit 0 when the reply says ok, 1 when
 * it is a refusal, 2 for bad usage or input, 3 when the socket cannot be
 * reached, does not speak kz frames or does not answer a whole frame, 4
 * internal.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_exit.h"
#include "kz_frame.h"
#include "kz_json.h"
#include "kz_key.h"
#include "msg.h"
#include "banned.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: kz-msg [-t SECONDS] [-m BYTES] SOCKET [JSON]\n"
	    "       kz-msg --help | --version\n"
	    "Sends one request (JSON, or stdin when absent) and prints the "
	    "reply.\n"
	    "  -t, --timeout SECONDS  whole exchange (default 10; without it "
	    "a status\n"
	    "                         reply must begin within 1)\n"
	    "  -m, --max BYTES        largest request or reply (default "
	    "1048576)\n"
	    "A request without \"v\" or \"id\" gets \"v\":1 and a random id.\n"
	    "Exit: 0 ok, 1 refused, 2 usage or bad input, 3 unreachable, "
	    "silent or\nnot speaking kz frames, 4 internal.\n");
}

static int
read_stdin(size_t max, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);

	if (buf == NULL)
		return KZ_ENOMEM;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap > max) {
				free(buf);
				return KZ_ETOOBIG;
			}
			if ((nb = realloc(buf, cap * 2)) == NULL) {
				free(buf);
				return KZ_ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(STDIN_FILENO, buf + n, cap - n);
		if (r == 0)
			break;
		if (r < 0) {
			free(buf);
			return KZ_ESYS;
		}
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* Fills in the envelope fields a person typing a request leaves out. */
static int
complete(cJSON *req)
{
	unsigned char rnd[8];
	char id[24];

	if (kz_json_get(req, "v") == NULL &&
	    cJSON_AddNumberToObject(req, "v", 1) == NULL)
		return KZ_ENOMEM;
	if (kz_json_get(req, "id") == NULL) {
		randombytes_buf(rnd, sizeof(rnd));
		kz_hex(rnd, sizeof(rnd), id);
		if (cJSON_AddStringToObject(req, "id", id) == NULL)
			return KZ_ENOMEM;
	}
	return 0;
}

static int
parse_opts(int argc, char **argv, int64_t *timeout, int64_t *max, bool *timed)
{
	static const struct option lo[] = {
	    {"timeout", required_argument, NULL, 't'},
	    {"max", required_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "+t:m:h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			if (kz_parse_int(optarg, 1, 3600, timeout) != 0)
				return KZ_EXIT_USAGE;
			*timed = true;
			break;
		case 'm':
			if (kz_parse_int(optarg, 16, KZ_FRAME_MAX_LIMIT, max) !=
			    0)
				return KZ_EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			exit(KZ_EXIT_OK);
		case 'V':
			printf("kz-msg " KZ_VERSION "\n");
			exit(KZ_EXIT_OK);
		default:
			return KZ_EXIT_USAGE;
		}
	}
	return argc - optind == 1 || argc - optind == 2 ? KZ_EXIT_OK :
	                                                  KZ_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	int64_t timeout = 10, max = KZ_FRAME_MAX_DEFAULT;
	char *text = NULL, why[256] = "", *out = NULL, *shown = NULL;
	cJSON *req = NULL, *reply = NULL;
	size_t len;
	bool timed = false;
	int r, ex = KZ_EXIT_INTERNAL, first;

	if (parse_opts(argc, argv, &timeout, &max, &timed) != 0) {
		usage(stderr);
		return KZ_EXIT_USAGE;
	}
	if (sodium_init() < 0)
		return KZ_EXIT_INTERNAL;
	if (optind + 1 < argc) {
		text = strdup(argv[optind + 1]);
		len = text ? strlen(text) : 0;
		r = text ? 0 : KZ_ENOMEM;
	} else
		r = read_stdin((size_t)max, &text, &len);
	if (r == 0)
		r = kz_json_parse_object(text, len, &req, why, sizeof(why));
	if (r == 0)
		r = complete(req);
	if (r != 0) {
		fprintf(stderr, "kz-msg: bad request: %s\n",
		    why[0] ? why : kz_strerror(r));
		ex = KZ_EXIT_USAGE;
		goto out;
	}
	/* Every daemon answers status from memory at once; a peer silent
	 * for a second is most likely not a kz daemon (kz-protocol(7)). */
	first = (int)timeout * 1000;
	if (!timed &&
	    strcmp(cJSON_GetStringValue(kz_json_get(req, "op")) ?
	            cJSON_GetStringValue(kz_json_get(req, "op")) :
	            "",
	        "status") == 0)
		first = MSG_STATUS_FIRST_MS;
	r = msg_call(argv[optind], req, (size_t)max, (int)timeout * 1000, first,
	    &reply, why, sizeof(why));
	if (r != 0) {
		fprintf(stderr, "kz-msg: %s: %s\n", argv[optind],
		    why[0] ? why : kz_strerror(r));
		ex = KZ_EXIT_UNAVAIL;
		goto out;
	}
	/* Printed so that a terminal shows it as it is (kz_json_inert). */
	if ((out = kz_json_print(reply)) != NULL &&
	    (shown = kz_json_inert(out, strlen(out), &len)) != NULL) {
		fwrite(shown, 1, len, stdout);
		putchar('\n');
	}
	free(out);
	free(shown);
	/*
	 * Every refusal is 1, whatever its code (kz-msg(1)): kz_exit_for_wire
	 * would make bad_request 2 and unavailable 3, statuses this page
	 * keeps for kz-msg's own usage and for a socket that did not answer.
	 */
	ex = cJSON_IsTrue(kz_json_get(reply, "ok")) ? KZ_EXIT_OK :
	                                              KZ_EXIT_REFUSED;
out:
	cJSON_Delete(req);
	cJSON_Delete(reply);
	free(text);
	return ex;
}
