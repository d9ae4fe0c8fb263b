#!/usr/bin/env python3
# A stand-in for "kz-sandbox serve", used only by the pool-level tests of
# kz-lease (tests/e2e/t41NN-lease-*.sh), so that leasing, fencing, expiry
# and the store's faults can be tested at a load no real sandbox reaches on
# a 2-core machine.  It speaks the frame protocol and answers "health" and
# "wipe" like a worker that is always clean.  STANDIN_HANG=1 makes it never
# answer (a worker whose agent does not respond).
import json, os, socket, struct, sys, threading

# kz-ctl-local also runs "reap" (a deleted worker's cgroups) and "files"
# (the bound on its open files): a stand-in has no cgroups and few files.
if sys.argv[1:2] == ["reap"]:
    sys.exit(0)
if sys.argv[1:2] == ["files"]:
    print(1000)
    sys.exit(0)
args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
wid, path = args["--id"], args["--socket"]
gen = [0]
# What a real worker proves on a wipe (kz-sandbox(8), kz-reset(8)).
EVIDENCE = ("leftovers_killed", "previous_gone", "namespaces_new",
            "within_lease_limit", "workspace_empty", "tmp_empty",
            "shm_empty", "mounts_baseline", "ipc_empty", "cgroup_only_agent",
            "memory_clean")
hang = os.environ.get("STANDIN_HANG") == "1"

def serve(c):
    try:
        while True:
            h = c.recv(4, socket.MSG_WAITALL)
            if len(h) < 4:
                return
            n = struct.unpack(">I", h)[0]
            req = json.loads(c.recv(n, socket.MSG_WAITALL))
            if hang:
                threading.Event().wait()
            rep = {"v": 1, "id": req.get("id"), "ok": True}
            if req.get("op") == "health":
                rep.update(worker=wid, generation=gen[0], state="ready")
            elif req.get("op") == "wipe":
                gen[0] += 1
                rep.update(generation=gen[0], memory_bytes=0,
                           evidence={k: True for k in EVIDENCE})
            else:
                rep = {"v": 1, "id": req.get("id"), "ok": False,
                       "error": "bad_request", "reason": "unknown op"}
            b = json.dumps(rep).encode()
            c.sendall(struct.pack(">I", len(b)) + b)
    except Exception:
        return
    finally:
        c.close()

# Its own v1 cgroups, so kz-reset's host-side cgroup check can pass (the
# test removes them: /sys/fs/cgroup/{memory,pids}/kzt-<test>/<id>).
parent = os.environ.get("STANDIN_CGROUP")
if parent:
    for ctl in ("memory", "pids"):
        d = "/sys/fs/cgroup/%s/%s/%s" % (ctl, parent, wid)
        os.makedirs(d, exist_ok=True)
        with open(d + "/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
