#!/usr/bin/python3
# A tenant's code for the tests of what crosses from one tenant to the next
# on one worker, and between tenants on two workers (t1111, t4203).  It runs
# inside kz-sandbox as ordinary code (ctypes only, no extra module) and
# prints one "name value" line per observation.
#   leave       make SysV shm, msg and sem objects and a POSIX message
#               queue under fixed names, fill the shm segment (SHM_MB,
#               default 32 MiB), fork FORKS processes, move LO_MB over the
#               loopback, then print what it made
#   look        print what of that the code can find, its own pid, the
#               loopback counters and its namespaces; then touch ALLOC_MB
#               (default 0) of memory
#   tcpfill N   queue as much as it can in N loopback TCP connections
#               without reading; print the MiB queued
#   exhaust S   take inotify instances and POSIX timers until the kernel
#               refuses, hold them S seconds, print how many it took
#   some        take 8 inotify instances and 8 POSIX timers; print how many
import ctypes, os, socket, sys, time

libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x4b5a7e01
IPC_CREAT, IPC_EXCL = 0o1000, 0o2000
MQ = b"/kz-tenant-left"


def err():
    return os.strerror(ctypes.get_errno())


def child_pid():
    """The pid the next process gets: the kernel's counter for this pid
    namespace, which the previous tenant's forks moved on."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("child_pid %d" % pid)


def ns():
    for n in ("ipc", "mnt", "net", "pid", "uts"):
        print("ns_%s %s" % (n, os.readlink("/proc/self/ns/" + n)))


def loopback():
    for line in open("/proc/net/dev"):
        if line.strip().startswith("lo:"):
            f = line.split(":", 1)[1].split()
            print("lo_rx_bytes %s" % f[0])
            print("lo_tx_bytes %s" % f[8])


def mq_open(flags, mode=0o600):
    libc.mq_open.restype = ctypes.c_int
    return libc.mq_open(MQ, flags, mode, None)


def leave():
    mb = int(os.environ.get("SHM_MB", "32"))
    shm = libc.shmget(KEY, mb << 20, IPC_CREAT | 0o600)
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(shm, None, 0)
    if shm < 0 or addr in (None, ctypes.c_void_p(-1).value):
        print("shm_made no %s" % err())
    else:
        ctypes.memset(addr, 0x5a, mb << 20)
        libc.shmdt(ctypes.c_void_p(addr))
        print("shm_made yes")
    msq = libc.msgget(KEY, IPC_CREAT | 0o600)
    buf = ctypes.create_string_buffer(b"\x01\x00\x00\x00\x00\x00\x00\x00secret", 14)
    print("msg_made %s" % ("yes" if msq >= 0 and
                           libc.msgsnd(msq, buf, 6, 0) == 0 else "no " + err()))
    print("sem_made %s" % ("yes" if libc.semget(KEY, 4, IPC_CREAT | 0o600) >= 0
                           else "no " + err()))
    q = mq_open(os.O_CREAT | os.O_WRONLY)
    print("mq_made %s" % ("yes" if q >= 0 and
                          libc.mq_send(q, b"secret", 6, 0) == 0 else "no " + err()))
    for _ in range(int(os.environ.get("FORKS", "200"))):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.create_connection(srv.getsockname())
    s, _ = srv.accept()
    left = int(os.environ.get("LO_MB", "8")) << 20
    chunk = b"x" * 65536
    while left > 0:
        c.sendall(chunk)
        got = 0
        while got < len(chunk):
            got += len(s.recv(len(chunk) - got))
        left -= len(chunk)
    print("pid %d" % os.getpid())
    child_pid()
    loopback()
    ns()


def look():
    print("shm_found %s" % ("yes" if libc.shmget(KEY, 0, 0) >= 0 else "no"))
    print("msg_found %s" % ("yes" if libc.msgget(KEY, 0) >= 0 else "no"))
    print("sem_found %s" % ("yes" if libc.semget(KEY, 0, 0) >= 0 else "no"))
    print("mq_found %s" % ("yes" if mq_open(os.O_RDONLY) >= 0 else "no"))
    print("pid %d" % os.getpid())
    child_pid()
    loopback()
    ns()
    mb = int(os.environ.get("ALLOC_MB", "0"))
    if mb:
        b = bytearray(mb << 20)
        for i in range(0, len(b), 4096):
            b[i] = 1
        print("alloc_mb %d" % mb)


def tcpfill(n):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1024)
    keep, total = [], 0
    for _ in range(n):
        try:
            c = socket.create_connection(srv.getsockname())
            s, _ = srv.accept()
        except OSError as e:
            print("connect_failed %s" % e.strerror)
            break
        c.setblocking(False)
        keep += [c, s]
        while True:
            try:
                total += c.send(b"x" * 65536)
            except OSError:
                break
    print("queued_mib %d" % (total >> 20))


class Sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int),
                ("notify", ctypes.c_int), ("pad", ctypes.c_char * 48)]


def timers(limit):
    n, ev = 0, Sigevent(None, 10, 0)	# SIGUSR1, SIGEV_SIGNAL
    while n < limit:
        tid = ctypes.c_void_p()
        if libc.timer_create(1, ctypes.byref(ev), ctypes.byref(tid)) != 0:
            break
        n += 1
    return n


def inotify(limit):
    fds = []
    while len(fds) < limit:
        fd = libc.inotify_init1(os.O_CLOEXEC)
        if fd < 0:
            break
        fds.append(fd)
    return fds


def main():
    cmd = sys.argv[1]
    if cmd == "leave":
        leave()
    elif cmd == "look":
        look()
    elif cmd == "tcpfill":
        tcpfill(int(sys.argv[2]))
    elif cmd == "exhaust":
        fds, n = inotify(1 << 20), timers(1 << 20)
        print("uid %d inotify %d timers %d" % (os.getuid(), len(fds), n))
        sys.stdout.flush()
        time.sleep(float(sys.argv[2]))
    elif cmd == "some":
        fds, n = inotify(8), timers(8)
        print("uid %d inotify %d timers %d" % (os.getuid(), len(fds), n))


main()
