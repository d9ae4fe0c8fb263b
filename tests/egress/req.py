# req.py PATH GRANT: one granted request over kz-egress's Unix socket, as
# a run's relay sends it; prints the answer's status, or "closed" when
# there is none.
import socket, sys

s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
try:
    s.sendall(("GET http://origin.kz.test/run HTTP/1.1\r\nHost: origin.kz.test\r\n"
               "Proxy-Authorization: Bearer %s\r\nConnection: close\r\n\r\n"
               % sys.argv[2]).encode())
    b = s.recv(100)
except OSError:
    b = b""
print(b.split(b" ")[1].decode() if b.startswith(b"HTTP/1.1 ") else "closed")
