/*
 * kz-sandbox internals: one module per kernel concern (conf, cgroup, ns,
 * mount, view, seccomp, caps, rlimit, env, relay, run, msg, serve, ops;
 * classification is libkz's).  Module functions return 0 or a negative
 * kz_err and fill (why, wlen) with a line that names the failed step; they
 * never print or exit.  The root view's contents, the gVisor runtime and
 * op browser have headers of their own (sbx_view.h, sbx_gvisor.h,
 * sbx_browser.h), which include this one.
 */
#ifndef SBX_H
#define SBX_H

#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/filter.h>

#include "kz_err.h"
#include "kz_exit.h"
#include "kz_sock.h"

#define SBX_ID_MAX 63
#define SBX_ARGV_MAX 256
#define SBX_ENV_MAX 128
#define SBX_ENV_BYTES (64 * 1024)
/* The request's variables and, after them, the fixed safe set, the proxy
 * variables and the package-broker settings (env.c). */
#define SBX_ENV_SLOTS (SBX_ENV_MAX + 24)
/* A package-broker token (kz-pkgbroker's, base64url and '.'). */
#define SBX_BROKER_TOKEN_MAX 512
/* npm's configuration for the run's broker (env.c), written by the code
 * process before it drops its capabilities (init_code.c). */
#define SBX_NPMRC "/tmp/.kz-broker.npmrc"
#define SBX_NPMRC_MAX (SBX_BROKER_TOKEN_MAX + 128)
#define SBX_ARG_BYTES (256 * 1024)
#define SBX_MASK_MAX 32
#define SBX_PBUF (PATH_MAX * 2)
#define SBX_PASS_MAX 8
#define SBX_PRESTART_AFTER_MS 2000
#define SBX_RESET_NICE 10 /* the reset's priority (nice) */
#define SBX_WS "/workspace"
#define SBX_PROJ "/projection"
/* Pseudo-terminals one lease may hold at once (its devpts max=). */
#define SBX_PTY_MAX "64"

struct sbx_conf {
	char id[SBX_ID_MAX + 1];
	char root[PATH_MAX];
	char projection[PATH_MAX];
	char egress_sock[108];
	char broker_sock[108]; /* kz-pkgbroker's socket (forward.c) */
	char state_dir[PATH_MAX];
	char cg_parent[128];
	char cg_root[256];
	char cg_version[8]; /* auto, v1 or v2 */
	char masks[4096];
	char extra_ro[4096];
	char hostname[64];
	char runtime[8]; /* native or gvisor */
	char gv_platform[16];
	char runsc[PATH_MAX];
	char archiver[PATH_MAX]; /* "": beside the binary (snapshot.c) */
	char gv_compat[PATH_MAX]; /* "": beside the binary (mount.c) */
	char gv_loader[PATH_MAX]; /* "": beside the binary (mount.c) */
	char sock[108];
	char run_dir[PATH_MAX];
	char peer_uids[1024];
	char peer_gids[1024];
	uint64_t ws_size, tmp_size, shm_size, memory, fsize;
	uint64_t stdout_max, stderr_max, frame_max, snapshot_max;
	uint64_t msgqueue, io_rbps, io_wbps, clean_memory;
	int64_t uid, gid, pids, cpu_milli, nofile, timeout_s, relay_port;
	int64_t broker_port;
	int64_t sigpending, leases_max;
	int64_t io_timeout_ms;
	int64_t userns; /* 0 or 1 */
	int64_t userns_uid, userns_gid; /* host ids of uid and gid */
	/* browser.c's: SANDBOX_BROWSER_* */
	char browser_bin[PATH_MAX];
	uint64_t browser_memory, browser_tmp;
	int64_t browser_pids, browser_cpu_milli;
	int64_t browser_prestart; /* 0 or 1 */
	int64_t gv_preboot; /* 0 or 1: boot the next lease's sandbox early */
	/* runsc's host ids under gvisor (ns.c); 0: the host's root. */
	int64_t gv_uid, gv_gid;
};

/* conf.c */
void sbx_conf_defaults(struct sbx_conf *c);
/* Loads file (NULL: none) and environment over the defaults. */
KZ_WUR int sbx_conf_load(struct sbx_conf *c, const char *path, char *why,
    size_t wlen);
/* Sets one value by command-line option name (without "--"); KZ_ENOENT if
 * the option is not a config option. */
