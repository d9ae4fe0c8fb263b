/*
 * Classification before dispatch, in-process with libkz's classifier (the
 * one "kz-sandbox classify" runs): every --file, an inline script
 * ("sh -c TEXT") and the command line itself ("sudo id"); a room's files
 * are classified the same way by kz-project (its classify op, asked
 * before the lease: admit.c).  A script that needs root is refused here
 * and never reaches a worker; a file that cannot be classified whole
 * (unreadable, not a regular file, too large) refuses too (fail closed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kz_classify.h"
#include "run.h"
#include "banned.h"

/* Each interpreter and the option letters that take the script text. */
static const struct {
	const char *name, *flags;
} interp[] = {
    {"sh", "c"},
    {"bash", "c"},
    {"dash", "c"},
    {"zsh", "c"},
    {"ksh", "c"},
    {"python3", "c"},
    {"python", "c"},
    {"perl", "eE"},
    {"ruby", "e"},
    {"node", "ep"},
    {NULL, NULL},
};

/* Whether w is a short-option cluster ("-c", "-ec", "-xc") holding one
 * of flags, or node's long form. */
static bool
takes_script(const char *w, const char *flags)
{
	if (strcmp(w, "--eval") == 0 || strcmp(w, "--print") == 0)
		return strchr(flags, 'p') != NULL;
	if (w[0] != '-' || w[1] == '-' || w[1] == '\0')
		return false;
	return strspn(w + 1,
	           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
	           "VWXYZ") == strlen(w + 1) &&
	    strpbrk(w + 1, flags) != NULL;
}

/* How many leading words of argv only run the rest: "env A=1 -i",
 * "nohup", "nice -n 5", "command", "time". */
static int
wrappers(int argc, char **argv)
{
	int k = 0;

	while (k < argc) {
		const char *w = strrchr(argv[k], '/') ?
		    strrchr(argv[k], '/') + 1 :
		    argv[k];

		if (strcmp(w, "env") == 0) {
			for (k++; k < argc &&
			     (strchr(argv[k], '=') != NULL ||
			         argv[k][0] == '-');
			     k++)
				if ((strcmp(argv[k], "-u") == 0 ||
				        strcmp(argv[k], "-C") == 0) &&
				    k + 1 < argc)
					k++;
		} else if (strcmp(w, "nice") == 0) {
			k++;
			if (k + 1 < argc && strcmp(argv[k], "-n") == 0)
				k += 2;
		} else if (strcmp(w, "nohup") == 0 ||
		    strcmp(w, "command") == 0 || strcmp(w, "time") == 0)
			k++;
		else
			break;
	}
	return k;
}

bool
run_inline_script(int argc, char **argv, const char **text)
{
	const char *b;
	size_t i;
	int k, w = wrappers(argc, argv);

	argc -= w;
	argv += w;
	if (argc < 3)
		return false;
	b = strrchr(argv[0], '/');
	b = b != NULL ? b + 1 : argv[0];
	for (i = 0; interp[i].name != NULL; i++)
		if (strcmp(b, interp[i].name) == 0)
			break;
	if (interp[i].name == NULL)
		return false;
	/* Options that take a value ("bash -o pipefail -c TEXT") are
	 * passed over: reading a value as text only classifies more. */
	for (k = 1; k + 1 < argc; k++)
		if (takes_script(argv[k], interp[i].flags)) {
			*text = argv[k + 1];
			return true;
		}
	return false;
}

/*
 * The command line as the classifier should read it: the words kz-run
 * execs directly, with every character a shell would treat specially
 * turned into a space.  No shell runs it, so "echo 'a;sudo'" must not read
 * as running sudo, while "sudo id", "env sudo id" and "cat /etc/sudoers"
 * must.
 */
static char *
command_line(int argc, char **argv)
{
	size_t n = 1;
	char *s, *p;

	for (int i = 0; i < argc; i++)
		n += strlen(argv[i]) + 1;
	if ((s = p = malloc(n)) == NULL)
		return NULL;
	for (int i = 0; i < argc; i++) {
		for (const char *a = argv[i]; *a != '\0'; a++)
			*p++ = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
			              "OPQRSTUVWXYZ0123456789_./=:@%+,-",
			           *a) != NULL ?
			    *a :
			    ' ';
		*p++ = i + 1 < argc ? ' ' : '\n';
	}
	*p = '\0';
	return s;
}

int
run_classify(const struct run_conf *c, const struct run_opts *o, char *why,
    size_t wlen)
{
	char line_why[256] = "";
	const char *text;
	char *line;
	size_t i;
	int e;

	for (i = 0; i < o->nfiles; i++)
		if ((e = kz_classify_file(o->files[i], line_why,
		         sizeof(line_why))) != KZ_CLASS_OK) {
			kz_why(why, wlen,
			    e == KZ_CLASS_HOST_ADMIN ?
			        "a projected file is host administration" :
			        "a projected file cannot be classified (%s)",
			    kz_strerror(e));
			return e == KZ_CLASS_HOST_ADMIN ? 1 : KZ_EUNAVAIL;
		}
	if (run_inline_script(o->argc, o->argv, &text) &&
	    kz_classify(text, strlen(text), line_why, sizeof(line_why)) ==
	        KZ_CLASS_HOST_ADMIN) {
		kz_why(why, wlen, "the inline script is host administration");
		return 1;
	}
	if (o->argc > 0) {
		if ((line = command_line(o->argc, o->argv)) == NULL) {
			kz_why(why, wlen,
			    "the command could not be classified");
			return KZ_EUNAVAIL;
		}
		e = kz_classify(line, strlen(line), line_why, sizeof(line_why));
		free(line);
		if (e == KZ_CLASS_HOST_ADMIN) {
			kz_why(why, wlen, "the command is host administration");
			return 1;
		}
	}
	return 0;
}
