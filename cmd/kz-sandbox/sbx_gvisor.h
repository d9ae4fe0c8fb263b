/*
 * SANDBOX_RUNTIME=gvisor: what gvisor.c, gvisor_box.c and gvisor_exec.c
 * declare for the rest of kz-sandbox (the run init, the worker, the view,
 * the namespaces and the cgroups each ask for the runtime's part), and
 * the names of what the sandbox is given.
 */
#ifndef SBX_GVISOR_H
#define SBX_GVISOR_H

#include <sys/socket.h>

#include "sbx.h"

/*
 * gvisor.c: SANDBOX_RUNTIME=gvisor, the code under runsc.  The runsc state
 * and bundle are on a tmpfs of the run init's mount namespace, at
 * <SANDBOX_STATE_DIR>/<id>.runsc (a host directory the agent makes).
 */
KZ_WUR bool sbx_gvisor(const struct sbx_conf *c);
/* <state>/<id>.runsc[/leaf]; KZ_ETOOBIG. */
KZ_WUR int sbx_gv_dir(const struct sbx_conf *c, const char *leaf, char *buf,
    size_t len);
/* SANDBOX_RUNSC is an executable regular file; why names it. */
KZ_WUR int sbx_gv_binary(const struct sbx_conf *c, char *why, size_t wlen);
/* Makes a file of runsc's state (p at fd; "": fd itself) its host uid's,
 * SANDBOX_GVISOR_UID, when that is set (runsc then has no capability over
 * the host root's files); -1 with errno. */
KZ_WUR int sbx_gv_chown(const struct sbx_conf *c, int fd, const char *p);
/* The OCI runtime spec of the sandbox on the view at rootfs: the one
 * place the policy is turned into runsc's terms. */
cJSON *sbx_gv_spec(const struct sbx_conf *c, const char *rootfs,
    const char *filter);
/* In the run init, instead of entering the view: the state tmpfs. */
KZ_WUR int sbx_gv_enter(const struct sbx_worker *w, char *why, size_t wlen);
/* In the code process: executes runsc (never returns). */
void sbx_gv_exec(const struct sbx_worker *w, int rep) __attribute__((noreturn));
/*
 * gvisor_box.c, in the run init: the sandbox (gvisor.c), a served
 * worker's kept for the lease, which dies with the run cgroup (a run
 * stopped, the reset, a one-shot run's end).  sbx_gv_run checks a job
 * (its working directory), writes its npm configuration, and hands it to
 * the sandbox, booted first if there is none; it returns what the init
 * waits for (runsc's pid), or 0 when the run was refused, reported at its
 * step (the caller closes the job's descriptors either way);
 * sbx_gv_boot_idle boots the sandbox between runs.
 * sbx_gv_ctl is the descriptor to poll (-1: none), sbx_gv_take forwards
 * the loader's report to the agent (true when the run is over),
 * sbx_gv_reaped forgets a sandbox whose runsc was reaped (true if pid
 * was it), sbx_gv_started says whether its loader said it is ready, and
 * sbx_gv_log_tail gives the last line runsc wrote, for a report.
 */
KZ_WUR pid_t sbx_gv_run(struct sbx_worker *w, struct sbx_job *j,
    const char *msg, char *stack, int sock);
void sbx_gv_boot_idle(struct sbx_worker *w, char *stack);
int sbx_gv_ctl(void);
KZ_WUR bool sbx_gv_take(int sock);
bool sbx_gv_reaped(pid_t pid);
KZ_WUR bool sbx_gv_started(void);
void sbx_gv_log_tail(char *buf, size_t len);
/*
 * gvisor_net.c, in the run init: the sandbox's way to the relay and the
 * broker forward (the code has gVisor's network only).  sbx_gv_net_boot
 * makes the pair the loader asks for connections over and queues its
 * end, with the ports it may ask for, as the first message on the
 * control socket; sbx_gv_net is the init's end to poll (-1: none), and
 * sbx_gv_net_serve answers one request, with a connection to that
 * port's listener or an error; sbx_gv_net_close forgets the pair.
 * sbx_gv_lo_addr is the abstract Unix address the relay and the forward
 * listen on under gvisor, by port, in the worker's network namespace.
 */