KZ_WUR int sbx_conf_opt(struct sbx_conf *c, const char *opt, const char *val,
    char *why, size_t wlen);
/* Cross-field checks (uid/gid never 0, sizes sane). */
KZ_WUR int sbx_conf_check(const struct sbx_conf *c, char *why, size_t wlen);
/* The option table, for --help. */
void sbx_conf_usage(void *fp);

/* reap.c: what the memory cgroup charges at least for an open file (a
 * struct file) and for a mapping (a vm_area_struct): the slab objects of
 * Linux 6.x on x86-64, 192 bytes and up. */
#define SBX_FILE_BYTES 192
#define SBX_VMA_BYTES 192
/* Kills what is left in worker c->id's cgroups and removes them. */
KZ_WUR int sbx_reap(const struct sbx_conf *c, char *why, size_t wlen);
/* The open files one run under c can hold at most. */
uint64_t sbx_files_bound(const struct sbx_conf *c);
KZ_WUR bool sbx_id_valid(const char *id);

/* cgroup.c: the worker's cgroup (the agent) and its run child (the code);
 * each version's controller files, limits and kill are in cgroup_v1.c and
 * cgroup_v2.c (cgroup.h between them).
 * v1 hierarchies, in order; blkio (last) only when I/O limits apply. */
enum { SBX_CG_MEM, SBX_CG_PIDS, SBX_CG_CPU, SBX_CG_FRZ, SBX_CG_IO, SBX_CG_N };
/* Room for root (255), controller, parent (127), id (63) and a leaf, with
 * no PATH_MAX arrays: the worker state is cleared at every start, and each
 * page it spans is a page fault. */
#define SBX_CG_PATH 512
struct sbx_cg {
	bool v2;
	int n; /* hierarchies in use: 1 on v2 */
	char io[24]; /* MAJOR:MINOR under the I/O limit */
	char root[256]; /* SANDBOX_CGROUP_ROOT */
	char worker[SBX_CG_N][SBX_CG_PATH]; /* .../<parent>/<id> */
	char run[SBX_CG_N][SBX_CG_PATH]; /* .../<parent>/<id>/run */
	char init[SBX_CG_N][SBX_CG_PATH]; /* .../<parent>/<id>/init */
	char orig[SBX_CG_N][SBX_CG_PATH]; /* agent's cgroup before */
	char agent[SBX_CG_PATH]; /* where the agent sits (v2: a leaf) */
	int procs_fd[SBX_CG_N]; /* run/tasks (v1), run/cgroup.procs (v2) */
	/* The agent's per-run reads and writes go through descriptors
	 * opened once (pread at 0), not a path walk each time. */
	int peak_fd, oom_fd, pev_fd, count_fd;
	bool joined, made;
};
struct sbx_cg_stats {
	uint64_t peak, oom_kills, pids_max_hits;
};
void sbx_cg_init(struct sbx_cg *g);
KZ_WUR int sbx_cg_setup(struct sbx_cg *g, const struct sbx_conf *c, bool join,
    char *why, size_t wlen);
KZ_WUR int sbx_cg_attach(const struct sbx_cg *g, pid_t pid);
KZ_WUR int sbx_cg_attach_init(const struct sbx_cg *g, pid_t pid);
void sbx_cg_stats(const struct sbx_cg *g, struct sbx_cg_stats *st);
void sbx_cg_reset_peak(const struct sbx_cg *g);
/* Kills every process in the run cgroup; returns the number left (0). */
int sbx_cg_kill_run(const struct sbx_cg *g);
/* Number of processes in the run cgroup and whether the worker cgroup
 * holds exactly pid. */
int sbx_cg_count_run(const struct sbx_cg *g);
/* After a tenant: reclaims what the empty run cgroup is still charged for
 * and waits (up to wait_ms) until its memory usage is at most max;
 * *usage is the last reading (UINT64_MAX when it cannot be read). */
bool sbx_cg_settle(const struct sbx_cg *g, uint64_t max, int wait_ms,
    uint64_t *usage);
bool sbx_cg_only(const struct sbx_cg *g, pid_t pid);
void sbx_cg_close_stats(struct sbx_cg *g);
void sbx_cg_teardown(struct sbx_cg *g);
const char *sbx_cg_relpath(const struct sbx_conf *c, char *buf, size_t len);

/* ns.c: the agent leaves its network, IPC and UTS namespaces for new ones
 * (the init joins them), names the host and brings up the loopback; the
 * code's user namespace, its id maps and setgroups. */
