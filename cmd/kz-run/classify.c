/*
 * Classification before dispatch: every projected file and an inline
 * script ("sh -c TEXT") go through "kz-sandbox classify".  A script that
 * needs root is refused here and never reaches a worker; a classifier that
 * could not run refuses too (fail closed).  A room's projection is
 * classified the same way, from a copy kz-project materializes before the
 * lease (run_classify_dir), so no way into the run skips the check.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kz_frame.h"
#include "run.h"
#include "banned.h"

/* Files per "kz-sandbox classify" process, and in one tree at most. */
#define BATCH 64
#define TREE_MAX 65536

/* Each interpreter and the option letters that take the script text. */
static const struct {
	const char *name, *flags;
} interp[] = {
	{"sh", "c"}, {"bash", "c"}, {"dash", "c"}, {"zsh", "c"},
	{"ksh", "c"}, {"python3", "c"}, {"python", "c"}, {"perl", "eE"},
	{"ruby", "e"}, {"node", "ep"}, {NULL, NULL},
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
	return strspn(w + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
	    "VWXYZ") == strlen(w + 1) && strpbrk(w + 1, flags) != NULL;
}

bool
run_inline_script(int argc, char **argv, const char **text)
{
	const char *b;
	size_t i;
	int k;

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

/*
 * One "kz-sandbox classify" over av (NULL-terminated, av[0] the binary):
 * 0 all ok, 1 one is host administration (*inl when the first line names
 * inl_path), or KZ_EUNAVAIL when the classifier could not run.
 */
static int
classify_exec(const char **av, const char *inl_path, bool *inl)
{
	char line[256] = "", sink[512];
	int st = 0, p[2];
	ssize_t r;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return KZ_EUNAVAIL;
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return KZ_EUNAVAIL;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execv(av[0], (char *const *)av);
		_exit(127);
	}
	close(p[1]);
	/* The first line decides the message; the rest is drained so the
	 * classifier never blocks on a full pipe. */
	if ((r = read(p[0], line, sizeof(line) - 1)) > 0) {
		line[r] = '\0';
		while (read(p[0], sink, sizeof(sink)) > 0)
			;
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (inl != NULL)
		*inl = inl_path != NULL && strstr(line, inl_path) != NULL;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 :
	    WIFEXITED(st) && WEXITSTATUS(st) == 1 ? 1 : KZ_EUNAVAIL;
}

int
run_classify(const struct run_conf *c, const struct run_opts *o, char *why,
    size_t wlen)
{
	char tmp[PATH_MAX] = "";
	const char *av[RUN_FILES_MAX + 4], *text;
	bool inl = false;
	int n = 0, e;
	size_t i;

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
	e = classify_exec(av, tmp[0] ? tmp : NULL, &inl);
	if (e == 1)
		kz_why(why, wlen, "%s is host administration", inl ?
		    "the inline script" : "a projected file");
	else if (e != 0)
		kz_why(why, wlen, "the script classifier could not run");
	if (tmp[0] != '\0')
		unlink(tmp);
	return e;
}

/* nftw has no argument for its callback: the walk's state (one walk at a
 * time, kz-run is single-threaded). */
static struct {
	char **paths;
	size_t n;
	bool odd;
} walk;

static int
collect(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_D || flag == FTW_DP)
		return 0;
	/* A projection holds directories and regular files only; anything
	 * else (a symlink, a file that could not be read) is not proven. */
	if (flag != FTW_F || !S_ISREG(sb->st_mode) || walk.n == TREE_MAX) {
		walk.odd = true;
		return 1;
	}
	if ((walk.paths[walk.n] = strdup(p)) == NULL) {
		walk.odd = true;
		return 1;
	}
	walk.n++;
	return 0;
}

int
run_classify_dir(const struct run_conf *c, const char *dir, char *why,
    size_t wlen)
{
	const char *av[BATCH + 3];
	size_t i, k;
	int e = 0;

	memset(&walk, 0, sizeof(walk));
	if ((walk.paths = calloc(TREE_MAX, sizeof(char *))) == NULL)
		return KZ_ENOMEM;
	if (nftw(dir, collect, 16, FTW_PHYS | FTW_MOUNT) != 0 || walk.odd) {
		kz_why(why, wlen, "the projected files could not be listed");
		e = KZ_EUNAVAIL;
		goto out;
	}
	for (i = 0; i < walk.n && e == 0; i += BATCH) {
		av[0] = c->sandbox_bin;
		av[1] = "classify";
		for (k = 0; k < BATCH && i + k < walk.n; k++)
			av[2 + k] = walk.paths[i + k];
		av[2 + k] = NULL;
		e = classify_exec(av, NULL, NULL);
	}
	if (e == 1)
		kz_why(why, wlen, "a projected file is host administration");
	else if (e != 0)
		kz_why(why, wlen, "the script classifier could not run");
out:
	for (i = 0; i < walk.n; i++)
		free(walk.paths[i]);
	free(walk.paths);
	memset(&walk, 0, sizeof(walk));
	return e;
}
