# flood.py unix PATH N OUT | tcp [SRC] HOST PORT N OUT: a slowloris
# flood for the kz-egress tests.  Opens N connections one after another
# (over TCP from address SRC when given), each sending half a request
# head; writes OUT.ready, waits for OUT.go, then writes to OUT "OPEN
# ANSWERED REFUSED": how many are still open, how many got an answer of
# any kind, and how many of those were a 503.
import os, socket, sys, time

a = sys.argv[1:]
n, out = int(a[-2]), a[-1]
where = a[1:-2]
held = []
for _ in range(n):
    try:
        if a[0] == "unix":
            s = socket.socket(socket.AF_UNIX)
            held.append(s)
            s.connect(where[0])
        else:
            s = socket.socket()
            held.append(s)
            if len(where) == 3:
                s.bind((where[0], 0))
            s.connect((where[-2], int(where[-1])))
        s.sendall(b"GET http://origin.kz.test/ HTTP/1.1\r\nHost: origin")
    except OSError:
        pass
time.sleep(1)
open(out + ".ready", "w").close()
for _ in range(1200):
    if os.path.exists(out + ".go"):
        break
    time.sleep(0.05)
open_, answered, refused = 0, 0, 0
for s in held:
    s.settimeout(0.05)
    try:
        b = s.recv(100)
        answered += len(b) > 0
        refused += b.startswith(b"HTTP/1.1 503")
    except socket.timeout:
        open_ += 1
    except OSError:
        pass
with open(out + ".tmp", "w") as f:
    f.write("%d %d %d\n" % (open_, answered, refused))
os.rename(out + ".tmp", out)
