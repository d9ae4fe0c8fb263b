#!/usr/bin/env python3
"""A small authoritative DNS server for the kz-egress tests (stdlib only).

Serves A and AAAA answers from a JSON zone on one loopback port, over UDP
and TCP:

    {"name": {"A": ["10.213.0.2"], "AAAA": ["::1"]},
     "rebind.t": {"A_seq": [["10.213.0.2"], ["127.0.0.1"]]},
     "broken.t": {"rcode": 2},
     "long.t": {"CNAME": ["c1.t", "c2.t"], "A": ["10.213.0.2"]},
     "slow.t": {"A": [...], "tcp": "hang"}}

"A_seq"/"AAAA_seq" answer the n-th query with the n-th list (the last one
repeats; an answer sent truncated does not count): a rebinding name.
"CNAME" answers with a chain, name -> c1 -> c2 -> ..., before the
addresses (owned by the last name of the chain).
"tcp": "hang" reads that name's questions over TCP and never answers them
(the connection stays open).  Names not in the zone get NXDOMAIN; a name
with no records of the asked type gets NOERROR with no answers.  Every
answer has TTL 0.  The question is echoed byte for byte, so resolvers that
randomize the case of the name (0x20) accept the answer.

Over UDP an answer larger than 512 bytes, or than the EDNS0 payload size
the question advertised, is sent truncated: TC set, no answer records, as a
real server does; the client is expected to ask again over TCP.

usage: dnsd.py ZONE.json PORTFILE [QUERYLOG]   (binds 127.0.0.1 on a free
port, UDP and TCP, and writes the port to PORTFILE once it answers; with
QUERYLOG, every question's name and type is appended to it, one "name
type" a line, before it is answered, so a test can show that a host never
reached DNS; " tc" follows when the answer went out truncated over UDP,
" tcp" when the question came over TCP)
"""
import json
import os
import selectors
import socket
import struct
import sys


