#!/bin/bash
# The egress relay: code in the sandbox reaches only 127.0.0.1:3128, the
# relay replaces whatever credentials the code sent with the run's grant
# and forwards to the egress Unix socket.  First against a recording stub
# proxy, then sandbox -> relay -> the real kz-egress (grant verified, the
# private destination refused by its policy).
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
plan 14
GRANT="g-$$-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# A stub proxy on a Unix socket: records each request head, answers 200 and
# echoes the tunnel.
python3 - "$T/stub.sock" "$T/heads" <<'PY' &
import os, socket, sys, threading
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
def h(c):
    b = b""
    while b"\r\n\r\n" not in b:
        d = c.recv(4096)
        if not d: return
        b += d
    head, rest = b.split(b"\r\n\r\n", 1)
    with open(sys.argv[2], "ab") as f: f.write(head + b"\n--\n")
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" + rest)
    while True:
        d = c.recv(4096)
        if not d: break
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=h, args=(c,), daemon=True).start()
PY
_pids="$_pids $!"
wait_sock "$T/stub.sock" 5

ID=e2e-relay-$$
bg "$SB" serve --id "$ID" --socket "$T/w.sock" --egress-socket "$T/stub.sock"
wait_sock "$T/w.sock" 10
CODE='exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9
printf "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\nProxy-Authorization: Bearer forged\r\n\r\nping\n" >&3
head -c 44 <&3; echo
echo PROXYENV=$(env | grep -c "^HTTPS_PROXY=http://127.0.0.1:3128$")
echo "'"$(echo "$GRANT" | rev)"'" | rev >/tmp/pat
echo GRANTSEEN=$(cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/mountinfo 2>/dev/null | tr "\0" "\n" | grep -c -f /tmp/pat)
true'
req=$(python3 -c 'import json,sys; print(json.dumps({"argv":["/bin/bash","-c",sys.argv[1]],"grant":sys.argv[2],"timeout_ms":8000}))' "$CODE" "$GRANT")
r=$($C "$T/w.sock" run "$req")
out=$(printf '%s' "$r" | python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["stdout_b64"]).decode())')
[ -n "$out" ] || diag "reply: $r"
like "$out" "HTTP/1.1 200 Connection established" "code reaches the proxy only through the relay"
like "$out" "ping" "the tunnel carries bytes both ways"
like "$out" "PROXYENV=1" "HTTPS_PROXY points at the relay"
like "$out" "GRANTSEEN=0" "the grant is nowhere in the code's env, argv or mounts"
heads=$(cat "$T/heads")
like "$heads" "^CONNECT example.org:443 HTTP/1.1" "the request line is forwarded"
is "$(grep -c "Proxy-Authorization: Bearer $GRANT" "$T/heads")" 1 "the relay adds the run's grant"
is "$(grep -c 'forged' "$T/heads")" 0 "the code's own credentials are dropped"
r=$($C "$T/w.sock" run '{"argv":["/bin/bash","-c","(exec 3<>/dev/tcp/127.0.0.1/3128) 2>/dev/null && echo open; env | grep -ci proxy"]}')
like "$r" '"stdout_b64": "MAo="' "a run without a grant has no relay and no proxy env"
r=$($C "$T/w.sock" run "$(python3 -c 'import json; print(json.dumps({"argv":["/bin/bash","-c","exec 3<>/dev/tcp/127.0.0.1/3128; printf \"GET /x HTTP/1.1\\r\\n\\r\\n\" >&3; head -1 <&3"],"grant":"g"}))')")
like "$r" '"stdout_b64": "SFRUUC8xLjEgNDAwIEJhZCBSZXF1ZXN0DQo="' "a request that is not proxy-form is refused by the relay"

# Sandbox -> relay -> kz-egress.
EG=$BIN/kz-egress
if [ -x "$EG" ] && "$EG" --help >/dev/null 2>&1; then
	head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
	"$EG" pubkey --field-key "$T/field.key" >"$T/pub"
	KZ_FIELD_KEY_FILE=$T/field.key SANDBOX_EGRESS_PUBLIC_KEY_FILE=$T/pub \
		bg "$EG" serve --socket "$T/eg.sock" 2>"$T/eg.log"
	wait_sock "$T/eg.sock" 5
	G=$("$EG" grant --field-key "$T/field.key" --run r-$$)
	bg "$SB" serve --id "$ID-eg" --socket "$T/w2.sock" --egress-socket "$T/eg.sock"
	wait_sock "$T/w2.sock" 10
	CODE='exec 3<>/dev/tcp/127.0.0.1/3128; printf "CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n" >&3; head -1 <&3'
	req=$(python3 -c 'import json,sys; print(json.dumps({"argv":["/bin/bash","-c",sys.argv[1]],"grant":sys.argv[2],"timeout_ms":8000}))' "$CODE" "$G")
	r=$($C "$T/w2.sock" run "$req")
	out=$(printf '%s' "$r" | python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["stdout_b64"]).decode())')
	like "$out" "HTTP/1.1 403" "kz-egress answers the relayed request (private destination refused)"
	sleep 0.2
	like "$(cat "$T/eg.log")" '"reason":"private_use".*"run_hash"' "kz-egress verified the relay-injected grant before its policy refused"
	# A refused request with a body: kz-egress answers the head and
	# closes while the relay is still passing the body on; the answer
	# still reaches the code (the relay used to drop it and close).
	# The head and the body's start arrive together, as one write.
	BODY='{ printf "POST http://10.0.0.1/up HTTP/1.1\r\nContent-Length: 4000000\r\n\r\n"; head -c 4000000 /dev/zero; } >/tmp/req
exec 3<>/dev/tcp/127.0.0.1/3128
cat /tmp/req >&3 2>/dev/null &
head -1 <&3'
	req=$(python3 -c 'import json,sys; print(json.dumps({"argv":["/bin/bash","-c",sys.argv[1]],"grant":sys.argv[2],"timeout_ms":8000}))' "$BODY" "$G")
	r=$($C "$T/w2.sock" run "$req")
	out=$(printf '%s' "$r" | python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["stdout_b64"]).decode())')
	like "$out" "HTTP/1.1 403" "a refused request whose body is still coming: the code gets the 403"
	req=$(python3 -c 'import json,sys; print(json.dumps({"argv":["/bin/bash","-c",sys.argv[1]],"grant":"not-a-grant","timeout_ms":8000}))' "$CODE")
	$C "$T/w2.sock" run "$req" >/dev/null
	sleep 0.2
	like "$(cat "$T/eg.log")" '"reason":"grant_(malformed|invalid|bad)' "a bad grant is refused by kz-egress"
	unlike "$(cat "$T/eg.log")" "$G" "kz-egress never logs the grant"
else
	for i in 1 2 3 4 5; do echo "ok $((_n + 1)) # SKIP kz-egress not built"; _n=$((_n + 1)); done
fi
done_testing
