/*
 * Artifact script classification.  A script that requires root, sudo,
 * visudo or /etc/sudoers (by its shebang, the commands it runs, the paths
 * it names or an explicit root check) is host administration: dispatch
 * refuses it before it reaches a worker and never retries it with more
 * privilege.  The check is lexical and errs towards refusing.  Shared by
 * "kz-sandbox classify" and kz-run, which classifies in-process before a
 * lease.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_classify.h"
#include "banned.h"

static const char *const admin_cmds[] = {"sudo", "visudo", "sudoedit", "doas",
    "pkexec", "su", "runuser", NULL};
static const char *const admin_text[] = {"/etc/sudoers", "/etc/shadow",
    "/etc/gshadow", "$euid -ne 0", "$euid != 0", "$uid -ne 0", "id -u) -ne 0",
    "id -u)\" -ne 0", "id -u)\" != \"0\"", "id -u) != 0",
    "whoami)\" != \"root\"", "whoami) != root", "geteuid() != 0",
    "getuid() != 0", "geteuid() == 0", "getuid() == 0", "must be run as root",
    "must be root", "run this as root", "requires root", "run as root",
    "process.getuid() !== 0", "\"sudo\"", "'sudo'", "\"sudo ", "'sudo ",
    "\"visudo", "'visudo", NULL};

static bool
word_char(int ch)
{
	return isalnum(ch) || ch == '_' || ch == '-' || ch == '.';
}

/* The command word at p, without a directory, lower-cased into out. */
static size_t
cmd_word(const char *p, const char *end, char *out, size_t cap)
{
	const char *s = p, *base;
	size_t n = 0;

	while (s < end && (word_char((unsigned char)*s) || *s == '/'))
		s++;
	base = p;
	for (const char *q = p; q < s; q++)
		if (*q == '/')
			base = q + 1;
	for (const char *q = base; q < s && n + 1 < cap; q++)
		out[n++] = (char)tolower((unsigned char)*q);
	out[n] = '\0';
	return (size_t)(s - p);
}

/* Words after which the next word is still in command position. */
static const char *const keywords[] = {"then", "do", "else", "if", "elif",
    "while", "until", "time", "builtin", NULL};
/* Commands that run the rest of their words as a command: every word
 * after one of them, up to the next separator, counts as a command
 * (options, assignments and durations included: "env -u X sudo",
 * "timeout 5 sudo", "nice -n 5 sudo"). */
static const char *const wrappers[] = {"env", "exec", "command", "nohup",
    "nice", "timeout", "xargs", "stdbuf", "setsid", "ionice", "chrt", "taskset",
    "flock", "unbuffer", "watch", NULL};

static bool
in_list(const char *w, const char *const *list)
{
	for (int i = 0; list[i] != NULL; i++)
		if (strcmp(w, list[i]) == 0)
			return true;
	return false;
}

/* The end of an assignment or option word: quoted parts are passed over
 * whole; a command substitution in it is left to be scanned. */
static const char *
skip_value(const char *p, const char *end)
{
	while (p < end && !isspace((unsigned char)*p) &&
	    strchr(";|&(`", *p) == NULL) {
		if (*p == '"' || *p == '\'') {
			const char *q = memchr(p + 1, *p,
			    (size_t)(end - p - 1));

			p = q != NULL ? q + 1 : end;
		} else
			p++;
	}
	return p;
}

/* Looks at each command position of one line: its start, what follows
 * ; | & ( ` { !, an assignment (FOO=1 sudo), a keyword (if sudo ...), and
 * every word after a wrapper command. */
