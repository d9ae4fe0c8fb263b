/*
 * The seccomp allowlist's tables, which seccomp.c compiles: the groups of
 * calls a tenant's programs may make, the groups withheld on purpose
 * (EPERM), and the calls whose arguments decide.  kz-sandbox(8) says why
 * each group is there; "kz-sandbox seccomp" prints them.
 */
#include <stddef.h>

#include "seccomp_table.h"
#include "banned.h"

/* Data through descriptors the process holds.  sync is not here: it
 * flushes every file system of the host, while the sandbox's own are
 * tmpfs; glibc's sync() ignores the error. */
static const char *const g_io[] = {
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "lseek",
    "sendfile",
    "splice",
    "tee",
    "vmsplice",
    "copy_file_range",
    "fsync",
    "fdatasync",
    "syncfs",
    "sync_file_range",
    "fadvise64",
    "readahead",
    "fallocate",
    "ftruncate",
    "flock",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "pipe",
    "pipe2",
    NULL,
};

/* Paths and metadata.  The mount view (read-only root, nodev tmpfs for
 * the writable places) and the uid decide what succeeds; mknod makes
 * FIFOs and sockets, a device node needs a capability the code lacks. */
static const char *const g_fs[] = {
    "open",
    "openat",
    "openat2",
    "creat",
    "stat",
    "fstat",
    "lstat",
    "newfstatat",
    "statx",
    "statfs",
    "fstatfs",
    "access",
    "faccessat",
    "faccessat2",
    "getdents",
    "getdents64",
    "getcwd",
    "chdir",
    "fchdir",
    "mkdir",
    "mkdirat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "unlink",
    "unlinkat",
    "symlink",
    "symlinkat",
    "readlink",
    "readlinkat",
    "chmod",
    "fchmod",
    "fchmodat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "umask",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "mknod",
    "mknodat",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    NULL,
};

/* Waiting for descriptors, file changes, signals and timers: the event
 * loops of Node, Python's asyncio, make and file watchers. */
static const char *const g_events[] = {
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "eventfd",
    "eventfd2",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "inotify_rm_watch",
    "signalfd",
    "signalfd4",
    "timerfd_create",
    "timerfd_settime",
    "timerfd_gettime",
    NULL,
};

/* The process's own address space; RLIMIT_MEMLOCK and the memory cgroup
 * bound what it can pin or map.  NUMA placement (mbind, set_mempolicy)
 * is not here: libnuma takes ENOSYS for a machine without NUMA. */
static const char *const g_memory[] = {
    "brk",
    "mmap",
    "munmap",
    "mprotect",
    "mremap",
    "madvise",
    "mincore",
    "msync",
    "mlock",
    "mlock2",
    "munlock",
    "mlockall",
    "munlockall",
    "membarrier",
    "memfd_create",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    NULL,
};

/* Processes and threads: the C library's plumbing for both (clone has
 * an argument rule below), within the run's pid namespace and cgroup.
 * seccomp and landlock let a program confine itself further; neither
 * can loosen this filter. */
static const char *const g_process[] = {
    "fork",
    "vfork",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "wait4",
    "waitid",
    "set_tid_address",
    "set_robust_list",
    "futex",
    "futex_waitv",
    "rseq",
    "arch_prctl",
    "prctl",
    "getpid",
    "getppid",
    "gettid",
    "getpgid",
    "getpgrp",
    "getsid",
    "setpgid",
    "setsid",
    "pidfd_open",
    "pidfd_send_signal",
    "getrlimit",
    "setrlimit",
    "prlimit64",
    "getrusage",
    "seccomp",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
    NULL,
};

/* Scheduling of the process's own threads; a real-time class needs a
 * capability or an RLIMIT_RTPRIO the code does not have, and the cpu
 * cgroup bounds the rest. */
static const char *const g_sched[] = {
    "sched_yield",
    "sched_getaffinity",
    "sched_setaffinity",
    "sched_getparam",
    "sched_setparam",
    "sched_getscheduler",
    "sched_setscheduler",
    "sched_getattr",
    "sched_setattr",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_rr_get_interval",
    "getpriority",
    "setpriority",
    "ioprio_get",
    "ioprio_set",
    "getcpu",
    NULL,
};

/* Credentials: reading them, and the changes the kernel allows without
 * capabilities, which gain nothing; programs that drop privileges expect
 * an answer from these rather than ENOSYS. */
static const char *const g_identity[] = {
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getresuid",
    "getresgid",
    "getgroups",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setfsuid",
    "setfsgid",
    "capget",
    "capset",
    NULL,
};

