#!/usr/bin/env bash
# The proxy's timeouts and bounds, with a live origin in this test's netns:
# a connect that never completes (SYNs to a neighbour that does not exist)
# ends at the connect timeout; an origin that never answers at the idle
# timeout; an idle tunnel is closed at the idle timeout while one that
# keeps talking is not; a kept-alive client that sends nothing more is cut
# off at the header timeout; connections beyond SANDBOX_EGRESS_MAX_CONNECTIONS
# are closed at once, counted across all worker threads; a client that does
# not read a large response holds the daemon to its per-direction bound,
# and every byte still arrives once it reads.  A daemon out of descriptors
# (a low RLIMIT_NOFILE, tunnels holding them all) with connections waiting
# in its backlog pauses accepting instead of spinning on accept(2): it
# burns no CPU, logs the shortage once, and serves again once descriptors
# are freed.  One run holds at most a quarter of the connections (at least
# 16): its next is refused as run_connections while other runs are served.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=106
plan 22

eg_netns $N || { echo "Bail out! cannot create a network namespace"; exit 1; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
O=$EG_ORIGIN
# A silent origin: accepts, reads, never answers.
cat >"$T/silent.py" <<'EOF'
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(64)
conns = []
while True:
    c, _ = s.accept()
    conns.append(c)
EOF
bg ip netns exec "$EG_NS" "$EG_PY" "$T/silent.py" "$O" 81
# 10.213.N.6: routed into the veth towards a neighbour that never answers.
ip route add "10.213.$N.4/30" dev "$EG_VH"
ip neigh replace "10.213.$N.6" lladdr 02:00:00:00:00:01 dev "$EG_VH" nud permanent
cat >"$T/zone.json" <<EOF
{"origin.kz.test": {"A": ["$O"]}, "void.kz.test": {"A": ["10.213.$N.6"]}}
EOF
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
eg_keys
EG_PORT=$(eg_free_port)
cat >"$T/eg.conf" <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/29
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = 127.0.0.1:$EG_PORT
SANDBOX_EGRESS_ALLOWED_PORTS = 80,81
SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS = 2
SANDBOX_EGRESS_CONNECT_TIMEOUT_SECONDS = 1
SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS = 2
SANDBOX_EGRESS_MAX_CONNECTIONS = 6
SANDBOX_EGRESS_THREADS = 2
EOF
eg_serve "$T/eg.conf" 2>"$T/egress.log" || { echo "Bail out! kz-egress did not start"; exit 1; }
P=http://127.0.0.1:$EG_PORT
G=$(kz-egress grant --field-key "$EG_KEY" --run run-106)

# timed CMD...: runs CMD, prints its output then the seconds it took.
timed() { local s e o; s=$(date +%s.%N); o=$("$@"); e=$(date +%s.%N); echo "$o $(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.1f", b - a }')"; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "$P" -U "run:$G" "$@"; }
within() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; }

