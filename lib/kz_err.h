/*
 * One error enum for all of libkz.  Library functions return 0 or a negative
 * enum kz_err; KZ_ESYS keeps errno as it was.  kz_errname() gives the stable
 * name logs carry in their "err" field, kz_strerror() a one-line description.
 */
#ifndef KZ_ERR_H
#define KZ_ERR_H

#include <stddef.h>

#define KZ_WUR __attribute__((warn_unused_result))

#define KZ_ERRORS(X)                                                           \
	X(KZ_ENOMEM, "out of memory")                                          \
	X(KZ_EINVAL, "invalid argument")                                       \
	X(KZ_ESYS, "system call failed")                                       \
	X(KZ_EPROTO, "protocol error")                                         \
	X(KZ_ETOOBIG, "over the size limit")                                   \
	X(KZ_EFRAME_EMPTY, "zero-length frame")                                \
	X(KZ_EFRAME_TRUNC, "truncated frame")                                  \
	X(KZ_EUTF8, "invalid UTF-8")                                           \
	X(KZ_EJSON, "invalid JSON")                                            \
	X(KZ_ENOTOBJ, "JSON is not an object")                                 \
	X(KZ_EDUPKEY, "duplicate JSON key")                                    \
	X(KZ_EDEPTH, "JSON nested too deeply")                                 \
	X(KZ_ENULCHAR, "NUL character in JSON string")                         \
	X(KZ_EMISSING, "required field missing")                               \
	X(KZ_ETYPE, "field has the wrong type")                                \
	X(KZ_ERANGE, "value out of range")                                     \
	X(KZ_EUNKNOWN, "unknown field")                                        \
	X(KZ_EEOF, "peer closed the connection")                               \
	X(KZ_ETIMEDOUT, "timed out")                                           \
	X(KZ_EDENIED, "denied")                                                \
	X(KZ_EPEER, "peer credentials not allowed")                            \
	X(KZ_EUNAVAIL, "dependency unavailable")                               \
	X(KZ_ECONF, "bad configuration")                                       \
	X(KZ_EKEY, "bad key file")                                             \
	X(KZ_ECRYPTO, "cryptographic check failed")                            \
	X(KZ_ENOENT, "not found")                                              \
	X(KZ_EEXIST, "already exists")                                         \
	X(KZ_ESTATE, "wrong state")                                            \
	X(KZ_EPATH_EMPTY, "path is empty")                                     \
	X(KZ_EPATH_ABSOLUTE, "path is absolute")                               \
	X(KZ_EPATH_DOTDOT, "path has a '..' segment")                          \
	X(KZ_EPATH_DOT, "path has a '.' segment")                              \
	X(KZ_EPATH_EMPTYSEG, "path has an empty segment")                      \
	X(KZ_EPATH_CTRL, "path has a control character")                       \
	X(KZ_EPATH_NUL, "path has an embedded NUL")                            \
	X(KZ_EPATH_BACKSLASH, "path has a backslash")                          \
	X(KZ_EPATH_SEGLEN, "path segment too long")                            \
	X(KZ_EPATH_LEN, "path too long")                                       \
	X(KZ_EPATH_UTF8, "path is not valid UTF-8")                            \
	X(KZ_EPATH_SYMLINK, "path crosses a symlink")                          \
	X(KZ_EPATH_ESCAPE, "path resolves outside the root")                   \
	X(KZ_EPATH_XDEV, "path crosses a mount point")                         \
	X(KZ_EPATH_NOTREG, "not a regular file")                               \
	X(KZ_EPATH_NOTDIR, "not a directory")                                  \
	X(KZ_EPATH_FIFO, "path is a fifo")                                     \
	X(KZ_EPATH_DEVICE, "path is a device node")                            \
	X(KZ_EPATH_NLINK, "unexpected hard link count")                        \
	X(KZ_EPATH_NOENT, "path does not exist")                               \
	X(KZ_EINTERNAL, "internal error")                                      \
	X(KZ_ENOSPC, "does not fit in the buffer")

enum kz_err {
	KZ_OK = 0,
	KZ_ERR_BASE_ = -1000,
#define KZ_ERR_ENUM(name, text) name,
	KZ_ERRORS(KZ_ERR_ENUM)
#undef KZ_ERR_ENUM
	    KZ_ERR_END_
};

/* Stable name, e.g. "KZ_ETOOBIG"; "KZ_OK" for 0; "KZ_E?" if unknown. */
const char *kz_errname(int err);
/* One line for a human; for KZ_ESYS it does not include errno's text. */
const char *kz_strerror(int err);

/* Copies a formatted one-line reason into why (if why is non-NULL). */
void kz_why(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
