/*
 * The host's processes, as /proc lists them: the pids a predicate picks,
 * and the live processes of one uid.  A uid is "live" on the host while a
 * process that is not a zombie holds it as its real, effective, saved or
 * filesystem user id: the kernel then still counts that process against
 * the uid's per-user limits.  Reads /proc only; no state.
 */
#ifndef KZ_PROC_H
#define KZ_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Every process in /proc for which match(pid, arg) holds, at most max of
 * them, their pids in out (NULL: only counted); the number, or -1 when
 * /proc cannot be read.
 */
int kz_proc_pids(bool (*match)(pid_t, const void *), const void *arg,
    pid_t *out, int max);

/* The live processes of uid, at most max of them counted; -1 when /proc
 * cannot be read (a caller asking whether a uid is free treats that as
 * not free). */
int kz_proc_uid_live(int64_t uid, int max);

#endif