KZ_WUR int sbx_gv_net_boot(const struct sbx_conf *c, int ctl, char *why,
    size_t wlen);
int sbx_gv_net(void);
void sbx_gv_net_serve(void);
void sbx_gv_net_close(void);
struct sockaddr_un;
socklen_t sbx_gv_lo_addr(int port, struct sockaddr_un *sa);
#define SBX_GV_LO_NAME "kz-sandbox.lo.%d"
/* The messages on that pair: the init's hello (on the control socket,
 * with the pair's sandbox end, unless no port is set), then requests from
 * the loader and answers from the init, each answer carrying the
 * connected socket when err is 0. */
#define SBX_GV_NET_PORTS 2 /* the relay's, the broker forward's */
struct sbx_gv_hello {
	char magic[4];
	uint16_t port[SBX_GV_NET_PORTS]; /* 0: none */
};
struct sbx_gv_net_req {
	uint32_t id;
	uint16_t port;
};
struct sbx_gv_net_ans {
	uint32_t id;
	int32_t err; /* 0, or an errno value */
};
/* Inside the sandbox: the loader's forwarder (gvloader/gvisor_fwd.c),
 * started before the loader says it is ready, from the hello on ctl;
 * why names what failed. */
KZ_WUR int sbx_gv_fwd_start(int ctl, char *why, size_t wlen);
/* Before each run: the forwarder listens at the ports of net (SBX_NET_*,
 * what listens on the host for the run) and at no other, as the native
 * loopback has them. */
KZ_WUR int sbx_gv_fwd_run(int net, char *why, size_t wlen);

/* In the agent, between runs: has a served worker's init boot the next
 * lease's sandbox (SANDBOX_GVISOR_PREBOOT). */
void sbx_gv_preboot(struct sbx_worker *w);
/* At a served worker's start: /bin/true through runsc, or refusal. */
KZ_WUR int sbx_gv_probe(struct sbx_worker *w, char *why, size_t wlen);

/* Under gvisor the run cgroup holds runsc, its gofer and the Sentry
 * (its threads and, on ptrace, a stub per address space) besides the
 * code's own tasks: this many more tasks are allowed. */
#define SBX_GV_PIDS 128
/* The run cgroup's pids.max. */
int64_t sbx_cg_pids(const struct sbx_conf *c);
/* Under gvisor, inside the sandbox: the loader, gVisor's pid 1, takes
 * each run's job on descriptor 0, starts its code as uid and gid, without
 * capabilities, under kz-sandbox's own filter (gVisor's kernel enforces
 * it), and answers the run's status there. */
int sbx_gv_serve(const char *uid, const char *gid);
/* Where the loader is in the view, and where make install puts it, from
 * kz-sandbox's directory (gvloader/). */
#define SBX_GV_LOADER "/.kz-gvisor-loader"
#define SBX_GV_LOADER_BESIDE "../libexec/kaizen/kz-gvisor-loader"
/* The whole environment of runsc and of the loader (each job brings
 * its own). */
#define SBX_GV_PATH "PATH=/usr/sbin:/usr/bin:/sbin:/bin"
#define SBX_GV_FILTER "/.kz-filter" /* the filter's BPF, read-only */
/* The object every dynamic program in the sandbox preloads (the view's
 * /etc/ld.so.preload names it), read-only, and where make install puts
 * it, from the binary's directory (gvcompat/kz-gvisor-compat.c). */
#define SBX_GV_COMPAT "/.kz-gvisor-compat.so"
#define SBX_GV_COMPAT_BESIDE "../libexec/kaizen/kz-gvisor-compat.so"
/* The uid and gid runsc 20221219 gives its sandbox process in root mode,
 * which runsc's user namespace maps to the sandbox ids (ns.c). */
#define SBX_GV_NOBODY 65534

#endif
