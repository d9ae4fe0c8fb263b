#!/usr/bin/env bash
# kz-pkgbroker inside a real kz-sandbox run: the code has no network but its
# run's broker forward on the sandbox loopback, and the real clients install
# through it with nothing but their ordinary index settings (npm's registry
# and _authToken, pip's --index-url with the token as password).  The
# registry servers on the host's loopback are unreachable from the sandbox
# except through the broker; without a token, or off the registry paths,
# the broker refuses; a worker without a broker socket, or a run without a
# token, has no forward.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/pkgbroker/lib.sh"
SB=$BIN/kz-sandbox
if [ ! -x "$SB" ] || [ ! -f "$TOP/tests/sandbox/client.py" ]; then
	echo "1..0 # SKIP kz-sandbox is not built"; exit 0
fi
if [ ! -x "$PB_VERDACCIO" ] || ! command -v npm >/dev/null; then
	echo "1..0 # SKIP verdaccio or npm is not installed (make deps)"; exit 0
fi
plan 10
PB_BIG=0

pb_keys
pb_audit_start || { echo "Bail out! kz-audit did not start"; exit 1; }
pb_upstreams || { echo "Bail out! the registry servers did not start"; exit 1; }
pb_broker_start || { echo "Bail out! kz-pkgbroker did not start"; exit 1; }
bg "$SB" serve --id "e2e-pkg-$$" --socket "$T/w.sock" --broker-socket "$PB_SOCK" \
	--broker-port 4873 --memory 512M --timeout 90
wait_sock "$T/w.sock" 10 || { echo "Bail out! kz-sandbox did not start"; exit 1; }
bg "$SB" serve --id "e2e-nopkg-$$" --socket "$T/w0.sock" --timeout 90
wait_sock "$T/w0.sock" 10 || { echo "Bail out! kz-sandbox did not start"; exit 1; }
diag "setup took ${SECONDS}s"
# The worker's forward presents the uid its code runs as (kz-sandbox's
# default): the token is bound to it.
TOK=$(kz-pkgbroker token --field-key "$PB_KEY" --run sandbox-run --uid 2100000000 --ttl 300)

# run SOCK CODE: the code's stdout and stderr (the worker's own env: HOME
# is the workspace, no network but the forward).  The request carries the
# run's token, as kz-run's does: the forward names the run by it.
run() {
	local req
	req=$("$PB_PY" -c 'import json,sys; print(json.dumps({"argv":["/bin/bash","-c",sys.argv[1]],"timeout_ms":80000,"broker_token":sys.argv[2]}))' "$2" "${3-$TOK}")
	"$PB_PY" "$TOP/tests/sandbox/client.py" "$1" run "$req" |
		"$PB_PY" -c 'import json,sys,base64; d=json.load(sys.stdin); print(base64.b64decode(d.get("stdout_b64","")).decode(errors="replace")+base64.b64decode(d.get("stderr_b64","")).decode(errors="replace"))'
}

R=$(run "$T/w.sock" "cd /workspace &&
printf 'registry=http://127.0.0.1:4873/\n//127.0.0.1:4873/:_authToken=$TOK\n' >.npmrc &&
printf '{\"name\":\"app\",\"version\":\"1.0.0\",\"dependencies\":{\"kz-top\":\"^2.0.0\"}}' >package.json &&
npm install --no-audit --no-fund --no-update-notifier >npm.log 2>&1 || { tail -5 npm.log; exit 1; }
node -e 'console.log(\"loaded\", require(\"kz-top\"), require(\"@kz-test/mid\"), require(\"kz-leaf\"))'")
like "$R" 'loaded kz-top@2.0.0 @kz-test/mid@1.2.0 kz-leaf@1.0.0' "npm install of the tree inside the sandbox, through the broker"
R=$(run "$T/w.sock" "cd /workspace &&
PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
/usr/bin/python3 -m pip install -q --target /workspace/py \
  --index-url http://__token__:$TOK@127.0.0.1:4873/simple/ kzalpha 2>&1 | tail -3
PYTHONPATH=/workspace/py /usr/bin/python3 -c 'import kzalpha, kzbeta; print(\"imported\", kzalpha.VALUE, kzbeta.VALUE)'")
like "$R" 'imported kzalpha-1.0 kzbeta-1.0' "pip install of a wheel and its dependency inside the sandbox, through the broker"
R=$(run "$T/w.sock" "(exec 3<>/dev/tcp/127.0.0.1/$PB_NPM_PORT) 2>/dev/null && echo npm-open || echo npm-closed
(exec 3<>/dev/tcp/127.0.0.1/$PB_PY_PORT) 2>/dev/null && echo py-open || echo py-closed")
like "$(printf '%s' "$R" | tr '\n' ' ')" 'npm-closed py-closed' "the registry servers are unreachable from the sandbox but through the broker"
R=$(run "$T/w.sock" "curl -s -i http://127.0.0.1:4873/kz-top | head -1")
like "$R" '^HTTP/1.1 401 no token' "inside the sandbox, no token: 401 with its reason"
R=$(run "$T/w.sock" "curl -s -i -H 'Authorization: Bearer $TOK' http://127.0.0.1:4873/-/whoami | head -1")
like "$R" '^HTTP/1.1 404 not a path of the registry protocols' "... a path outside the protocols: refused"
R=$(run "$T/w.sock" "curl -s -i -H 'Authorization: Bearer $TOK' -H 'Host: 10.0.0.1' http://127.0.0.1:4873/kz-top | head -1")
like "$R" '^HTTP/1.1 403 .*host_refused' "... another Host: refused"
like "$(pb_refusals | grep '"token_missing"')" '"registry":"npm".*"package":"kz-top".*"host":"127.0.0.1"' \
	"the in-sandbox refusal is audited with host and package"
unlike "$(cat "$T"/audit/* "$T/pb.log")" "${TOK:0:40}" "and the token is in no record or log"
R=$(run "$T/w0.sock" "(exec 3<>/dev/tcp/127.0.0.1/4873) 2>/dev/null && echo open || echo closed" "")
is "$R" "closed" "a worker without a broker socket has no forward"
R=$(run "$T/w.sock" "(exec 3<>/dev/tcp/127.0.0.1/4873) 2>/dev/null && echo open || echo closed" "")
is "$R" "closed" "a run without a token has no forward (it has no run to bind to)"
done_testing
