/*
 * kz-audit's internal interfaces: the closed event schema, the keyed MAC
 * chain over JSON Lines records, the log directory with rotation and
 * crash recovery, the daemon's state shared by serve.c and ops.c, and the
 * one-shot subcommands.
 */
#ifndef KZ_AUDIT_INT_H
#define KZ_AUDIT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <cJSON.h>

#include "kz_err.h"
#include "kz_exit.h"
#include "kz_key.h"
#include "kz_sock.h"
#include "kz_srv.h"

#define AUD_MAC_BYTES 32
#define AUD_MAC_HEX (AUD_MAC_BYTES * 2)
/* A stored record (one line) is never longer than this. */
#define AUD_LINE_MAX (32u * 1024u)
/* Members an event may have, strings bounds (see the schema table). */
#define AUD_EVENT_MAX_FIELDS 48
#define AUD_KIND_MAX 32
#define AUD_FILE_PREFIX "audit-"
#define AUD_FILE_SUFFIX ".jsonl"
#define AUD_FILES_MAX 100000
#define AUD_MAX_FILE_DEFAULT (64ull * 1024 * 1024)
#define AUD_MAX_FILE_MIN 4096ull
/* Startup reads the newest file whole: no file may grow past this. */
#define AUD_MAX_FILE_MAX (1024ull * 1024 * 1024)
/* Integers are stored exactly: |n| <= 2^53 - 1, exact as a double. */
#define AUD_INT_MAX 9007199254740991LL

/* ---- schema.c: closed kinds, closed field schemas, value checks. ---- */

enum aud_refusal {
	AUD_R_KIND, /* kind is not one of the closed set */
	AUD_R_FIELD, /* field outside the kind's schema */
	AUD_R_TYPE, /* wrong JSON type */
	AUD_R_NESTED, /* object or array where a scalar is required */
	AUD_R_MULTILINE, /* control character (newline, tab, ...) */
	AUD_R_LENGTH, /* string or list over its bound, or empty */
	AUD_R_PATH, /* absolute path, home path or URL */
	AUD_R_CHARSET, /* character outside the field's alphabet */
	AUD_R_RANGE, /* number out of range or not an integer */
	AUD_R_CONFLICT, /* a raw id and its hash both given */
	AUD_R_INVISIBLE, /* zero-width, tag or other invisible character */
	AUD_R_COUNT_
};

struct aud_refusal_info {
	enum aud_refusal reason;
	/* Counter key: a schema field name, "kind", "event" or "(unknown)". */
	const char *field;
	char why[200]; /* one line naming the field, never the value */
};

const char *aud_refusal_name(enum aud_refusal r);
/* The kinds, NULL-terminated; and the schema field names (for status). */
extern const char *const aud_kinds[];
bool aud_kind_known(const char *kind);
/* Every field name the schema knows, NULL-terminated (counter keys). */
const char *const *aud_field_names(void);

/*
 * Checks event against kind's schema and returns in *clean a new object
 * holding what may be stored: raw actor/conversation/member/session ids are
 * replaced by <name>_hash with the keyed identifier hash (idkey is the
 * IDHASH subkey).  KZ_EDENIED with ri filled when refused.
 */
KZ_WUR int aud_schema_check(const char *kind, const cJSON *event,
    const struct kz_key *idkey, cJSON **clean, struct aud_refusal_info *ri);

/* ---- chain.c: record format and the keyed MAC chain. ---- */

struct aud_chain {
	struct kz_key key; /* the AUDIT subkey */
	uint64_t seq; /* last record written (0: none yet) */
	unsigned char mac[AUD_MAC_BYTES]; /* its MAC (zeros: genesis) */
};

/*
 * Formats the next record (seq + 1, ts_ms, the writer's uid, kind, event)
 * as one line ending in '\n' into a malloc'd buffer, and advances the
 * chain.  Every number of
 * event is written as its decimal digits; KZ_EINVAL for one that is not an
 * integer within AUD_INT_MAX.
 */
KZ_WUR int aud_record_format(struct aud_chain *c, const char *kind, uid_t uid,
    const cJSON *event, int64_t ts_ms, char **line, size_t *len);

struct aud_rec {
	uint64_t seq;
	int64_t ts_ms;
	int64_t uid; /* the writer's uid; -1 in a record written without it */
	unsigned char prev[AUD_MAC_BYTES];
	unsigned char mac[AUD_MAC_BYTES];
	cJSON *json; /* the parsed record, owned; may be NULL */
};

/*
 * Checks one stored line (without its '\n'): its form and its MAC.  Chain
 * linkage (seq, prev) is the caller's.  why says what is wrong.
 */
