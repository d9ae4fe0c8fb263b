/*
 * Crash recovery of a log file: which bytes at its end a crash can have
 * left, to be cut, and which are damage, to be refused.  The sink
 * acknowledges a record only after fdatasync, so a crash can leave
 * incomplete only the last write, never acknowledged: its bytes after the
 * last newline (a torn tail), or, on a file system that can keep a later
 * block of a write but not an earlier one, a hole.  A complete line is
 * never cut for any other reason: an edit of the newest records must stop
 * the sink, not vanish into NAME.cut with its seq given to the next record.
 */
#include <string.h>

#include "audit.h"
#include "banned.h"

/*
 * A file system allocates and writes a file in blocks of at least this
 * many bytes, at multiples of it in the file.
 */
#define HOLE_BLOCK 512u

/*
 * Whether the line buf[pos, pos + ll) holds a hole: a run of NUL bytes up
 * to a HOLE_BLOCK boundary of the file, from the boundary before it or
 * from the start of the line.  That is what a file system may show after
 * a power loss for a block of the last, unsynced write whose data did not
 * reach the disk while a later block's did and the file's size covers
 * both (an unwritten extent on XFS; the zeros past the old end of a block
 * written back at the previous sync).  A record never holds a NUL byte.
 */
static bool
has_hole(const char *buf, size_t pos, size_t ll)
{
	size_t b = (pos / HOLE_BLOCK + 1) * HOLE_BLOCK, i;

	for (; b <= pos + ll; b += HOLE_BLOCK) {
		i = b - HOLE_BLOCK < pos ? pos : b - HOLE_BLOCK;
		while (i < b && buf[i] == '\0')
			i++;
		if (i == b)
			return true;
	}
	return false;
}

/* What is wrong with a line as the next record of c, or NULL. */
static const char *
line_fault(const struct kz_key *key, const char *line, size_t ll,
    const struct aud_chain *c, bool any, struct aud_rec *rec)
{
	char w[8];
	int r = aud_record_check(key, line, ll, false, rec, w, sizeof(w));

	if (r == KZ_ECRYPTO)
		return "record does not verify (mac mismatch)";
	if (r != 0)
		return "line is not a record";
	if (any && rec->seq != c->seq + 1)
		return "record is out of sequence";
	if (any && !kz_ct_equal(rec->prev, c->mac, AUD_MAC_BYTES))
		return "record does not link to the one before it";
	return NULL;
}

/*
 * What a crash leaves after a hole: more lines with holes, and records of
 * the same unsynced write, each under the key and later than the one
 * before (the records between them may be in a hole).  Returns the line
 * number of the first complete line that is neither, or 0.
 */
static size_t
crash_tail(const struct kz_key *key, const char *buf, size_t pos, size_t len,
    uint64_t seq, size_t lineno)
{
	const char *nl;
	struct aud_rec rec;
	char w[8];

	for (; (nl = memchr(buf + pos, '\n', len - pos)) != NULL;
	     pos = (size_t)(nl - buf) + 1) {
		size_t ll = (size_t)(nl - buf) - pos;

		lineno++;
		if (has_hole(buf, pos, ll))
			continue;
		if (aud_record_check(key, buf + pos, ll, false, &rec, w,
		        sizeof(w)) != 0 ||
		    rec.seq <= seq)
			return lineno;
		seq = rec.seq;
	}
	return 0;
}

static int
damaged(const char *name, size_t lineno, const char *what, bool any,
    uint64_t seq, char *why, size_t wlen)
{
	char after[48] = "";

	if (any)
		snprintf(after, sizeof(after), " after seq %llu",
		    (unsigned long long)seq);
	kz_why(why, wlen,
	    "%s:%zu: %s%s; the log was edited or damaged, not cut short "
	    "by a crash: run kz-audit verify",
	    name, lineno, what, after);
	return KZ_ECRYPTO;
}

int
aud_scan(const struct kz_key *key, const char *name, const char *buf,
    size_t len, size_t *valid, size_t *cutline, struct aud_chain *c, bool *any,
    char *why, size_t wlen)
{
	const char *nl, *bad;
	size_t pos = 0, lineno = 0, at;

	*any = false;
	for (; (nl = memchr(buf + pos, '\n', len - pos)) != NULL;
	     pos = (size_t)(nl - buf) + 1) {
		size_t ll = (size_t)(nl - buf) - pos;
		struct aud_rec rec;

		lineno++;
		bad = line_fault(key, buf + pos, ll, c, *any, &rec);
		if (bad != NULL && !has_hole(buf, pos, ll))
			return damaged(name, lineno, bad, *any, c->seq, why,
			    wlen);
		if (bad != NULL) {
			at = crash_tail(key, buf, (size_t)(nl - buf) + 1, len,
			    c->seq, lineno);
			if (at != 0)
				return damaged(name, at,
				    "line after a hole is not a later record",
				    *any, c->seq, why, wlen);
			break;
		}
		c->seq = rec.seq;
		memcpy(c->mac, rec.mac, AUD_MAC_BYTES);
		*any = true;
	}
	*valid = pos;
	*cutline = lineno + (nl == NULL);
	return 0;
}