def parse_name(pkt, i):
    labels = []
    while True:
        n = pkt[i]
        if n == 0:
            return labels, i + 1
        if n & 0xC0:
            raise ValueError("compressed name")
        labels.append(pkt[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n


def parse_question(pkt):
    labels, i = parse_name(pkt, 12)
    qtype, qclass = struct.unpack("!HH", pkt[i:i + 4])
    return ".".join(labels).lower(), qtype, qclass, pkt[12:i + 4]


def udp_limit(pkt):
    """512, or the payload size of the question's EDNS0 OPT record."""
    qd, an, ns, ar = struct.unpack("!HHHH", pkt[4:12])
    if qd != 1 or an != 0 or ns != 0 or ar == 0:
        return 512
    _labels, i = parse_name(pkt, 12)
    i += 4
    for _ in range(ar):
        _labels, i = parse_name(pkt, i)
        rtype, rclass, _ttl, rdlen = struct.unpack("!HHIH", pkt[i:i + 10])
        if rtype == 41:
            return max(512, rclass)
        i += 10 + rdlen
    return 512


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode("ascii")
    return out + b"\0"


def answer(zone, counters, pkt, commit=True):
    qid, flags = struct.unpack("!HH", pkt[:4])
    name, qtype, _qclass, question = parse_question(pkt)
    rd = flags & 0x0100
    rec = zone.get(name.rstrip("."))
    rcode, rrs = 0, []
    if rec is None:
        rcode = 3
    elif "rcode" in rec:
        rcode = rec["rcode"]
    else:
        owner = b"\xc0\x0c"
        for target in rec.get("CNAME", []):
            rdata = encode_name(target)
            rrs.append(owner + struct.pack("!HHIH", 5, 1, 0, len(rdata)) +
                       rdata)
            owner = rdata
        key = {1: "A", 28: "AAAA"}.get(qtype)
        if key is not None:
            if key + "_seq" in rec:
                seq = rec[key + "_seq"]
                n = counters.get((name, key), 0)
                if commit:
                    counters[(name, key)] = n + 1
                addrs = seq[min(n, len(seq) - 1)]
            else:
                addrs = rec.get(key, [])
            fam = socket.AF_INET if key == "A" else socket.AF_INET6
            for a in addrs:
                rdata = socket.inet_pton(fam, a)
                rrs.append(owner + struct.pack("!HHIH", qtype, 1, 0,
                                               len(rdata)) + rdata)
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd | 0x0080 | rcode, 1,
                      len(rrs), 0, 0)
    return hdr + question + b"".join(rrs)


def truncate(full):
    """The header with TC set and the question, no records."""
    qid, flags = struct.unpack("!HH", full[:4])
    _labels, i = parse_name(full, 12)
    return struct.pack("!HHHHHH", qid, flags | 0x0200, 1, 0, 0, 0) + \
        full[12:i + 4]


class Server:
    def __init__(self, zone, qlog):
        self.zone, self.qlog, self.counters = zone, qlog, {}
        self.sel = selectors.DefaultSelector()
        self.bufs = {}

    def log(self, pkt, how):
        if self.qlog is not None:
            name, qtype, _qclass, _q = parse_question(pkt)
            self.qlog.write("%s %d%s\n" % (name, qtype, how))
            self.qlog.flush()

    def hangs(self, pkt):
        rec = self.zone.get(parse_question(pkt)[0].rstrip("."))
        return isinstance(rec, dict) and rec.get("tcp") == "hang"

    def on_udp(self, s):
        pkt, peer = s.recvfrom(4096)
        try:
            # A truncated answer does not count as the n-th of a sequence:
            # the client has not seen it yet.
            out = answer(self.zone, self.counters, pkt, commit=False)
            tc = len(out) > udp_limit(pkt)
            self.log(pkt, " tc" if tc else "")
            if not tc:
                out = answer(self.zone, self.counters, pkt)
            s.sendto(truncate(out) if tc else out, peer)
        except (ValueError, IndexError, struct.error, OSError):
            pass

    def on_accept(self, ls):
        try:
            c, _ = ls.accept()
        except OSError:
            return
        self.bufs[c] = b""
        self.sel.register(c, selectors.EVENT_READ, self.on_tcp)

    def on_tcp(self, c):
        try:
            data = c.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(c)
            del self.bufs[c]
            c.close()
            return
        buf = self.bufs[c] + data
        while len(buf) >= 2:
            n = struct.unpack("!H", buf[:2])[0]
            if len(buf) < 2 + n:
                break
            pkt, buf = buf[2:2 + n], buf[2 + n:]
            try:
                self.log(pkt, " tcp")
                if self.hangs(pkt):
                    continue
                out = answer(self.zone, self.counters, pkt)
                c.sendall(struct.pack("!H", len(out)) + out)
            except (ValueError, IndexError, struct.error, OSError):
                continue
        self.bufs[c] = buf

    def run(self, u, t):
        self.sel.register(u, selectors.EVENT_READ, self.on_udp)
        self.sel.register(t, selectors.EVENT_READ, self.on_accept)
        while True:
            for key, _ev in self.sel.select():
                key.data(key.fileobj)


def bind_pair():
    """A UDP and a TCP socket on the same free loopback port."""
    for _ in range(100):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            t.bind(("127.0.0.1", u.getsockname()[1]))
        except OSError:
            u.close()
            t.close()
            continue
        t.listen(64)
        return u, t
    raise SystemExit("dnsd: no free port for UDP and TCP")


def main():
    zone_path, port_file = sys.argv[1], sys.argv[2]
    with open(zone_path) as f:
        zone = {k.lower().rstrip("."): v for k, v in json.load(f).items()}
    u, t = bind_pair()
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(u.getsockname()[1]))
    os.rename(tmp, port_file)
    qlog = open(sys.argv[3], "a") if len(sys.argv) > 3 else None
    Server(zone, qlog).run(u, t)


if __name__ == "__main__":
    main()
