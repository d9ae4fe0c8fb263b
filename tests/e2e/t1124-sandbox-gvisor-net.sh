#!/bin/bash
# SANDBOX_RUNTIME=gvisor with an egress socket: the code has gVisor's own
# network stack (runsc --network=none), not the worker's; the relay is
# reached through the loader's forwarder on gVisor's loopback (requests,
# a half-closed request, 4 MiB intact), and so is the broker forward; a listener on the worker's own
# loopback is not reachable from the code (it was under --network=host);
# the forwarder's descriptors cannot be opened by the code; a forwarder
# that cannot listen at boot refuses the run, naming the step, and nothing
# runs.
# e2e: alone (gVisor on the ptrace platform takes what CPU there is)
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
RUNSC=${RUNSC:-/usr/bin/runsc}
[ -x "$RUNSC" ] || { echo "1..0 # SKIP runsc is not installed (make deps)"; exit 0; }
plan 15
export SANDBOX_RUNTIME=gvisor SANDBOX_STATE_DIR=$T/state

# A stand-in egress socket: a request for /big is answered with 4 MiB of
# a known pattern, any other with one line.
python3 -c 'import socket,os,sys,threading
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
os.chmod(sys.argv[1], 0o666); print("up", flush=True)
def serve(c):
	d=b""
	while b"\r\n\r\n" not in d:
		b=c.recv(4096)
		if not b: break
		d+=b
	n=4<<20
	body=(bytes(range(256))*(n//256))[:n] if b"/big" in d.split(b"\r\n")[0] else b"relay-ok\n"
	c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body); c.close()
while True:
	c,_=s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()' "$T/egress.sock" >"$T/egress.up" &
_pids="$_pids $!"
for _ in $(seq 50); do [ -s "$T/egress.up" ] && break; sleep 0.05; done
big=$(python3 -c 'import hashlib; print(hashlib.sha256((bytes(range(256))*((4<<20)//256))).hexdigest())')

bg "$SB" serve --id gn --socket "$T/w.sock" --egress-socket "$T/egress.sock" 2>"$T/serve.log"
agent=$LASTPID
wait_sock "$T/w.sock" 30 || { echo "Bail out! the gvisor worker did not start"; exit 1; }
# A listener on the worker's own loopback, beside the relay: the code
# reached it under --network=host, and must not now.
nsenter --net="/proc/$agent/ns/net" python3 -c 'import socket
s=socket.socket(); s.bind(("127.0.0.1", 47124)); s.listen(4); print("up", flush=True)
while True: c,_=s.accept(); c.sendall(b"host-loopback\n"); c.close()' >"$T/lo.up" 2>&1 &
_pids="$_pids $!"
for _ in $(seq 50); do [ -s "$T/lo.up" ] && break; sleep 0.05; done
is "$(cat "$T/lo.up")" "up" "a listener runs on the worker's loopback (port 47124)"

call() { python3 "$TOP/tests/sandbox/client.py" "$T/w.sock" "$@"; }
# runw SCRIPT: a bash script run with a grant; its decoded stdout.
runw() {
	local req
	req=$(python3 -c 'import json,sys
print(json.dumps({"argv": ["/bin/bash", "-c", sys.argv[1]], "grant": "grant-token", "timeout_ms": 60000}))' "$1")
	call run "$req" | python3 -c 'import json,sys,base64
r=json.load(sys.stdin); print(base64.b64decode(r.get("stdout_b64","")).decode(), end="") if r.get("ok") else print(r)'
}
out=$(runw '
echo "small=$(curl -s -x http://127.0.0.1:3128 http://example.test/)"
s=$(date +%s%N)
echo "big=$(curl -s -x http://127.0.0.1:3128 http://example.test/big | sha256sum | cut -d" " -f1)"
echo "big_ms=$(( ($(date +%s%N) - s) / 1000000 ))"
echo "ifaces=$(awk -F: "NR>2 {print \$1}" /proc/net/dev | tr -d " " | sort | tr "\n" " ")"
python3 -c "import socket
def try_(port):
    try:
        c = socket.create_connection((\"127.0.0.1\", port), timeout=5)
        return c.recv(64).decode().strip() or \"open\"
    except OSError as e:
        return type(e).__name__
print(\"hostlo=\" + try_(47124))
print(\"broker=\" + try_(4873))
s = socket.create_connection((\"127.0.0.1\", 3128))
s.sendall(b\"GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n\")
s.shutdown(socket.SHUT_WR)
d = b\"\"
for b in iter(lambda: s.recv(4096), b\"\"):
    d += b
print(\"halfclose=\" + d.decode().splitlines()[-1])"
' 2>&1)
val() { printf '%s\n' "$out" | sed -n "s/^$1=//p"; }
is "$(val small)" "relay-ok" "a request through the relay is answered, from inside gVisor"
is "$(val big)" "$big" "4 MiB through the relay arrive intact ($(val big_ms) ms)"
is "$(val halfclose)" "relay-ok" "a request whose sender shut its side for writing is still answered"
is "$(val ifaces)" "lo " "the code sees gVisor's network: a loopback only"
is "$(val hostlo)" "ConnectionRefusedError" "a listener on the worker's loopback is not reachable from the code"
is "$(val broker)" "ConnectionRefusedError" "nothing listens at the broker's port of a worker without a broker socket"

# The loader's and its forwarder's descriptors, listed through /proc/1/fd
# while a connection through the relay is open (its host socket
# included), beside /dev/null on 0-2: the control socket, the listener,
# the pair to the init, the loader's own pair to its forwarder (both
# ends), the connection and its host socket; none can be opened by the
# code.
out=$(runw 'exec 3<>/dev/tcp/127.0.0.1/3128; sleep 0.5
python3 -c "import os
n = o = 0
for f in os.listdir(\"/proc/1/fd\"):
    if os.readlink(\"/proc/1/fd/\" + f) == \"/dev/null\":
        continue
    n += 1
    for m in (os.O_RDONLY, os.O_WRONLY):
        try:
            os.close(os.open(\"/proc/1/fd/\" + f, m)); o += 1
        except OSError:
            pass
print(n, o)"' 2>&1)
is "${out% *}" "7" "the loader holds seven sockets with a connection open"
is "${out#* }" "0" "and the code can open none of them"

# The run ends, and with it the relay: a later run without a grant has
# no relay to reach, and nothing listens at its port, as on the native
# loopback (the forwarder listens only for a run that has a relay).
out=$(call run '{"argv": ["/bin/sh", "-c", "curl -s -m 5 -o /dev/null -w %{http_code} -x http://127.0.0.1:3128 http://example.test/; echo \" rc=$?\""]}' |
	python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin).get("stdout_b64","")).decode())')
like "$out" "rc=7\$" "without a grant the run has no relay: nothing listens at its port ($out)"
call shutdown >/dev/null 2>&1

# The broker forward the same way: a stand-in broker that answers the
# forward's bind of the connection to the run (GET /-/kz/bind, 200 with no
# body) and then the code's request.
python3 -c 'import socket,os,sys,threading
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
os.chmod(sys.argv[1], 0o666); print("up", flush=True)
def head(c):
	d=b""
	while b"\r\n\r\n" not in d:
		b=c.recv(1)
		if not b: return d
		d+=b
	return d
def serve(c):
	h=head(c)
	if b"/-/kz/bind" not in h or b"Bearer run-token" not in h:
		c.close(); return
	c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	head(c)
	c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nbroker-ok\n"); c.close()
while True:
	c,_=s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()' "$T/broker.sock" >"$T/broker.up" &
_pids="$_pids $!"
for _ in $(seq 50); do [ -s "$T/broker.up" ] && break; sleep 0.05; done
bg "$SB" serve --id gb --socket "$T/b.sock" --broker-socket "$T/broker.sock" 2>"$T/serveb.log"
wait_sock "$T/b.sock" 30 || { echo "Bail out! the gvisor worker did not start"; exit 1; }
out=$(python3 "$TOP/tests/sandbox/client.py" "$T/b.sock" run '{"argv": ["/bin/sh", "-c", "curl -s http://127.0.0.1:4873/pkg; curl -s -m 5 -o /dev/null -w \"relay=%{http_code}\" -x http://127.0.0.1:3128 http://x.test/"], "broker_token": "run-token"}' |
	python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin).get("stdout_b64","")).decode())')
like "$out" "^broker-ok" "the broker forward is reached at its port from inside gVisor, bound to the run"
like "$out" "relay=000" "and a worker without an egress socket has nothing at the relay's port"
python3 "$TOP/tests/sandbox/client.py" "$T/b.sock" shutdown >/dev/null 2>&1

# Fail closed: a forwarder that cannot listen (the relay's and the
# broker's ports the same) refuses the run at its boot, naming the step;
# the code never runs.
: >"$T/ran"
echo grant-token >"$T/grant"
rc_is 3 "a sandbox whose forwarder cannot listen refuses the run (exit 3)" \
	"$SB" run --timeout 30 --egress-socket "$T/egress.sock" --grant-file "$T/grant" \
	--broker-socket "$T/egress.sock" --relay-port 4000 --broker-port 4000 \
	--pass-fd 5 -- /bin/sh -c 'echo ran >&5' 5>"$T/ran"
like "$(cat "$T/.out")" "gvisor.*network: cannot listen on 127.0.0.1:4000" "naming the step and the port"
is "$(cat "$T/ran")" "" "and nothing ran"
done_testing
