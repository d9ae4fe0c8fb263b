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
    if fault == "steal" and op == "create" and rep.get("ok"):
        ep = other_endpoint(wid)
        if ep is not None:
            rep["endpoint"] = ep
    write_frame(out, rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
