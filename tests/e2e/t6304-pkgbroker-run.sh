#!/usr/bin/env bash
# Every kz-run on a pool with a package broker (LEASE_BROKER_SOCKET) gets
# a token of its own, minted from the field key for that run: the code
# finds npm's registry and token and pip's index already set, and the real
# clients install through the broker with no setting of the member's and
# no general network.  Two runs get two tokens; the token reaches neither
# kz-run's output nor the audit trail; a worker without a broker refuses a
# token; a token that is not one is refused before anything runs; a
# kz-run that cannot mint one does not run.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
. "$TOP/tests/pkgbroker/lib.sh"
if [ ! -x "$PB_VERDACCIO" ] || ! command -v npm >/dev/null; then
	echo "1..0 # SKIP verdaccio or npm is not installed (make deps)"; exit 0
fi
plan 17
PB_BIG=0
PB_KEY=$T/field.key
kz-pkgbroker pubkey --field-key "$PB_KEY" >"$T/pb.pub"
pb_upstreams || { echo "Bail out! the registry servers did not start"; exit 1; }
pb_broker_start || { echo "Bail out! kz-pkgbroker did not start"; exit 1; }
export LEASE_BROKER_SOCKET=$PB_SOCK LEASE_WORKER_ARGS="--memory 512M"
start_stack 1
t "a worker with a broker forward becomes warm" wait_for warm 1
diag "setup took ${SECONDS}s"

# The token, out of npm's configuration file.
TOKSH='sed -n "s/^.*:_authToken=//p" "$NPM_CONFIG_USERCONFIG"'
kz-run -q --actor alice --conversation c1 -- bash -c "
$TOKSH >tok; sed -n 's/^registry=//p' \$NPM_CONFIG_USERCONFIG; printenv PIP_INDEX_URL | sed 's/__token__:[^@]*@/__token__:T@/'
printf '{\"name\":\"app\",\"version\":\"1.0.0\"}' >package.json
npm install --no-audit --no-fund --no-update-notifier kz-top >npm.log 2>&1 || { tail -5 npm.log; exit 1; }
node -e 'console.log(\"loaded\", require(\"kz-top\"), require(\"@kz-test/mid\"), require(\"kz-leaf\"))'
PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
	/usr/bin/python3 -m pip install -q --target py kzalpha 2>&1 | tail -3
PYTHONPATH=py /usr/bin/python3 -c 'import kzalpha, kzbeta; print(\"imported\", kzalpha.VALUE, kzbeta.VALUE)'
(exec 3<>/dev/tcp/127.0.0.1/$PB_NPM_PORT) 2>/dev/null && echo registry-open || echo registry-closed
cat tok" >"$T/o1" 2>"$T/e1"
rc=$?
is "$rc" 0 "kz-run: npm and pip install through the broker with no setting of the code's"
[ "$rc" = 0 ] || diag "$(tail -5 "$T/o1" "$T/e1")"
like "$(sed -n 1p "$T/o1")" '^http://127\.0\.0\.1:4873/$' "npm's registry is the run's broker forward"
like "$(sed -n 2p "$T/o1")" '^http://__token__:T@127\.0\.0\.1:4873/simple/$' "pip's index is the broker, the token as its password"
like "$(cat "$T/o1")" 'loaded kz-top@2.0.0 @kz-test/mid@1.2.0 kz-leaf@1.0.0' "the npm tree installed"
like "$(cat "$T/o1")" 'imported kzalpha-1.0 kzbeta-1.0' "the wheel and its dependency installed"
like "$(cat "$T/o1")" 'registry-closed' "the registry itself is unreachable from the run"
TOK1=$(tail -1 "$T/o1")
kz-run -q --actor alice --conversation c1 -- sh -c "$TOKSH" >"$T/o2" 2>&1
TOK2=$(cat "$T/o2")
t "each run gets a token of its own" test -n "$TOK1" -a -n "$TOK2" -a "$TOK1" != "$TOK2"
R=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOK1" "$PB_URL/kz-leaf")
is "$R" 403 "the run's token, bound to its worker, is refused on the TCP listener"
like "$(audit_q --kind dispatch | tail -1)" '"packages":"broker"' "the dispatch record says the run had the broker"
unlike "$(cat "$T"/audit/* "$T/e1" "$T/lease.log" "$T/pb.log")" "${TOK1:0:40}" \
	"the token is in no audit record, log or kz-run output"

# kz-sandbox: a token for a worker without a broker, and a token that is
# not one, are refused before anything runs.
bg kz-sandbox serve --id "e2e-nob-$$" --socket "$T/w0.sock" --timeout 30
wait_sock "$T/w0.sock" 10
R=$(python3 "$TOP/tests/sandbox/client.py" "$T/w0.sock" run '{"argv":["/bin/true"],"broker_token":"abc.def"}')
like "$R" '"reason": *"a broker token, but this worker has no package broker"' \
	"a worker without a broker refuses a token"
bg kz-sandbox serve --id "e2e-bad-$$" --socket "$T/w1.sock" --timeout 30 --broker-socket "$PB_SOCK"
wait_sock "$T/w1.sock" 10
R=$(python3 "$TOP/tests/sandbox/client.py" "$T/w1.sock" run '{"argv":["/bin/sh","-c","touch ran"],"broker_token":"x@evil.example/"}')
like "$R" '"reason": *"the broker token is malformed"' "a token with characters no token has is refused"
# npm's file is the run's: a symlink a run without a token left in its
# place is replaced, never followed, and the code cannot change the file.
sbx_run() { # SOCK TOKEN SCRIPT: the code's stdout
	python3 "$TOP/tests/sandbox/client.py" "$1" run "$(python3 -c 'import json,sys; print(json.dumps({"argv":["/bin/sh","-c",sys.argv[2]],"broker_token":sys.argv[1]}))' "$2" "$3")" |
		python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin).get("stdout_b64","")).decode(), end="")'
}
sbx_run "$T/w1.sock" "" 'ln -s /workspace/victim /tmp/.kz-broker.npmrc && echo planted' >"$T/o4"
is "$(cat "$T/o4")" planted "a run without a token plants a symlink at npm's file"
sbx_run "$T/w1.sock" "$TOK1" 'f=$NPM_CONFIG_USERCONFIG; [ -f "$f" ] && [ ! -L "$f" ] && echo regular; [ -e /workspace/victim ] && echo followed; { echo x >>"$f"; } 2>/dev/null && echo writable; grep -c _authToken "$f"' >"$T/o5"
is "$(cat "$T/o5" | tr '\n' ' ')" "regular 1 " "the next run's file is made anew, the link not followed, and read-only to the code"

RUN_PKGBROKER_BIN=$T/no-such-broker kz-run -q --actor alice --conversation c1 -- true >"$T/o3" 2>&1
is "$?" 3 "kz-run that cannot mint the run's token does not run it (exit 3)"
like "$(audit_q --kind isolation_denial | tail -1)" '"stage":"packages"' "and the denial is audited"
done_testing
