/*
 * append: JSON lines on stdin, one event each, either
 *   {"kind":"dispatch","event":{"worker_id":"w1",...}}   or flat:
 *   {"kind":"dispatch","worker_id":"w1",...}
 * Written straight to the log directory (which must not be held by a
 * running daemon), or sent to the daemon with --socket.  The first bad
 * line stops the run: the lines before it are appended and durable, the
 * bad one and those after it are not.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_audit.h"
#include "kz_json.h"
#include "audit.h"
#include "banned.h"

#define INPUT_LINE_MAX (256u * 1024u)
#define BATCH 512

struct src {
	FILE *in;
	char *line;
	size_t lineno;
};

/* 1 a line, 0 end of input, <0 error (why says). */
static int
next_event(struct src *s, cJSON **obj, char *why, size_t wlen)
{
	size_t n;
	bool nl;
	int r;

	for (;;) {
		if ((r = aud_getline(s->in, s->line, INPUT_LINE_MAX + 1, &n,
		         &nl)) == 0)
			return 0;
		s->lineno++;
		if (r < 0) {
			kz_why(why, wlen, "line is over %u bytes",
			    INPUT_LINE_MAX);
			return KZ_ETOOBIG;
		}
		if (n > 0)
			break;
	}
	return kz_json_parse_object(s->line, n, obj, why, wlen) == 0 ? 1 :
	                                                               KZ_EJSON;
}

static int
append_socket(const char *sock, struct src *s, char *why, size_t wlen)
{
	const char *kind;
	cJSON *line, *ev;
	int r;

	while ((r = next_event(s, &line, why, wlen)) == 1) {
		if ((r = aud_input_split(line, &kind, &ev, why, wlen)) == 0) {
			r = kz_audit_send(sock, kind, ev, KZ_AUDIT_TIMEOUT_MS,
			    why, wlen);
			cJSON_Delete(ev);
		}
		cJSON_Delete(line);
		if (r != 0)
			return r == KZ_EUNAVAIL ? KZ_EXIT_UNAVAIL :
			    r == KZ_EDENIED     ? KZ_EXIT_USAGE :
			                          KZ_EXIT_INTERNAL;
	}
	return r == 0 ? KZ_EXIT_OK : KZ_EXIT_USAGE;
}

static int
add_line(struct aud_store *st, const struct kz_key *idkey, cJSON *line,
    char *why, size_t wlen)
{
	struct aud_refusal_info ri;
	const char *kind;
	cJSON *ev, *clean = NULL;
	uint64_t seq;
	int r;

	if ((r = aud_input_split(line, &kind, &ev, why, wlen)) != 0)
		return KZ_EXIT_USAGE;
	r = aud_schema_check(kind, ev, idkey, &clean, &ri);
	cJSON_Delete(ev);
	if (r == KZ_EDENIED) {
		kz_why(why, wlen, "%s", ri.why);
		return KZ_EXIT_USAGE;
	}
	if (r == 0)
		r = aud_store_add(st, kind, geteuid(), clean, &seq, why, wlen);
	cJSON_Delete(clean);
	return r == 0       ? KZ_EXIT_OK :
	    r == KZ_ETOOBIG ? KZ_EXIT_USAGE :
	                      KZ_EXIT_INTERNAL;
}

static int
append_direct(struct aud_cfg *c, struct src *s, char *why, size_t wlen)
{
	struct kz_key akey, idkey;
	struct aud_store *st = NULL;
	size_t n = 0;
	cJSON *line;
	int r, rc = 0;

	if (aud_keys_load(c->keyfile, &akey, &idkey, why, wlen) != 0)
		return KZ_EXIT_USAGE;
	r = aud_store_open(c->dir, c->max_file, &akey, &st, why, wlen);
	kz_key_wipe(&akey);
	if (r != 0) {
		kz_key_wipe(&idkey);
		return r == KZ_EEXIST ? KZ_EXIT_UNAVAIL :
		    r == KZ_ECRYPTO   ? KZ_EXIT_REFUSED :
		                        KZ_EXIT_INTERNAL;
	}
	while (rc == 0 && (r = next_event(s, &line, why, wlen)) == 1) {
		rc = add_line(st, &idkey, line, why, wlen);
		cJSON_Delete(line);
		if (rc == 0 && ++n % BATCH == 0 &&
		    aud_store_commit(st, why, wlen) != 0)
			rc = KZ_EXIT_INTERNAL;
	}
	if (rc == 0 && r < 0)
		rc = KZ_EXIT_USAGE;
	/* What came before a bad line is kept: commit it either way. */
	if (aud_store_commit(st, rc ? NULL : why, rc ? 0 : wlen) != 0 &&
	    rc == 0)
		rc = KZ_EXIT_INTERNAL;
	aud_store_free(st);
	kz_key_wipe(&idkey);
	return rc;
}

int
aud_append(struct aud_cfg *c, const char *sock, FILE *in)
{
	struct src s = {in, NULL, 0};
	char why[300] = "";
	int rc;

	if ((s.line = malloc(INPUT_LINE_MAX + 1)) == NULL)
		return KZ_EXIT_INTERNAL;
	rc = sock ? append_socket(sock, &s, why, sizeof(why)) :
	            append_direct(c, &s, why, sizeof(why));
	if (rc != 0 && s.lineno > 0 && rc != KZ_EXIT_UNAVAIL)
		fprintf(stderr, "kz-audit: line %zu: %s\n", s.lineno, why);
	else if (rc != 0)
		fprintf(stderr, "kz-audit: %s\n", why);
	free(s.line);
	return rc;
}
