#!/usr/bin/env bash
# kz-pkgbroker with https upstreams, on loopback only: a throwaway CA made
# here signs the certificates; verdaccio serves the npm tree over its own
# https listener and python's http.server, wrapped in TLS, the PEP 503
# index.  npm install and pip install through the broker succeed when
# PKGBROKER_UPSTREAM_CA is the test CA.  Without it (the system's store),
# with a certificate for another name, an expired one, plain http on the
# https port and a closed port, each fetch is refused at once with a 502
# and its one-line reason, audited, and the broker goes on serving.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/pkgbroker/lib.sh"
if [ ! -x "$PB_VERDACCIO" ] || ! command -v npm >/dev/null || ! command -v openssl >/dev/null; then
	echo "1..0 # SKIP verdaccio, npm or openssl is not installed (make deps)"; exit 0
fi
plan 24
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
export npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false
# npm and pip retry a 502 with backoff for a minute; once is enough here.
export npm_config_fetch_retries=0 PIP_RETRIES=0
PB_BIG=0 PB_NPM_TLS=1

pb_keys
pb_tls_certs || { echo "Bail out! openssl could not make the test certificates"; exit 1; }
pb_audit_start || { echo "Bail out! kz-audit did not start"; exit 1; }
pb_py_build & BUILD=$!
pb_npm_registry || { echo "Bail out! verdaccio did not start on https"; exit 1; }
wait "$BUILD" || { echo "Bail out! the wheels were not built"; exit 1; }
pb_py_serve_tls srv other old || { echo "Bail out! the TLS index did not start"; exit 1; }
pb_py_serve || { echo "Bail out! the plain index did not start"; exit 1; }
NPM_TLS=$PB_NPM_URL PY_PLAIN_PORT=$PB_PY_PORT
# The index by name where localhost is 127.0.0.1 alone (the name check
# and SNI), by address otherwise.
PYHOST=127.0.0.1
[ "$(getent ahosts localhost | awk '{print $1; exit}')" = 127.0.0.1 ] && PYHOST=localhost
PY_TLS=https://$PYHOST:$PB_TLS_PORT_srv
diag "setup took ${SECONDS}s (index on $PYHOST)"
TOK=$(kz-pkgbroker token --field-key "$PB_KEY" --run run-1 --ttl 300)

# broker NAME NPM-UPSTREAM PYPI-UPSTREAM [EXTRA-LINE]: a broker on
# $T/NAME.sock and a loopback port, in PORT_<NAME>.
broker() {
	local p
	p=$(pb_port)
	eval "PORT_$1=$p"
	cat >"$T/$1.conf" <<CONF
PKGBROKER_SOCKET = $T/$1.sock
PKGBROKER_LISTEN = 127.0.0.1:$p
PKGBROKER_NPM_UPSTREAM = $2
PKGBROKER_PYPI_UPSTREAM = $3
PKGBROKER_PUBLIC_KEY_FILE = $T/pb.pub
PKGBROKER_UPSTREAM_TIMEOUT = 20
KZ_AUDIT_SOCKET = $PB_AUDIT_SOCK
CONF
	[ -z "${4:-}" ] || printf '%s\n' "$4" >>"$T/$1.conf"
	bg kz-pkgbroker serve --config "$T/$1.conf" 2>>"$T/pb.log"
	eval "PID_$1=$LASTPID"
	wait_sock "$T/$1.sock" 10
}
npm_in() { # DIR DEP PORT
	mkdir -p "$1"
	printf 'registry=http://127.0.0.1:%s/\n//127.0.0.1:%s/:_authToken=%s\n' "$3" "$3" "$TOK" >"$1/.npmrc"
	printf '{"name":"app","version":"1.0.0","dependencies":{"%s":"*"}}\n' "$2" >"$1/package.json"
	(cd "$1" && npm install --cache "$1/.cache" 2>&1)
}
pip_in() { # DIR PROJECT PORT
	"$PB_PY" -m pip install --target "$1" --index-url "http://__token__:$TOK@127.0.0.1:$3/simple/" "$2" 2>&1
}
# get PORT PATH: the status line, then the body, of one GET.
get() {
	curl -s -i -m 25 -H "Authorization: Bearer $TOK" "http://127.0.0.1:$1$2" | tr -d '\r' |
		sed -n '1p;/^{/p'
}

broker good "$NPM_TLS" "$PY_TLS" "PKGBROKER_UPSTREAM_CA = $PB_CA"
broker sys "$NPM_TLS" "$PY_TLS"
broker wrong "https://127.0.0.1:$PB_TLS_PORT_other" "https://127.0.0.1:$PB_TLS_PORT_old" "PKGBROKER_UPSTREAM_CA = $PB_CA"
CLOSED=$(pb_port)
broker plain "https://127.0.0.1:$PY_PLAIN_PORT" "https://127.0.0.1:$CLOSED" "PKGBROKER_UPSTREAM_CA = $PB_CA"
# Plain http registries, and an https origin for the index's files only.
broker mixed "http://127.0.0.1:$PY_PLAIN_PORT" "http://127.0.0.1:$PY_PLAIN_PORT" "PKGBROKER_PYPI_FILES_UPSTREAM = $PY_TLS
PKGBROKER_UPSTREAM_CA = $PB_CA"

# ---- with the test CA: the real clients install ----
out=$(npm_in "$T/app" kz-top "$PORT_good"); rc=$?
is "$rc" 0 "npm install through the broker from the https registry succeeds"
[ "$rc" = 0 ] || diag "$out"
is "$(cd "$T/app" && node -e 'console.log(require("kz-top"), require("@kz-test/mid"), require("kz-leaf"))')" \
	"kz-top@2.0.0 @kz-test/mid@1.2.0 kz-leaf@1.0.0" "the tree's three packages are installed and load"
