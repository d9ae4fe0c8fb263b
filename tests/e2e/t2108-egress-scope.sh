#!/usr/bin/env bash
# The scope in force, live: `kz-egress status` asks the running daemon on
# its status socket (and says so), or computes from the config without one
# (and says that), and exits 1 when the scope is isolation.  SIGHUP reloads
# the config: the next connection gets the new scope, a tunnel admitted
# before stays up, the next request on a kept-alive connection has its
# grant verified again under the new public key (a rotated key revokes it), a broken file reloads as isolation (never the old scope
# or the open default), the reload is logged and audited.  A proxy
# restarted without its public key file reports isolation.  The only
# origin is in this test's netns.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=108
plan 45
for k in $(env | grep -o '^SANDBOX_EGRESS_[A-Z_]*'); do unset "$k"; done
unset KZ_CONFIG KZ_SOCKET KZ_RUN_DIR

eg_site $N
eg_keys

# A stand-in audit sink: acknowledges every append and keeps the events.
bg "$EG_PY" "$EGDIR/sink.py" "$T/audit.sock" "$T/audit.jsonl"
wait_sock "$T/audit.sock" 10

# A tunnel: CONNECT, one request, then another once $T/go exists.
cat >"$T/tunnel.py" <<'EOF'
import os, socket, sys, time
port, grant, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(("CONNECT origin.kz.test:80 HTTP/1.1\r\nHost: origin.kz.test:80\r\n"
           "Proxy-Authorization: Bearer %s\r\n\r\n" % grant).encode())
def head():
    b = b""
    while b"\r\n\r\n" not in b:
        d = s.recv(1)
        if not d:
            return None
        b += d
    return b.decode()
def get(path):
    s.sendall(("GET %s HTTP/1.1\r\nHost: origin.kz.test\r\n\r\n" % path).encode())
    h = head()
    if h is None:
        return "closed"
    n = int([l for l in h.split("\r\n") if l.lower().startswith("content-length")][0].split(":")[1])
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            return "closed"
        b += d
    return b.decode().strip()
