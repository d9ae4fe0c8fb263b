/*
 * The names of the log directory's files, audit-NNNNNN.jsonl, and their
 * listing in chain order: for the sink (store.c), which recovers the
 * newest and continues in the next, and for verify and query, which read
 * every file of a directory.  Only a name of exactly that form counts (.lock
 * and NAME.cut are not the log's), and a listing's array has a maximum,
 * AUD_FILES_MAX.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kz_conf.h"
#include "audit.h"
#include "banned.h"

void
aud_file_name(unsigned idx, char *out, size_t len)
{
	snprintf(out, len, AUD_FILE_PREFIX "%06u" AUD_FILE_SUFFIX, idx);
}

/* audit-NNNNNN.jsonl -> NNNNNN; 0 when the name is not a log file. */
static unsigned
name_idx(const char *name)
{
	size_t pl = strlen(AUD_FILE_PREFIX), sl = strlen(AUD_FILE_SUFFIX);
	size_t n = strlen(name);
	char digits[16];
	int64_t v;

	if (n < pl + sl + 6 || n > pl + sl + 9 ||
	    strncmp(name, AUD_FILE_PREFIX, pl) != 0 ||
	    strcmp(name + n - sl, AUD_FILE_SUFFIX) != 0)
		return 0;
	memcpy(digits, name + pl, n - pl - sl);
	digits[n - pl - sl] = '\0';
	if (kz_parse_int(digits, 1, 999999999, &v) != 0)
		return 0;
	return (unsigned)v;
}

static int
cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/* Sorted indexes of the log files in dirfd (malloc'd). */
int
aud_list_idx(int dirfd, unsigned **out, size_t *n, char *why, size_t wlen)
{
	unsigned *v = NULL, *nv;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd;

	if ((fd = dup(dirfd)) < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		kz_why(why, wlen, "cannot list the log directory");
		return KZ_ESYS;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		unsigned i = name_idx(de->d_name);

		if (i == 0)
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			if (cap > AUD_FILES_MAX ||
			    (nv = reallocarray(v, cap, sizeof(*v))) == NULL) {
				free(v);
				closedir(d);
				kz_why(why, wlen, "too many log files");
				return KZ_ETOOBIG;
			}
			v = nv;
		}
		v[cnt++] = i;
	}
	closedir(d);
	if (cnt > 0)
		qsort(v, cnt, sizeof(*v), cmp_uint);
	*out = v;
	*n = cnt;
	return 0;
}

int
aud_dir_files(const char *dir, char ***paths, size_t *n, char *why, size_t wlen)
{
	unsigned *idx = NULL;
	char **p = NULL, name[64];
	size_t cnt = 0;
	int dfd, r;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		kz_why(why, wlen, "cannot open the log directory");
		return KZ_ENOENT;
	}
	r = aud_list_idx(dfd, &idx, &cnt, why, wlen);
	close(dfd);
	if (r != 0)
		return r;
	if (cnt > 0 && (p = calloc(cnt, sizeof(*p))) == NULL)
		r = KZ_ENOMEM;
	for (size_t i = 0; r == 0 && i < cnt; i++) {
		aud_file_name(idx[i], name, sizeof(name));
		if (asprintf(&p[i], "%s/%s", dir, name) < 0) {
			p[i] = NULL;
			r = KZ_ENOMEM;
		}
	}
	free(idx);
	if (r != 0) {
		aud_paths_free(p, cnt);
		return r;
	}
	*paths = p;
	*n = cnt;
	return 0;
}

void
aud_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; paths != NULL && i < n; i++)
		free(paths[i]);
	free(paths);
}
