#!/usr/bin/env bash
# kz-pkgbroker from the host, with real clients and real registry servers on
# loopback: npm install of a small tree from a local verdaccio and pip
# install of two wheels from a PEP 503 directory, both through the broker;
# then, as a hostile client would try: no token, an expired, a forged and a
# spliced token, paths outside the registry protocols, another method,
# another Host, HTTP/1.0, a file over the ceiling (declared, and one that
# only grows past it while streaming).  Each is refused with its one-line
# reason and audited with host and package, never the token.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/pkgbroker/lib.sh"
if [ ! -x "$PB_VERDACCIO" ] || ! command -v npm >/dev/null; then
	echo "1..0 # SKIP verdaccio or npm is not installed (make deps)"; exit 0
fi
plan 41
# pip sees only the index it is given (no machine-wide find-links).
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
export npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false

pb_keys
pb_audit_start || { echo "Bail out! kz-audit did not start"; exit 1; }
pb_upstreams || { echo "Bail out! the registry servers did not start"; exit 1; }
pb_broker_start || { echo "Bail out! kz-pkgbroker did not start"; exit 1; }
diag "setup took ${SECONDS}s"
TOK=$(kz-pkgbroker token --field-key "$PB_KEY" --run run-1 --ttl 300)
# A token of one second, used once the installs below have outlived it.
OLD=$(kz-pkgbroker token --field-key "$PB_KEY" --run run-1 --ttl 1)
HP=${PB_URL#http://}

# npm_in DIR DEP TOKEN: npm install DEP in DIR through the broker with
# TOKEN as the registry credential (a fresh cache: nothing comes from it).
npm_in() {
	mkdir -p "$1"
	printf 'registry=%s/\n//%s/:_authToken=%s\n' "$PB_URL" "$HP" "$3" >"$1/.npmrc"
	printf '{"name":"app","version":"1.0.0","dependencies":{"%s":"*"}}\n' "$2" >"$1/package.json"
	(cd "$1" && npm install --cache "$1/.cache" 2>&1)
}
# pip_in DIR PROJECT TOKEN
pip_in() {
	"$PB_PY" -m pip install --target "$1" --index-url "http://__token__:$3@$HP/simple/" "$2" 2>&1
}
# status [CURL-ARGS...] PATH: the status line's code and reason.
status() { curl -s -i -m 10 "$@" | head -1 | tr -d '\r'; }

# ---- the real clients through the broker ----
out=$(npm_in "$T/app" kz-top "$TOK"); rc=$?
is "$rc" 0 "npm install of the test tree through the broker succeeds"
is "$(cd "$T/app" && node -e 'console.log(require("kz-top"), require("@kz-test/mid"), require("kz-leaf"))')" \
	"kz-top@2.0.0 @kz-test/mid@1.2.0 kz-leaf@1.0.0" "the tree's three packages are installed and load"
unlike "$(cat "$T/app/package-lock.json")" "127.0.0.1:$PB_NPM_PORT" "nothing in the lock names the upstream"
doc=$(curl -s -H "Authorization: Bearer $TOK" "$PB_URL/kz-top")
like "$doc" "\"tarball\":\"$PB_URL/kz-top/-/kz-top-2.0.0.tgz\"" "a package document's tarball URL points at the broker"
out=$(pip_in "$T/py" kzalpha "$TOK"); rc=$?
is "$rc" 0 "pip install through the broker succeeds"
is "$(PYTHONPATH=$T/py "$PB_PY" -c 'import kzalpha, kzbeta; print(kzalpha.VALUE, kzbeta.VALUE)')" \
	"kzalpha-1.0 kzbeta-1.0" "the wheel and its dependency are installed"
like "$(curl -s -u "__token__:$TOK" -H 'Accept: application/vnd.pypi.simple.v1+json' "$PB_URL/simple/kzalpha/")" \
	'"api-version":"1.0".*"url":"/files/simple/kzalpha/kzalpha-1.0-py3-none-any.whl".*"sha256":"[0-9a-f]{64}"' \
	"PEP 691 JSON when the client asks, with the file at the broker and its hash"
like "$(curl -s -u "__token__:$TOK" "$PB_URL/simple/kzalpha/")" \
	'<a href="/files/simple/kzalpha/kzalpha-1.0-py3-none-any.whl#sha256=[0-9a-f]{64}" data-requires-python="&gt;=3.7">' \
	"PEP 503 HTML otherwise"

# ---- a hostile upstream: fields cut, a foreign tarball dropped, no
# credential forwarded, a file that grows past the ceiling cut off ----
LIAR_PORT=$(pb_port)
bg "$PB_PY" "$PB_DIR/liar.py" "$LIAR_PORT" "$T/liar.log"
pb_wait_http "http://127.0.0.1:$LIAR_PORT/none" 10
P2=$(pb_port)
cat >"$T/pb2.conf" <<CONF
PKGBROKER_SOCKET = $T/pb2.sock
PKGBROKER_LISTEN = 127.0.0.1:$P2
PKGBROKER_NPM_UPSTREAM = http://127.0.0.1:$LIAR_PORT
PKGBROKER_PUBLIC_KEY_FILE = $T/pb.pub
PKGBROKER_FILE_MAX = $PB_CEILING
PKGBROKER_FETCHES_MAX = 40
KZ_AUDIT_SOCKET = $PB_AUDIT_SOCK
CONF
bg kz-pkgbroker serve --config "$T/pb2.conf" 2>>"$T/pb.log"
PB2_PID=$LASTPID
wait_sock "$T/pb2.sock" 10
doc=$(curl -s -H "Authorization: Bearer $TOK" "http://127.0.0.1:$P2/kz-liar")
like "$doc" '"1.0.0"' "the hostile upstream's document is served"
unlike "$doc" 'UPSTREAM-|readme|maintainers|_npmUser|0\.9\.0|elsewhere' \
	"... without the fields npm does not need and without the version whose tarball is elsewhere"
curl -s -m 20 -o "$T/liar.tgz" -H "Authorization: Bearer $TOK" \
	"http://127.0.0.1:$P2/kz-liar/-/kz-liar-1.0.0.tgz"; rc=$?
ok "$([ "$rc" -ne 0 ]; echo $?)" "a file growing past the ceiling: the client sees an incomplete transfer (curl exit $rc)"
ok "$([ "$(stat -c %s "$T/liar.tgz" 2>/dev/null || echo 0)" -le $((1024 * 1024)) ]; echo $?)" \
	"... and gets no more than the ceiling"
is "$(grep -vc '^auth=-$' "$T/liar.log")" 0 "the client's Authorization never reaches the upstream"
# What the broker holds of an upstream's answer is bounded: 32 MB of
# header lines, a chunk declared at 256 MB, a chunk-size line of 32 MB
# (which the broker stops reading; the client gives up first).
# The refusal is a 502; its reason is the headers' (upstream_error) unless
# the upstream's connection ended first (then diag says which).
bad=""
for p in /kz-fat /kz-fat/-/kz-fat-1.0.0.tgz; do
	s=$(status -H "Authorization: Bearer $TOK" "http://127.0.0.1:$P2$p")
	case $s in
	*"502 the upstream's headers are malformed or over 64K (upstream_error)") ;;
	"HTTP/1.1 502 "*) diag "$p: $s" ;;
	*) bad="$bad $p=[$s]" ;;
	esac