#define SBX_NS_WORKER (CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
KZ_WUR int sbx_ns_enter_worker(const struct sbx_conf *c, char *why,
    size_t wlen);
pid_t sbx_clone(unsigned long flags, int *pidfd);
/* The code's user namespace (SANDBOX_USERNS=on), made once by the init:
 * *nsfd holds it, mapped to the sandbox uid and gid alone; under gvisor,
 * runsc's (root as SANDBOX_GVISOR_UID/GID, and its nobody as the sandbox
 * ids). */
KZ_WUR int sbx_ns_userns_make(const struct sbx_conf *c, int *nsfd, char *why,
    size_t wlen);
/* In a code process: drops the supplementary groups, enters it; -1. */
KZ_WUR int sbx_ns_userns_enter(int nsfd);
/* The namespaces of a run init, by kind: the kernel's 64-bit id where it
 * has one (0: none) and the nsfs inode number. */
enum { SBX_NS_PID, SBX_NS_MNT, SBX_NS_NET, SBX_NS_IPC, SBX_NS_UTS, SBX_NS_N };
struct sbx_nsid {
	uint64_t id[SBX_NS_N];
	uint64_t ino[SBX_NS_N];
};
KZ_WUR int sbx_ns_ids(pid_t pid, struct sbx_nsid *out);
/* Whether cur holds only namespaces no earlier lease had: prev is the
 * previous lease's (alive when cur was made), hist the n kernel ids of
 * every earlier lease. */
bool sbx_ns_new(const struct sbx_nsid *cur, const struct sbx_nsid *prev,
    const uint64_t *hist, size_t n);

/*
 * mount.c: the root view, assembled under stage in the run init's own
 * mount namespace: the view itself on a tmpfs at stage/root (the code's
 * root), the projection's source beside it where the code cannot see it.
 */
struct sbx_mnt {
	char stage[PATH_MAX];
	char *baseline; /* normalized mount table of the view */
	bool made_dir;
};
KZ_WUR int sbx_mnt_build(struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen);
/* sbx_mnt_build in two halves: what every lease of a worker shares, read
 * only (built once, in the worker's template mount namespace), and what
 * each lease gets fresh (in a copy of that namespace). */
/* The file at set, or when set is "" at rel from this binary's directory
 * (../libexec/kaizen/..., where make install puts kz-sandbox's own), in
 * p; -1 with errno when there is no such path. */
KZ_WUR int sbx_beside(const char *set, const char *rel, char *p, size_t len);
KZ_WUR int sbx_mnt_base(struct sbx_mnt *m, const struct sbx_conf *c, char *why,
    size_t wlen);
KZ_WUR int sbx_mnt_lease(const struct sbx_mnt *m, const struct sbx_conf *c,
    char *why, size_t wlen);
/* In a run's init (new mount and pid namespaces): pivot into the stage,
 * confine to the view and mount a fresh /proc. */
KZ_WUR int sbx_mnt_enter(const struct sbx_mnt *m, char *why, size_t wlen);
/* Records the mount table of the view as the baseline. */
KZ_WUR int sbx_mnt_record(struct sbx_mnt *m);
/* Positive evidence: the three writable places are empty, the table
 * equals the baseline. */
bool sbx_mnt_empty(const struct sbx_mnt *m, const char *rel);
bool sbx_mnt_baseline_ok(const struct sbx_mnt *m);
void sbx_mnt_release(struct sbx_mnt *m);
/* Normalizes mountinfo text to the entries under prefix (for tests). */
char *sbx_mnt_normalize(const char *mountinfo, const char *prefix);

/* seccomp.c: the allowlist filter, compiled with libseccomp.  Compiling
 * fails, naming the call, when libseccomp cannot resolve a listed name on
 * this architecture.  rtnl compiles the browser variant: the same filter
 * that also allows socket(AF_NETLINK, SOCK_RAW or SOCK_DGRAM,
 * NETLINK_ROUTE), for the Chromium of a session with WebRTC only, never
 * for a run's code.  Only the build (gen/filter_gen.c), `kz-sandbox
 * seccomp` and the tests compile; everything that loads a filter takes
 * sbx_seccomp_build's. */
KZ_WUR int sbx_seccomp_compile(struct sock_fprog *out, bool rtnl, char *why,
    size_t wlen);
