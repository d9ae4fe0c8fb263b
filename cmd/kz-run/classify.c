/*
 * Classification before dispatch: every projected file and an inline
 * script ("sh -c TEXT") go through "kz-sandbox classify".  A script that
 * needs root is refused here and never reaches a worker; a classifier that
 * could not run refuses too (fail closed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_frame.h"
#include "run.h"
#include "banned.h"

static const char *const interp[] = {"sh", "bash", "dash", "zsh", "ksh",
	"python3", "python", "perl", "ruby", "node", NULL};

bool
run_inline_script(int argc, char **argv, const char **text)
{
	const char *b;
	size_t i;

	if (argc < 3)
		return false;
	b = strrchr(argv[0], '/');
	b = b != NULL ? b + 1 : argv[0];
	for (i = 0; interp[i] != NULL; i++)
		if (strcmp(b, interp[i]) == 0)
			break;
	if (interp[i] == NULL || (strcmp(argv[1], "-c") != 0 &&
	    strcmp(argv[1], "-e") != 0))
		return false;
	*text = argv[2];
	return true;
}

static int
write_inline(const char *text, char *path, size_t plen)
{
	int fd;
	size_t n = strlen(text);

	snprintf(path, plen, "%s/kz-run-inline.XXXXXX", getenv("TMPDIR") ?
	    getenv("TMPDIR") : "/tmp");
	if ((fd = mkstemp(path)) < 0)
		return KZ_ESYS;
	if (kz_write_full(fd, text, n, kz_now_ms() + 5000) != 0) {
		close(fd);
		unlink(path);
		return KZ_ESYS;
	}
	close(fd);
	return 0;
}

int
run_classify(const struct run_conf *c, const struct run_opts *o, char *why,
    size_t wlen)
{
	char tmp[PATH_MAX] = "", line[256] = "";
	const char *av[RUN_FILES_MAX + 4], *text;
	int n = 0, st, p[2], e;
	size_t i;
	ssize_t r;
	pid_t pid;

	av[n++] = c->sandbox_bin;
	av[n++] = "classify";
	for (i = 0; i < o->nfiles; i++)
		av[n++] = o->files[i];
	if (run_inline_script(o->argc, o->argv, &text)) {
		if ((e = write_inline(text, tmp, sizeof(tmp))) != 0)
			return e;
		av[n++] = tmp;
	}
	av[n] = NULL;
	if (n == 2)
		return 0;
	if (pipe2(p, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
		e = KZ_ESYS;
		goto out;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execv(av[0], (char *const *)av);
		_exit(127);
	}
	close(p[1]);
	line[0] = '\0';
	/* The first line decides the message; the rest is drained so the
	 * classifier never blocks on a full pipe. */
	if ((r = read(p[0], line, sizeof(line) - 1)) > 0) {
		char sink[512];

		line[r] = '\0';
		while (read(p[0], sink, sizeof(sink)) > 0)
			;
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	e = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 :
	    WIFEXITED(st) && WEXITSTATUS(st) == 1 ? 1 : KZ_EUNAVAIL;
	if (e == 1)
		kz_why(why, wlen, "%s is host administration",
		    strstr(line, tmp[0] ? tmp : "\x01") ? "the inline script" :
		    "a projected file");
	else if (e != 0)
		kz_why(why, wlen, "the script classifier could not run");
out:
	if (tmp[0] != '\0')
		unlink(tmp);
	return e;
}