done
is "$bad" "" "an upstream's endless headers: refused 502"
# Two framings at once are refused, whatever the libevent in use makes of
# them (Debian's 2.1.12-8 reads a length beside a chunked body as chunked).
bad=""
for p in /kz-split/-/kz-split-1.0.0.tgz /kz-twolen/-/kz-twolen-1.0.0.tgz /kz-gzte/-/kz-gzte-1.0.0.tgz; do
	s=$(status -H "Authorization: Bearer $TOK" "http://127.0.0.1:$P2$p")
	case $s in
	*"502 the upstream's headers are malformed or over 64K (upstream_error)") ;;
	*) bad="$bad $p=[$s]" ;;
	esac
done
is "$bad" "" "a length beside a chunked body, two lengths, an encoding not chunked alone: refused 502"
curl -s -m 20 -o /dev/null -H "Authorization: Bearer $TOK" "http://127.0.0.1:$P2/kz-chunk/-/kz-chunk-1.0.0.tgz"
like "$(grep '"package":"kz-chunk"' "$T/pb.log")" '"error":"file_over_ceiling"' \
	"a chunk declared past the ceiling is cut off as it is declared"
curl -s -m 1 -o /dev/null -H "Authorization: Bearer $TOK" "http://127.0.0.1:$P2/kz-chunkline/-/kz-chunkline-1.0.0.tgz"
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$PB2_PID/status")
ok "$([ "${hwm:-999999}" -lt 24576 ]; echo $?)" "... and none of them grew the broker past the ceiling (peak ${hwm} kB)"
# One run's fetches in flight are bounded: 32 held by a slow upstream,
# the next is refused busy at once.  So are the broker's, whatever the run
# (PKGBROKER_FETCHES_MAX, 40 here): another run's 9th beside them is.
TOK3=$(kz-pkgbroker token --field-key "$PB_KEY" --run run-3 --ttl 300)
busy=$("$PB_PY" - "$P2" "$TOK" "$TOK3" <<'PY'
import socket, sys, time
def req(tok):
    return ("GET /kz-slow HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer %s\r\n\r\n" % tok).encode()
held = []
def hold(tok, n):
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        s.sendall(req(tok))
        held.append(s)
def refused(tok):
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        s.settimeout(0.3)
        s.sendall(req(tok))
        held.append(s)
        try:
            return s.makefile("rb").readline().decode().strip()
        except OSError:
            pass
    return "none"
hold(sys.argv[2], 32)
print(refused(sys.argv[2]))
hold(sys.argv[3], 8)
print(refused(sys.argv[3]))
PY
)
is "$(sed -n 1p <<<"$busy")" "HTTP/1.1 503 the run has 32 fetches in flight already (busy)" \
	"a run's 33rd fetch in flight: 503 busy, at once"
