#!/usr/bin/env python3
"""Minimal frame-protocol client for kz-sandbox tests and the benchmark.

client.py SOCK OP [JSON-FIELDS]      one request, prints the reply
client.py SOCK --loop N JSON-FIELDS  N run requests on one connection,
                                     prints the median latency in ms
"""
import json, socket, struct, sys, time, statistics


def call(s, obj):
    b = json.dumps(obj).encode()
    s.sendall(struct.pack(">I", len(b)) + b)
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


def main():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    if sys.argv[2] == "--loop":
        n = int(sys.argv[3])
        req = {"v": 1, "op": "run", "id": "b"}
        req.update(json.loads(sys.argv[4]))
        times = []
        for _ in range(n):
            t = time.perf_counter()
            r = call(s, req)
            times.append((time.perf_counter() - t) * 1000)
            if not r.get("ok") or r.get("exit_code") != 0:
                print(json.dumps(r))
                sys.exit(1)
        print("%.3f" % statistics.median(times))
        return
    req = {"v": 1, "op": sys.argv[2], "id": "t"}
    if len(sys.argv) > 3:
        req.update(json.loads(sys.argv[3]))
    print(json.dumps(call(s, req)))


main()
