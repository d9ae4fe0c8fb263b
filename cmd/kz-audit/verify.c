/*
 * verify: walks the given files as one chain.  Each record must carry the
 * next seq, name the previous record's MAC as prev and carry a MAC that
 * verifies under the AUDIT subkey.  The chain starts at seq 1 (prev all
 * zeros) unless the caller anchors it at the first record given.
 */
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "banned.h"

struct vstate {
	bool any, anchor;
	uint64_t seq, first, count;
	unsigned char mac[AUD_MAC_BYTES];
};

static void
bad(FILE *err, const char *path, size_t lineno, const char *line, size_t len,
    const struct vstate *vs, const char *reason)
{
	struct aud_rec rec;
	char w[8];
	uint64_t seq = vs->seq + 1;

	/* Name the record by the seq it claims when it still parses. */
	if (aud_record_parse(line, len, &rec, w, sizeof(w)) == 0) {
		seq = rec.seq;
		aud_rec_release(&rec);
	}
	fprintf(err, "kz-audit: %s:%zu: seq %llu: %s\n", path, lineno,
	    (unsigned long long)seq, reason);
}

static int
check_line(const struct kz_key *key, const char *line, size_t len,
    struct vstate *vs, char *why, size_t wlen)
{
	static const unsigned char zero[AUD_MAC_BYTES];
	struct aud_rec rec;
	int r;

	if ((r = aud_record_check(key, line, len, false, &rec, why, wlen)) != 0)
		return r;
	if (!vs->any && !vs->anchor &&
	    (rec.seq != 1 || !kz_ct_equal(rec.prev, zero, AUD_MAC_BYTES))) {
		kz_why(why, wlen,
		    "the chain does not start at seq 1 "
		    "(records deleted before it? --anchor accepts that)");
		return KZ_ECRYPTO;
	}
	if (vs->any && rec.seq != vs->seq + 1) {
		kz_why(why, wlen,
		    "out of sequence (expected seq %llu): a "
		    "record was deleted or moved",
		    (unsigned long long)vs->seq + 1);
		return KZ_ECRYPTO;
	}
	if (vs->any && !kz_ct_equal(rec.prev, vs->mac, AUD_MAC_BYTES)) {
		kz_why(why, wlen, "prev does not match the previous record");
		return KZ_ECRYPTO;
	}
	if (!vs->any)
		vs->first = rec.seq;
	vs->any = true;
	vs->seq = rec.seq;
	vs->count++;
	memcpy(vs->mac, rec.mac, AUD_MAC_BYTES);
	return 0;
}

/* 0 intact so far, 1 a bad record (reported), 2 unreadable. */
static int
verify_file(const struct kz_key *key, const char *path, struct vstate *vs,
    FILE *err)
{
	struct aud_file af;
	char why[200];
	size_t len, lineno = 0;
	bool nl;
	int rc = 0, r;

	if ((rc = aud_file_open(path, err, &af)) != 0)
		return rc;
	while ((r = aud_file_getline(&af, &len, &nl)) != 0) {
		lineno++;
		if (r < 0) {
			bad(err, path, lineno, af.line, 0, vs,
			    "record over the length limit");
			rc = KZ_EXIT_REFUSED;
			break;
		}
		if (!nl) {
			bad(err, path, lineno, af.line, len, vs,
			    "incomplete record (no end of line)");
			rc = KZ_EXIT_REFUSED;
			break;
		}
		if (check_line(key, af.line, len, vs, why, sizeof(why))) {
			bad(err, path, lineno, af.line, len, vs, why);
			rc = KZ_EXIT_REFUSED;
			break;
		}
	}
	if (rc == 0 && ferror(af.f)) {
		fprintf(err, "kz-audit: %s: read error\n", path);
		rc = KZ_EXIT_USAGE;
	}
	aud_file_close(&af);
	return rc;
}

int
aud_verify_anchor(const struct kz_key *auditkey, char **files, size_t n,
    bool anchor, FILE *out, FILE *err)
{
	struct vstate vs;
	int rc;

	memset(&vs, 0, sizeof(vs));
	vs.anchor = anchor;
	for (size_t i = 0; i < n; i++)
		if ((rc = verify_file(auditkey, files[i], &vs, err)) != 0)
			return rc;
	if (vs.any)
		fprintf(out, "kz-audit: %llu records, seq %llu..%llu, intact\n",
		    (unsigned long long)vs.count, (unsigned long long)vs.first,
		    (unsigned long long)vs.seq);
	else
		fprintf(out, "kz-audit: no records\n");
	return 0;
}

int
aud_verify(const struct kz_key *auditkey, char **files, size_t n, FILE *out,
    FILE *err)
{
	return aud_verify_anchor(auditkey, files, n, false, out, err);
}
