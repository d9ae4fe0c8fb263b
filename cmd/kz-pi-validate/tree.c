/*
 * Fresh exact copies of the authored tree, their removal, and the static
 * resources (skills, prompts, themes) the parent reads itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kz_json.h"
#include "kz_path.h"
#include "kz_tree.h"
#include "pv.h"
#include "banned.h"

/*
 * The parents of rel are made beneath dfd one segment at a time, owned by
 * owner, and the file is created beneath the last of them: a symlink the
 * walk meets is refused, never followed.
 */
static int
copy_one(int srcfd, int dfd, const char *rel, uid_t owner, char *why,
    size_t wlen)
{
	char buf[65536];
	const char *base;
	int in = -1, out = -1, pfd = -1, r;
	ssize_t n;

	if ((r = kz_path_open(srcfd, rel, strlen(rel), KZ_PATH_FILE, &in, why,
	         wlen)) != 0)
		return r;
	if ((r = kz_path_mkparent(dfd, rel, 0755, owner, (gid_t)owner, &pfd,
	         &base, NULL)) != 0)
		goto out;
	out = openat(pfd, base,
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (out < 0 || fchown(out, owner, (gid_t)owner) != 0) {
		r = KZ_ESYS;
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			r = KZ_ESYS;
			goto out;
		}
	if (n < 0)
		r = KZ_ESYS;
out:
	if (r == KZ_ESYS)
		kz_why(why, wlen, "copy: %s", strerror(errno));
	else if (r != 0)
		kz_why(why, wlen, "copy: %s", kz_strerror(r));
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (pfd >= 0)
		close(pfd);
	return r;
}

/*
 * Copies every file of t from srcfd into a new directory name beneath
 * dirfd.  owner is who may write the copy (the test tree belongs to the
 * child's uid; the loader's tree to us, read-only for the child).
 */
int
pv_materialize(int srcfd, const struct pv_tree *t, int dirfd, const char *name,
    uid_t owner, char *why, size_t wlen)
{
	int dfd, r = 0;

	if (mkdirat(dirfd, name, 0755) != 0) {
		kz_why(why, wlen, "cannot make a fresh tree: %s",
		    strerror(errno));
		return KZ_ESYS;
	}
	if ((dfd = openat(dirfd, name,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fchown(dfd, owner, (gid_t)owner) != 0) {
		if (dfd >= 0)
			close(dfd);
		return KZ_ESYS;
	}
	for (size_t i = 0; i < t->n && r == 0; i++)
		r = copy_one(srcfd, dfd, t->paths[i], owner, why, wlen);
	close(dfd);
	return r;
}

/*
 * Gives a tree the child could write to owner, by descriptor only: each
 * directory is opened O_NOFOLLOW beneath its parent's descriptor, so a
 * directory swapped for a symlink is never followed, only chowned itself.
 * A tree deeper than the walk is refused (the child made it, the copy
 * was at most KZ_PATH_DEPTH_MAX deep); kz_tree_remove() takes it away.
 */
static int
chown_at(int pfd, const char *name, int depth, uid_t owner)
{
	struct dirent *e;
	DIR *d;
	int fd, r = 0;

	if (depth > KZ_TREE_DEPTH)
		return KZ_EPATH_LEN;
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fchownat(pfd, name, owner, owner, AT_SYMLINK_NOFOLLOW) ==
		        0 ?
		    0 :
		    KZ_ESYS;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return KZ_ESYS;
	}
	while (r == 0 && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			r = chown_at(dirfd(d), e->d_name, depth + 1, owner);
	if (r == 0 && fchown(dirfd(d), owner, owner) != 0)
		r = KZ_ESYS;
	closedir(d);
	return r;
}

int
pv_chown_tree(const char *path, uid_t owner)
{
	return chown_at(AT_FDCWD, path, 0, owner);
}

/* "name: value" from a leading "---" front matter block, bounded. */
static void
front(const char *buf, const char *key, char *out, size_t olen)
{
	size_t kl = strlen(key);
	const char *p = buf, *end;

	out[0] = '\0';
	if (strncmp(buf, "---\n", 4) != 0)
		return;
	for (p = buf + 4; *p != '\0' && strncmp(p, "---", 3) != 0;) {
		end = strchr(p, '\n');
		if (end == NULL)
			return;
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			const char *v = p + kl + 1;

			while (*v == ' ')
				v++;
			snprintf(out, olen, "%.*s", (int)(end - v), v);
			if (!kz_utf8_valid(out, strlen(out)))
				out[0] = '\0';
			return;
		}
		p = end + 1;
	}
}

static int
read_res(int rootfd, const char *rel, char **buf, char hex[65], char *why,
    size_t wlen)
{
	struct stat st;
	int fd, r;
	ssize_t n;

	if ((r = kz_path_open(rootfd, rel, strlen(rel), KZ_PATH_FILE, &fd, why,
	         wlen)) != 0)
		return r;
	if (fstat(fd, &st) != 0 || st.st_size > 1 << 20 ||
	    (*buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		kz_why(why, wlen, "static resource over 1 MiB");
		return KZ_ETOOBIG;
	}
	n = read(fd, *buf, (size_t)st.st_size);
	close(fd);
	(*buf)[n > 0 ? n : 0] = '\0';
	pv_sha256_hex(*buf, n > 0 ? (size_t)n : 0, hex);
	return 0;
}

static int
add_entry(cJSON *arr, int rootfd, const char *rel, bool theme, char *why,
    size_t wlen)
{
	char hex[65], name[128], desc[PV_DIAG_LEN];
	char *buf = NULL;
	cJSON *e, *t = NULL;
	int r;

	if ((r = read_res(rootfd, rel, &buf, hex, why, wlen)) != 0)
		return r;
	if (theme) {
		/* A theme is strict JSON; the parent parses it, not Pi. */
		r = kz_json_parse_object(buf, strlen(buf), &t, why, wlen);
		name[0] = '\0';
		if (r == 0 && cJSON_IsString(kz_json_get(t, "name")))
			snprintf(name, sizeof(name), "%s",
			    kz_json_get(t, "name")->valuestring);
		desc[0] = '\0';
		cJSON_Delete(t);
	} else {
		front(buf, "name", name, sizeof(name));
		front(buf, "description", desc, sizeof(desc));
	}
	free(buf);
	if (r != 0)
		return r;
	if ((e = cJSON_AddObjectToObject(arr, rel)) == NULL ||
	    cJSON_AddStringToObject(e, "sha256", hex) == NULL ||
	    cJSON_AddStringToObject(e, "name", name) == NULL ||
	    (!theme && cJSON_AddStringToObject(e, "description", desc) == NULL))
		return KZ_ENOMEM;
	return 0;
}

/* A skill directory's SKILL.md files are the ones the tree lists. */
static int
add_skills(cJSON *o, int rootfd, const struct pv_profile *p,
    const struct pv_tree *t, char *why, size_t wlen)
{
	for (size_t i = 0; i < p->nskills; i++) {
		size_t pl = strlen(p->skills[i]);

		for (size_t k = 0; k < t->n; k++) {
			const char *f = t->paths[k], *b = strrchr(f, '/');
			int r;

			if (strncmp(f, p->skills[i], pl) != 0 || f[pl] != '/' ||
			    b == NULL || strcmp(b, "/SKILL.md") != 0)
				continue;
			if ((r = add_entry(o, rootfd, f, false, why, wlen)) !=
			    0)
				return r;
		}
	}
	return 0;
}

int
pv_static_read(int rootfd, const struct pv_profile *p, cJSON *out, char *why,
    size_t wlen)
{
	cJSON *sk, *pr, *th;
	struct pv_tree t;
	int r;

	if ((sk = cJSON_AddObjectToObject(out, "skills")) == NULL ||
	    (pr = cJSON_AddObjectToObject(out, "prompts")) == NULL ||
	    (th = cJSON_AddObjectToObject(out, "themes")) == NULL)
		return KZ_ENOMEM;
	if ((r = pv_tree_scan(rootfd, false, &t, why, wlen)) != 0)
		return r;
	r = add_skills(sk, rootfd, p, &t, why, wlen);
	pv_tree_release(&t);
	for (size_t i = 0; r == 0 && i < p->nprompts; i++)
		r = add_entry(pr, rootfd, p->prompts[i], false, why, wlen);
	for (size_t i = 0; r == 0 && i < p->nthemes; i++)
		r = add_entry(th, rootfd, p->themes[i], true, why, wlen);
	return r;
}
