#!/usr/bin/env python3
"""Writes the fuzz seed corpora, tests/fuzz/seeds/TARGET/, one input a file,
from the inputs the unit and e2e tests already use (their C string literals
and t2102's host table).  Run it by hand when those tests change; the seeds
it writes are committed, and so are crash inputs (crash-*), which it keeps.

usage: tests/fuzz/mkseeds.py
"""
import hashlib
import os
import re

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = os.path.join(TOP, "tests", "fuzz", "seeds")
LIT = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def c_unescape(s):
    out = bytearray()
    for ch in s.encode("latin-1", "backslashreplace").decode(
            "unicode_escape"):
        o = ord(ch)
        out += bytes([o]) if o < 256 else ch.encode("utf-8")
    return bytes(out)


def literals(path):
    """Every string literal, adjacent literals concatenated as C does."""
    src = open(os.path.join(TOP, path), encoding="latin-1").read()
    src = re.sub(r"^#include.*$", "", src, flags=re.M)
    out, prev_end, cur = [], None, None
    for m in LIT.finditer(src):
        if cur is not None and src[prev_end:m.start()].strip() == "":
            cur += c_unescape(m.group(1))
        else:
            if cur is not None:
                out.append(cur)
            cur = c_unescape(m.group(1))
        prev_end = m.end()
    if cur is not None:
        out.append(cur)
    return out


def t2102_hosts():
    src = open(os.path.join(TOP, "tests/e2e/t2102-egress-destinations.sh")).read()
    hosts = set()
    for line in src.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] in ("private_networks", "public_internet",
                                    "host_allowlist", "isolated"):
            hosts.add(f[1].replace("$O", "10.213.102.2").replace("$N", "102"))
    hosts.update(n + ".kz.test" for n in re.findall(r'"(\w+)\.kz\.test"', src))
    return sorted(hosts)


def write(target, items):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if not f.startswith("crash-"):
            os.unlink(os.path.join(d, f))
    for b in set(items):
        name = hashlib.sha1(b).hexdigest()[:16]
        with open(os.path.join(d, name), "wb") as f:
            f.write(b)


def main():
    http = literals("tests/unit/kz-egress/check_http.c")
    heads = [s for s in http if b"HTTP/1." in s or b"HTTP/2" in s]
    write("http_head",
          [(b"\x01" if s.startswith(b"HTTP/") else b"\x00") + s for s in heads] +
          [b"\x00POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\n",
           b"\x06POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"fffffffffffffff\r\n"])
    hosts = t2102_hosts()
    auth = [s for s in http if b"\r" not in s and b" " not in s and s]
    write("authority",
          [(b"\x01" if s.lower().startswith(b"http://") else b"\x00") + s
           for s in auth] +
          [b"\x00" + h.encode() + b":80" for h in hosts] +
          [b"\x01http://" + h.encode() + b":80/probe?q=1" for h in hosts] +
          [b"\x01http://user:pw@[::1]:8080/x#f"])
    addr = [s for s in literals("tests/unit/kz-egress/check_addr.c")
            if 0 < len(s) < 100 and b"%s" not in s and b" " not in s]
    write("host", addr + [h.encode() for h in hosts])
    write("ip_diff", addr + [h.encode() for h in hosts])
    g = literals("tests/unit/kz-egress/check_grant.c")
    claims = [s for s in g if s.startswith(b"{")]
    good = (b'{"v":1,"run":"0123456789abcdef0123456789abcdef","iat":1000000,'
            b'"nbf":1000000,"exp":1000600,"caps":["turn"]}')
    write("grant", [b"\x00" + s for s in g if not s.startswith(b"{")] +
          [b"\x01" + s for s in claims + [good]] +
          [b"\x02alice\x00sharedsecret\n", b'\x02a"b\x00k'])
    # check_schema.c's tables are {kind, event, ...}: a kind literal, then
    # the event's literals.
    sch = literals("tests/unit/kz-audit/check_schema.c")
    pairs = [(k, e) for k, e in zip(sch, sch[1:])
             if re.fullmatch(rb"[a-z_.]*", k) and e.startswith(b"{")]
    write("audit_schema",
          [b'{"kind":"%s","event":%s}' % p for p in pairs] +
          [b'{"kind":"%s",%s' % (k, e[1:]) for k, e in pairs if len(e) > 2] +
          [b'{"kind":"lease","worker_id":"w-1"}'])
    write("classify", [s for s in literals("tests/unit/check_classify.c") if s])
    write("path", [s for s in literals("tests/unit/check_path.c") if s] +
          [b"/srv/r|/srv/r/a", b"/srv/r|/srv/r-x/a", b"/|/a"])


if __name__ == "__main__":
    main()
