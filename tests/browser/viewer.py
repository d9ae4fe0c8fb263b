#!/usr/bin/env python3
"""A kz-browser viewer for the tests: connects to the view socket, names
the session and role, then writes one line per event to OUT (flushed):
"frame" for each PNG frame, "refused REASON" for a refusal, "closed" when
the daemon closes the connection, "timeout" after SECONDS.

usage: viewer.py VIEW_SOCK SESSION ROLE OUT SECONDS
"""
import base64, json, socket, struct, sys, time

sock, sid, role, out, secs = sys.argv[1:6]
f = open(out, "a", buffering=1)
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
b = json.dumps({"session": sid, "role": role}).encode()
s.sendall(struct.pack(">I", len(b)) + b)
end = time.time() + float(secs)


def read(n):
    buf = b""
    while len(buf) < n:
        s.settimeout(max(0.1, end - time.time()))
        c = s.recv(n - len(buf))
        if not c:
            raise EOFError
        buf += c
    return buf


try:
    while time.time() < end:
        n = struct.unpack(">I", read(4))[0]
        m = json.loads(read(n))
        if "png_b64" in m:
            ok = base64.b64decode(m["png_b64"])[:4] == b"\x89PNG"
            f.write("frame\n" if ok else "bad frame\n")
        else:
            f.write("refused %s\n" % m.get("reason"))
except EOFError:
    f.write("closed\n")
except (socket.timeout, TimeoutError):
    f.write("timeout\n")
