#!/usr/bin/env bash
# A run's package-broker token works only for the run it was minted for.
# Two kz-runs on two workers of one pool: run A installs with its own token
# and leaks it (its stdout); run B, another tenant on the other worker,
# presents A's token through its own broker forward with the real npm and
# pip and by hand: each is refused, 403 token_wrong_peer, and audited
# under the run whose token leaked, while B's own token works.  A's token
# is refused on the TCP listener too (no peer credentials to check there);
# a token bound to no worker (the older form) is refused on the socket
# (as a bind, and unbound) and taken only on the TCP listener.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
. "$TOP/tests/pkgbroker/lib.sh"
if [ ! -x "$PB_VERDACCIO" ] || ! command -v npm >/dev/null; then
	echo "1..0 # SKIP verdaccio or npm is not installed (make deps)"; exit 0
fi
plan 16
PB_BIG=0
PB_KEY=$T/field.key
kz-pkgbroker pubkey --field-key "$PB_KEY" >"$T/pb.pub"
pb_upstreams || { echo "Bail out! the registry servers did not start"; exit 1; }
pb_broker_start || { echo "Bail out! kz-pkgbroker did not start"; exit 1; }
export LEASE_BROKER_SOCKET=$PB_SOCK LEASE_WORKER_ARGS="--memory 512M"
start_stack 2
t "two workers with a broker forward become warm" wait_for warm 2 600
diag "setup took ${SECONDS}s"

NPMI='npm install --no-audit --no-fund --no-update-notifier'
PIPI='PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /usr/bin/python3 -m pip install -q'
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
# The run the token names (its claims, before the dot).
RUNA=$("$PB_PY" -c 'import base64,json,sys; b=sys.argv[1].split(".")[0]; print(json.loads(base64.urlsafe_b64decode(b+"="*(-len(b)%4)))["run"])' "$TOKA" 2>/dev/null)
diag "run A ran as uid $UIDA"

# Run B: a tenant on the other worker with A's leaked token.  The pool
# picks a warm worker at random: a B that lands on A's worker says so and
# is run again.
B_CODE='u=$(id -u); [ "$u" = "$1" ] && { echo same-worker; exit 0; }
echo "uid $u"
own=$(sed -n "s/^.*:_authToken=//p" "$NPM_CONFIG_USERCONFIG")
printf "registry=http://127.0.0.1:4873/\n//127.0.0.1:4873/:_authToken=%s\n" "$2" >stolen.npmrc
printf "{\"name\":\"b\",\"version\":\"1.0.0\"}" >package.json
if NPM_CONFIG_USERCONFIG=$PWD/stolen.npmrc '"$NPMI"' kz-leaf >npm-stolen.log 2>&1; then echo npm-stolen-ok; else echo npm-stolen-refused; fi
grep -o "token_wrong_peer" npm-stolen.log | head -1
if PIP_INDEX_URL=http://__token__:$2@127.0.0.1:4873/simple/ '"$PIPI"' --target py kzalpha >pip.log 2>&1; then echo pip-stolen-ok; else echo pip-stolen-refused; fi
[ -e py/kzalpha ] && echo pip-stolen-installed
exec 3<>/dev/tcp/127.0.0.1/4873
printf "GET /kz-leaf HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" "$2" >&3
head -1 <&3 | tr -d "\r"
exec 3<&-
rm -rf node_modules package-lock.json
if '"$NPMI"' kz-leaf >npm-own.log 2>&1; then echo npm-own-ok; else echo npm-own-refused; fi
true'
for i in 1 2 3 4 5 6 7 8; do
	kz-run -q --actor bob --conversation "cb$i" -- bash -c "$B_CODE" b "$UIDA" "$TOKA" >"$T/ob" 2>"$T/eb"
	grep -q same-worker "$T/ob" || break
	diag "run B $i landed on run A's worker; again"
done
like "$(cat "$T/ob")" '^uid [0-9]+' "run B runs on another worker (another uid)"
unlike "$(sed -n 1p "$T/ob")" "^uid $UIDA\$" "... not run A's"
like "$(cat "$T/ob")" 'npm-stolen-refused' "npm in run B with run A's token fails"
like "$(cat "$T/ob")" 'token_wrong_peer' "... refused as another worker's token (token_wrong_peer)"
ok "$(grep -q pip-stolen-refused "$T/ob" && ! grep -q pip-stolen-installed "$T/ob"; echo $?)" \
	"pip in run B with run A's token fails, nothing installed"
like "$(cat "$T/ob")" '^HTTP/1\.1 403 .*\(token_wrong_peer\)$' "by hand through B's forward: 403 token_wrong_peer"
like "$(cat "$T/ob")" 'npm-own-ok' "run B's own token still installs on its worker"
[ -n "$(grep -v same-worker "$T/ob")" ] || diag "$(cat "$T/ob" "$T/eb")"
R=$(pb_refusals | grep '"token_wrong_peer"')
like "$R" "\"run_hash\":\"$RUNA\"" "the refusals are audited under the run whose token leaked"
like "$R" '"registry":"npm".*"package":"kz-leaf"' "... with the registry and the package"

# The TCP listener has no peer credentials: a bound token is refused there.
status() { curl -s -o /dev/null -w '%{http_code} ' "$@"; curl -s "$@" | head -c 300; }
like "$(status -H "Authorization: Bearer $TOKA" "$PB_URL/kz-leaf")" '^403 .*token_wrong_peer' \
	"run A's token is refused on the TCP listener"
# A token bound to no worker (the older form): refused on the socket,
# where it cannot bind a connection (token_unbound), and a request that is
# not a bind is refused before its token is read (t6307); taken on the
# TCP listener alone.
OLD=$(kz-pkgbroker token --field-key "$PB_KEY" --run old-form --ttl 300)
like "$(status --unix-socket "$PB_SOCK" -H "Authorization: Bearer $OLD" http://127.0.0.1/-/kz/bind)" \
	'^403 .*token_unbound' "an unbound token cannot bind a connection on the socket (token_unbound)"
like "$(status --unix-socket "$PB_SOCK" -H "Authorization: Bearer $OLD" http://127.0.0.1/kz-leaf)" \
	'^403 .*bind_missing' "... nor be used on the socket without a bind (bind_missing)"
like "$(status -H "Authorization: Bearer $OLD" "$PB_URL/kz-leaf")" '^200 ' \
	"an unbound token is taken on the TCP listener (its documented use)"
done_testing