is "$(sed -n 2p <<<"$busy")" "HTTP/1.1 503 the broker has PKGBROKER_FETCHES_MAX fetches in flight already (busy)" \
	"the broker's 41st, of another run: 503 busy, at once"

# ---- refusals, each with its one-line reason ----
like "$(status "$PB_URL/kz-top")" '^HTTP/1.1 401 no token: .*\(token_missing\)$' "no token: 401 with its reason"
like "$(npm_in "$T/app-none" kz-top '')" 'E401' "npm install without a token fails (401)"
like "$(status -H "Authorization: Bearer $OLD" "$PB_URL/kz-top")" '^HTTP/1.1 403 the token has expired \(token_expired\)$' \
	"an expired token: 403 with its reason"
pip_in "$T/py-old" kzalpha "$OLD" >/dev/null; rc=$?
ok "$([ "$rc" -ne 0 ] && [ ! -e "$T/py-old/kzalpha" ]; echo $?)" "pip install with an expired token fails, nothing installed"
head -c 32 /dev/urandom >"$T/other.key"; chmod 0600 "$T/other.key"
FORGED=$(kz-pkgbroker token --field-key "$T/other.key" --run run-1 --ttl 300)
like "$(status -H "Authorization: Bearer $FORGED" "$PB_URL/kz-top")" '^HTTP/1.1 403 .*\(token_forged\)$' \
	"a token signed by another field key: 403 forged"
OTHER=$(kz-pkgbroker token --field-key "$PB_KEY" --run run-2 --ttl 300)
SPLICED=${OTHER%%.*}.${TOK#*.}
like "$(status -u "__token__:$SPLICED" "$PB_URL/simple/kzalpha/")" '^HTTP/1.1 403 .*\(token_forged\)$' \
	"one run's claims under another's signature: 403 forged"
bad=""
for p in /-/whoami '/-/v1/search?text=kz' '/kz-top?write=true' /simple/../../etc/passwd \
	/files/simple/kzalpha/../../../etc/shadow.whl /-/npm/v1/security/audits / \
	/kz-top/-/../x.tgz '/simple/kzalpha/?x=1' /files/simple/kzalpha/README; do
	s=$(status -H "Authorization: Bearer $TOK" --path-as-is "$PB_URL$p")
	case $s in "HTTP/1.1 404 not a path of the registry protocols"*"(path_refused)") ;; *) bad="$bad $p=[$s]";; esac
