#!/usr/bin/env python3
"""A tiny HTTP/1.1 origin for the kz-egress tests, run inside a test network
namespace.  GET answers "origin <host> <path>" (GET /headers: the request
headers it received; GET /bytes/N: N bytes of "x"; GET /drip/N: a body
without length, read until close, one line every 0.2 s for N seconds;
GET /raw/NAME: a malformed response head from RAW, then the connection held
open); POST answers "got N <sha256>" for the body it read (Content-Length or
chunked).  Keep-alive on.

usage: origin.py ADDR PORT
"""
import hashlib
import http.server
import sys
import time

# Heads no conforming origin sends; each is followed by silence.
RAW = {
    "barelf": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi",
    "ssh": b"SSH-2.0-OpenSSH_9.2\r\n",
    "nul": b"HTTP/1.1 200 OK\r\nX: \x00\r\n",
    # Framing a proxy would strip as hop-by-hop while it frames by it.
    "connlen": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
    b"Connection: Content-Length\r\n\r\nhi",
}


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, body):
        b = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(b)
            except (BrokenPipeError, ConnectionResetError):
                # A test's client that stops reading (a refusal mid-body)
                # has gone: nothing to answer, and no traceback.
                self.close_connection = True

    def do_GET(self):
        if self.path.startswith("/raw/"):
            self.wfile.write(RAW[self.path[5:]])
            self.wfile.flush()
            time.sleep(20)
            self.close_connection = True
            return
        if self.path.startswith("/drip/"):
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for i in range(int(self.path[6:]) * 5):
                    self.wfile.write(b"drip %d\n" % i)
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass  # the proxy closed it
            return
        if self.path.startswith("/bytes/"):
            n = int(self.path[7:])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"x" * 65536
            while n > 0:
                self.wfile.write(block[:min(n, len(block))])
                n -= min(n, len(block))
            return
        if self.path == "/headers":
            self.reply("".join("%s: %s\n" % kv for kv in self.headers.items()))
            return
        self.reply("origin %s %s\n" % (self.headers.get("Host"), self.path))

    do_HEAD = do_GET

    def do_POST(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                try:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                except ValueError:
                    self.close_connection = True
                    return
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.reply("got %d %s\n" % (len(data), hashlib.sha256(data).hexdigest()))


class S(http.server.ThreadingHTTPServer):
    daemon_threads = True


S((sys.argv[1], int(sys.argv[2])), H).serve_forever()