like "$(curl -s -H "Authorization: Bearer $TOK" "http://127.0.0.1:$PORT_good/kz-top")" \
	"\"tarball\":\"http://127.0.0.1:$PORT_good/kz-top/-/kz-top-2.0.0.tgz\"" \
	"the registry's https tarball URL is pointed back at the broker"
unlike "$(cat "$T/app/package-lock.json")" "https:|:$PB_NPM_PORT" "nothing in the lock names the https upstream"
out=$(pip_in "$T/py" kzalpha "$PORT_good"); rc=$?
is "$rc" 0 "pip install through the broker from the https index succeeds"
[ "$rc" = 0 ] || diag "$out"
is "$(PYTHONPATH=$T/py "$PB_PY" -c 'import kzalpha, kzbeta; print(kzalpha.VALUE, kzbeta.VALUE)')" \
	"kzalpha-1.0 kzbeta-1.0" "the wheel and its dependency are installed"

# ---- the system's trust store: the test CA is not in it ----
UNTRUSTED="the upstream's certificate is not trusted (upstream_tls_untrusted)"
s=$SECONDS; r=$(get "$PORT_sys" /kz-top); TOOK=$((SECONDS - s))
is "$r" "HTTP/1.1 502 $UNTRUSTED
{\"error\":\"$UNTRUSTED\"}" "no CA configured: the npm document is refused 502, one line, the trust reason"
ok "$([ "$TOOK" -lt 5 ]; echo $?)" "... at once, not at the upstream timeout (${TOOK}s)"
like "$(npm_in "$T/app-sys" kz-top "$PORT_sys")" "502 the upstream's certificate is not trusted" \
	"npm install fails with the trust reason"
out=$(pip_in "$T/py-sys" kzalpha "$PORT_sys"); rc=$?
ok "$([ "$rc" -ne 0 ] && [ ! -e "$T/py-sys/kzalpha" ]; echo $?)" "pip install fails, nothing installed"
# (pip does not print why an index page failed; curl shows it.)
is "$(get "$PORT_sys" /simple/kzalpha/ | head -1)" "HTTP/1.1 502 $UNTRUSTED" \
	"the project page pip asked for was refused with the trust reason"

# ---- the other failures, each with its reason ----
r=$(get "$PORT_wrong" /kz-top)
like "$r" "^HTTP/1.1 502 the upstream's certificate is not for its host name \(upstream_tls_name\)$" \
	"a certificate for another name: 502 with its reason"
r=$(get "$PORT_wrong" /simple/kzalpha/)
like "$r" "^HTTP/1.1 502 the upstream's certificate has expired or is not yet valid \(upstream_tls_expired\)$" \
	"an expired certificate: 502 with its reason"
s=$SECONDS; r=$(get "$PORT_plain" /kz-top); TOOK=$((SECONDS - s))
like "$r" '^HTTP/1.1 502 the upstream did not answer in TLS \(upstream_not_tls\)$' \
	"plain http on the https port: 502 with its reason"
ok "$([ "$TOOK" -lt 5 ]; echo $?)" "... at once (${TOOK}s)"
like "$(get "$PORT_plain" /simple/kzalpha/)" '^HTTP/1.1 502 the upstream did not answer \(upstream_unavailable\)$' \
	"a closed https port: 502, the upstream did not answer"
is "$(get "$PORT_mixed" /pyfiles/simple/kzalpha/kzalpha-1.0-py3-none-any.whl | head -1)" "HTTP/1.1 200 OK" \
	"an https files origin beside plain http registries is fetched over TLS"
like "$(get "$PORT_wrong" /files/simple/kzalpha/kzalpha-1.0-py3-none-any.whl)" '^HTTP/1.1 502 .*\(upstream_tls_expired\)$' \
	"a file behind a bad certificate: 502 with the reason, no byte of it"

# ---- what a user and an operator see afterwards ----
ALL=$(for p in "$PORT_sys" "$PORT_wrong" "$PORT_plain"; do get "$p" /kz-top; done)
unlike "$ALL" "$T|\\.pem|\\.key|${TOK:0:30}|${TOK#*.}" "no refusal names a file path or the token"
R=$(pb_refusals)
miss=""
for e in upstream_tls_untrusted upstream_tls_name upstream_tls_expired upstream_not_tls upstream_unavailable; do
	printf '%s' "$R" | grep -q "\"error\":\"$e\"" || miss="$miss $e"
done
is "$miss" "" "every TLS refusal is audited"
like "$(printf '%s' "$R" | grep '"upstream_tls_untrusted"' | head -1)" \
	'"registry":"npm".*"package":"kz-top".*"run_hash":"[0-9a-f]{32}"' "... with the registry, the package and the run's hash"
like "$(get "$PORT_sys" /kz-top | head -1)" "upstream_tls_untrusted" "the broker answers the same after its refusals"
t "... and no broker has exited" kill -0 "$PID_sys" "$PID_wrong" "$PID_plain" "$PID_good" "$PID_mixed"

# ---- a trust file that cannot be used stops the broker at start ----
printf 'PKGBROKER_PUBLIC_KEY_FILE = %s\nPKGBROKER_NPM_UPSTREAM = %s\nPKGBROKER_UPSTREAM_CA = %s\n' \
	"$T/pb.pub" "$NPM_TLS" "$T/none.pem" >"$T/bad.conf"
out=$(kz-pkgbroker check --config "$T/bad.conf" 2>&1); rc=$?
is "$rc:$out" "2:kz-pkgbroker: PKGBROKER_UPSTREAM_CA is not a readable PEM file of certificates" \
	"an unreadable PKGBROKER_UPSTREAM_CA: exit 2, the key named, not the path"
done_testing
