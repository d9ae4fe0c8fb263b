# Fixtures of the kz-pkgbroker tests and benchmark, sourced after
# tests/e2e/lib.sh (it uses T, bg and wait_sock).  Real registry servers on
# loopback only, never a public registry:
#   pb_keys             a field key and the broker's public key
#   pb_audit_start      a real kz-audit sink on $T/kz-audit.sock
#   pb_npm_registry     verdaccio (tests/pkgbroker/registry) with a config of
#                       its own, a user, and the test tree published to it:
#                       kz-top -> @kz-test/mid -> kz-leaf, kz-top -> kz-leaf,
#                       and kz-big (over the ceiling the tests set)
#   pb_upstreams        both of the below, the wheels built meanwhile
#   pb_py_build, pb_py_serve  wheels built here by setuptools (kzalpha needs
#                       kzbeta; kzhuge is over the ceiling) as a PEP 503
#                       directory served by python3 -m http.server
#   pb_broker_start     kz-pkgbroker on $T/pb.sock and a loopback port
#   pb_tls_certs        a throwaway CA and server certificates (openssl)
#   pb_py_serve_tls     the PEP 503 directory over TLS (tlsserve.py)
#   pb_raw UID REQ...   one kept-alive connection to the broker's socket
#                       as UID, its requests' status lines (raw.py)
# With PB_NPM_TLS=1 (pb_tls_certs first), verdaccio listens on https with
# the certificate for 127.0.0.1 and localhost.
PB_DIR=$TOP/tests/pkgbroker
PB_PY=/usr/bin/python3
PB_VERDACCIO=$PB_DIR/registry/node_modules/.bin/verdaccio
# The ceiling the tests set: the test tree's files are a few hundred
# bytes, kz-big and kzhuge are megabytes.
PB_CEILING=1M

