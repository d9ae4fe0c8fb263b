#!/usr/bin/env python3
# The fault tests' load and witness (tests/e2e/t4402-store-failover.sh).
#   load.py clients HOST SOCK N SECS OUT: N clients lease a worker from
#     kz-lease at SOCK, hold it a few ms, release it, again, for SECS
#     seconds (or until the file $LOAD_STOP exists); every grant, release and refusal goes to OUT as one JSON
#     line, with wall-clock times (every "host" runs on this machine, so
#     one clock orders them all).
#   load.py monitor SENTINEL PRIMARY-NAME DEP PASSFILE SECS OUT: asks the
#     sentinel every 50 ms which server is the primary and reads the
#     pool's epoch there; every change goes to OUT.
# The checker (check.py) reads both.
import asyncio, json, os, random, socket, struct, sys, time

# LOAD_HOLD scales the time a lease is held (0: release at once, the bench).
HOLD = float(os.environ.get("LOAD_HOLD", "1"))

def now():
    return time.time()

class Client:
    def __init__(self, path):
        self.path, self.r, self.w = path, None, None

    async def call(self, req, timeout=3.0):
        if self.w is None:
            self.r, self.w = await asyncio.wait_for(
                asyncio.open_unix_connection(self.path), timeout)
        b = json.dumps(req).encode()
        self.w.write(struct.pack(">I", len(b)) + b)
        try:
            h = await asyncio.wait_for(self.r.readexactly(4), timeout)
            n = struct.unpack(">I", h)[0]
            return json.loads(await asyncio.wait_for(self.r.readexactly(n), timeout))
        except Exception:
            self.w.close()
            self.r = self.w = None
            raise

async def one(host, sock, k, end, out):
    c, seq, nap = Client(sock), 0, 0.005
    actor = "%s-a%d" % (host, k)
    def rec(**d):
        d.update(host=host, client=k)
        out.write(json.dumps(d) + "\n")
    stop = os.environ.get("LOAD_STOP", "")
    while now() < end and not (stop and os.path.exists(stop)):
        seq += 1
        t0 = now()
        try:
            r = await c.call({"v": 1, "op": "lease", "id": "l%d" % seq,
                              "actor": actor, "conversation": "c"})
        except Exception as e:
            rec(ev="refuse", code="no_answer", t=now())
            await asyncio.sleep(0.05)
            continue
        t = now()
        if not r.get("ok"):
            rec(ev="refuse", code=r.get("error"), t=t)
            await asyncio.sleep(nap)
            nap = min(nap * 2, 0.1)
            continue
        nap = 0.005
        rec(ev="grant", t=t, lat=t - t0, worker=r["worker"], token=r["token"],
            lease_id=r["lease_id"], owner=actor,
            expires=r["expires_ms"] / 1000.0)
        await asyncio.sleep(random.uniform(0.005, 0.03) * HOLD)
        ts = now()
        try:
            s = await c.call({"v": 1, "op": "release", "id": "r%d" % seq,
                              "lease_id": r["lease_id"], "token": r["token"]})
            ok = bool(s.get("ok"))
        except Exception:
            ok = False
        rec(ev="release", lease_id=r["lease_id"], t_send=ts, ok=ok)

async def clients(host, sock, n, secs, path):
    end = now() + float(secs)
    with open(path, "w", buffering=1) as out:
        await asyncio.gather(*(one(host, sock, k, end, out) for k in range(int(n))))

# ---- a small RESP client for the monitor ----

def resp(sock, *args):
    b = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        b += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(b)
    f = sock.makefile("rb")
    return parse(f)

def parse(f):
    line = f.readline().rstrip(b"\r\n")
    t, rest = line[:1], line[1:]
    if t in (b"+", b"-"):
        return rest.decode() if t == b"+" else Exception(rest.decode())
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        d = f.read(n + 2)[:-2]
        return d.decode()
    if t == b"*":
        n = int(rest)
        return None if n < 0 else [parse(f) for _ in range(n)]
    raise ValueError("bad reply")

def ask(addr, pw, *cmd):
    h, p = addr.rsplit(":", 1)
    s = socket.create_connection((h, int(p)), timeout=0.3)
    s.settimeout(0.3)
    try:
        resp(s, "AUTH", "kz", pw)
        return resp(s, *cmd)
    finally:
        s.close()

def monitor(sentinels, name, dep, passfile, secs, path):
    pw = open(passfile).read().strip()
    end, last = now() + float(secs), None
    with open(path, "w", buffering=1) as out:
        while now() < end:
            prim = epoch = None
            for s in sentinels.split(","):
                try:
                    a = ask(s, pw, "SENTINEL", "get-master-addr-by-name", name)
                    prim = "%s:%s" % (a[0], a[1])
                    break
                except Exception:
                    pass
            if prim:
                try:
                    role = ask(prim, pw, "ROLE")[0]
                    epoch = ask(prim, pw, "GET", "kz:{%s}:epoch" % dep) \
                        if role == "master" else None
                except Exception:
                    epoch = None
            cur = (prim, epoch)
            if cur != last:
                out.write(json.dumps({"ev": "store", "t": now(), "primary": prim,
                                      "epoch": epoch}) + "\n")
                last = cur
            time.sleep(0.05)

if __name__ == "__main__":
    if sys.argv[1] == "clients":
        asyncio.run(clients(*sys.argv[2:7]))
    elif sys.argv[1] == "monitor":
        monitor(*sys.argv[2:8])
    else:
        sys.exit("usage: load.py clients|monitor ...")
