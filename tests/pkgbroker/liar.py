#!/usr/bin/python3
"""A hostile npm upstream for the kz-pkgbroker tests, on loopback only.

GET /kz-liar answers a package document whose one tarball is served
without a Content-Length (HTTP/1.0, close-delimited) and keeps going far
past any ceiling, so only a ceiling enforced while streaming stops it.
GET /kz-split/-/kz-split-1.0.0.tgz answers a Content-Length of 5 and a
chunked body far longer, a response forged for the client's next request
inside it (a framing the broker must not pass on); /kz-twolen answers two
lengths, /kz-gzte a Transfer-Encoding that is not chunked alone.  /kz-fat and its
tarball answer 32 MB of header lines before a small body (headers the
broker must not buffer without a bound); /kz-chunk declares a chunk of
256 MB, /kz-chunkline sends a chunk-size line of 32 MB; /kz-slow answers
after 8 seconds (this server answers one request at a time).
Every request's Authorization header (or its absence) is appended to the
file named by the second argument, so a test can see what the broker sent.
usage: liar.py PORT HEADER-LOG
"""
import http.server
import json
import sys
import time

PORT = int(sys.argv[1])
LOG = sys.argv[2]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def do_GET(self):
        with open(LOG, "a") as f:
            f.write("auth=%s\n" % (self.headers.get("Authorization") or "-"))
        base = "http://127.0.0.1:%d" % PORT
        try:
            if self.raw():
                return
        except OSError:
            return
        if self.path == "/kz-liar":
            doc = {"name": "kz-liar", "dist-tags": {"latest": "1.0.0"},
                   "readme": "UPSTREAM-README", "maintainers": [
                       {"name": "x", "email": "UPSTREAM-EMAIL@example.invalid"}],
                   "versions": {"1.0.0": {
                       "name": "kz-liar", "version": "1.0.0",
                       "_npmUser": {"email": "UPSTREAM-EMAIL@example.invalid"},
                       "dist": {"tarball": base + "/kz-liar/-/kz-liar-1.0.0.tgz",
                                "shasum": "0" * 40}},
                       "0.9.0": {"name": "kz-liar", "version": "0.9.0",
                                 "dist": {"tarball": "http://elsewhere.invalid/x.tgz"}}}}
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == "/kz-liar/-/kz-liar-1.0.0.tgz":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            try:
                for _ in range(64):
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                pass
            return
        self.send_response(404)
        self.end_headers()


    def raw(self):
        if self.path == "/kz-split/-/kz-split-1.0.0.tgz":
            forged = b'{"name":"kz-forged"}'
            forged = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(forged)) + forged
            body = b"hello" + forged
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n" +
                             b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
            return True
        if self.path == "/kz-twolen/-/kz-twolen-1.0.0.tgz":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                             b"Content-Length: 50\r\nConnection: close\r\n\r\n"
                             + b"x" * 50)
            return True
        if self.path == "/kz-gzte/-/kz-gzte-1.0.0.tgz":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                             b"Transfer-Encoding: gzip, chunked\r\n"
                             b"Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            return True
        if self.path in ("/kz-fat", "/kz-fat/-/kz-fat-1.0.0.tgz"):
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            pad = b"X-Pad: " + b"a" * 1017 + b"\r\n"
            for _ in range(32):
                self.wfile.write(pad * 1024)
            body = b'{"name":"kz-fat","versions":{}}'
            self.wfile.write(b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                             % len(body) + body)
            return True
        if self.path == "/kz-slow":
            # An upstream that takes its time (and, one request at a
            # time, keeps every other fetch of the broker waiting).
            time.sleep(8)
            return False
        if self.path == "/kz-chunk/-/kz-chunk-1.0.0.tgz":
            # One chunk declared at 256 MB; 32 MB of it sent, then a pause
            # the test does not wait for.
            self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                             b"\r\n10000000\r\n")
            for _ in range(32):
                self.wfile.write(b"\0" * (1 << 20))
            return True
        if self.path == "/kz-chunkline/-/kz-chunkline-1.0.0.tgz":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(32):
                self.wfile.write(b"0" * (1 << 20))
            self.wfile.write(b"1\r\nx\r\n0\r\n\r\n")
            return True
        return False


http.server.HTTPServer(("127.0.0.1", PORT), H).serve_forever()
