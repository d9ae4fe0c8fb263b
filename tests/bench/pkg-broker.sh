#!/bin/bash
# kz-pkgbroker benchmark, the install half (not a pass/fail test).  In one
# run, against the same local verdaccio on loopback with the test tree
# (kz-top -> @kz-test/mid -> kz-leaf) published: `npm install` of the tree
# straight from the registry, and the same install through the broker (its
# TCP listener, a run token as the registry credential), ROUNDS times each,
# alternating, every install in a fresh directory with a fresh npm cache.
# Prints each median and their ratio (target <= 1.2).
set -u
. "$(dirname "$0")/../e2e/lib.sh"
. "$TOP/tests/pkgbroker/lib.sh"
ROUNDS=${ROUNDS:-5}
[ -x "$TOP/bin/kz-pkgbroker" ] || { echo "build first: make" >&2; exit 2; }
[ -x "$PB_VERDACCIO" ] || { echo "install the test registry first: make deps" >&2; exit 2; }
export npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false
PB_BIG=0
pb_keys
pb_audit_start || { echo "kz-audit did not start" >&2; exit 3; }
pb_npm_registry || { echo "verdaccio did not start" >&2; exit 3; }
pb_broker_start || { echo "kz-pkgbroker did not start" >&2; exit 3; }
TOK=$(kz-pkgbroker token --field-key "$PB_KEY" --run bench --ttl 900)

# install N URL [TOKEN]: milliseconds of one npm install of the tree.
install() {
	local d=$T/i$1 t0 t1
	mkdir -p "$d"
	printf 'registry=%s/\n' "$2" >"$d/.npmrc"
	[ -z "${3:-}" ] || printf '//%s/:_authToken=%s\n' "${2#http://}" "$3" >>"$d/.npmrc"
	printf '{"name":"app","version":"1.0.0","dependencies":{"kz-top":"^2.0.0"}}\n' >"$d/package.json"
	t0=$(date +%s%N)
	(cd "$d" && npm install --cache "$d/.cache" >/dev/null 2>&1) || { echo "install failed" >&2; exit 4; }
	t1=$(date +%s%N)
	[ -f "$d/node_modules/kz-leaf/index.js" ] || { echo "install incomplete" >&2; exit 4; }
	rm -rf "$d"
	echo $(( (t1 - t0) / 1000000 ))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

install w0 "$PB_NPM_URL" >/dev/null	# warm both paths once
install w1 "$PB_URL" "$TOK" >/dev/null
: >"$T/direct" ; : >"$T/broker"
for i in $(seq 1 "$ROUNDS"); do
	install d$i "$PB_NPM_URL" >>"$T/direct"
	install b$i "$PB_URL" "$TOK" >>"$T/broker"
done
d=$(median <"$T/direct") b=$(median <"$T/broker")
echo "npm install of the test tree (3 packages), $ROUNDS rounds, median:"
echo "  direct from the local registry: $d ms"
echo "  through kz-pkgbroker:           $b ms"
awk -v b="$b" -v d="$d" 'BEGIN {printf "  ratio broker/direct: %.2f (target <= 1.2)\n", b / d}'
