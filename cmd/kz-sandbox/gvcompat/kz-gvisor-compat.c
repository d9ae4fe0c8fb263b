/*
 * kz-gvisor-compat.so: what Debian 12's runsc (20221219) gets wrong for
 * ordinary programs, put right inside the sandbox.  Under
 * SANDBOX_RUNTIME=gvisor the view's /etc/ld.so.preload names it (view.c),
 * so every dynamically linked program the code starts maps it.  It is
 * only code running as the tenant inside gVisor: it makes no system call
 * the program could not make itself, and changes nothing but the two
 * answers below.
 *
 * statx(2) and fstatat(2) with AT_NO_AUTOMOUNT fail there with EINVAL
 * (coreutils' ls -l and stat pass it).  The sandbox has no automount
 * point, so the flag means nothing there: it is cleared and the call made.
 *
 * With the host network (an egress or broker socket), a blocking read(2)
 * or readv(2) of a TCP socket fails with EAGAIN while no byte has arrived,
 * where recv(2) and recvmsg(2) block as they should.  On that answer alone
 * the read is made again as recv or recvmsg with no flags, which is what
 * read and readv are on a socket: a blocking socket waits for data (and
 * a signal interrupts it as it would the read), a non-blocking one
 * answers EAGAIN again, and anything but a socket keeps the first answer.
 * Every other answer costs nothing more.
 *
 * What it cannot reach: a statically linked program, one that makes the
 * system call itself (syscall(2), Go), and glibc's own internal calls,
 * such as stdio reading a socket through fread(3).
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "banned.h"

#define EXPORT __attribute__((visibility("default")))

static void *statx_slot, *fstatat_slot, *fstatat64_slot, *read_slot,
    *__read_chk_slot, *readv_slot;

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
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*read_chk_fn)(int, void *, size_t, size_t);
typedef ssize_t (*readv_fn)(int, const struct iovec *, int);

__attribute__((constructor)) static void
resolve(void)
{
	(void)next(&statx_slot, "statx");
	(void)next(&fstatat_slot, "fstatat");
	(void)next(&fstatat64_slot, "fstatat64");
	(void)next(&read_slot, "read");
	(void)next(&__read_chk_slot, "__read_chk");
	(void)next(&readv_slot, "readv");
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

/* A read that answered EAGAIN, made again as recv (see above). */
static ssize_t
as_recv(int fd, void *buf, size_t len)
{
	ssize_t n = recv(fd, buf, len, 0);

	if (n < 0 && errno == ENOTSOCK)
		errno = EAGAIN;
	return n;
}

EXPORT ssize_t
read(int fd, void *buf, size_t len)
{
	NEXT(read_fn, read);
	ssize_t n = read_next(fd, buf, len);

	return n < 0 && errno == EAGAIN ? as_recv(fd, buf, len) : n;
}

/* What a program built with _FORTIFY_SOURCE calls for read (coreutils'
 * cat, for one); the bound is checked by the next definition first. */
EXPORT ssize_t
__read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	NEXT(read_chk_fn, __read_chk);
	ssize_t n = __read_chk_next(fd, buf, len, buflen);

	return n < 0 && errno == EAGAIN ? as_recv(fd, buf, len) : n;
}

EXPORT ssize_t
readv(int fd, const struct iovec *iov, int iovcnt)
{
	NEXT(readv_fn, readv);
	ssize_t n = readv_next(fd, iov, iovcnt);
	struct msghdr m = {.msg_iov = (struct iovec *)iov,
	    .msg_iovlen = (size_t)(iovcnt < 0 ? 0 : iovcnt)};

	if (n >= 0 || errno != EAGAIN)
		return n;
	if ((n = recvmsg(fd, &m, 0)) < 0 && errno == ENOTSOCK)
		errno = EAGAIN;
	return n;
}