/* Signals; the pid namespace and the uid decide whom they reach. */
static const char *const g_signal[] = {
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigpending",
    "rt_sigtimedwait",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "sigaltstack",
    "kill",
    "tkill",
    "tgkill",
    "pause",
    "restart_syscall",
    NULL,
};

/* Reading clocks, sleeping and interval timers; setting a clock is
 * withheld. */
static const char *const g_time[] = {
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "time",
    "times",
    "alarm",
    "getitimer",
    "setitimer",
    "timer_create",
    "timer_settime",
    "timer_gettime",
    "timer_getoverrun",
    "timer_delete",
    NULL,
};

/* Sockets of the families the socket rule allows; the network namespace
 * has only loopback, and the egress relay when a run has a grant. */
static const char *const g_socket[] = {
    "bind",
    "listen",
    "accept",
    "accept4",
    "connect",
    "getsockname",
    "getpeername",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
    "setsockopt",
    "getsockopt",
    NULL,
};

/* System V and POSIX IPC, in the lease's own IPC namespace: Python's
 * multiprocessing, databases and the reset's proof that a tenant's
 * objects are gone all use them. */
static const char *const g_ipc[] = {
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    NULL,
};

/* Facts about the system (the UTS namespace's names) and randomness. */
static const char *const g_system[] = {
    "uname",
    "sysinfo",
    "getrandom",
    NULL,
};

/*
 * Not on the list, so ENOSYS: Linux native AIO (io_setup and its
 * siblings).  Its event count (fs.aio-max-nr) is one for the whole host,
 * not per uid or cgroup, so one tenant could take all of it from the
 * host and every other tenant; glibc's POSIX AIO uses threads instead,
 * and a program that probes for native AIO takes ENOSYS for a kernel
 * without it.
 */
const struct sbx_group sbx_seccomp_allowed[] = {
    {"io", g_io},
    {"fs", g_fs},
    {"events", g_events},
    {"memory", g_memory},
    {"process", g_process},
    {"sched", g_sched},
    {"identity", g_identity},
    {"signal", g_signal},
    {"time", g_time},
    {"socket", g_socket},
    {"ipc", g_ipc},
    {"system", g_system},
    {NULL, NULL},
};

/* Reading or steering another process. */
static const char *const w_process[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "kcmp",
    NULL,
};

/* Changing the file system view. */
static const char *const w_mount[] = {
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    NULL,
};

/* New or foreign namespaces, the user namespace first of all. */
static const char *const w_namespace[] = {
    "unshare",
    "setns",
    NULL,
};

/* The kernel keyring. */
static const char *const w_keyring[] = {
    "keyctl",
    "add_key",
    "request_key",
    NULL,
};

/* Kernel surfaces with a record of exploitable bugs. */
static const char *const w_kernel[] = {
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "fanotify_init",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    NULL,
};

/* Host administration. */
static const char *const w_host[] = {
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "uselib",
    "nfsservctl",
    "vhangup",
    "personality",
    NULL,
};

/* Opening files by handle, around the mount view. */
static const char *const w_handle[] = {
    "open_by_handle_at",
    "name_to_handle_at",
    NULL,
};

/* Hardware and descriptor tables. */
static const char *const w_hardware[] = {
    "iopl",
    "ioperm",
    "modify_ldt",
    NULL,
};

/* The clocks and the host's identity. */
static const char *const w_clock[] = {
    "clock_settime",
    "clock_adjtime",
    "settimeofday",
    "adjtimex",
    "sethostname",
    "setdomainname",
    NULL,
};

const struct sbx_group sbx_seccomp_withheld[] = {
    {"process", w_process},
    {"mount", w_mount},
    {"namespace", w_namespace},
    {"keyring", w_keyring},
    {"kernel", w_kernel},
    {"host", w_host},
    {"handle", w_handle},
    {"hardware", w_hardware},
    {"clock", w_clock},
    {NULL, NULL},
};

/* The calls whose arguments decide, as "kz-sandbox seccomp" lists them. */
const struct sbx_arg_rule sbx_seccomp_arg_rules[] = {
    {"clone", "args", "allowed without namespace flags, EPERM with any"},
    {"ioctl", "args", "allowed except TIOCSTI and TIOCLINUX (EPERM)"},
    {"socket", "args",
        "AF_UNIX, AF_INET, AF_INET6, else EAFNOSUPPORT; "
        "SOCK_RAW and SOCK_PACKET EPERM; the WebRTC browser variant "
        "also AF_NETLINK NETLINK_ROUTE raw or datagram"},
    {"socketpair", "args", "AF_UNIX, else EAFNOSUPPORT"},
    {"clone3", "refuse",
        "ENOSYS its flags are in memory, where a filter "
        "cannot look; libc falls back to clone"},
    {NULL, NULL, NULL},
};
