#!/usr/bin/env python3
"""A small authoritative DNS server for the kz-egress tests (stdlib only).

Serves A and AAAA answers from a JSON zone on a loopback UDP port:

    {"name": {"A": ["10.213.0.2"], "AAAA": ["::1"]},
     "rebind.t": {"A_seq": [["10.213.0.2"], ["127.0.0.1"]]},
     "broken.t": {"rcode": 2}}

"A_seq"/"AAAA_seq" answer the n-th query with the n-th list (the last one
repeats): a rebinding name.  Names not in the zone get NXDOMAIN; a name
with no records of the asked type gets NOERROR with no answers.  Every
answer has TTL 0.  The question is echoed byte for byte, so resolvers that
randomize the case of the name (0x20) accept the answer.

usage: dnsd.py ZONE.json PORTFILE [QUERYLOG]   (binds 127.0.0.1 on a free
port and writes the port to PORTFILE once it answers; with QUERYLOG, every
question's name and type is appended to it, one "name type" a line, before
it is answered, so a test can show that a host never reached DNS)
"""
import json
import os
import socket
import struct
import sys


def parse_question(pkt):
    i, labels = 12, []
    while True:
        n = pkt[i]
        if n == 0:
            i += 1
            break
        if n & 0xC0:
            raise ValueError("compressed question")
        labels.append(pkt[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    qtype, qclass = struct.unpack("!HH", pkt[i:i + 4])
    return ".".join(labels).lower(), qtype, qclass, pkt[12:i + 4]


def answer(zone, counters, pkt):
    qid, flags = struct.unpack("!HH", pkt[:4])
    name, qtype, _qclass, question = parse_question(pkt)
    rd = flags & 0x0100
    rec = zone.get(name.rstrip("."))
    rcode, rdatas = 0, []
    if rec is None:
        rcode = 3
    elif "rcode" in rec:
        rcode = rec["rcode"]
    else:
        key = {1: "A", 28: "AAAA"}.get(qtype)
        if key is not None:
            if key + "_seq" in rec:
                seq = rec[key + "_seq"]
                n = counters.get((name, key), 0)
                counters[(name, key)] = n + 1
                addrs = seq[min(n, len(seq) - 1)]
            else:
                addrs = rec.get(key, [])
            fam = socket.AF_INET if key == "A" else socket.AF_INET6
            rdatas = [socket.inet_pton(fam, a) for a in addrs]
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd | 0x0080 | rcode, 1,
                      len(rdatas), 0, 0)
    out = hdr + question
    for rdata in rdatas:
        out += struct.pack("!HHHIH", 0xC00C, qtype, 1, 0, len(rdata)) + rdata
    return out


def main():
    zone_path, port_file = sys.argv[1], sys.argv[2]
    with open(zone_path) as f:
        zone = {k.lower().rstrip("."): v for k, v in json.load(f).items()}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(tmp, port_file)
    counters = {}
    qlog = open(sys.argv[3], "a") if len(sys.argv) > 3 else None
    while True:
        pkt, peer = s.recvfrom(4096)
        try:
            if qlog is not None:
                name, qtype, _qclass, _q = parse_question(pkt)
                qlog.write("%s %d\n" % (name, qtype))
                qlog.flush()
            s.sendto(answer(zone, counters, pkt), peer)
        except (ValueError, IndexError, struct.error, OSError):
            continue


if __name__ == "__main__":
    main()
