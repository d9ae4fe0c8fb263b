#!/usr/bin/python3
"""A directory served over TLS for the kz-pkgbroker tests, on loopback only.

tlsserve.py DIR PORT:CERT:KEY [PORT:CERT:KEY ...]

Each PORT serves DIR (python's http.server) with its own certificate, so
one process stands for a good upstream and for ones whose certificate is
for another name or has expired.  A handshake the client aborts is
dropped and the server goes on.
"""
import functools
import http.server
import ssl
import sys
import threading


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a refused handshake is what some tests are about


def serve(root, port, cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    srv = Server(("127.0.0.1", int(port)),
                 functools.partial(Handler, directory=root))
    # The handshake runs in the handler's thread, not in accept(): a
    # client that stalls it holds up no other.
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True,
                                 do_handshake_on_connect=False)
    srv.serve_forever()


def main():
    root = sys.argv[1]
    threads = []
    for spec in sys.argv[2:]:
        port, cert, key = spec.split(":", 2)
        t = threading.Thread(target=serve, args=(root, port, cert, key),
                             daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