static const char *
scan_line(const char *p, const char *end, char w[64])
{
	bool cmdpos = true, wrapped = false;

	while (p < end) {
		if (isspace((unsigned char)*p)) {
			p++;
			continue;
		}
		if (strchr(";|&(`{!", *p) != NULL) {
			cmdpos = true;
			wrapped = false;
			p++;
			continue;
		}
		if (*p == '#')
			return NULL; /* the rest is a comment */
		if (word_char((unsigned char)*p) || *p == '/') {
			size_t n = cmd_word(p, end, w, 64);

			if (cmdpos && in_list(w, admin_cmds))
				return w;
			if ((cmdpos && p + n < end && p[n] == '=') ||
			    (wrapped && *p == '-')) {
				/* An assignment or a wrapper's option: the
				 * command is still to come. */
				p = skip_value(p, end);
				continue;
			}
			wrapped = wrapped || in_list(w, wrappers);
			cmdpos = wrapped || in_list(w, keywords);
			p += n ? n : 1;
			continue;
		}
		cmdpos = wrapped;
		p++;
	}
	return NULL;
}

/* A lower-cased copy of text, without quotes when strip is set (so
 * "$EUID" -ne 0 reads like $EUID -ne 0). */
static char *
folded(const char *text, size_t len, bool strip, size_t *outlen)
{
	char *o = malloc(len + 1);
	size_t n = 0;

	if (o == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
		if (!strip || (text[i] != '"' && text[i] != '\''))
			o[n++] = (char)tolower((unsigned char)text[i]);
	o[n] = '\0';
	*outlen = n;
	return o;
}

static const char *
named(const char *text, size_t len)
{
	size_t flen = 0, ulen = 0;
	char *f = folded(text, len, false, &flen);
	char *u = folded(text, len, true, &ulen);
	const char *hit = NULL;

	for (int i = 0; f && u && hit == NULL && admin_text[i] != NULL; i++) {
		char needle[64];
		size_t n = 0;

		for (const char *c = admin_text[i];
		     *c && n + 1 < sizeof(needle); c++)
			needle[n++] = (char)tolower((unsigned char)*c);
		if (memmem(f, flen, needle, n) != NULL ||
		    memmem(u, ulen, needle, n) != NULL)
			hit = admin_text[i];
	}
	/* Fail towards refusing: no memory to check means no pass. */
	if (f == NULL || u == NULL)
		hit = "memory";
	free(f);
	free(u);
	return hit;
}

enum kz_class
kz_classify(const char *text, size_t len, char *why, size_t wlen)
{
	const char *p = text, *end = text + len, *w;
	char word[64];

	if ((w = named(text, len)) != NULL) {
		kz_why(why, wlen,
		    "host_administration: the script requires "
		    "root (it names \"%s\")",
		    w);
		return KZ_CLASS_HOST_ADMIN;
	}
	/* A NUL ends a line, not the script: shells and perl go on reading
	 * after one. */
	while (p < end) {
		const char *le = p;

		while (le < end && *le != '\n' && *le != '\0')
			le++;
		if (p == text && le - p > 2 && p[0] == '#' && p[1] == '!')
			w = scan_line(p + 2, le, word); /* the shebang */
		else
			w = scan_line(p, le, word);
		if (w != NULL) {
			kz_why(why, wlen,
			    "host_administration: the script runs %s", w);
			return KZ_CLASS_HOST_ADMIN;
		}
		p = le + 1;
	}
	return KZ_CLASS_OK;
}

int
kz_classify_file(const char *path, char *why, size_t wlen)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	ssize_t n = -1;
	int fd, r;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		kz_why(why, wlen, "cannot open %s", path);
		return KZ_ESYS;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		kz_why(why, wlen, "%s is not a regular file", path);
		return KZ_EPATH_NOTREG;
	}
	/* Every byte is read: a check of a prefix is no check. */
	if (st.st_size > KZ_CLASSIFY_MAX ||
	    (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		kz_why(why, wlen, "%s is too large to classify", path);
		return KZ_ETOOBIG;
	}
	while (got <= (size_t)st.st_size &&
	    (n = read(fd, buf + got, (size_t)st.st_size + 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (n != 0 || got != (size_t)st.st_size) {
		free(buf);
		kz_why(why, wlen, "%s changed or could not be read", path);
		return KZ_ESYS;
	}
	r = kz_classify(buf, got, why, wlen);
	free(buf);
	return r;
}
