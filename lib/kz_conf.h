/*
 * Config files: "key = value" lines, '#' comments, blank lines.  Keys are
 * UPPER_SNAKE and an environment variable of the same name overrides the
 * file.  An unreadable file, a malformed line, a duplicate or an unknown key
 * is an error: callers fail closed (exit 2), never run on defaults.
 */
#ifndef KZ_CONF_H
#define KZ_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "kz_err.h"

#define KZ_CONF_MAX_BYTES (256 * 1024)
#define KZ_CONF_MAX_VALUE 4096

struct kz_conf;

/*
 * Loads path (NULL: no file, environment only).  known is the
 * NULL-terminated list of keys this binary accepts.
 */
KZ_WUR int kz_conf_load(const char *path, const char *const *known,
    struct kz_conf **out, char *why, size_t wlen);
void kz_conf_free(struct kz_conf *c);

/* Value from environment, else file, else dflt. */
const char *kz_conf_str(const struct kz_conf *c, const char *key,
    const char *dflt);
/*
 * A string setting copied into out (len bytes): the value, else dflt, or
 * "dir/dflt" when dir is given (a file in the run dir, a tool beside the
 * binary).  KZ_ECONF, naming key, when it does not fit.
 */
KZ_WUR int kz_conf_copy(const struct kz_conf *c, const char *key,
    const char *dir, const char *dflt, char *out, size_t len, char *why,
    size_t wlen);
/*
 * The run directory and what every binary finds in it (kaizen.conf(5),
 * DEFAULTS): KZ_RUN_DIR, else /run/kaizen.  The socket of daemon NAME
 * ("kz-audit", "kz-lease", "kz-project", "kz-egress", "store") is
 * RUN/NAME/NAME.sock when RUN/NAME is a directory (the systemd units give
 * a daemon that is not root a RuntimeDirectory of its own), else
 * RUN/NAME.sock (kz-supervise's flat run dir); the field key is
 * RUN/field.key and the audit log RUN/audit.  KZ_ECONF when it does not
 * fit in len.
 */
#define KZ_RUN_DIR_DEFAULT "/run/kaizen"
KZ_WUR int kz_run_dir(const struct kz_conf *c, char *out, size_t len, char *why,
    size_t wlen);
KZ_WUR int kz_sock_default(const char *run_dir, const char *name, char *out,
    size_t len);
/* The same rule for another file of daemon NAME (kz-egress's status
 * socket): RUN/NAME/FILE when RUN/NAME is a directory, else RUN/FILE. */
KZ_WUR int kz_sock_in(const char *run_dir, const char *name, const char *file,
    char *out, size_t len);
/* key's value, else kz_sock_default(run_dir, name); an empty value is
 * KZ_ECONF (a socket must be named). */
KZ_WUR int kz_conf_sock(const struct kz_conf *c, const char *key,
    const char *run_dir, const char *name, char *out, size_t len, char *why,
    size_t wlen);
/*
 * The audit sink of a binary that audits: KZ_AUDIT (on, the default, or
 * off: the explicit, debugging-only opt-out) and KZ_AUDIT_SOCKET (else
 * kz-audit's socket under the run dir).  With audit off, out is "" and
 * the caller records nothing and says so on every run.
 */
KZ_WUR int kz_conf_audit(const struct kz_conf *c, const char *run_dir,
    char *out, size_t len, char *why, size_t wlen);
/* Where the value came from: "env", "file" or "default". */
const char *kz_conf_origin(const struct kz_conf *c, const char *key);
KZ_WUR int kz_conf_int(const struct kz_conf *c, const char *key, int64_t dflt,
    int64_t min, int64_t max, int64_t *out, char *why, size_t wlen);
/* on/off, yes/no, true/false, 1/0. */
KZ_WUR int kz_conf_bool(const struct kz_conf *c, const char *key, bool dflt,
    bool *out, char *why, size_t wlen);
/* Sizes with an optional K, M or G suffix (powers of 1024). */
KZ_WUR int kz_conf_size(const struct kz_conf *c, const char *key, uint64_t dflt,
    uint64_t max, uint64_t *out, char *why, size_t wlen);
/*
 * "FIRST-LAST": a range of host uids (and gids, the same numbers) handed
 * out one per worker or tool, from 1 to 2147483646 and never the overflow
 * id 65534 (nobody), which other processes hold too.
 */
#define KZ_WORKER_IDS_DEFAULT "2100000001-2100065536" /* LEASE_WORKER_IDS */
KZ_WUR int kz_conf_ids(const struct kz_conf *c, const char *key,
    const char *dflt, int64_t *first, int64_t *last, char *why, size_t wlen);

/* Strict decimal parse of a whole string into [min, max]. */
KZ_WUR int kz_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);
KZ_WUR int kz_parse_size(const char *s, uint64_t max, uint64_t *out);

#endif
