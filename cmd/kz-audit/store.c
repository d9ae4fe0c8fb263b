/*
 * The log directory: audit-NNNNNN.jsonl files written append-only.  Records
 * are formatted into a pending batch and committed with one write and one
 * fdatasync, which is what makes group commit cheap.  A file that would
 * grow past the size limit is closed and the chain continues in the next.
 * On open, the newest file is checked record by record (recover.c): what
 * a crash can leave after the last fdatasync (a torn tail, or a hole) is
 * cut off, and anything else that does not verify stops the daemon rather
 * than being cut or written over.  The files' names and the listing of
 * the directory in chain order are store_list.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "audit.h"
#include "banned.h"

static int write_all(int fd, const char *p, size_t len);

struct aud_store {
	char *dir; /* as opened, to see that it still names dirfd */
	int dirfd, lockfd, fd;
	unsigned idx;
	uint64_t size; /* committed bytes of the current file */
	uint64_t max_file;
	struct aud_chain chain; /* including pending records */
	struct aud_chain committed;
	char *pend;
	size_t plen, pcap, pn;
	struct aud_store_stats st;
};

static int
read_all(int fd, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	ssize_t k;
	size_t got = 0;

	if (fstat(fd, &st) < 0)
		return KZ_ESYS;
	if ((uint64_t)st.st_size > AUD_MAX_FILE_MAX)
		return KZ_ETOOBIG;
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL)
		return KZ_ENOMEM;
	while (got < (size_t)st.st_size) {
		k = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

/* Keeps a torn tail next to the log (NAME.cut) before it is cut off. */
static int
keep_tail(struct aud_store *s, const char *name, const char *tail, size_t len)
{
	char cut[80];
	int fd, r = 0;

	snprintf(cut, sizeof(cut), "%s.cut", name);
	fd = openat(s->dirfd, cut,
	    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd < 0)
		return KZ_ESYS;
	if (write_all(fd, tail, len) != 0 || write_all(fd, "\n", 1) != 0 ||
	    fsync(fd) < 0 || fsync(s->dirfd) < 0)
		r = KZ_ESYS;
	close(fd);
	return r;
}

/* Reads and checks file idx; cuts a torn tail when allowed. */
static int
recover_file(struct aud_store *s, unsigned idx, bool cut, bool *any, char *why,
    size_t wlen)
{
	char name[64], *buf = NULL;
	size_t len = 0, valid = 0, cutline = 0;
	int fd, r;

	aud_file_name(idx, name, sizeof(name));
	fd = openat(s->dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		kz_why(why, wlen, "cannot open log file %s", name);
		return KZ_ESYS;
	}
	if ((r = read_all(fd, &buf, &len)) != 0) {
		kz_why(why, wlen, "cannot read log file %s", name);
		goto out;
	}
	if ((r = aud_scan(&s->chain.key, name, buf, len, &valid, &cutline,
	         &s->chain, any, why, wlen)) != 0)
		goto out;
	/* Only the newest file was being written at a crash. */
	if (valid < len && !cut) {
		kz_why(why, wlen,
		    "%s:%zu: incomplete record in a file before the "
		    "newest: run kz-audit verify",
		    name, cutline);
		r = KZ_ECRYPTO;
		goto out;
	}
	if (valid < len) {
		if (keep_tail(s, name, buf + valid, len - valid) != 0 ||
		    ftruncate(fd, (off_t)valid) < 0 || fsync(fd) < 0) {
			kz_why(why, wlen, "cannot cut the incomplete record");
			r = KZ_ESYS;
			goto out;
		}
		s->st.truncated_bytes += len - valid;
	}
	s->size = valid;
out:
	free(buf);
	close(fd);
	return r;
}

static int
open_file(struct aud_store *s, unsigned idx, bool create, char *why,
    size_t wlen)
{
	char name[64];
	int fl = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW, fd;

	aud_file_name(idx, name, sizeof(name));
	if (create)
		fl |= O_CREAT | O_EXCL;
	if ((fd = openat(s->dirfd, name, fl, 0640)) < 0) {
		kz_why(why, wlen, "cannot open log file %s: %s", name,
		    strerror(errno));
		return KZ_ESYS;
	}
	/* The new name must survive a crash as much as its records. */
	if (create && fsync(s->dirfd) < 0) {
		close(fd);
		kz_why(why, wlen, "cannot sync the log directory");
		return KZ_ESYS;
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = fd;
	s->idx = idx;
	if (create)
		s->size = 0;
	return 0;
}

/* A new log directory's own name must be durable before its records. */
static void
sync_parent(const char *dir)
{
	char *copy = strdup(dir);
	int fd;

	if (copy == NULL)
		return;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		if (fsync(fd) < 0) {
			/* Best effort: the directory itself is synced. */
		}
		close(fd);
	}
	free(copy);
}

static int
lock_dir(struct aud_store *s, const char *dir, char *why, size_t wlen)
{
	if (mkdir(dir, 0750) == 0)
		sync_parent(dir);
	else if (errno != EEXIST) {
		kz_why(why, wlen, "cannot create the log directory: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0) {
		kz_why(why, wlen, "cannot open the log directory: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	s->lockfd = openat(s->dirfd, ".lock",
	    O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (s->lockfd < 0) {
		kz_why(why, wlen, "cannot open the log directory lock");
		return KZ_ESYS;
	}
	if (flock(s->lockfd, LOCK_EX | LOCK_NB) < 0) {
		kz_why(why, wlen,
		    "the log directory is in use by another "
		    "kz-audit (append --socket goes through a daemon)");
		return KZ_EEXIST;
	}
	return 0;
}

static int
recover(struct aud_store *s, char *why, size_t wlen)
{
	unsigned *idx = NULL;
	size_t n = 0;
	bool any = false;
	int r;

	if ((r = aud_list_idx(s->dirfd, &idx, &n, why, wlen)) != 0)
		return r;
	if (n == 0) {
		r = open_file(s, 1, true, why, wlen);
		goto out;
	}
	if ((r = recover_file(s, idx[n - 1], true, &any, why, wlen)) != 0)
		goto out;
	/* A file rotated to but not yet written: continue the chain from
	 * the file before it. */
	if (!any && n > 1) {
		uint64_t keep = s->size;

		r = recover_file(s, idx[n - 2], false, &any, why, wlen);
		s->size = keep;
		if (r != 0)
			goto out;
	}
	r = open_file(s, idx[n - 1], false, why, wlen);
out:
	free(idx);
	return r;
}

int
aud_store_open(const char *dir, uint64_t max_file, const struct kz_key *key,
    struct aud_store **out, char *why, size_t wlen)
{
	struct aud_store *s;
	int r;

	if (sodium_init() < 0)
		return KZ_EINTERNAL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return KZ_ENOMEM;
	s->dirfd = s->lockfd = s->fd = -1;
	if ((s->dir = strdup(dir)) == NULL) {
		free(s);
		return KZ_ENOMEM;
	}
	s->max_file = max_file < AUD_MAX_FILE_MIN ? AUD_MAX_FILE_MIN :
	    max_file > AUD_MAX_FILE_MAX           ? AUD_MAX_FILE_MAX :
	                                            max_file;
	s->chain.key = *key;
	if ((r = lock_dir(s, dir, why, wlen)) != 0 ||
	    (r = recover(s, why, wlen)) != 0) {
		aud_store_free(s);
		return r;
	}
	s->committed = s->chain;
	s->st.last_seq = s->chain.seq;
	s->st.file_idx = s->idx;
	*out = s;
	return 0;
}

void
aud_store_free(struct aud_store *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (s->lockfd >= 0)
		close(s->lockfd);
	if (s->dirfd >= 0)
		close(s->dirfd);
	kz_key_wipe(&s->chain.key);
	kz_key_wipe(&s->committed.key);
	free(s->pend);
	free(s->dir);
	free(s);
}

/*
 * Nothing more is written: after a failed write or fsync the state of the
 * file is unknown (and a later fsync may falsely succeed), so what the
 * batch wrote is cut (cut).  A file that is no longer the log's (see
 * check_place) is left as it is.
 */
static void
store_fail(struct aud_store *s, bool cut)
{
	if (cut && ftruncate(s->fd, (off_t)s->size) < 0) {
		/* The restart recovery cuts or refuses what is left. */
	}
	s->st.failed = true;
	s->chain = s->committed;
	s->plen = s->pn = 0;
}

static bool
same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * Whether the sink still writes the log: the file it holds is the one the
 * directory names, linked, of exactly the size the sink wrote (size), and
 * the directory and its lock are the ones it opened and locked.  A record
 * written to a file renamed, removed or replaced under the sink is not in
 * the log, and one appended after a truncation or another writer's bytes
 * breaks the chain: checked before each write and again after its sync,
 * so that no such record is acknowledged.
 */
static int
check_place(const struct aud_store *s, uint64_t size, char *why, size_t wlen)
{
	struct stat f, n, d, dn, l, ln;
	char name[64];

	aud_file_name(s->idx, name, sizeof(name));
	if (fstat(s->fd, &f) < 0 || f.st_nlink == 0 ||
	    fstatat(s->dirfd, name, &n, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !same_file(&f, &n)) {
		kz_why(why, wlen,
		    "log file %s was moved, removed or replaced under the "
		    "sink",
		    name);
		return KZ_ESTATE;
	}
	if ((uint64_t)f.st_size != size) {
		kz_why(why, wlen,
		    "log file %s is %lld bytes, not the %llu the sink wrote: "
		    "truncated or written by another process",
		    name, (long long)f.st_size, (unsigned long long)size);
		return KZ_ESTATE;
	}
	if (fstat(s->dirfd, &d) < 0 || stat(s->dir, &dn) < 0 ||
	    !same_file(&d, &dn) || fstat(s->lockfd, &l) < 0 ||
	    fstatat(s->dirfd, ".lock", &ln, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !same_file(&l, &ln)) {
		kz_why(why, wlen,
		    "the log directory or its lock was moved, removed or "
		    "replaced under the sink");
		return KZ_ESTATE;
	}
	return 0;
}

/* A plain write loop: the log is a file, not a socket. */
static int
write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return KZ_ESYS;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
aud_store_commit(struct aud_store *s, char *why, size_t wlen)
{
	int r;

	if (s->st.failed) {
		kz_why(why, wlen, "the audit log is not writable");
		return KZ_ESTATE;
	}
	if (s->plen == 0)
		return 0;
	if ((r = check_place(s, s->size, why, wlen)) != 0) {
		store_fail(s, false);
		return r;
	}
	if (write_all(s->fd, s->pend, s->plen) != 0 || fdatasync(s->fd) < 0) {
		kz_why(why, wlen, "writing the audit log failed: %s",
		    strerror(errno));
		store_fail(s, true);
		return KZ_ESYS;
	}
	if ((r = check_place(s, s->size + s->plen, why, wlen)) != 0) {
		store_fail(s, false);
		return r;
	}
	s->size += s->plen;
	s->st.records += s->pn;
	s->st.batches++;
	s->st.fsyncs++;
	s->plen = s->pn = 0;
	s->committed = s->chain;
	s->st.last_seq = s->chain.seq;
	return 0;
}

static int
pend_add(struct aud_store *s, const char *line, size_t len)
{
	if (s->plen + len > s->pcap) {
		size_t cap = s->pcap ? s->pcap : 64 * 1024;
		char *p;

		while (cap < s->plen + len)
			cap *= 2;
		if ((p = realloc(s->pend, cap)) == NULL)
			return KZ_ENOMEM;
		s->pend = p;
		s->pcap = cap;
	}
	memcpy(s->pend + s->plen, line, len);
	s->plen += len;
	s->pn++;
	return 0;
}

int
aud_store_add(struct aud_store *s, const char *kind, uid_t uid,
    const cJSON *event, uint64_t *seq, char *why, size_t wlen)
{
	struct aud_chain save = s->chain, next;
	char *line = NULL;
	size_t len;
	int r;

	if (s->st.failed) {
		kz_why(why, wlen, "the audit log is not writable");
		return KZ_ESTATE;
	}
	if ((r = aud_record_format(&s->chain, kind, uid, event, aud_now_ms(),
	         &line, &len)) != 0) {
		kz_why(why, wlen, "the event cannot be formatted (%s)",
		    kz_strerror(r));
		return r;
	}
	/* The chain moves on only once the record is in the batch. */
	next = s->chain;
	s->chain = save;
	if (s->size + s->plen + len > s->max_file && s->size + s->plen > 0) {
		if ((r = aud_store_commit(s, why, wlen)) != 0 ||
		    (r = open_file(s, s->idx + 1, true, why, wlen)) != 0) {
			if (!s->st.failed)
				store_fail(s, true);
			goto out;
		}
		s->st.rotations++;
		s->st.file_idx = s->idx;
	}
	if ((r = pend_add(s, line, len)) != 0) {
		kz_why(why, wlen, "out of memory");
		goto out;
	}
	s->chain = next;
	*seq = s->chain.seq;
out:
	free(line);
	return r;
}

void
aud_store_stats(const struct aud_store *s, struct aud_store_stats *out)
{
	*out = s->st;
}