/* filter.c: a copy of the program compiled at build time (the variant
 * with rtnl), in *out (sbx_seccomp_free frees it). */
KZ_WUR int sbx_seccomp_build(struct sock_fprog *out, bool rtnl, char *why,
    size_t wlen);
/* Sets *nr to name's number on the native architecture; KZ_EUNAVAIL,
 * naming the call in why, when libseccomp has none. */
KZ_WUR int sbx_seccomp_resolve(const char *name, int *nr, char *why,
    size_t wlen);
/* Prints the policy to fp (a FILE *), one call a line:
 * "allow|args|refuse NR NAME DETAIL". */
KZ_WUR int sbx_seccomp_list(void *fp, char *why, size_t wlen);
/* Loads a compiled filter (no_new_privs first); code_enter.c. */
KZ_WUR int sbx_seccomp_load(const struct sock_fprog *prog);
void sbx_seccomp_free(struct sock_fprog *prog);

/* caps.c: securebits, uid/gid switch, every capability set emptied.
 * sbx_caps_bound empties the bounding and ambient sets of the agent once,
 * which every run init and code process inherits; sbx_caps_drop (in each
 * code process) then fails closed unless all five sets are empty. */
KZ_WUR int sbx_caps_bound(char *why, size_t wlen);
KZ_WUR int sbx_caps_drop(uid_t uid, gid_t gid, bool userns, char *why,
    size_t wlen);

/* rlimit.c */
KZ_WUR int sbx_rlimit_apply(const struct sbx_conf *c, char *why, size_t wlen);

/* env.c */
struct sbx_env {
	char *v[SBX_ENV_SLOTS + 1];
	size_t n;
	size_t bytes;
};
void sbx_env_init(struct sbx_env *e);
/* Adds NAME=VALUE after checking the name; KZ_EINVAL/KZ_ETOOBIG. */
KZ_WUR int sbx_env_add(struct sbx_env *e, const char *name, const char *value,
    char *why, size_t wlen);
/* Adds the fixed safe set (and proxy variables when port > 0) for the
 * names the request did not set. */
KZ_WUR int sbx_env_finish(struct sbx_env *e, int proxy_port, char *why,
    size_t wlen);
/* The run's package-broker settings (npm and pip, through the forward on
 * PORT, with the run's TOKEN) for the names the request did not set;
 * npmrc (SBX_NPMRC_MAX) gets the content of SBX_NPMRC. */
KZ_WUR int sbx_env_broker(struct sbx_env *e, int port, const char *token,
    char *npmrc, char *why, size_t wlen);
/* A token fit for those settings: 1..SBX_BROKER_TOKEN_MAX of base64url
 * and '.'. */
KZ_WUR bool sbx_broker_token_ok(const char *token);
void sbx_env_release(struct sbx_env *e);
KZ_WUR bool sbx_env_name_ok(const char *name);

/* relay.c */
#define SBX_RELAY_HEAD_MAX (16 * 1024)
/* Copies both ways between two connected sockets until both sides are
 * done or the link idles for 5 minutes: the relay's and the broker
 * forward's connections alike. */
void sbx_pump(int a, int b);
/* Rewrites one proxy request head: keeps the request line (CONNECT or an
 * absolute-form URL), drops every client Proxy-Authorization, adds the
 * grant.  KZ_EPROTO for anything else. */
KZ_WUR int sbx_relay_head(const char *in, size_t inlen, const char *grant,
    char *out, size_t outcap, size_t *outlen);
KZ_WUR int sbx_relay_listen(const struct sbx_conf *c, int port, int *fd,
    char *why, size_t wlen);
/* netif.c: the browser's one interface besides loopback, which WebRTC
 * needs to gather at all; it routes nowhere. */
KZ_WUR int sbx_webrtc_if(char *why, size_t wlen);
/* Forks the relay for one run; returns its pid (the caller kills it). */
pid_t sbx_relay_start(int lfd, const char *egress_sock, const char *grant);

/* forward.c: the run's broker forward, binding each of its connections
 * to the run with the run's token; 0 when none is configured or the run
 * has no token, -1 with why when it cannot listen, else its pid for
 * sbx_forward_stop. */
pid_t sbx_forward_start(const struct sbx_conf *c, const char *token, char *why,
    size_t wlen);
/* The host uid the code runs as (the user namespace's host uid when it
 * has one), which the forward presents to the broker: "broker_uid" of
 * health, what kz-run binds the run's token to. */
