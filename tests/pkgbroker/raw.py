# raw.py SOCK UID REQUEST...: one kept-alive connection to the broker's
# Unix socket, made with effective uid UID ("-": the caller's own), as a
# worker's forward makes it.  Each REQUEST is "TARGET|HOST|TOKEN" (HOST
# "-" sends no Host header); prints the status line of each answer,
# joined by " | ", and "closed" once the broker has closed (an end of
# file, or a reset: a broker that closed with a request unread resets).
import ctypes, os, socket, sys

sock, uid, reqs = sys.argv[1], sys.argv[2], sys.argv[3:]
if uid != "-":
    os.setresuid(-1, int(uid), -1)
    ctypes.CDLL(None).setfsuid(0)
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sock)
f = s.makefile("rb")


def ask(target, host, tok):
    head = "GET %s HTTP/1.1\r\n" % target
    if host != "-":
        head += "Host: %s\r\n" % host
    head += "Authorization: Bearer %s\r\n\r\n" % tok
    try:
        s.sendall(head.encode())
        h = b""
        while not h.endswith(b"\r\n\r\n"):
            c = f.read(1)
            if not c:
                return "closed"
            h += c
        for l in h.split(b"\r\n"):
            if l.lower().startswith(b"content-length:"):
                f.read(int(l.split(b":")[1]))
    except OSError:
        return "closed"
    return h.split(b"\r\n")[0].decode()


out = []
for r in reqs:
    out.append(ask(*r.split("|", 2)))
    if out[-1] == "closed":
        break
print(" | ".join(out))