print(head().split("\r\n")[0], flush=True)
print(get("/before"), flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
print(get("/after"), flush=True)
EOF

EG_PORT=$(eg_free_port)
C=$T/eg.conf
open_conf() {
	cat <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = 127.0.0.1:$EG_PORT
SANDBOX_EGRESS_AUDIT_SOCKET = $T/audit.sock
SANDBOX_EGRESS_STATUS_SOCKET = $T/status.sock
SANDBOX_EGRESS_TURN = turn.kz.test:3478
SANDBOX_EGRESS_TOKEN_TTL_SECONDS = 900
EOF
}
put_conf() { cat >"$C.new" && mv "$C.new" "$C"; }
open_conf | put_conf

# Without a daemon: computed from the config, and said so.
S=$(kz-egress status --config "$C")
like "$S" "^scope from the configuration \(no running daemon at $T/status.sock\)" \
	"no daemon: the scope is computed from the config and says so"
rc_is 0 "no daemon, an open scope: exit 0" kz-egress status --config "$C"

eg_serve "$C" 2>"$T/egress.log" || { echo "Bail out! kz-egress did not start"; exit 1; }
wait_sock "$T/status.sock" 10
G=$(kz-egress grant --field-key "$EG_KEY" --run run-108)
code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
X="http://run:$G@127.0.0.1:$EG_PORT"
is "$(code -x "$X" http://origin.kz.test/one)" 200 "private_networks: the test origin is reached"
is "$(code -x "$X" http://origin.kz.test:22/)" 403 "a port not allowed is refused"

S=$(kz-egress status --config "$C")
like "$S" "^scope in force \(running daemon, $T/status.sock\)" "a running daemon: its answer, and said so"
like "$S" '^mode in force: private_networks' "status: the mode in force"
like "$S" '^ports: 80 443$' "status: the enforced ports"
like "$S" '^denied in every mode:.*loopback.*metadata.*control_plane.*own_address' \
	"status: the classes denied in every mode"
like "$S" '^turn: turn.kz.test:3478$' "status: the TURN authority"
like "$S" '^token ttl: 900s$' "status: the token TTL"
like "$S" '^allowed: 1$' "status: the allowed count"
like "$S" '^refused: 1 port_not_allowed=1$' "status: refusals by reason"
rc_is 0 "an open scope in force: exit 0" kz-egress status --config "$C"
J=$(kz-egress status --json --config "$C")
t "status --json is JSON" "$EG_PY" -c 'import json,sys; json.loads(sys.argv[1])' "$J"
like "$J" '"mode":"private_networks"' "JSON: the mode the daemon holds"
like "$J" '"turn_authority":"turn.kz.test:3478"' "JSON: the TURN authority"
like "$J" '"refused_by_reason":\{"port_not_allowed":1\}.*"source":"running_daemon"' \
	"JSON: counters by reason, from the running daemon"

# A tunnel admitted before the reload, then open -> isolated.
bg "$EG_PY" "$T/tunnel.py" "$EG_PORT" "$G" "$T/go" >"$T/tunnel.out"
i=0; while [ "$(grep -c . "$T/tunnel.out" 2>/dev/null)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
like "$(cat "$T/tunnel.out")" 'origin origin.kz.test /before' "a tunnel is up before the reload"
reloaded() { # reloaded N: waits for the Nth egress.reload log line
	local i=0
	while [ "$(grep -c '"event":"egress.reload"' "$T/egress.log")" -lt "$1" ] && [ $i -lt 100 ]; do
		sleep 0.05; i=$((i + 1))
	done
	[ "$(grep -c '"event":"egress.reload"' "$T/egress.log")" -ge "$1" ]
}
{ open_conf | sed 's/^SANDBOX_EGRESS_MODE = .*/SANDBOX_EGRESS_MODE = isolated/'; } | put_conf
kill -HUP "$EG_PID"
t "SIGHUP: the reload is logged" reloaded 1
like "$(grep '"event":"egress.reload"' "$T/egress.log" | tail -1)" '"mode":"isolated".*"restart_needed":"no"' \
	"the log names the mode reloaded (nothing that needs a restart changed)"
is "$(code -x "$X" http://origin.kz.test/two)" 403 "after the reload to isolated: the next connection is refused"
like "$(tail -1 "$T/egress.log")" '"reason":"isolated"' "... as isolated"
touch "$T/go"
i=0; while [ "$(grep -c . "$T/tunnel.out")" -lt 3 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
like "$(sed -n 3p "$T/tunnel.out")" 'origin origin.kz.test /after' \
	"the tunnel admitted before the reload stays up"
S=$(kz-egress status --config "$C")
like "$S" '^mode in force: isolated' "status: the daemon now holds isolation"
like "$S" '^reloads: 1$' "status: the reload is counted"
rc_is 1 "status exits 1 when the scope in force is isolation" kz-egress status --config "$C"
i=0; while ! grep -q egress_reload "$T/audit.jsonl" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
like "$(grep egress_reload "$T/audit.jsonl")" '"mode": "isolated", "ok": false' \
	"the reload is audited (egress_reload, mode, ok)"

# Back to open: new connections get it.
open_conf | put_conf
kill -HUP "$EG_PID"
t "a second reload" reloaded 2
is "$(code -x "$X" http://origin.kz.test/three)" 200 "reloaded open again: the next connection is allowed"

# A reload that reads a broken file: isolation, not the old scope.
{ open_conf; echo "SANDBOX_EGRESS_MOOD = open"; } | put_conf
kill -HUP "$EG_PID"
t "a reload of a broken file" reloaded 3
like "$(grep '"event":"egress.reload"' "$T/egress.log" | tail -1)" '"restart_needed":"yes","isolated_because":"config cannot be used' \
	"... logged with why, and that its listeners and sockets stay those of the start"
is "$(code -x "$X" http://origin.kz.test/four)" 403 "a broken config reloads as isolation: refused"
# (The broken file names no status socket for the client: the environment does.)
J=$(SANDBOX_EGRESS_STATUS_SOCKET=$T/status.sock kz-egress status --json --config "$C" 2>/dev/null)
like "$J" '"mode":"isolated","configured_mode":"public_internet","isolated_because":"config cannot be used: line 10: unknown key' \
	"status: the daemon reports isolation and why after reading a broken file"
like "$J" '"reloads":3,"generation":3,.*"source":"running_daemon"' \
	"... the daemon's answer: three reloads, the policy of the third"
like "$(grep egress_reload "$T/audit.jsonl" | tail -1)" '"ok": false.*"reason": "config cannot be used' \
	"the broken reload is audited with its reason"

# The grant key is rotated: a kept-alive connection's next request is
# verified again under the new public key, not waved through because its
# grant verified under the old one.
open_conf | put_conf
kill -HUP "$EG_PID"
t "reloaded open" reloaded 4
cat >"$T/keep.py" <<'EOF'
import os, socket, sys, time
port, grant, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(5)
def get(path):
    """One whole response (head and Content-Length body): its status."""
    s.sendall(("GET http://origin.kz.test%s HTTP/1.1\r\nHost: origin.kz.test\r\n"
               "Proxy-Authorization: Bearer %s\r\n\r\n" % (path, grant)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(4096)
        if not b:
            return "closed"
        buf += b
    head, body = buf.split(b"\r\n\r\n", 1)
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
         if l.lower().startswith(b"content-length:")][0]
    while len(body) < n:
        b = s.recv(4096)
        if not b:
            break
        body += b
    return head.split(b" ")[1].decode()
print(get("/keep1"), flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
print(get("/keep2"), flush=True)
EOF
coproc KP { "$EG_PY" "$T/keep.py" "$EG_PORT" "$G" "$T/go2"; }
read -r first <&"${KP[0]}"
is "$first" 200 "a kept-alive connection's first request, under the grant key in force"
cp "$EG_PK" "$EG_PK.old"
head -c 32 /dev/urandom >"$T/field2.key" && chmod 600 "$T/field2.key"
kz-egress pubkey --field-key "$T/field2.key" >"$EG_PK"
kill -HUP "$EG_PID"
t "reloaded with a rotated grant key" reloaded 5
touch "$T/go2"
read -r second <&"${KP[0]}"
is "$second" 403 "its next request, same grant, after the key was rotated: refused"
mv "$EG_PK.old" "$EG_PK"

# The public key file disappears and the proxy restarts: isolation.
open_conf | put_conf
kill "$EG_PID"; wait "$EG_PID" 2>/dev/null
S=$(kz-egress status --config "$C")
like "$S" "^scope from the configuration \(no running daemon at $T/status.sock\)" \
	"daemon stopped: status says the scope is from the configuration"
mv "$EG_PK" "$EG_PK.gone"
eg_serve "$C" 2>>"$T/egress.log" || { echo "Bail out! kz-egress did not restart"; exit 1; }
wait_sock "$T/status.sock" 10
S=$(kz-egress status --config "$C")
like "$S" "^scope in force \(running daemon, $T/status.sock\)" "restarted: the daemon answers"
like "$S" '^isolated because: public key file cannot be read' \
	"restarted without its public key file: the daemon reports isolation and why"
rc_is 1 "... and status exits 1" kz-egress status --config "$C"

# The status socket's default follows the socket rule under KZ_RUN_DIR.
open_conf | grep -v STATUS_SOCKET >"$T/norun.conf"
like "$(KZ_RUN_DIR=$T/run kz-egress status --config "$T/norun.conf")" \
	"^scope from the configuration \(no running daemon at $T/run/kz-egress-status.sock\)" \
	"unset, the status socket is KZ_RUN_DIR's kz-egress-status.sock"
like "$(kz-egress status --config "$T/norun.conf")" \
	'^scope from the configuration \(no status socket configured\)' \
	"neither set: no status socket, and said so"
