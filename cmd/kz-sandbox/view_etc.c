/*
 * The /etc of the allowlisted root view (view.c builds the rest of it), on
 * a tmpfs of its own: the synthesized files (their text is view_path.c's),
 * ld.so.preload under gvisor, the os-release link, and the host files of
 * /etc that the code's tools read.  None of them is the host's inode: a
 * directory is shown through an overlay of the worker's own and a file as
 * a copy (sbx_view_ro_layer, sbx_view_copy_at).  A host entry that is
 * missing or not of the type named is left out; anything else that fails
 * refuses the start.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "sbx_view.h"
#include "banned.h"

/*
 * Host files of /etc that the code's tools read, bound read-only where the
 * host has them as the type named (and left out otherwise): the loader's
 * cache, the alternatives that Debian's cc, awk or editor links go through,
 * the CA certificates (links into /usr/share/ca-certificates) and OpenSSL's
 * configuration, and the name tables of libc and Python.
 */
static const struct {
	const char *path;
	mode_t type;
} etc_binds[] = {
    {"ld.so.cache", S_IFREG},
    {"alternatives", S_IFDIR},
    {"ssl/certs", S_IFDIR},
    {"ssl/openssl.cnf", S_IFREG},
    {"protocols", S_IFREG},
    {"services", S_IFREG},
    {"mime.types", S_IFREG},
};

static int
write_at(int dirfd, const char *name, const char *text, size_t n)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0644);
	ssize_t w;

	if (fd < 0)
		return -1;
	w = write(fd, text, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

/*
 * One host file of /etc, where the host has it as the type named: a
 * directory as an overlay of its own, a file copied.  Neither is the
 * host's inode, which an inotify watch would hear every host process and
 * every other worker open (the loader opens ld.so.cache at every start of
 * a dynamic program); see sbx_view_ro_layer.
 */
static int
etc_bind(struct sbx_view_fill *f, int host, int etc, const char *rel,
    mode_t type)
{
	const char *slash = strrchr(rel, '/');
	char dir[64], dst[SBX_PBUF];
	struct stat st;
	int src, r = 0;

	if ((src = sbx_view_open_exact(host, rel, RESOLVE_BENEATH)) < 0)
		return 0;
	if (fstat(src, &st) < 0 || (st.st_mode & S_IFMT) != type)
		goto out;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 0, rel);
	snprintf(dst, sizeof(dst), "%s/etc/%s", f->root, rel);
	if (slash != NULL && mkdirat(etc, dir, 0755) < 0 && errno != EEXIST)
		r = -1;
	else if (type == S_IFREG)
		r = sbx_view_copy_at(src, etc, rel, 0644);
	else if ((r = mkdirat(etc, rel, 0755)) == 0)
		r = sbx_view_ro_layer(f, src, dst);
out:
	close(src);
	return r < 0 ? sbx_view_sys(f, "copy /etc", rel) : 0;
}

static const char *const etc_files[] = {"passwd", "group", "hosts", "hostname",
    "nsswitch.conf", NULL};

/*
 * /etc of the allowlisted view, on a tmpfs of its own: passwd and group
 * name only the sandbox's ids, hosts and hostname only the sandbox's name;
 * no host name, machine-id, resolv.conf, account database or kz config.
 * No localtime: the code's local time is UTC.
 */
int
sbx_view_etc(struct sbx_view_fill *f)
{
	char p[SBX_PBUF], text[512];
	int etcfd = -1, host = -1, n, r = 0;

	snprintf(p, sizeof(p), "%s/etc", f->root);
	if (mkdir(p, 0755) < 0 ||
	    mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	        "size=1m,nr_inodes=64,mode=0755") < 0)
		return sbx_view_sys(f, "tmpfs", "/etc");
	if ((etcfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (host = open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = sbx_view_sys(f, "open", "/etc");
		goto out;
	}
	for (int i = 0; r == 0 && etc_files[i] != NULL; i++)
		if ((n = sbx_view_etc_text(f->c, etc_files[i], text,
		         sizeof(text))) < 0 ||
		    write_at(etcfd, etc_files[i], text, (size_t)n) < 0)
			r = sbx_view_sys(f, "write /etc", etc_files[i]);
	/* Under gvisor, every dynamic program maps the object that puts
	 * right what runsc gets wrong (mount.c binds it; kz-sandbox(8)). */
	if (r == 0 && sbx_gvisor(f->c) &&
	    write_at(etcfd, "ld.so.preload", SBX_GV_COMPAT "\n",
	        sizeof(SBX_GV_COMPAT)) < 0)
		r = sbx_view_sys(f, "write /etc", "ld.so.preload");
	if (r == 0 &&
	    symlinkat("../usr/lib/os-release", etcfd, "os-release") < 0)
		r = sbx_view_sys(f, "symlink", "/etc/os-release");
	for (size_t i = 0;
	     r == 0 && i < sizeof(etc_binds) / sizeof(etc_binds[0]); i++)
		r = etc_bind(f, host, etcfd, etc_binds[i].path,
		    etc_binds[i].type);
out:
	if (etcfd >= 0)
		close(etcfd);
	if (host >= 0)
		close(host);
	return r;
}
