#!/usr/bin/env python3
"""Sends stdin as raw bytes to a proxy and prints what comes back.

usage: raw.py 127.0.0.1:PORT | unix:PATH   [TIMEOUT [shut]]
Reads until the peer closes or TIMEOUT seconds (default 3) pass quietly;
with "shut", shuts its writing side once stdin is sent (as nc -N does).
The escape "\\r\\n" in stdin is not interpreted: callers use printf."""
import socket
import sys

dest = sys.argv[1]
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
if dest.startswith("unix:"):
    s = socket.socket(socket.AF_UNIX)
    s.connect(dest[5:])
else:
    host, port = dest.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
s.settimeout(timeout)
s.sendall(sys.stdin.buffer.read())
if len(sys.argv) > 3 and sys.argv[3] == "shut":
    s.shutdown(socket.SHUT_WR)
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    out += b"\n[timeout]"
except ConnectionResetError:
    out += b"\n[reset]"
sys.stdout.buffer.write(out)
