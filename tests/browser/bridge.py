#!/usr/bin/env python3
"""Drives a kz-sandbox browser bridge directly (tests): CDP over frames.

bridge.py WORKER_SOCK GRANT CMD...   where each CMD is one of
  nav URL        navigate, print "nav <errorText or ok>"
  title          print the page title
  eval JS        print the value of a JS expression
  shot FILE      save a PNG screenshot
  sleep S
"""
import base64, json, socket, struct, sys, time

def send(s, obj):
    b = json.dumps(obj).encode()
    s.sendall(struct.pack(">I", len(b)) + b)


def recv(s):
    hdr = b""
    while len(hdr) < 4:
        c = s.recv(4 - len(hdr))
        if not c:
            raise EOFError("closed")
        hdr += c
    n = struct.unpack(">I", hdr)[0]
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise EOFError("closed")
        buf += c
    return json.loads(buf)


def call(s, obj):
    send(s, obj)
    return recv(s)


class CDP:
    def __init__(self, s):
        self.s, self.n, self.ev = s, 0, []

    def cmd(self, method, params=None, sid=None, timeout=20):
        self.n += 1
        m = {"id": self.n, "method": method, "params": params or {}}
        if sid:
            m["sessionId"] = sid
        send(self.s, m)
        end = time.time() + timeout
        while time.time() < end:
            r = recv(self.s)
            if r.get("id") == self.n:
                if "error" in r:
                    raise RuntimeError(r["error"].get("message"))
                return r.get("result", {})
            self.ev.append(r)
        raise TimeoutError(method)

    def wait(self, method, timeout=20):
        end = time.time() + timeout
        for i, e in enumerate(self.ev):
            if e.get("method") == method:
                del self.ev[i]
                return e
        self.s.settimeout(timeout)
        while time.time() < end:
            e = recv(self.s)
            if e.get("method") == method:
                return e
        raise TimeoutError(method)


def main():
    w = socket.socket(socket.AF_UNIX)
    w.connect(sys.argv[1])
    r = call(w, {"v": 1, "id": "b", "op": "browser", "grant": sys.argv[2]})
    if not r.get("ok"):
        print("refused", r.get("error", {}).get("reason", r))
        return 1
    s = socket.socket(socket.AF_UNIX)
    s.connect(r["bridge"])
    c = CDP(s)
    t0 = time.time()
    t = c.cmd("Target.createTarget", {"url": "about:blank"})
    print("first answer after %.2f s" % (time.time() - t0), file=sys.stderr)
    sid = c.cmd("Target.attachToTarget",
                {"targetId": t["targetId"], "flatten": True})["sessionId"]
    c.cmd("Page.enable", sid=sid)
    args, i = sys.argv[3:], 0
    while i < len(args):
        a = args[i]
        if a == "nav":
            t1 = time.time()
            c.ev.clear()
            r = c.cmd("Page.navigate", {"url": args[i + 1]}, sid=sid)
            # Serialised: the next navigation waits for this one's page
            # (the error page too) to stop loading.
            c.wait("Page.frameStoppedLoading")
            print("nav", r.get("errorText") or "ok")
            print("nav took %.2f s" % (time.time() - t1), file=sys.stderr)
            i += 2
        elif a == "eval":
            r = c.cmd("Runtime.evaluate", {"expression": args[i + 1],
                      "awaitPromise": True, "returnByValue": True}, sid=sid)
            print("eval", json.dumps(r.get("result", {}).get("value")))
            i += 2
        elif a == "title":
            r = c.cmd("Runtime.evaluate", {"expression": "document.title",
                      "returnByValue": True}, sid=sid)
            print("title", r["result"].get("value"))
            i += 1
        elif a == "shot":
            r = c.cmd("Page.captureScreenshot", {"format": "png"}, sid=sid)
            open(args[i + 1], "wb").write(base64.b64decode(r["data"]))
            print("shot ok")
            i += 2
        elif a == "sleep":
            time.sleep(float(args[i + 1]))
            i += 2
        else:
            raise SystemExit("unknown command " + a)
        sys.stdout.flush()
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
