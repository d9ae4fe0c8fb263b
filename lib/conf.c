#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_conf.h"
#include "kz_io.h"
#include "banned.h"

#define CONF_MAX_KEYS 128

struct kz_conf {
	const char *const *known;
	size_t n;
	char *keys[CONF_MAX_KEYS];
	char *vals[CONF_MAX_KEYS];
};

int
kz_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0' || (*s != '-' && (*s < '0' || *s > '9')))
		return KZ_EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return KZ_EINVAL;
	if (v < min || v > max)
		return KZ_ERANGE;
	*out = v;
	return 0;
}

int
kz_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (s == NULL || *s < '0' || *s > '9')
		return KZ_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return KZ_EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1024;
		break;
	case 'm':
	case 'M':
		mul = 1024 * 1024;
		break;
	case 'g':
	case 'G':
		mul = 1024ull * 1024 * 1024;
		break;
	default:
		return KZ_EINVAL;
	}
	if (*end != '\0' && end[1] != '\0')
		return KZ_EINVAL;
	if (v > max / mul)
		return KZ_ERANGE;
	*out = v * mul;
	return 0;
}

static const char *file_value(const struct kz_conf *c, const char *key);

static bool
is_known(const struct kz_conf *c, const char *key)
{
	for (size_t i = 0; c->known[i] != NULL; i++)
		if (strcmp(c->known[i], key) == 0)
			return true;
	return false;
}

static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int
parse_line(struct kz_conf *c, char *line, int lineno, char *why, size_t wlen)
{
	char *eq, *k, *v;

	line = trim(line);
	if (*line == '\0' || *line == '#')
		return 0;
	if ((eq = strchr(line, '=')) == NULL) {
		kz_why(why, wlen, "line %d: expected 'key = value'", lineno);
		return KZ_ECONF;
	}
	*eq = '\0';
	k = trim(line);
	v = trim(eq + 1);
	if (*k == '\0' ||
	    strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(k)) {
		kz_why(why, wlen, "line %d: bad key", lineno);
		return KZ_ECONF;
	}
	if (!is_known(c, k)) {
		kz_why(why, wlen, "line %d: unknown key '%.64s'", lineno, k);
		return KZ_ECONF;
	}
	if (file_value(c, k) != NULL) {
		kz_why(why, wlen, "line %d: duplicate key '%s'", lineno, k);
		return KZ_ECONF;
	}
	if (strlen(v) > KZ_CONF_MAX_VALUE || c->n == CONF_MAX_KEYS) {
		kz_why(why, wlen, "line %d: value or file too large", lineno);
		return KZ_ECONF;
	}
	if ((c->keys[c->n] = strdup(k)) == NULL ||
	    (c->vals[c->n] = strdup(v)) == NULL)
		return KZ_ENOMEM;
	c->n++;
	return 0;
}

static int
read_file(const char *path, char **out, char *why, size_t wlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	char *buf = NULL;
	int r;

	if (fd < 0) {
		kz_why(why, wlen, "cannot open config: %s", strerror(errno));
		return KZ_ECONF;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > KZ_CONF_MAX_BYTES) {
		kz_why(why, wlen, "config is not a regular file under %d bytes",
		    KZ_CONF_MAX_BYTES);
		r = KZ_ECONF;
		goto out;
	}
	if ((buf = calloc(1, (size_t)st.st_size + 1)) == NULL) {
		r = KZ_ENOMEM;
		goto out;
	}
	if ((r = kz_read_full(fd, buf, (size_t)st.st_size, -1)) != 0) {
		kz_why(why, wlen, "cannot read config");
		r = KZ_ECONF;
		goto out;
	}
	if (memchr(buf, '\0', (size_t)st.st_size) != NULL) {
		kz_why(why, wlen, "config contains a NUL byte");
		r = KZ_ECONF;
		goto out;
	}
	*out = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

int
kz_conf_load(const char *path, const char *const *known, struct kz_conf **out,
    char *why, size_t wlen)
{
	struct kz_conf *c;
	char *text = NULL, *line, *save = NULL;
	int r = 0, lineno = 0;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return KZ_ENOMEM;
	c->known = known;
	if (path != NULL && (r = read_file(path, &text, why, wlen)) != 0)
		goto out;
	/* strtok_r would merge blank lines and misnumber them: use strsep. */
	for (save = text; save != NULL && r == 0;) {
		line = strsep(&save, "\n");
		r = parse_line(c, line, ++lineno, why, wlen);
	}
out:
	free(text);
	if (r != 0) {
		kz_conf_free(c);
		return r;
	}
	*out = c;
	return 0;
}

void
kz_conf_free(struct kz_conf *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->keys[i]);
		free(c->vals[i]);
	}
	free(c);
}