uid_t sbx_host_uid(const struct sbx_conf *c);
void sbx_forward_stop(pid_t pid);

/* run.c */
struct sbx_worker {
	struct sbx_conf *c;
	struct sbx_cg cg;
	struct sbx_mnt mnt;
	struct sock_fprog prog;
	/* Served: the browser variant (sbx_seccomp_build's rtnl), compiled
	 * at the first session that asks for WebRTC and held by the agent
	 * alone; the init and the code never get it. */
	struct sock_fprog prog_rtc;
	int zsock; /* to the run namespace's init */
	pid_t zpid;
	int zpidfd;
	int userns_fd; /* in the init: the code's user namespace */
	int tmpl_fd; /* served: the template mount namespace */
	int tar_fd; /* served, native: the snapshot archiver (O_PATH) */
	unsigned char *obuf[2]; /* output buffers reused across runs */
	size_t ocap[2];
	uint64_t generation;
	/* BLAKE2b of the archive restored in this lease (snapshot.c), so a
	 * save of an unchanged workspace need not be written again. */
	unsigned char restored[32];
	bool restored_ok;
	struct sbx_nsid ns_cur; /* this lease's namespaces */
	uint64_t *ns_hist; /* every lease's kernel ids */
	size_t ns_n, ns_cap;
	int64_t leases; /* run namespaces made so far */
	bool serve, broken;
	/* SANDBOX_BROWSER_PRESTART: a clean wipe arms a pre-start, the
	 * reset's health (its last item) makes it due at once, a session
	 * that took the pre-started bridge makes a replacement due
	 * SBX_PRESTART_AFTER_MS later (so that it does not start beside
	 * the session's first page); the agent forks it between requests
	 * at prestart_at (kz_now_ms; 0: none due). */
	bool prestart_armed;
	int64_t prestart_at;
	bool gv_dir; /* made <state>/<id>.runsc */
};
struct sbx_req {
	char **argv; /* NULL-terminated */
	struct sbx_env env;
	const char *cwd; /* relative to the workspace; NULL = top */
	const unsigned char *stdin_buf;
	size_t stdin_len;
	int stdin_fd; /* one-shot: stream from this fd; else -1 */
	int out_fd[2]; /* one-shot: stream to these fds; else -1 */
	int64_t timeout_ms;
	uint64_t out_max[2];
	char *grant; /* wiped after the relay has it */
	char npmrc[SBX_NPMRC_MAX]; /* SBX_NPMRC's content; "": none */
	/* The run's broker token, which its forward binds each connection
	 * to the run with (forward.c); "": the run has none, and no
	 * forward.  Wiped once the forward has it. */
	char broker_token[SBX_BROKER_TOKEN_MAX + 1];
	int pass_fd[SBX_PASS_MAX]; /* one-shot: the caller's descriptors
	                            * the code gets at the same numbers */
	int npass;
	/* What listens on the sandbox loopback for this run: SBX_NET_*
	 * (run.c sets it; under gvisor the loader listens for the same). */
	int net;
};
#define SBX_NET_RELAY 1 /* the egress relay (a grant) */
#define SBX_NET_BROKER 2 /* the broker forward (a token) */
struct sbx_res {
	bool setup_failed;
	char step[64];
	char why[256];
	bool exited;
	int code, sig;
	const char *limit; /* NULL, "timeout", "memory", "pids", "output" */
	unsigned char *buf[2];
	bool lent[2]; /* buf is the worker's, not to be freed */
	size_t len[2];
	bool trunc[2];
	int64_t wall_ms, cpu_ms;
	uint64_t peak;
	int leftovers;
};
KZ_WUR int sbx_worker_init(struct sbx_worker *w, struct sbx_conf *c, bool serve,
    char *why, size_t wlen);
void sbx_worker_release(struct sbx_worker *w);
#include <signal.h>
extern volatile sig_atomic_t sbx_interrupted;
KZ_WUR int sbx_run(struct sbx_worker *w, struct sbx_req *rq,
    struct sbx_res *rs);
void sbx_res_release(struct sbx_res *rs);
/* check.c: what the next tenant will find, checked by the run init from
 * inside its namespaces (sbx_check). */