R=$(timed code http://void.kz.test/)
is "${R% *}" 502 "a connect that never completes: 502"
t "after the 1 s connect timeout (took ${R#* } s)" within "${R#* }" 0.8 3.5
R=$(timed code http://origin.kz.test:81/)
is "${R% *}" 502 "an origin that never answers: 502"
t "after the 2 s idle timeout (took ${R#* } s)" within "${R#* }" 1.8 4.5

# Python clients for what curl cannot do: hold a tunnel, stay idle, not read.
cat >"$T/cli.py" <<'EOF'
import socket, sys, time
port, grant, what = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
auth = "Proxy-Authorization: Bearer %s\r\n" % grant
def until_eof(s):
    t = time.time()
    s.settimeout(15)
    while s.recv(65536):
        pass
    return time.time() - t
if what == "tunnel-idle":
    s.sendall(("CONNECT origin.kz.test:80 HTTP/1.1\r\nHost: x\r\n%s\r\n" % auth).encode())
    assert s.recv(100).startswith(b"HTTP/1.1 200")
    print("%.1f" % until_eof(s))
elif what == "tunnel-busy":
    s.sendall(("CONNECT origin.kz.test:80 HTTP/1.1\r\nHost: x\r\n%s\r\n" % auth).encode())
    assert s.recv(100).startswith(b"HTTP/1.1 200")
    ok = 0
    s.settimeout(5)
    for i in range(5):
        s.sendall(b"GET /%d HTTP/1.1\r\nHost: origin.kz.test\r\n\r\n" % i)
        want, buf = b"origin origin.kz.test /%d\n" % i, b""
        while not buf.endswith(want):
            b = s.recv(4096)
            if not b:
                break
            buf += b
        ok += buf.endswith(want)
        time.sleep(0.9)
    print(ok)
elif what == "keepalive-idle":
    s.sendall(("GET http://origin.kz.test/ka HTTP/1.1\r\nHost: origin.kz.test\r\n%s\r\n" % auth).encode())
    buf = b""
    while not buf.endswith(b"origin origin.kz.test /ka\n"):
        buf += s.recv(4096)
    print("%.1f" % until_eof(s))
elif what == "slow-reader":
    n = int(sys.argv[4])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(("GET http://origin.kz.test/bytes/%d HTTP/1.1\r\nHost: origin.kz.test\r\n%s\r\n" % (n, auth)).encode())
    time.sleep(3)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    got, head = 0, b""
    while b"\r\n\r\n" not in head:
        head += s.recv(65536)
    got = len(head.split(b"\r\n\r\n", 1)[1])
    while got < n:
        b = s.recv(1 << 20)
        if not b:
            break
        got += len(b)
    print(got)
EOF
cli() { "$EG_PY" "$T/cli.py" "$EG_PORT" "$G" "$@"; }

R=$(cli tunnel-idle)
t "an idle tunnel is closed after the 2 s idle timeout (took $R s)" within "$R" 1.8 4.5
is "$(cli tunnel-busy)" 5 "a tunnel that keeps talking outlives the idle timeout"
R=$(cli keepalive-idle)
t "a kept-alive client that sends no next request is cut off at the 2 s header timeout (took $R s)" \
	within "$R" 1.8 4.5

# Six connections fill the bound whichever thread took them; the seventh
# is closed at once, and once one of the six is gone a new one is served.
cat >"$T/bound.py" <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(6)]
for s in held:
    s.sendall(b"GET http://origin.kz.test/ HTTP/1.1\r\n")  # a head never ended
time.sleep(0.3)
extra = socket.create_connection(("127.0.0.1", port))
extra.settimeout(1)
try:
    print("closed" if extra.recv(10) == b"" else "served")
except socket.timeout:
    print("open")
held.pop().close()
time.sleep(0.3)
again = socket.create_connection(("127.0.0.1", port))
again.sendall(b"GET http://origin.kz.test/ HTTP/1.1\r\n\r\n")
again.settimeout(3)
print("answered" if again.recv(100).startswith(b"HTTP/1.1 407") else "not answered")
EOF
R=$("$EG_PY" "$T/bound.py" "$EG_PORT" | tr '\n' ' ')
like "$R" '^closed ' "a connection beyond the 6 allowed (over two threads) is closed at once"
like "$R" '^closed answered' "a slot freed is served again"
sleep 2.5	# the held heads time out

# The slow reader: the daemon holds at most its per-direction bound.
KPID=$EG_PID
R0=$(awk '/^VmRSS/ {print $2}' "/proc/$KPID/status")
coproc SR { "$EG_PY" "$T/cli.py" "$EG_PORT" "$G" slow-reader 67108864; }
read -r line <&"${SR[0]}"
R1=$(awk '/^VmRSS/ {print $2}' "/proc/$KPID/status")
echo go >&"${SR[1]}"
read -r got <&"${SR[0]}"
t "a client that does not read a 64 MiB response costs the daemon < 6 MiB (grew $((R1 - R0)) KiB)" \
	test $((R1 - R0)) -lt 6144
is "$got" 67108864 "and every byte arrives once it reads"
t "the daemon is still serving" test "$(code http://origin.kz.test/)" = 200
unlike "$(cat "$T/egress.log")" '"level":"(error|fatal)"' "no errors logged"

# ---- descriptors exhausted ----
FD_PORT=$(eg_free_port)
sed -e "s/^SANDBOX_EGRESS_LISTEN = .*/SANDBOX_EGRESS_LISTEN = 127.0.0.1:$FD_PORT/" \
	-e 's/^SANDBOX_EGRESS_MAX_CONNECTIONS = .*/SANDBOX_EGRESS_MAX_CONNECTIONS = 1000/' \
	-e 's/^SANDBOX_EGRESS_THREADS = .*/SANDBOX_EGRESS_THREADS = 1/' \
	-e 's/^SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS = .*/SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS = 30/' \
	"$T/eg.conf" >"$T/fd.conf"
bg prlimit --nofile=32:32 kz-egress serve --config "$T/fd.conf" 2>"$T/fd.log"
FD_PID=$LASTPID
i=0; while ! bash -c "echo >/dev/tcp/127.0.0.1/$FD_PORT" 2>/dev/null; do
	i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.05; done
cat >"$T/fd.py" <<'EOF'
import socket, sys, time
port, grant, pid = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def ticks():
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
held = []
for _ in range(30):  # tunnels until the descriptors run out
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("CONNECT origin.kz.test:80 HTTP/1.1\r\nHost: x\r\n"
               "Proxy-Authorization: Bearer %s\r\n\r\n" % grant).encode())
    s.settimeout(3)
    try:
        s.recv(100)
    except OSError:
        pass
    held.append(s)