static const char *
file_value(const struct kz_conf *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->keys[i], key) == 0)
			return c->vals[i];
	return NULL;
}

const char *
kz_conf_str(const struct kz_conf *c, const char *key, const char *dflt)
{
	const char *v = getenv(key);

	if (v != NULL)
		return v;
	v = c ? file_value(c, key) : NULL;
	return v ? v : dflt;
}

int
kz_conf_copy(const struct kz_conf *c, const char *key, const char *dir,
    const char *dflt, char *out, size_t len, char *why, size_t wlen)
{
	const char *v = kz_conf_str(c, key, NULL);
	int n;

	if (v != NULL)
		n = snprintf(out, len, "%s", v);
	else if (dir != NULL)
		n = snprintf(out, len, "%s/%s", dir, dflt);
	else
		n = snprintf(out, len, "%s", dflt);
	if (n < 0 || (size_t)n >= len) {
		kz_why(why, wlen, "%s is too long", key);
		return KZ_ECONF;
	}
	return 0;
}

int
kz_run_dir(const struct kz_conf *c, char *out, size_t len, char *why,
    size_t wlen)
{
	if (kz_conf_copy(c, "KZ_RUN_DIR", NULL, KZ_RUN_DIR_DEFAULT, out, len,
	        why, wlen) != 0)
		return KZ_ECONF;
	if (out[0] == '\0') {
		kz_why(why, wlen, "KZ_RUN_DIR is empty");
		return KZ_ECONF;
	}
	return 0;
}

int
kz_sock_in(const char *run_dir, const char *name, const char *file, char *out,
    size_t len)
{
	struct stat st;
	char dir[PATH_MAX];
	int n;

	if (run_dir == NULL || name == NULL || *name == '\0' ||
	    strchr(name, '/') != NULL || file == NULL || *file == '\0' ||
	    strchr(file, '/') != NULL)
		return KZ_EINVAL;
	n = snprintf(dir, sizeof(dir), "%s/%s", run_dir, name);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return KZ_ERANGE;
	/* stat, not lstat: a link to the daemon's directory is its
	 * directory.  This only picks a name; connect() proves the rest. */
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		n = snprintf(out, len, "%s/%s", dir, file);
	else
		n = snprintf(out, len, "%s/%s", run_dir, file);
	return n < 0 || (size_t)n >= len ? KZ_ERANGE : 0;
}

int
kz_sock_default(const char *run_dir, const char *name, char *out, size_t len)
{
	char file[128];
	int n;

	if (name == NULL)
		return KZ_EINVAL;
	n = snprintf(file, sizeof(file), "%s.sock", name);
	if (n < 0 || (size_t)n >= sizeof(file))
		return KZ_ERANGE;
	return kz_sock_in(run_dir, name, file, out, len);
}

