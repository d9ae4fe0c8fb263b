/*
 * Artifact script classification.  A script that requires root, sudo,
 * visudo or /etc/sudoers (by its shebang, the commands it runs, the paths
 * it names or an explicit root check) is host administration: dispatch
 * refuses it before it reaches a worker and never retries it with more
 * privilege.  The check is lexical and errs towards refusing.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "banned.h"

static const char *const admin_cmds[] = {"sudo", "visudo", "sudoedit",
    "doas", "pkexec", "su", "runuser", NULL};
static const char *const admin_text[] = {"/etc/sudoers", "/etc/shadow",
    "/etc/gshadow", "$euid -ne 0", "$euid != 0", "$uid -ne 0",
    "id -u) -ne 0", "id -u)\" -ne 0", "id -u)\" != \"0\"", "id -u) != 0",
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

static bool
is_admin_cmd(const char *w)
{
	for (int i = 0; admin_cmds[i] != NULL; i++)
		if (strcmp(w, admin_cmds[i]) == 0)
			return true;
	return false;
}

/* Looks at each command position of one line: its start and what follows
 * ; | & ( ` and the words env, exec, command, nohup, then, do. */
static const char *
scan_line(const char *p, const char *end)
{
	static char w[64];
	bool cmdpos = true;

	while (p < end) {
		if (isspace((unsigned char)*p)) {
			p++;
			continue;
		}
		if (strchr(";|&(`{!", *p) != NULL) {
			cmdpos = true;
			p++;
			continue;
		}
		if (*p == '#' )
			return NULL;	/* the rest is a comment */
		if (word_char((unsigned char)*p) || *p == '/') {
			size_t n = cmd_word(p, end, w, sizeof(w));

			if (cmdpos && is_admin_cmd(w))
				return w;
			cmdpos = strcmp(w, "env") == 0 ||
			    strcmp(w, "exec") == 0 ||
			    strcmp(w, "command") == 0 ||
			    strcmp(w, "nohup") == 0 ||
			    strcmp(w, "then") == 0 || strcmp(w, "do") == 0 ||
			    strcmp(w, "else") == 0 || strcmp(w, "time") == 0;
			p += n ? n : 1;
			continue;
		}
		cmdpos = false;
		p++;
	}
	return NULL;
}

static bool
contains_ci(const char *text, size_t len, const char *needle)
{
	size_t n = strlen(needle);

	for (size_t i = 0; n <= len && i <= len - n; i++)
		if (strncasecmp(text + i, needle, n) == 0)
			return true;
	return false;
}

/* The text without quotes, so "$EUID" -ne 0 reads like $EUID -ne 0. */
static char *
unquoted(const char *text, size_t len, size_t *outlen)
{
	char *o = malloc(len + 1);
	size_t n = 0;

	if (o == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
		if (text[i] != '"' && text[i] != '\'')
			o[n++] = text[i];
	o[n] = '\0';
	*outlen = n;
	return o;
}

static const char *
named(const char *text, size_t len)
{
	size_t ulen = 0;
	char *u = unquoted(text, len, &ulen);
	const char *hit = NULL;

	for (int i = 0; hit == NULL && admin_text[i] != NULL; i++)
		if (contains_ci(text, len, admin_text[i]) ||
		    (u != NULL && contains_ci(u, ulen, admin_text[i])))
			hit = admin_text[i];
	free(u);
	/* Fail towards refusing: no memory to check means no pass. */
	return u == NULL ? "memory" : hit;
}

enum sbx_class
sbx_classify(const char *text, size_t len, char *why, size_t wlen)
{
	const char *p = text, *end, *w;

	if (memchr(text, '\0', len) != NULL)
		len = strlen(text);
	end = text + len;
	if ((w = named(text, len)) != NULL) {
		kz_why(why, wlen, "host_administration: the script requires "
		    "root (it names \"%s\")", w);
		return SBX_CLASS_HOST_ADMIN;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if (p == text && le - p > 2 && p[0] == '#' && p[1] == '!')
			w = scan_line(p + 2, le);	/* the shebang */
		else
			w = scan_line(p, le);
		if (w != NULL) {
			kz_why(why, wlen, "host_administration: the script "
			    "runs %s", w);
			return SBX_CLASS_HOST_ADMIN;
		}
		p = le + 1;
	}
	return SBX_CLASS_OK;
}
