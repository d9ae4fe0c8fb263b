/*
 * kz-gvisor-compat.so: what Debian 12's runsc (20221219) gets wrong for
 * ordinary programs, put right inside the sandbox.  Under
 * SANDBOX_RUNTIME=gvisor the view's /etc/ld.so.preload names it (view.c),
 * so every dynamically linked program the code starts maps it.  It is
 * only code running as the tenant inside gVisor: it makes no system call
 * the program could not make itself, and changes nothing but the answer
 * below.
 *
 * statx(2) and fstatat(2) with AT_NO_AUTOMOUNT fail there with EINVAL
 * (coreutils' ls -l and stat pass it).  The sandbox has no automount
 * point, so the flag means nothing there: it is cleared and the call made.
 *
 * It also wrapped read(2), __read_chk and readv(2): with runsc's host
 * network (--network=host, which kz-sandbox used with an egress or broker
 * socket) a blocking read of a TCP socket failed with EAGAIN while no byte
 * had arrived.  The code now always has gVisor's own network stack, whose
 * sockets wait as they should (t1120 reads the relay's answer with cat and
 * readv), so those wrappers are gone.
 *
 * What it cannot reach: a statically linked program, one that makes the
 * system call itself (syscall(2), Go), and glibc's own internal calls.
 *
 * It links nothing but libc and does not use libkz (which is built for
 * executables, -fPIE).  The next definition of each function is found
 * with dlsym(RTLD_NEXT) when the object is loaded, so that no later call
 * (from a signal handler, say) takes the loader's lock; a library whose
 * constructor runs first finds it at its first call.  banned.h is
 * included as everywhere: it is only macros.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "banned.h"

#define EXPORT __attribute__((visibility("default")))

static void *statx_slot, *fstatat_slot, *fstatat64_slot;

/*
 * The next definition of name, looked up once.  Two threads may race to
 * look it up: both find the same address.
 */
static void *
next(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_RELAXED);

	if (f == NULL) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELAXED);
	}
	return f;
}

#define NEXT(type, name)                                                       \
	type name##_next = (type)next(&name##_slot, #name);                    \
	if (name##_next == NULL) {                                             \
		errno = ENOSYS;                                                \
		return -1;                                                     \
	}

typedef int (*statx_fn)(int, const char *, int, unsigned int, struct statx *);
typedef int (*fstatat_fn)(int, const char *, struct stat *, int);
typedef int (*fstatat64_fn)(int, const char *, struct stat64 *, int);

__attribute__((constructor)) static void
resolve(void)
{
	(void)next(&statx_slot, "statx");
	(void)next(&fstatat_slot, "fstatat");
	(void)next(&fstatat64_slot, "fstatat64");
}

EXPORT int
statx(int dirfd, const char *path, int flags, unsigned int mask,
    struct statx *buf)
{
	NEXT(statx_fn, statx);
	return statx_next(dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

EXPORT int
fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
	NEXT(fstatat_fn, fstatat);
	return fstatat_next(dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}

/* The same function under the name of the large-file interface (one
 * struct on 64-bit systems, where _FILE_OFFSET_BITS changes nothing). */
EXPORT int
fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags)
{
	NEXT(fstatat64_fn, fstatat64);
	return fstatat64_next(dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}