int
kz_conf_sock(const struct kz_conf *c, const char *key, const char *run_dir,
    const char *name, char *out, size_t len, char *why, size_t wlen)
{
	const char *v = kz_conf_str(c, key, NULL);
	int n;

	if (v == NULL) {
		if (kz_sock_default(run_dir, name, out, len) != 0) {
			kz_why(why, wlen,
			    "%s: the default under KZ_RUN_DIR is too long",
			    key);
			return KZ_ECONF;
		}
		return 0;
	}
	if (*v == '\0') {
		kz_why(why, wlen, "%s is empty", key);
		return KZ_ECONF;
	}
	n = snprintf(out, len, "%s", v);
	if (n < 0 || (size_t)n >= len) {
		kz_why(why, wlen, "%s is too long", key);
		return KZ_ECONF;
	}
	return 0;
}

int
kz_conf_audit(const struct kz_conf *c, const char *run_dir, char *out,
    size_t len, char *why, size_t wlen)
{
	const char *v;
	bool on;
	int e;

	if ((e = kz_conf_bool(c, "KZ_AUDIT", true, &on, why, wlen)) != 0)
		return e;
	if (!on) {
		if (len > 0)
			out[0] = '\0';
		return 0;
	}
	v = kz_conf_str(c, "KZ_AUDIT_SOCKET", NULL);
	if (v != NULL && *v == '\0') {
		/* Once "no audit": now a mistake, never a silent opt-out. */
		kz_why(why, wlen,
		    "KZ_AUDIT_SOCKET is empty: audit is "
		    "mandatory (KZ_AUDIT = off records nothing)");
		return KZ_ECONF;
	}
	return kz_conf_sock(c, "KZ_AUDIT_SOCKET", run_dir, "kz-audit", out, len,
	    why, wlen);
}

const char *
kz_conf_origin(const struct kz_conf *c, const char *key)
{
	if (getenv(key) != NULL)
		return "env";
	return c && file_value(c, key) ? "file" : "default";
}

int
kz_conf_int(const struct kz_conf *c, const char *key, int64_t dflt, int64_t min,
    int64_t max, int64_t *out, char *why, size_t wlen)
{
	const char *v = kz_conf_str(c, key, NULL);

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	if (kz_parse_int(v, min, max, out) != 0) {
		kz_why(why, wlen, "%s: expected an integer in [%lld, %lld]",
		    key, (long long)min, (long long)max);
		return KZ_ECONF;
	}
	return 0;
}

int
kz_conf_bool(const struct kz_conf *c, const char *key, bool dflt, bool *out,
    char *why, size_t wlen)
{
	static const char *const yes[] = {"on", "yes", "true", "1", NULL};
	static const char *const no[] = {"off", "no", "false", "0", NULL};
	const char *v = kz_conf_str(c, key, NULL);

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	for (int i = 0; yes[i] != NULL; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	kz_why(why, wlen, "%s: expected on or off", key);
	return KZ_ECONF;
}

int
kz_conf_size(const struct kz_conf *c, const char *key, uint64_t dflt,
    uint64_t max, uint64_t *out, char *why, size_t wlen)
{
	const char *v = kz_conf_str(c, key, NULL);

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	if (kz_parse_size(v, max, out) != 0) {
		kz_why(why, wlen, "%s: expected a size (e.g. 64M) up to %llu",
		    key, (unsigned long long)max);
		return KZ_ECONF;
	}
	return 0;
}

int
kz_conf_ids(const struct kz_conf *c, const char *key, const char *dflt,
    int64_t *first, int64_t *last, char *why, size_t wlen)
{
	char buf[64], *dash;
	const char *v = kz_conf_str(c, key, dflt);

	snprintf(buf, sizeof(buf), "%s", v);
	if (strlen(v) >= sizeof(buf) || (dash = strchr(buf, '-')) == NULL)
		goto bad;
	*dash = '\0';
	if (kz_parse_int(buf, 1, 2147483646, first) != 0 ||
	    kz_parse_int(dash + 1, 1, 2147483646, last) != 0 ||
	    *last < *first || (*first <= 65534 && *last >= 65534))
		goto bad;
	return 0;
bad:
	kz_why(why, wlen,
	    "%s must be FIRST-LAST, ids from 1 to 2147483646 without 65534",
	    key);
	return KZ_ECONF;
}
