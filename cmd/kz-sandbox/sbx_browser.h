/*
 * Op browser: what browser.c, browser_bridge.c and browser_stub.c declare
 * for one another and for the op table and the wipe (serve.c, ops.c).
 */
#ifndef SBX_BROWSER_H
#define SBX_BROWSER_H

#include "sbx.h"

/* browser.c: op browser, a Chromium session's bridge (kz-browser(8)). */
/* How long the op waits for a bridge to be ready, and a bridge for its
 * peer to connect. */
#define SBX_BR_ACCEPT_MS 10000
extern const char *const sbx_browser_fields[];
cJSON *sbx_op_browser(struct sbx_worker *w, const cJSON *req);
/* Forks the pre-started bridge (SANDBOX_BROWSER_PRESTART) unless it is
 * off, one is there already, or the worker cannot browse. */
void sbx_browser_prestart(struct sbx_worker *w);
/* "off", "none" (being replaced, or unavailable) or "ready". */
const char *sbx_browser_prestart_state(const struct sbx_worker *w);
/* The wipe's part: ends every bridge (sessions and the pre-started
 * one); true when none of their cgroups is left in any hierarchy. */
bool sbx_browser_wipe(struct sbx_worker *w);
/* browser_bridge.c: the bridge process, forked by the op (ready: the
 * pipe it answers on once its socket listens; grant: the op's, wiped) or
 * pre-started (ctl: its control socket, on which the op's grant comes;
 * grant NULL); n names its cgroup leaf, path its socket.  It never
 * returns. */
__attribute__((noreturn)) void sbx_br_bridge(struct sbx_worker *w, int ready,
    const char *path, char *grant, bool webrtc, unsigned long n, int ctl);
/* browser_stub.c, in a bridge: the session's cgroup leaf n under the
 * worker's (joined; removed once empty), its loopback, and the stub
 * (pid 1 of Chromium's pid namespace; never returns). */
KZ_WUR int sbx_br_cg_join(const struct sbx_worker *w, unsigned long n,
    char leaf[][SBX_CG_PATH]);
void sbx_br_cg_remove(const struct sbx_worker *w, char leaf[][SBX_CG_PATH]);
KZ_WUR int sbx_br_loopback_up(void);
__attribute__((noreturn)) void sbx_br_stub(const struct sbx_worker *w,
    bool webrtc, int mntns, int in, int out);

#endif
