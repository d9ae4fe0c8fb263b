/*
 * Readiness for a service manager: systemd's notification protocol, one
 * datagram of "KEY=VALUE\n" lines to the AF_UNIX socket named by
 * NOTIFY_SOCKET (sd_notify(3)).  Without NOTIFY_SOCKET every call is a
 * successful no-op, so a daemon run by hand, by kz-supervise or by a test
 * is unaffected.
 *
 * The first call reads NOTIFY_SOCKET and removes it from the environment:
 * children started later (kz-lease's workers) must not speak for this
 * daemon.  Make it before starting children, or threads that read the
 * environment.  Calls come from one thread.
 */
#ifndef KZ_NOTIFY_H
#define KZ_NOTIFY_H

#include "kz_err.h"

/* The longest STATUS= text sent; longer text is cut. */
#define KZ_NOTIFY_STATUS_MAX 200

/* READY=1 with STATUS=status (status may be NULL). */
int kz_notify_ready(const char *status);
/* STATUS=text: one line for `systemctl status` (newlines become spaces). */
int kz_notify_status(const char *text);
/* STOPPING=1: the daemon has begun to shut down. */
int kz_notify_stopping(void);

/* Whether a service manager is listening (NOTIFY_SOCKET was set). */
int kz_notify_enabled(void);

#endif