#define SBX_CHK_WS 1 /* /workspace lists nothing */
#define SBX_CHK_TMP 2 /* /tmp */
#define SBX_CHK_SHM 4 /* /dev/shm */
#define SBX_CHK_MOUNTS 8 /* the mount table equals the baseline */
#define SBX_CHK_SYSV 16 /* no SysV shm, msg or sem object */
#define SBX_CHK_MQUEUE 32 /* no POSIX message queue */
#define SBX_CHK_DONE 64 /* every check ran */
KZ_WUR int sbx_check(struct sbx_worker *w, unsigned *bits);
/* check.c, in the run init: runs the checks and reports the bits on sock
 * (REP_CHECKED). */
void sbx_check_here(const struct sbx_mnt *zm, int sock);
/*
 * The next tenant's run namespace, made during the reset: a new init in
 * new pid and mount namespaces (a new root view, fresh tmpfs instances)
 * joined to new network, IPC and UTS namespaces; then the previous init,
 * the last process of the previous tenant's namespaces, is killed and
 * reaped (*gone: it was, in time).  *fresh: every namespace of the new
 * init is one no earlier lease had.  A failure leaves the worker broken.
 */
KZ_WUR int sbx_worker_refresh(struct sbx_worker *w, bool *gone, bool *fresh,
    char *why, size_t wlen);

/* snapshot.c: ops snapshot and restore (an archiver runs inside the
 * sandbox). */
#include <cJSON.h>
/* A served native worker's archiver, opened once at start (w->tar_fd);
 * KZ_EUNAVAIL with why naming the path when it is not an executable
 * regular file.  Under gvisor the sandbox's own /bin/tar archives. */
KZ_WUR int sbx_snapshot_open(struct sbx_worker *w, char *why, size_t wlen);
/* The fields each op takes besides v, op and id (serve.c's op table
 * checks them before the op runs). */
extern const char *const sbx_snapshot_fields[];
extern const char *const sbx_restore_fields[];
cJSON *sbx_op_snapshot(struct sbx_worker *w, const cJSON *req);
cJSON *sbx_op_restore(struct sbx_worker *w, const cJSON *req);

/* msg.c: the agent <-> run init messages (run.c and init.c send and take
 * them). */
#define ZMSG_MAX (SBX_ARG_BYTES + SBX_ENV_BYTES + 8192)
#define ZFDS 4 /* stdin, stdout, stderr, report */

enum { REP_FAIL = 1, REP_DONE = 2, REP_READY = 3, REP_CHECKED = 4 };
struct report {
	int kind;
	int status;
	int64_t cpu_ms;
	int leftovers; /* under gvisor, served: processes killed inside */
	char step[64];
	char why[192];
};
/* One run's job as the init takes it: pointers into the message. */
struct sbx_job {
	char *argv[SBX_ARGV_MAX + 1];
	char *env[SBX_ENV_SLOTS + 1];
	const char *cwd;
	int fd[ZFDS + SBX_PASS_MAX]; /* stdin, stdout, stderr, report,
	                              * then the passed descriptors */
	int target[SBX_PASS_MAX]; /* their numbers in the code */
	int npass;
	const char *npmrc; /* "": none */
	int net; /* SBX_NET_*: what listens on the loopback for the run */
	size_t len; /* the whole message's, as it came */
};
/* The setup's descriptors: the agent's pidfd and at most one run cgroup
 * file per hierarchy. */
#define SBX_SETUP_FDS (1 + SBX_CG_N)

/* A report's cpu_ms: the user and system time of a reaped process. */
struct rusage;
int64_t sbx_cpu_ms(const struct rusage *ru);
/* A report to the agent (or, from a code process, to its report pipe). */
void sbx_msg_report(int fd, int kind, int status, const char *step,
    const char *why);
/* The agent's setup: true when the whole message was sent. */
bool sbx_msg_setup_send(int sock, const struct sock_fprog *prog, int self,
    const int *cgfd, int ncg);
/* The init's side: 0 with the descriptors (the pidfd first), their number
 * and the filter (malloc'd); -1 for a malformed message (nothing kept
 * open), -2 when the agent is gone. */
KZ_WUR int sbx_msg_setup_take(int sock, char *buf, size_t cap,
    int fds[SBX_SETUP_FDS], int *nfd, struct sock_fprog *prog);
/* A run's job; KZ_ETOOBIG when it does not fit one message. */
KZ_WUR int sbx_msg_job_send(int sock, const struct sbx_req *rq,
    const int fds[ZFDS]);
