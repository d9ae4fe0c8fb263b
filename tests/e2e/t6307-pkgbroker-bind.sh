#!/usr/bin/env bash
# A run's package-broker token works only through the forward of its own
# run, even on the same worker.  A pool of one worker, two kz-runs one
# after the other: run A installs and leaks its token; run B, the next
# tenant of the SAME worker (same uid, after the reset), presents it
# through its own forward with the real npm and pip and by hand: each is
# refused, 403 token_other_run, audited under run A, while B's own token
# installs with npm and pip.  Every request of a kept-alive connection is
# checked.  On the broker's socket, as the worker's uid: a connection
# whose first request is not the bind is refused (bind_missing), a second
# bind is refused (bind_again), and a bound connection takes only its
# run's tokens.  Neither the bind nor its token is logged.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
. "$TOP/tests/pkgbroker/lib.sh"
if [ ! -x "$PB_VERDACCIO" ] || ! command -v npm >/dev/null; then
	echo "1..0 # SKIP verdaccio or npm is not installed (make deps)"; exit 0
fi
plan 21
PB_BIG=0
PB_KEY=$T/field.key
kz-pkgbroker pubkey --field-key "$PB_KEY" >"$T/pb.pub"
pb_upstreams || { echo "Bail out! the registry servers did not start"; exit 1; }
pb_broker_start || { echo "Bail out! kz-pkgbroker did not start"; exit 1; }
export LEASE_BROKER_SOCKET=$PB_SOCK LEASE_WORKER_ARGS="--memory 512M"
# Run A's token must outlive run B on a loaded host: kz-run mints it for
# its run timeout and a minute.
export RUN_TIMEOUT_MS=600000
start_stack 1
t "one worker with a broker forward becomes warm" wait_for warm 1 600
diag "setup took ${SECONDS}s"

NPMI='npm install --no-audit --no-fund --no-update-notifier'
PIPI='PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /usr/bin/python3 -m pip install -q'
claims_run() { "$PB_PY" -c 'import base64,json,sys; b=sys.argv[1].split(".")[0]; print(json.loads(base64.urlsafe_b64decode(b+"="*(-len(b)%4)))["run"])' "$1" 2>/dev/null; }

# Run A: its own token installs; its uid and its token go out on stdout.
kz-run -q --actor alice --conversation ca -- bash -c "
id -u; sed -n 's/^.*:_authToken=//p' \"\$NPM_CONFIG_USERCONFIG\"
printf '{\"name\":\"a\",\"version\":\"1.0.0\"}' >package.json
$NPMI kz-top >npm.log 2>&1 || tail -3 npm.log
node -e 'console.log(\"loaded\", require(\"kz-top\"))'" >"$T/oa" 2>"$T/ea"
is "$?" 0 "run A installs with its own token"
like "$(cat "$T/oa")" 'loaded kz-top@2.0.0' "and the tree it installed loads"
UIDA=$(sed -n 1p "$T/oa")
TOKA=$(sed -n 2p "$T/oa")
RUNA=$(claims_run "$TOKA")
t "the worker is reset and warm again" wait_for warm 1 600