KZ_WUR int aud_record_check(const struct kz_key *key, const char *line,
    size_t len, bool keep_json, struct aud_rec *out, char *why, size_t wlen);
/* Parses a record's form only (no key): for query. */
KZ_WUR int aud_record_parse(const char *line, size_t len, struct aud_rec *out,
    char *why, size_t wlen);
void aud_rec_release(struct aud_rec *r);

/*
 * Reads one line of at most cap - 1 bytes into buf, without its newline;
 * *nl says whether it had one.  1 a line, 0 end of input, KZ_ETOOBIG for
 * a longer line (skipped to its end).  Memory stays bounded by cap.
 */
KZ_WUR int aud_getline(FILE *f, char *buf, size_t cap, size_t *len, bool *nl);

/* An audit file open for reading. */
struct aud_file {
	FILE *f;
	char *line; /* AUD_LINE_MAX + 1 bytes: the line last read */
	uint64_t left; /* bytes of its size at open not yet read */
};

/*
 * Opens an audit file for reading: not through a symbolic link, and only
 * a regular file, read up to its size at open (a log directory is not
 * trusted: a FIFO or a link to /dev/zero would never end).  0, or the
 * exit status, reported in one line on err naming path.  aud_file_close
 * releases it.
 */
KZ_WUR int aud_file_open(const char *path, FILE *err, struct aud_file *af);
/* aud_getline into af->line, reading no further than af->left. */
KZ_WUR int aud_file_getline(struct aud_file *af, size_t *len, bool *nl);
void aud_file_close(struct aud_file *af);

/* RFC 3339 UTC with milliseconds; and its strict parse. */
void aud_ts_format(int64_t ms, char out[32]);
KZ_WUR int aud_ts_parse(const char *s, int64_t *ms);
int64_t aud_now_ms(void);

/* ---- store.c, store_list.c: the log directory. ---- */

struct aud_store;

struct aud_store_stats {
	uint64_t records, batches, fsyncs, rotations, last_seq;
	uint64_t truncated_bytes; /* cut off at open (crash recovery) */
	unsigned file_idx;
	bool failed;
};

/*
 * Opens (creating it 0750 if missing) and locks the log directory, recovers
 * the newest file (a torn tail or a hole a crash left is cut off) and
 * continues the chain from the last good record.  Any other line that does
 * not verify is damage: KZ_ECRYPTO, why naming the file and line.  key is
 * the AUDIT subkey.
 */
KZ_WUR int aud_store_open(const char *dir, uint64_t max_file,
    const struct kz_key *key, struct aud_store **out, char *why, size_t wlen);
void aud_store_free(struct aud_store *s);
/*
 * recover.c: checks the complete lines of buf, the bytes of log file name,
 * as a chain continuing c (its first record anchors it) and returns in
 * *valid the length of the good prefix, and in *cutline the line number
 * where what follows it starts.  What follows may be only what a crash
 * leaves: a torn tail (bytes after the last newline), or a hole (a run of
 * NULs up to a 512-byte boundary of the file, from the one before it or
 * from the start of its line) with nothing after it but lines holding
 * holes and later records under key.  Any other complete line that does
 * not verify or link is damage: KZ_ECRYPTO, why naming name and the line
 * number, never the line's bytes.
 */
KZ_WUR int aud_scan(const struct kz_key *key, const char *name, const char *buf,
    size_t len, size_t *valid, size_t *cutline, struct aud_chain *c, bool *any,
    char *why, size_t wlen);
/* Formats a record of the writer uid into the pending batch; rotates when
 * the file is full. */
KZ_WUR int aud_store_add(struct aud_store *s, const char *kind, uid_t uid,
    const cJSON *event, uint64_t *seq, char *why, size_t wlen);
/* Writes the pending batch and fdatasyncs it: one fsync for the batch. */
KZ_WUR int aud_store_commit(struct aud_store *s, char *why, size_t wlen);
void aud_store_stats(const struct aud_store *s, struct aud_store_stats *out);
/* store_list.c: "audit-000001.jsonl" for idx 1. */
void aud_file_name(unsigned idx, char *out, size_t len);
/* The sorted indexes of the log files in dirfd (a malloc'd array of n;
 * KZ_ETOOBIG when it would grow past AUD_FILES_MAX). */
KZ_WUR int aud_list_idx(int dirfd, unsigned **out, size_t *n, char *why,
    size_t wlen);
/*
 * The log files of dir in chain order (malloc'd array of malloc'd paths).
 */
