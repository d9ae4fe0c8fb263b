#!/usr/bin/env python3
"""A stand-in audit sink for the kz-egress tests: acknowledges every append
on a Unix socket and keeps each request, one JSON line per event (a batch,
kz-protocol(7)'s "records", is kept as one line per record, each in the
form of a single append, and answered with a seq per record).

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
    recs = req.pop("records", None)
    with open(out, "a") as f:
        for r in recs if recs is not None else [{}]:
            f.write(json.dumps(dict(req, **r)) + "\n")
    rep = {"v": 1, "id": req.get("id"), "ok": True, "seq": 1}
    if recs is not None:
        rep["seqs"] = list(range(1, len(recs) + 1))
    rep = json.dumps(rep).encode()
    c.sendall(struct.pack("!I", len(rep)) + rep)
    c.close()
