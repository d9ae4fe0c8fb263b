#!/usr/bin/env bash
# Peers that abuse what the proxy passes on, live against origins in this
# test's netns.  An origin that answers with endless 100 Continue heads to a
# client that does not read costs the daemon a bounded amount of memory, and
# the client gets a 502 after at most 8 interim heads, at once.  A Connection
# header that names a framing or routing header (Content-Length,
# Transfer-Encoding, Host) is refused in a request (400, recorded) and in a
# response (502): no body becomes a second request.  A grant bounds what it
# admitted: a CONNECT tunnel and a plain exchange read until close are both
# closed within a second of its expiry, and the close is logged and audited.
# e2e: alone (it times a close to within a second)
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=109
plan 24

eg_netns $N || { echo "Bail out! cannot create a network namespace"; exit 1; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
O=$EG_ORIGIN
# The flooding origin: answers each request with 100 Continue heads of
# 8 KB, as fast as the proxy takes them, for SECS seconds, then closes.
cat >"$T/flood.py" <<'EOF'
import socket, sys, threading, time
addr, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, port))
ls.listen(16)
head = b"HTTP/1.1 100 Continue\r\nX-Pad: " + b"a" * 8000 + b"\r\n\r\n"
def serve(c):
    c.recv(65536)
    t0 = time.time()
    try:
        while time.time() - t0 < secs:
            c.sendall(head * 64)
    except OSError:
        pass
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
bg ip netns exec "$EG_NS" "$EG_PY" "$T/flood.py" "$O" 81 3
cat >"$T/zone.json" <<EOF
{"origin.kz.test": {"A": ["$O"]}}
EOF
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
eg_keys
bg "$EG_PY" "$EGDIR/sink.py" "$T/audit.sock" "$T/audit.jsonl"
wait_sock "$T/audit.sock" 10
EG_PORT=$(eg_free_port)
cat >"$T/eg.conf" <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = 127.0.0.1:$EG_PORT
SANDBOX_EGRESS_ALLOWED_PORTS = 80,81
SANDBOX_EGRESS_AUDIT_SOCKET = $T/audit.sock
SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS = 5
SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS = 20
SANDBOX_EGRESS_THREADS = 1
EOF
eg_serve "$T/eg.conf" 2>"$T/egress.log" || { echo "Bail out! kz-egress did not start"; exit 1; }
G=$(kz-egress grant --field-key "$EG_KEY" --run run-109)
within() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; }