pb_port() {
	"$PB_PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# pb_wait_http URL [SECONDS]: until URL answers at all (an https URL
# verified against the test CA).
pb_wait_http() {
	local i=0 max=$(( ${2:-20} * 10 ))
	while [ $i -lt $max ]; do
		curl -s -o /dev/null -m 2 ${PB_CA:+--cacert "$PB_CA"} "$1" && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}

pb_keys() {
	PB_KEY=$T/field.key
	head -c 32 /dev/urandom >"$PB_KEY"
	chmod 0600 "$PB_KEY"
	kz-pkgbroker pubkey --field-key "$PB_KEY" >"$T/pb.pub"
}

pb_audit_start() {
	PB_AUDIT_SOCK=$T/kz-audit.sock
	mkdir -p "$T/audit"
	KZ_FIELD_KEY_FILE=$PB_KEY KZ_AUDIT_DIR=$T/audit bg kz-audit serve \
		--socket "$PB_AUDIT_SOCK" 2>>"$T/audit.log"
	wait_sock "$PB_AUDIT_SOCK" 10
}

# pb_refusals: the pkg_refusal records, one JSON line each.
pb_refusals() { KZ_FIELD_KEY_FILE=$PB_KEY kz-audit query --dir "$T/audit" --kind pkg_refusal; }

# pb_pkg DIR NAME VERSION DEPS-JSON: one package directory.
pb_pkg() {
	mkdir -p "$1"
	"$PB_PY" - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
d, name, ver, deps = sys.argv[1:5]
json.dump({"name": name, "version": ver, "main": "index.js",
           "dependencies": json.loads(deps), "license": "MIT",
           "description": "kz-pkgbroker test package"},
          open(d + "/package.json", "w"))
open(d + "/index.js", "w").write(
    "module.exports = %s;\n" % json.dumps(name + "@" + ver))
PY
}

pb_verdaccio_conf() {
	cat <<YAML
storage: $1/storage
auth:
  htpasswd:
    file: $1/htpasswd
    max_users: 10
uplinks: {}
packages:
  '**':
    access: \$all
    publish: \$authenticated
log: { type: file, path: $1/verdaccio.log, level: warn }
YAML
	if [ "${PB_NPM_TLS:-0}" = 1 ]; then
		printf 'https:\n  key: %s\n  cert: %s\n' "$PB_TLS/srv.key" "$PB_TLS/srv.pem"
	fi
}

# pb_tls_certs: $PB_TLS/ca.pem (PB_CA, a CA of this test alone) and, signed
# by it, NAME.pem/NAME.key for srv (127.0.0.1 and localhost), other
# (other.example only) and old (127.0.0.1, expired yesterday).
pb_tls_certs() {
	local e="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes" n
	PB_TLS=$T/tls
	PB_CA=$PB_TLS/ca.pem
	mkdir -p "$PB_TLS"
	# shellcheck disable=SC2086
	openssl req -x509 $e -keyout "$PB_TLS/ca.key" -out "$PB_CA" -days 2 \
		-subj /CN=kz-pkgbroker-test-ca 2>>"$T/openssl.log" || return 1
	for n in srv:2:IP:127.0.0.1,DNS:localhost other:2:DNS:other.example old:-1:IP:127.0.0.1; do
		set -- "${n%%:*}" "$(echo "$n" | cut -d: -f2)" "${n#*:*:}"
		# shellcheck disable=SC2086
		openssl req $e -keyout "$PB_TLS/$1.key" -out "$PB_TLS/$1.csr" \
			-subj "/CN=$1" 2>>"$T/openssl.log" || return 1
		printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
			"$3" >"$PB_TLS/$1.ext"
		openssl x509 -req -in "$PB_TLS/$1.csr" -CA "$PB_CA" -CAkey "$PB_TLS/ca.key" \
			-CAcreateserial -days "$2" -extfile "$PB_TLS/$1.ext" \
			-out "$PB_TLS/$1.pem" 2>>"$T/openssl.log" || return 1
	done
}

pb_npm_registry() {
	local d=$T/verdaccio tok p scheme=http
	[ "${PB_NPM_TLS:-0}" = 1 ] && scheme=https
	PB_NPM_PORT=$(pb_port)
	PB_NPM_URL=$scheme://127.0.0.1:$PB_NPM_PORT
	mkdir -p "$d/storage"
	pb_verdaccio_conf "$d" >"$d/config.yaml"
	bg "$PB_VERDACCIO" --config "$d/config.yaml" --listen "$PB_NPM_URL"
	pb_wait_http "$PB_NPM_URL/-/ping" 40 || return 1
	tok=$(curl -s ${PB_CA:+--cacert "$PB_CA"} -XPUT -H 'Content-Type: application/json' \
		-d '{"name":"kztest","password":"kztest-pass"}' \
		"$PB_NPM_URL/-/user/org.couchdb.user:kztest" |
		"$PB_PY" -c 'import json,sys; print(json.load(sys.stdin)["token"])') || return 1
	printf '//127.0.0.1:%s/:_authToken=%s\n' "$PB_NPM_PORT" "$tok" >"$d/npmrc"
	pb_pkg "$d/src/leaf" kz-leaf 1.0.0 '{}'
	pb_pkg "$d/src/mid" @kz-test/mid 1.2.0 '{"kz-leaf": "^1.0.0"}'
	pb_pkg "$d/src/top" kz-top 2.0.0 '{"@kz-test/mid": "^1.0.0", "kz-leaf": "1.0.0"}'
	set -- leaf mid top
	if [ "${PB_BIG:-1}" = 1 ]; then
		pb_pkg "$d/src/big" kz-big 1.0.0 '{}'
		head -c 3000000 /dev/urandom | base64 >"$d/src/big/blob.txt"
		set -- "$@" big
	fi
	# In parallel: each npm publish is mostly npm's own start-up.
	local pids=""
	for p in "$@"; do
		(cd "$d/src/$p" && npm publish --userconfig "$d/npmrc" ${PB_CA:+--cafile "$PB_CA"} \
			--registry "$PB_NPM_URL" --access public --no-audit \
			--no-fund >"$T/publish-$p.log" 2>&1) &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || return 1; done
}

# pb_wheel NAME REQ [EXTRA-BYTES]: a wheel of NAME 1.0 needing REQ ('' for
# none), built by setuptools offline into $T/wheels.
pb_wheel() {
	local name=$1 req=$2 src=$T/pysrc/$1 extra=${3:-0}
	mkdir -p "$src/$name"
	printf 'VALUE = "%s-1.0"\n' "$name" >"$src/$name/__init__.py"
	[ "$extra" = 0 ] || head -c "$extra" /dev/urandom | base64 >"$src/$name/blob.txt"
	cat >"$src/setup.py" <<PY
from setuptools import setup
setup(name="$name", version="1.0", packages=["$name"],
      package_data={"$name": ["*.txt"]},
      install_requires=[r for r in ["$req"] if r], python_requires=">=3.7")
PY
	(cd "$src" && "$PB_PY" setup.py -q bdist_wheel -d "$T/wheels" >>"$T/wheel.log" 2>&1)
}

# pb_py_build: the wheels and the PEP 503 tree (no server; it may run in
# the background while verdaccio starts).
pb_py_build() {
	local w name f pids=""
	pb_wheel kzbeta '' & pids="$pids $!"
	pb_wheel kzalpha kzbeta & pids="$pids $!"
	if [ "${PB_BIG:-1}" = 1 ]; then pb_wheel kzhuge '' 3000000 & pids="$pids $!"; fi
	for w in $pids; do wait "$w" || return 1; done
	# One page per project listing its files with their sha256, as a
	# real index does; the root page lists the projects.
	mkdir -p "$T/pyindex/simple"
	printf '<!DOCTYPE html><html><body>\n' >"$T/pyindex/simple/index.html"
	for w in "$T"/wheels/*.whl; do
		f=$(basename "$w")
		name=${f%%-*}
		mkdir -p "$T/pyindex/simple/$name"
		cp "$w" "$T/pyindex/simple/$name/"
		printf '<!DOCTYPE html><html><body>\n<a href="%s#sha256=%s" data-requires-python="&gt;=3.7">%s</a><br>\n</body></html>\n' \
			"$f" "$(sha256sum "$w" | cut -d' ' -f1)" "$f" \
			>"$T/pyindex/simple/$name/index.html"
		printf '<a href="%s/">%s</a>\n' "$name" "$name" >>"$T/pyindex/simple/index.html"
	done
}

pb_py_serve() {
	PB_PY_PORT=$(pb_port)
	PB_PY_URL=http://127.0.0.1:$PB_PY_PORT
	bg "$PB_PY" -m http.server --bind 127.0.0.1 --directory "$T/pyindex" "$PB_PY_PORT"
	pb_wait_http "$PB_PY_URL/simple/" 20
}

# pb_py_serve_tls NAME...: the PEP 503 directory over TLS, one port per
# certificate NAME of pb_tls_certs, in PB_TLS_PORT_<NAME>.
pb_py_serve_tls() {
	local n p specs=""
	for n in "$@"; do
		p=$(pb_port)
		eval "PB_TLS_PORT_$n=$p"
		specs="$specs $p:$PB_TLS/$n.pem:$PB_TLS/$n.key"
	done
	# shellcheck disable=SC2086
	bg "$PB_PY" "$PB_DIR/tlsserve.py" "$T/pyindex" $specs
	pb_wait_http "https://127.0.0.1:$(eval "echo \$PB_TLS_PORT_$1")/simple/" 20
}

# pb_upstreams: verdaccio with the tree published, and the PEP 503 index,
# the wheels built while verdaccio starts.
pb_upstreams() {
	local b
	pb_py_build & b=$!
	pb_npm_registry || { wait "$b"; return 1; }
	wait "$b" || return 1
	pb_py_serve
}

# pb_broker_start [EXTRA-CONFIG-LINE]
pb_broker_start() {
	PB_PORT=$(pb_port)
	PB_URL=http://127.0.0.1:$PB_PORT
	PB_SOCK=$T/pb.sock
	cat >"$T/pb.conf" <<CONF
PKGBROKER_SOCKET = $PB_SOCK
PKGBROKER_LISTEN = 127.0.0.1:$PB_PORT
PKGBROKER_NPM_UPSTREAM = ${PB_NPM_URL:-}
PKGBROKER_PYPI_UPSTREAM = ${PB_PY_URL:-}
PKGBROKER_PUBLIC_KEY_FILE = $T/pb.pub
PKGBROKER_FILE_MAX = $PB_CEILING
KZ_AUDIT_SOCKET = ${PB_AUDIT_SOCK:-$T/kz-audit.sock}
# The workers' broker forwards connect with the worker's uid and this
# test's group (kz-pkgbroker(8), KZ_PEER_GIDS).
KZ_PEER_GIDS = $(id -g)
CONF
	[ -z "${1:-}" ] || printf '%s\n' "$1" >>"$T/pb.conf"
	bg kz-pkgbroker serve --config "$T/pb.conf" 2>>"$T/pb.log"
	PB_PID=$LASTPID
	wait_sock "$PB_SOCK" 10
}

# pb_raw UID REQUEST...: raw.py on the broker's socket (what it says).
pb_raw() { "$PB_PY" "$PB_DIR/raw.py" "$PB_SOCK" "$@"; }