KZ_WUR int aud_dir_files(const char *dir, char ***paths, size_t *n, char *why,
    size_t wlen);
void aud_paths_free(char **paths, size_t n);

/* ---- quota.c: the writer's queue and each peer uid's share of it. ---- */

/* Records queued for the writer, all peers together. */
#define AUD_QUEUE_MAX 4096
/* The most one peer uid may hold of them: a quarter, so that no single
 * client can keep the others' records out. */
#define AUD_UID_SHARE (AUD_QUEUE_MAX / 4)

enum aud_quota_res { AUD_Q_OK, AUD_Q_SHARE, AUD_Q_FULL };

struct aud_quota {
	size_t queued;
	size_t nuids;
	struct {
		uid_t uid;
		size_t held;
	} by_uid[AUD_QUEUE_MAX];
};

void aud_quota_clear(struct aud_quota *q);
KZ_WUR enum aud_quota_res aud_quota_admit(struct aud_quota *q, uid_t uid,
    size_t n);
size_t aud_quota_held(const struct aud_quota *q, uid_t uid);

/* ---- serve.c, ops.c: the daemon and the ops its loop serves. ---- */

/* Refusal counters by field: the schema's names, then extra_slots. */
#define SLOTS_MAX 160

struct rec {
	char kind[AUD_KIND_MAX + 1];
	uid_t uid; /* the peer's (SO_PEERCRED), stamped into the record */
	cJSON *event;
	uint64_t seq;
	int err;
};

/* One append: one record, or a batch of them queued together (so one
 * fsync makes them all durable) and answered together. */
struct job {
	STAILQ_ENTRY(job) link;
	struct kz_req *req;
	bool batch; /* the request named "records": the reply has seqs */
	size_t n;
	struct rec r[];
};
STAILQ_HEAD(jobq, job);

struct daemon {
	struct event_base *base;
	struct kz_srv *srv;
	struct aud_store *store;
	struct kz_key idkey;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct jobq in, done; /* under mu */
	struct aud_quota quota; /* what in holds, by uid; under mu */
	bool stop; /* under mu */
	struct aud_store_stats st; /* copy, under mu */
	uint64_t max_batch; /* under mu */
	int efd;
	struct event *done_ev, *sigterm, *sigint;
	/* Loop thread only. */
	uint64_t acked, errors, refused, by_reason[AUD_R_COUNT_];
	uint64_t busy;
	int64_t busy_logged_ms;
	uint64_t by_field[SLOTS_MAX];
};

/* ops.c: the op table (its handlers take the daemon as arg), and a job's
 * release (NULL-safe), which the loop calls once the job is answered. */
extern const struct kz_op aud_ops[];
void aud_job_free(struct job *j);

/* ---- cfg.c: configuration. ---- */

struct aud_cfg {
	struct kz_conf *conf;
	char dir[4096];
	char socket[4096];
	char keyfile[4096];
	uint64_t max_file;
	uint64_t frame_max;
	struct kz_peer_policy peers;
};

KZ_WUR int aud_cfg_load(const char *path, struct aud_cfg *c, char *why,
    size_t wlen);
void aud_cfg_release(struct aud_cfg *c);
/* Loads the field key and derives the AUDIT and IDHASH subkeys. */
KZ_WUR int aud_keys_load(const char *keyfile, struct kz_key *audit,
    struct kz_key *idhash, char *why, size_t wlen);

/* ---- the subcommands; each returns an exit status. ---- */

int aud_serve(struct aud_cfg *c);
int aud_append(struct aud_cfg *c, const char *sock, FILE *in);
/* 0 intact, 1 the first bad record named on err, 2 unreadable input.
 * anchor: the chain may start at the first record given (not seq 1). */
int aud_verify(const struct kz_key *auditkey, char **files, size_t n, FILE *out,
    FILE *err);
int aud_verify_anchor(const struct kz_key *auditkey, char **files, size_t n,
    bool anchor, FILE *out, FILE *err);

struct aud_query {
	const char *kind;
	const char *actor_hash;
	const char *conversation_hash;
	int64_t uid; /* the writer's; -1 when unset */
	int64_t since_ms, until_ms; /* INT64_MIN/MAX when unset */
	bool raw; /* the lines byte for byte, not made inert (kz_json_inert) */
};
int aud_query(const struct aud_query *q, char **files, size_t n, FILE *out,
    FILE *err);

/* Parses one input line for append: {"kind":K,"event":{...}} or flat. */
KZ_WUR int aud_input_split(const cJSON *line, const char **kind, cJSON **event,
    char *why, size_t wlen);

#endif
