#!/usr/bin/env bash
# kz-egress behind a kz-sandbox relay: code in the sandbox reaches the
# allowed origin (a test host in this test's own network namespace) through
# relay and proxy, and nothing else: loopback, metadata and a name that does
# not resolve are all the same refusal, and without the relay there is no
# route at all.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=104
SB=$BIN/kz-sandbox
if [ ! -x "$SB" ] || [ ! -f "$TOP/tests/sandbox/client.py" ]; then
	echo "1..0 # SKIP kz-sandbox is not built"; exit 0
fi
plan 6

eg_netns $N || { echo "Bail out! cannot create a network namespace"; exit 1; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
cat >"$T/zone.json" <<EOF
{"origin.kz.test": {"A": ["$EG_ORIGIN"]}, "loop.kz.test": {"A": ["127.0.0.1"]}}
EOF
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
eg_keys
cat >"$T/eg.conf" <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = unix:$T/eg.sock
EOF
bg kz-egress serve --config "$T/eg.conf" 2>"$T/eg.log"
wait_sock "$T/eg.sock" 10 || { echo "Bail out! kz-egress did not start"; exit 1; }
chmod 0666 "$T/eg.sock"
G=$(kz-egress grant --field-key "$EG_KEY" --run sandbox-$$)
bg "$SB" serve --id "e2e-egress-$$" --socket "$T/w.sock" --egress-socket "$T/eg.sock"
wait_sock "$T/w.sock" 10 || { echo "Bail out! kz-sandbox did not start"; exit 1; }

# run CODE [GRANT]: the code's stdout
run() {
	local req r
	req=$("$EG_PY" -c 'import json,sys; d={"argv":["/bin/bash","-c",sys.argv[1]],"timeout_ms":8000}
if sys.argv[2]: d["grant"]=sys.argv[2]
print(json.dumps(d))' "$1" "${2:-}")
	r=$("$EG_PY" "$TOP/tests/sandbox/client.py" "$T/w.sock" run "$req")
	printf '%s' "$r" | "$EG_PY" -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin).get("stdout_b64","")).decode())'
}
# The answer is read with cat's read(2), under gvisor (t1121) too, where
# runsc 20221219's host network failed it with EAGAIN while no byte had
# arrived; gVisor's own stack, which the code now has, waits.
get() {
	run "exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9
printf 'GET http://$1/from-sandbox HTTP/1.1\\r\\nHost: $1\\r\\nConnection: close\\r\\n\\r\\n' >&3
cat <&3" "$G"
}
like "$(get origin.kz.test | tr '\r\n' '  ')" '^HTTP/1.1 200 .*origin origin.kz.test /from-sandbox' \
	"sandbox code reaches the allowed origin through relay and proxy"
like "$(get loop.kz.test | sed -n 1p)" '^HTTP/1.1 403' "a name for loopback: refused"
like "$(get 169.254.169.254 | sed -n 1p)" '^HTTP/1.1 403' "the metadata address: refused"
like "$(get nx.kz.test | sed -n 1p)" '^HTTP/1.1 403' "a name that does not resolve: the same refusal"
like "$(get "$EG_ORIGIN:8080" | sed -n 1p)" '^HTTP/1.1 403' "the origin on a port not allowed: refused"
R=$(run "(exec 3<>/dev/tcp/$EG_ORIGIN/80) 2>/dev/null && echo direct-open || echo no-route" "$G")
like "$R" 'no-route' "the origin is unreachable except through the proxy"
done_testing
