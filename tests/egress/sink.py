#!/usr/bin/env python3
"""A stand-in audit sink for the kz-egress tests: acknowledges every append
on a Unix socket and keeps each request, one JSON line per event.

usage: sink.py SOCKET OUT
"""
import json
import socket
import struct
import sys

path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(16)
while True:
    c, _ = s.accept()
    n = struct.unpack("!I", c.recv(4, socket.MSG_WAITALL))[0]
    req = json.loads(c.recv(n, socket.MSG_WAITALL))
    with open(out, "a") as f:
        f.write(json.dumps(req) + "\n")
    rep = json.dumps({"v": 1, "id": req.get("id"), "ok": True, "seq": 1}).encode()
    c.sendall(struct.pack("!I", len(rep)) + rep)
    c.close()