/* Asks the init to check what the next tenant will find (sbx_check). */
KZ_WUR int sbx_msg_check_send(int sock);
/* Asks the init to boot its gVisor sandbox now, if it has none. */
KZ_WUR int sbx_msg_boot_send(int sock);
/* The init's next message: 0 a job (its descriptors open), 1 a check, 2
 * a boot, -1 malformed (nothing kept open), -2 the agent is gone. */
KZ_WUR int sbx_msg_take(int sock, char *buf, size_t cap, struct sbx_job *j);
/* Splits a job message's bytes into j (j->npass already set); -1. */
KZ_WUR int sbx_msg_unpack(char *b, size_t n, struct sbx_job *j);
/* One message of len bytes on sock with nfd descriptors beside it
 * (0 to ZFDS + SBX_PASS_MAX); 0 when all of it went. */
KZ_WUR int sbx_msg_send_fds(int sock, const void *buf, size_t len,
    const int *fds, int nfd);
/* One message into buf (flags for recvmsg beside MSG_CMSG_CLOEXEC) and
 * the descriptor beside it in *fd (-1: none): recvmsg's answer, or -1
 * for a message cut short or with more than one descriptor (none kept). */
ssize_t sbx_msg_recv_fd(int sock, void *buf, size_t len, int flags, int *fd);

/* init.c: the run namespace's init, as the agent starts it. */
/* Clones the init, which starts building the root view at once (a served
 * worker's init copies it from the template). */
KZ_WUR int sbx_init_start(struct sbx_worker *w, char *why, size_t wlen);
/* A served worker's template mount namespace (w->tmpl_fd): the root view
 * less what each lease gets fresh, built once by a short-lived child and
 * never entered by code; every lease's init runs in a copy of it. */
KZ_WUR int sbx_template_make(struct sbx_worker *w, char *why, size_t wlen);
/* Hands the init the seccomp filter, the run cgroup's descriptors and a
 * pidfd of the agent (whose network, IPC and UTS namespaces it joins) and
 * waits until it is ready (or has failed, with its reason). */
KZ_WUR int sbx_init_go(struct sbx_worker *w, char *why, size_t wlen);
/* init_code.c: the code process the init starts for each job. */
/* In the init: starts the code of one job on stack (under gvisor, runsc
 * for the sandbox); its pid or -1. */
pid_t sbx_init_spawn(struct sbx_worker *w, struct sbx_job *j, char *stack);

/* code_enter.c: the code process's last steps, for the native init and
 * the gVisor loader alike (libc only). */
/* j's descriptors where the code gets them (stdio on 0-2, the passed ones
 * at their numbers, nothing else open) and *rep, the report pipe, high
 * and close-on-exec; -1. */
KZ_WUR int sbx_place_fds(struct sbx_job *j, int *rep);
/* Into the job's directory in the workspace, the filter, the job's
 * environment, exec; a step that fails is reported on rep ("cwd",
 * "seccomp"), exit 127. */
void sbx_code_enter(const struct sock_fprog *prog, struct sbx_job *j, int rep)
    __attribute__((noreturn));
/* A stack for a code process started with CLONE_VM, guard page below;
 * NULL when it cannot be mapped. */
char *sbx_code_stack(void);

/* rlimit.c's limits, for the OCI spec too. */
#define SBX_RLIMIT_N 6
struct sbx_rlimit {
	int res;
	uint64_t v;
	const char *name;
};
void sbx_rlimit_list(const struct sbx_conf *c, struct sbx_rlimit *l);

/* ops.c: ops run, health, status and wipe (serve.c's op table). */
cJSON *sbx_op_run(struct sbx_worker *w, const cJSON *req);
cJSON *sbx_op_health(struct sbx_worker *w, const cJSON *req);
cJSON *sbx_op_status(struct sbx_worker *w, const cJSON *req);
cJSON *sbx_op_wipe(struct sbx_worker *w, const cJSON *req);

/* serve.c: serves until shutdown or SIGTERM; returns the exit status. */
enum kz_exit sbx_serve(struct sbx_worker *w, int lfd, const char *pid_file);
/* What the worker has served in its life, which status reports: serve.c
 * counts connections, requests and refusals, ops.c runs and wipes. */
struct sbx_stats {
	unsigned long conns, requests, runs, wipes, wipes_unclean, bad_frames,
	    peer_refused;
};
extern struct sbx_stats sbx_stats;

#endif