# ---- endless interim responses ----
cat >"$T/cli.py" <<'EOF'
import base64, json, socket, sys, time
port, grant, what = int(sys.argv[1]), sys.argv[2], sys.argv[3]
auth = "Proxy-Authorization: Bearer %s\r\n" % grant
def connect(rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s
def drain(s, limit, cap=8 << 20):
    """Reads until the end, limit seconds or cap bytes: data, 'eof'|'open'."""
    s.settimeout(0.5)
    t, buf = time.time(), b""
    while time.time() - t < limit and len(buf) < cap:
        try:
            b = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return buf, "eof"
        if not b:
            return buf, "eof"
        buf += b
    return buf, "open"
def interim(buf):
    final = b"502 Bad Gateway" in buf
    return "interim=%d final502=%s" % (buf.count(b"HTTP/1.1 100 "), final)
def expiry(g):
    claims = g.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["exp"]
flood = ("GET http://origin.kz.test:81/x HTTP/1.1\r\nHost: origin.kz.test\r\n%s\r\n" % auth).encode()
if what == "flood-noread":
    s = connect(4096)
    s.sendall(flood)
    print("sent", flush=True)
    sys.stdin.readline()
    buf, end = drain(s, 5)
    print(interim(buf), end)
elif what == "flood-read":
    s = connect()
    t = time.time()
    s.sendall(flood)
    buf, end = drain(s, 5)
    print(interim(buf), end, "%.1f" % (time.time() - t))
elif what == "tunnel":
    exp = expiry(grant)
    s = connect()
    s.sendall(("CONNECT origin.kz.test:80 HTTP/1.1\r\nHost: x\r\n%s\r\n" % auth).encode())
    s.settimeout(2)
    ok, closed = 0, None
    head = s.recv(100)
    while time.time() < exp + 3:
        try:
            s.sendall(b"GET /t HTTP/1.1\r\nHost: origin.kz.test\r\n\r\n")
            buf = b""
            while not buf.endswith(b"origin origin.kz.test /t\n"):
                b = s.recv(4096)
                if not b:
                    raise ConnectionResetError
                buf += b
            ok += time.time() < exp
        except (OSError, socket.timeout):
            closed = time.time() - exp
            break
        time.sleep(0.2)
    print(head.split(b"\r\n")[0].decode(), "before=%d" % ok,
          "closed=%s" % ("never" if closed is None else "%.2f" % closed))
elif what == "drip":
    exp = expiry(grant)
    s = connect()
    s.sendall(("GET http://origin.kz.test/drip/10 HTTP/1.1\r\nHost: origin.kz.test\r\n%s\r\n" % auth).encode())
    s.settimeout(1)
    buf, before, closed = b"", 0, None
    while time.time() < exp + 3:
        try:
            b = s.recv(4096)
        except socket.timeout:
            continue
        except OSError:
            b = b""
        if not b:
            closed = time.time() - exp
            break
        buf += b
        if time.time() < exp:
            before = buf.count(b"drip ")
    print(buf.split(b"\r\n")[0].decode(), "before=%d" % before,
          "closed=%s" % ("never" if closed is None else "%.2f" % closed))
EOF
cli() { "$EG_PY" "$T/cli.py" "$EG_PORT" "$@"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$EG_PID/status"; }

R0=$(rss) MAX=0
coproc FL { cli "$G" flood-noread; }
read -r line <&"${FL[0]}"
for i in $(seq 12); do
	sleep 0.25
	r=$(rss); [ $((r - R0)) -gt $MAX ] && MAX=$((r - R0))
done
echo go >&"${FL[1]}"
read -r got <&"${FL[0]}"
t "an origin flooding 100 Continue at a client that does not read: the daemon grows < 16 MiB (grew $MAX KiB)" \
	test "$MAX" -lt 16384
like "$got" 'final502=True eof$' "that client gets a 502 and the connection ends"
like "$got" 'interim=[0-8] ' "after at most 8 interim heads ($got)"
got=$(cli "$G" flood-read)
like "$got" 'interim=[0-8] final502=True eof ' "a client that reads: at most 8 interim heads, then a 502 ($got)"
t "at once (${got##* } s)" within "${got##* }" 0 1.5
like "$(grep '"event":"egress.upstream"' "$T/egress.log" | tail -1)" 'too many interim responses' \
	"the cut is logged"
t "the daemon is still serving" test "$(curl -s -o /dev/null -w '%{http_code}' -x "http://run:$G@127.0.0.1:$EG_PORT" \
	http://origin.kz.test/)" = 200

# ---- a Connection header naming framing or routing ----
raw() { printf '%b' "$1" | "$EG_PY" "$TOP/tests/egress/raw.py" "127.0.0.1:$EG_PORT" "${2:-3}"; }
A="Proxy-Authorization: Bearer $G\r\n"
SMUG="GET /smuggled HTTP/1.1\r\nHost: origin.kz.test\r\n\r\n"
R=$(raw "POST http://origin.kz.test/p HTTP/1.1\r\nHost: origin.kz.test\r\n${A}Connection: content-length\r\nContent-Length: $(printf '%b' "$SMUG" | wc -c)\r\n\r\n$SMUG")
like "$R" '^HTTP/1.1 400' "Connection: content-length in a request: 400"
unlike "$R" 'smuggled|HTTP/1.1 200' "the body never becomes a request at the origin"
like "$(grep '"event":"egress.bad_request"' "$T/egress.log" | tail -1)" '"reason":"bad_connection"' \
	"the refusal is recorded as bad_connection"
like "$(raw "POST http://origin.kz.test/p HTTP/1.1\r\n${A}Transfer-Encoding: chunked\r\nConnection: keep-alive, Transfer-Encoding\r\n\r\n5\r\nhello\r\n0\r\n\r\n")" \
	'^HTTP/1.1 400' "Connection: ..., Transfer-Encoding: 400"
like "$(raw "GET http://origin.kz.test/ HTTP/1.1\r\nHost: origin.kz.test\r\n${A}Connection: HOST\r\n\r\n")" \
	'^HTTP/1.1 400' "Connection: Host: 400"
like "$(raw "POST http://origin.kz.test/p HTTP/1.1\r\n${A}Connection: close, X-Hop\r\nX-Hop: 1\r\nContent-Length: 5\r\n\r\nhello")" \
	'^got 5 [0-9a-f]{64}$' "Connection naming any other header still passes"
t0=$(date +%s%N)
R=$(raw "GET http://origin.kz.test/raw/connlen HTTP/1.1\r\nHost: origin.kz.test\r\n${A}\r\n" 8)
ms=$((($(date +%s%N) - t0) / 1000000))
like "$R" '^HTTP/1.1 502' "an origin's Connection: Content-Length: 502"
t "at once (${ms} ms)" test "$ms" -lt 2000

# ---- a grant bounds what it admitted ----
G3=$(kz-egress grant --field-key "$EG_KEY" --run run-109 --ttl 3)
R=$(cli "$G3" tunnel)
like "$R" '^HTTP/1.1 200 .* before=[1-9]' "a tunnel under a 3 s grant carries traffic before it expires ($R)"
t "and is closed within a second after ($R)" within "${R##*closed=}" -0.2 1.2
G3=$(kz-egress grant --field-key "$EG_KEY" --run run-109 --ttl 3)
R=$(cli "$G3" drip)
like "$R" '^HTTP/1.1 200 OK before=[1-9]' "an exchange read until close under a 3 s grant flows before it expires ($R)"
t "and is closed within a second after ($R)" within "${R##*closed=}" -0.2 1.2
L=$(grep '"event":"egress.expire"' "$T/egress.log")
like "$L" '"reason":"grant_expired","host":"origin.kz.test","port":"80","closed":"tunnel"' \
	"the tunnel's close is logged with the reason"
like "$L" '"closed":"exchange"' "and so is the exchange's"
i=0; while [ "$(grep -c '"outcome": "closed"' "$T/audit.jsonl")" -lt 2 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
like "$(grep '"outcome": "closed"' "$T/audit.jsonl" | head -1)" '"kind": "egress_refusal".*"reason": "grant_expired"' \
	"both are audited as egress_refusal, grant_expired, outcome closed"
is "$(grep -c '"outcome": "closed"' "$T/audit.jsonl")" 2 "once each"
unlike "$(cat "$T/egress.log")" '"level":"(error|fatal)"' "no errors logged"
done_testing