waiting = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
t0 = ticks()
time.sleep(2)
print(ticks() - t0)
for s in held + waiting:
    s.close()
time.sleep(0.5)
EOF
R=$("$EG_PY" "$T/fd.py" "$FD_PORT" "$G" "$FD_PID")
t "out of descriptors with a backlog, the daemon does not spin ($R ticks in 2 s)" test "${R:-999}" -lt 40
is "$(grep -c '"event":"egress.accept"' "$T/fd.log")" 1 "the shortage is logged once"
is "$(grep -vc '^{' "$T/fd.log")" 0 "and nothing else floods its stderr"
t "descriptors freed, it serves again" test "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
	-x "http://127.0.0.1:$FD_PORT" -U "run:$G" http://origin.kz.test/)" = 200
# ---- one run's share of the connections ----
RUN_PORT=$(eg_free_port)
sed -e "s/^SANDBOX_EGRESS_LISTEN = .*/SANDBOX_EGRESS_LISTEN = 127.0.0.1:$RUN_PORT/" \
	-e 's/^SANDBOX_EGRESS_MAX_CONNECTIONS = .*/SANDBOX_EGRESS_MAX_CONNECTIONS = 80/' \
	-e 's/^SANDBOX_EGRESS_CONNECT_TIMEOUT_SECONDS = .*/SANDBOX_EGRESS_CONNECT_TIMEOUT_SECONDS = 5/' \
	-e 's/^SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS = .*/SANDBOX_EGRESS_IDLE_TIMEOUT_SECONDS = 30/' \
	"$T/eg.conf" >"$T/run.conf"
bg kz-egress serve --config "$T/run.conf" 2>"$T/run.log"
i=0; while ! bash -c "echo >/dev/tcp/127.0.0.1/$RUN_PORT" 2>/dev/null; do
	i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.05; done
G2=$(kz-egress grant --field-key "$EG_KEY" --run run-106-other)
cat >"$T/share.py" <<'EOF'
import socket, sys, time
port, ga, gb = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def tunnel(g):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("CONNECT origin.kz.test:80 HTTP/1.1\r\nHost: x\r\n"
               "Proxy-Authorization: Bearer %s\r\n\r\n" % g).encode())
    s.settimeout(3)
    return s, s.recv(100).split(b"\r\n")[0].split(b" ")[1].decode()
held = [tunnel(ga) for _ in range(20)]
print("".join("y" if r == "200" else "(%s)" % r for _, r in held), end=" ")
print(tunnel(ga)[1], tunnel(gb)[1], end=" ")
held[0][0].close()
time.sleep(0.5)
print(tunnel(ga)[1])
EOF
R=$("$EG_PY" "$T/share.py" "$RUN_PORT" "$G" "$G2")
like "$R" '^y{20} ' "one run holds 20 tunnels, a quarter of 80 connections ($R)"
like "$R" '^y+ 403 ' "its 21st is refused"
like "$R" '^y+ 403 200 ' "while another run is still served"
like "$R" ' 200$' "and one of its own closed, the run is served again"
like "$(grep '"event":"egress.refuse"' "$T/run.log")" '"reason":"run_connections"' \
	"the refusal is logged as run_connections"
done_testing
