#!/usr/bin/python3
"""A hostile npm upstream for the kz-pkgbroker tests, on loopback only.

GET /kz-liar answers a package document whose one tarball is served
without a Content-Length (HTTP/1.0, close-delimited) and keeps going far
past any ceiling, so only a ceiling enforced while streaming stops it.
Every request's Authorization header (or its absence) is appended to the
file named by the second argument, so a test can see what the broker sent.
usage: liar.py PORT HEADER-LOG
"""
import http.server
import json
import sys

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


http.server.HTTPServer(("127.0.0.1", PORT), H).serve_forever()