# Run B: the next tenant of the same worker, with A's leaked token.
# "req TOKEN..." sends one request per token on ONE connection through
# the forward (keep-alive) and prints each status line.
B_CODE='echo "uid $(id -u)"
own=$(sed -n "s/^.*:_authToken=//p" "$NPM_CONFIG_USERCONFIG")
echo "tok $own"
req() { exec 3<>/dev/tcp/127.0.0.1/4873; local k
	for k in "$@"; do
		printf "GET /kz-leaf HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n" "$k" >&3
		/usr/bin/python3 -c "
import sys
f = open(3, \"rb\", buffering=0, closefd=False)
h = b\"\"
while not h.endswith(b\"\r\n\r\n\"):
    c = f.read(1)
    if not c: break
    h += c
line = h.split(b\"\r\n\")[0].decode()
print(line or \"closed\")
n = [int(l.split(b\":\")[1]) for l in h.split(b\"\r\n\") if l.lower().startswith(b\"content-length:\")]
if n: f.read(n[0])
"
	done; exec 3<&-; }
printf "registry=http://127.0.0.1:4873/\n//127.0.0.1:4873/:_authToken=%s\n" "$2" >stolen.npmrc
printf "{\"name\":\"b\",\"version\":\"1.0.0\"}" >package.json
if NPM_CONFIG_USERCONFIG=$PWD/stolen.npmrc '"$NPMI"' kz-leaf >npm-stolen.log 2>&1; then echo npm-stolen-ok; else echo npm-stolen-refused; fi
grep -o "token_other_run" npm-stolen.log | head -1 | sed "s/^/npm-said /"
if PIP_INDEX_URL=http://__token__:$2@127.0.0.1:4873/simple/ '"$PIPI"' --target py kzalpha >pip.log 2>&1; then echo pip-stolen-ok; else echo pip-stolen-refused; fi
[ -e py/kzalpha ] && echo pip-stolen-installed
echo "stolen: $(req "$2")"
echo "keepalive: $(req "$own" "$own" "$2" "$own" | tr "\n" " ")"
rm -rf node_modules package-lock.json py
if '"$NPMI"' kz-leaf >npm-own.log 2>&1; then echo npm-own-ok; else echo npm-own-refused; fi
if PIP_INDEX_URL=http://__token__:$own@127.0.0.1:4873/simple/ '"$PIPI"' --target py kzalpha >pip.log 2>&1 &&
	PYTHONPATH=py /usr/bin/python3 -c "import kzalpha, kzbeta"; then echo pip-own-ok; else echo pip-own-refused; tail -3 pip.log; fi
true'
kz-run -q --actor bob --conversation cb -- bash -c "$B_CODE" b "$UIDA" "$TOKA" >"$T/ob" 2>"$T/eb"
is "$(sed -n 's/^uid //p' "$T/ob")" "$UIDA" "run B runs on run A's worker (the same uid)"
TOKB=$(sed -n 's/^tok //p' "$T/ob")
like "$(cat "$T/ob")" 'npm-stolen-refused' "npm in run B with run A's token fails"
like "$(cat "$T/ob")" 'npm-said token_other_run' "... refused as another run's token (token_other_run)"
ok "$(grep -q pip-stolen-refused "$T/ob" && ! grep -q pip-stolen-installed "$T/ob"; echo $?)" \
	"pip in run B with run A's token fails, nothing installed"
like "$(cat "$T/ob")" '^stolen: HTTP/1\.1 403 .*\(token_other_run\)$' "by hand through B's forward: 403 token_other_run"
like "$(cat "$T/ob")" '^keepalive: HTTP/1\.1 200 OK HTTP/1\.1 200 OK HTTP/1\.1 403 .*\(token_other_run\) closed $' \
	"one kept-alive connection: each request is checked, A's token refused after two of B's"
like "$(cat "$T/ob")" 'npm-own-ok' "run B's own token installs with npm"
like "$(cat "$T/ob")" 'pip-own-ok' "... and with pip"
[ -n "$TOKB" ] || diag "$(cat "$T/ob" "$T/eb")"
R=$(pb_refusals | grep '"token_other_run"')
like "$R" "\"run_hash\":\"$RUNA\"" "the refusals are audited under the run whose token leaked"
like "$R" '"registry":"npm".*"package":"kz-leaf"' "... with the registry and the package"

# On the socket itself, as the worker's uid (what its forward presents).
# raw TOKEN-FOR-BIND TOKEN...: "-" binds nothing; then one request per
# token ("bind:TOKEN" a bind); prints each status line ("closed" once the
# broker has closed).
raw() {
	local t a=()
	[ "$1" = - ] || a+=("/-/kz/bind|127.0.0.1|$1")
	shift
	for t; do
		case $t in
		bind:*) a+=("/-/kz/bind|127.0.0.1|${t#bind:}") ;;
		*) a+=("/kz-leaf|127.0.0.1|$t") ;;
		esac
	done
	pb_raw "$UIDA" "${a[@]}"
}
R=$(raw - "$TOKB" "$TOKB")
like "$R" '^HTTP/1\.1 403 .*\(bind_missing\) \| closed$' \
	"a connection to the socket as the worker's uid that does not bind first: refused and closed"
R=$(raw "$TOKB" "bind:$TOKB" "$TOKB")
like "$R" '^HTTP/1\.1 200 Bound \| HTTP/1\.1 403 .*\(bind_again\) \| closed$' "a second bind: refused and closed"
R=$(raw "$TOKB" "$TOKB" "$TOKA")
like "$R" '^HTTP/1\.1 200 Bound \| HTTP/1\.1 200 OK \| HTTP/1\.1 403 .*\(token_other_run\)' \
	"a connection bound to run B takes B's token and refuses A's"
R=$(raw "$TOKA" "$TOKA")
like "$R" '^HTTP/1\.1 200 Bound \| HTTP/1\.1 200 OK$' "... and one bound to run A takes A's (the binding, not the token, decides)"
R=$(pb_refusals)
like "$(printf '%s' "$R" | grep '"bind_missing"')" '"outcome":"refused"' "bind_missing is audited"
like "$(printf '%s' "$R" | grep '"bind_again"')" "\"run_hash\":\"$(claims_run "$TOKB")\"" "bind_again is audited under the bound run"
unlike "$(cat "$T"/audit/* "$T/pb.log")" "${TOKA:0:40}|${TOKB:0:40}|kz/bind" "no token and no bind path in any record or log"
done_testing
