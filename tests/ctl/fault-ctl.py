#!/usr/bin/python3 -S
"""A controller for the controller-fault tests (t4106): it speaks
kz-controller(7) on stdin/stdout and passes each call to the real local
controller ($CTL_REAL), except where the mode in $KZ_RUN_DIR/ctl-mode
(one word a line: OP:FAULT, or FAULT for every op) says to fail:

  hang      does not answer for 30 s (and ignores SIGTERM)
  die       passes the call on, then exits without answering
  garbage   passes the call on, then answers bytes that are no frame
  badjson   passes the call on, then answers a frame of invalid JSON
  refuse    answers a refusal without passing the call on
  phantom   (list) adds a worker that does not exist
  omit      (list) leaves out the workers named in $KZ_RUN_DIR/ctl-omit
  steal     (create) answers the endpoint of another existing worker
  parrot    (create) answers the endpoint of a listener of its own (in
            $KZ_RUN_DIR, pid in parrot-ID.pid, gone after 60 s) that
            names the worker's id and claims every wipe evidence item

Each call is logged to $KZ_RUN_DIR/ctl-ops as "OP ID FAULT PID" (while
a mode is set: with none, tests/ctl/fault-ctl runs the real one alone).
"""
import json
import os
import signal
import struct
import subprocess
import sys
import time

RUN = os.environ.get("KZ_RUN_DIR", ".")
PHANTOM = "wphantom0001"


def read_frame(f):
    h = f.read(4)
    if len(h) < 4:
        return None
    n = struct.unpack(">I", h)[0]
    return f.read(n)


def write_frame(f, obj):
    b = json.dumps(obj).encode()
    f.write(struct.pack(">I", len(b)) + b)
    f.flush()


def mode_for(op):
    try:
        words = open(os.path.join(RUN, "ctl-mode")).read().split()
    except OSError:
        return "good"
    for w in words:
        if w.startswith(op + ":"):
            return w.split(":", 1)[1]
    for w in words:
        if ":" not in w:
            return w
    return "good"


def real(raw):
    p = subprocess.run([os.environ["CTL_REAL"]],
                       input=struct.pack(">I", len(raw)) + raw,
                       stdout=subprocess.PIPE, check=False)
    return json.loads(p.stdout[4:])


def other_endpoint(me):
    d = os.environ.get("LEASE_WORKERS_DIR", os.path.join(RUN, "workers"))
    for w in sorted(os.listdir(d)):
        s = os.path.join(d, w, "sock")
        if w != me and os.path.exists(s):
            return s
    return None


def parrot(wid):
    """A listener at RUN/parrot-ID.sock that answers as if it were worker
    wid's agent; its path is returned once it listens."""
    path = os.path.join(RUN, "parrot-%s.sock" % wid)
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        import socket
        with open(os.path.join(RUN, "parrot-%s.pid" % wid), "w") as f:
            f.write(str(os.getpid()))
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.listen(8)
        s.settimeout(1)
        end = time.time() + 60
        items = ["leftovers_killed", "previous_gone", "namespaces_new",
                 "within_lease_limit", "workspace_empty", "tmp_empty",
                 "shm_empty", "mounts_baseline", "ipc_empty",
                 "cgroup_only_agent", "memory_clean"]
        while time.time() < end:
            try:
                c, _ = s.accept()
            except OSError:
                continue
            f = c.makefile("rwb")
            while True:
                raw = read_frame(f)
                if not raw:
                    break
                q = json.loads(raw)
                r = {"v": 1, "ok": True, "id": q.get("id"), "worker": wid,
                     "generation": 7}
                if q.get("op") == "wipe":
                    r["evidence"] = {k: True for k in items}
                write_frame(f, r)
            c.close()
        os.unlink(path)
        os._exit(0)
    for _ in range(100):
        if os.path.exists(path):
            break
        time.sleep(0.02)
    return path


def main():
    out = sys.stdout.buffer
    raw = read_frame(sys.stdin.buffer)
    if raw is None:
        return 0
    req = json.loads(raw)
    op, wid = req.get("op", "?"), req.get("id", "-")
    fault = mode_for(op)
    with open(os.path.join(RUN, "ctl-ops"), "a") as log:
        log.write("%s %s %s %d\n" % (op, wid, fault, os.getpid()))
    if fault == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(30)
        return 1
    if fault == "refuse":
        write_frame(out, {"v": 1, "ok": False, "error": "refused",
                          "message": "test controller refuses"})
        return 0
    rep = real(raw)
    if fault == "die":
        os._exit(1)
    if fault == "garbage":
        out.write(b"\xff\xff\xff\xffnot a frame at all")
        out.flush()
        return 0
    if fault == "badjson":
        out.write(struct.pack(">I", 9) + b"{not json")
        out.flush()
        return 0
    if fault == "phantom" and op == "list":
        rep["workers"].append(PHANTOM)
    if fault == "omit" and op == "list":
        try:
            gone = open(os.path.join(RUN, "ctl-omit")).read().split()
        except OSError:
            gone = []
        rep["workers"] = [w for w in rep["workers"] if w not in gone]
    if fault == "parrot" and op == "create" and rep.get("ok"):
        rep["endpoint"] = parrot(wid)
    if fault == "steal" and op == "create" and rep.get("ok"):
        ep = other_endpoint(wid)
        if ep is not None:
            rep["endpoint"] = ep
    write_frame(out, rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