done
is "$bad" "" "every path outside the registry protocols: 404 with its reason"
like "$(status -X PUT -H "Authorization: Bearer $TOK" -d '{}' "$PB_URL/kz-top")" '^HTTP/1.1 405 only GET is served' \
	"a publish (PUT): refused"
like "$(status -H "Authorization: Bearer $TOK" -H 'Host: registry.example' "$PB_URL/kz-top")" '^HTTP/1.1 403 .*\(host_refused\)$' \
	"another Host: refused"
like "$(status -0 -H "Authorization: Bearer $TOK" "$PB_URL/kz-top")" '505 HTTP/1.1 is required' "HTTP/1.0: refused"
like "$(npm_in "$T/app-big" kz-big "$TOK")" '403 .*over the broker.s ceiling.*file_too_large' \
	"npm install of a package over the ceiling fails with the reason"
like "$(pip_in "$T/py-big" kzhuge "$TOK")" 'over the broker.s ceiling.*file_too_large' \
	"pip install of a wheel over the ceiling fails with the reason"
ok "$([ ! -e "$T/app-big/node_modules/kz-big" ] && [ ! -e "$T/py-big/kzhuge" ]; echo $?)" \
	"... and neither is installed in part"

# ---- the audit trail ----
R=$(pb_refusals)
miss=""
for e in token_missing token_expired token_forged path_refused method_refused host_refused \
	http_version file_too_large file_over_ceiling; do
	printf '%s' "$R" | grep -q "\"error\":\"$e\"" || miss="$miss $e"
done
is "$miss" "" "every kind of refusal is audited"
like "$(printf '%s' "$R" | grep '"file_too_large"' | grep '"registry":"npm"')" \
	'"package":"kz-big".*"host":"127.0.0.1".*"run_hash":"[0-9a-f]{32}"' \
	"a refusal names the package, the host and the run's hash"
like "$(printf '%s' "$R" | grep '"token_expired"' | head -1)" '"package":"kz-top"' "a token refusal names the package"
claims=${TOK%%.*} sig=${TOK#*.}
unlike "$(cat "$T"/audit/* "$T/pb.log")" "${claims:0:40}|${sig:0:40}|${OLD:0:40}|${FORGED#*.}" \
	"no token, or part of one, is in the audit log or the broker's log"
t "the audit chain verifies" env KZ_FIELD_KEY_FILE="$PB_KEY" kz-audit verify --dir "$T/audit"

# ---- an index below a path of its origin (a repository manager's) ----
# Files are fetched only beneath that path: never another repository's on
# the same host, whatever path a client asks for.
kill "$PB_PID"; wait "$PB_PID" 2>/dev/null
PB_PY_URL=$PB_PY_URL/pyidx pb_broker_start || { echo "Bail out! kz-pkgbroker did not restart"; exit 1; }
like "$(status -H "Authorization: Bearer $TOK" "$PB_URL/files/simple/kzalpha/kzalpha-1.0-py3-none-any.whl")" \
	'^HTTP/1.1 404 a file outside the index.s path on its origin \(path_refused\)$' \
	"with an index at /pyidx, a file outside it: 404 path_refused"
unlike "$(status -H "Authorization: Bearer $TOK" "$PB_URL/files/pyidx/kzalpha-1.0-py3-none-any.whl")" \
	'path_refused' "... and one beneath it is asked of the upstream"

# ---- fail closed at start ----
printf 'PKGBROKER_SOCKET = %s\n' "$T/pb3.sock" >"$T/pb3.conf"
rc_is 2 "without a public key the broker does not start" kz-pkgbroker serve --config "$T/pb3.conf"
printf 'PKGBROKER_PUBLIC_KEY_FILE = %s\nPKGBROKER_NPM_UPSTREAM = https://user:pw@registry.example\n' "$T/pb.pub" >"$T/pb4.conf"
rc_is 2 "an upstream with credentials in it is a configuration error" kz-pkgbroker check --config "$T/pb4.conf"
done_testing
