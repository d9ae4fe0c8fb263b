#!/bin/bash
# Every daemon answers status (kz-audit, kz-lease, kz-project, kz-pkgrun,
# kz-browser, a kz-sandbox worker and kz-egress's status socket); kz-msg tells a socket that does
# not speak kz frames (the egress proxy's, the store's) within about a
# second; kz-metrics prints Prometheus text that a strict reading of
# prometheus_client's parser accepts, and its counters move with a run,
# an egress refusal and an egress check.
# e2e: alone (it times answers to within 1.5 s)
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
. "$TOP/tests/egress/lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import prometheus_client' 2>/dev/null; then
	echo "1..0 # SKIP python3-prometheus-client is not installed (make deps)"; exit 0
fi
plan 39
# The runner's parent cgroup (the runner makes it; its sandboxes' are
# below), once they are gone.
on_exit "for c in /sys/fs/cgroup/kz-pkgrun /sys/fs/cgroup/*/kz-pkgrun; do rmdir \$c 2>/dev/null; done"
start_stack 1
t "a real worker becomes warm" wait_for warm 1

export KZ_PROJECT_SOCKET=$T/kz-project.sock KZ_PROJECT_BLOB_DIR=$T/blobs
bg kz-project serve --socket "$KZ_PROJECT_SOCKET" 2>"$T/project.log"
wait_sock "$KZ_PROJECT_SOCKET"
# kz-pkgrun with one warm worker, kz-browser with sessions off (its
# default): both at their run-dir sockets.
PKGRUN_WARM=1 PKGRUN_CACHE=$T/pkgcache PKGRUN_STATE_DIR=$T/pkgstate \
	bg kz-pkgrun serve --socket "$T/kz-pkgrun.sock" 2>"$T/pkgrun.log"
bg kz-browser serve --socket "$T/kz-browser.sock" 2>"$T/browser.log"
wait_sock "$T/kz-pkgrun.sock" && wait_sock "$T/kz-browser.sock"

# kz-egress: the proxy on a Unix socket, status on a socket of its own;
# one origin in a network namespace of this test.
N=116
eg_netns $N || { echo "Bail out! cannot create a network namespace"; exit 1; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
echo "{\"origin.kz.test\": {\"A\": [\"$EG_ORIGIN\"]}}" >"$T/zone.json"
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
EG_PK=$T/grant.pub
kz-egress pubkey --field-key "$KZ_FIELD_KEY_FILE" >"$EG_PK"
cat >"$T/eg.conf" <<EOF2
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = unix:$T/kz-egress.sock
SANDBOX_EGRESS_STATUS_SOCKET = $T/kz-egress-status.sock
EOF2
bg kz-egress serve --config "$T/eg.conf" 2>"$T/eg.log"
wait_sock "$T/kz-egress-status.sock" 10 || { echo "Bail out! kz-egress did not start"; exit 1; }
G=$(kz-egress grant --field-key "$KZ_FIELD_KEY_FILE" --run metrics-$$)

# status on every daemon socket
for s in kz-audit kz-lease kz-project kz-pkgrun kz-browser kz-egress-status; do
	t "$s answers status" kz-msg "$T/$s.sock" '{"op":"status"}'
done
W=$(ls "$T"/workers/*/sock | head -1)
out=$(kz-msg "$W" '{"op":"status"}')
like "$out" '"ok":true.*"leases":[0-9]+.*"runs":[0-9]+' "a kz-sandbox worker answers status with its counters"
like "$(kz-msg "$T/kz-egress-status.sock" '{"op":"status"}')" '"allowed":0.*"refused":0' \
	"kz-egress's status starts at zero"

# A socket that does not speak frames, told within a second or so.
elapsed() { local t0 t1; t0=$(date +%s%N); "$@" >"$T/.out" 2>&1; RC=$?; t1=$(date +%s%N); MS=$(( (t1 - t0) / 1000000 )); }
elapsed kz-msg "$T/kz-egress.sock" '{"op":"status"}'
is "$RC" 3 "kz-msg against the egress proxy socket: exit 3"
like "$(cat "$T/.out")" "does not speak kz frames \(got 'HTTP/1.1 400" "and says it does not speak frames, quoting the answer"
t "within 1.5 s ($MS ms)" test "$MS" -lt 1500
elapsed kz-msg "$STORE_SOCK" '{"op":"status"}'
is "$RC" 3 "kz-msg against the store socket: exit 3"
like "$(cat "$T/.out")" "does not speak kz frames" "and says the store does not speak frames"
t "within 2.5 s, not the 10 s timeout ($MS ms)" test "$MS" -lt 2500
elapsed kz-msg -t 2 "$STORE_SOCK" '{"op":"ping"}'
t "with -t, the whole timeout is waited for ($MS ms)" test "$MS" -ge 1900

# The metrics, strictly parsed.
cat >"$T/parse.py" <<'PY'
import math, re, sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
names = re.findall(r'^# TYPE (\S+) (\S+)$', text, re.M)
helps = re.findall(r'^# HELP (\S+) ', text, re.M)
assert len(names) == len(set(n for n, _ in names)), "a family declared twice"
assert [n for n, _ in names] == helps, "HELP and TYPE do not pair"
seen = {}
for fam in text_string_to_metric_families(text):
    assert fam.type in ("counter", "gauge"), (fam.name, fam.type)
    assert fam.documentation, fam.name
    for s in fam.samples:
        assert re.match(r'^kz_[a-z0-9_]+$', s.name), s.name
        assert math.isfinite(s.value), s.name
        if fam.type == "counter":
            assert s.name.endswith("_total") and s.value >= 0, s.name
        key = (s.name, tuple(sorted(s.labels.items())))
        assert key not in seen, key
        seen[key] = s.value
for line in text.splitlines():
    assert line.startswith("# ") or re.match(r'^kz_[a-z0-9_]+(\{.*\})? \S+$', line), line
for k, v in sorted(seen.items()):
    print(k[0] + "{" + ",".join("%s=%s" % kv for kv in k[1]) + "}", v)
PY
export KZ_EGRESS_STATUS_SOCKET=$T/kz-egress-status.sock
t "kz-metrics writes its output atomically" kz-metrics --run-dir "$T" -o "$T/m1.prom"
t "the text parses strictly with prometheus_client" sh -c "$PY '$T/parse.py' '$T/m1.prom' >'$T/m1'"
m() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
for d in kz-audit kz-lease kz-project kz-egress kz-pkgrun kz-browser; do
	is "$(m "$T/m1" "kz_up{daemon=$d}")" 1.0 "kz_up is 1 for $d"
done
is "$(m "$T/m1" 'kz_pkgrun_warm_target{}')" 1.0 "kz-pkgrun's warm target"
is "$(m "$T/m1" 'kz_browser_enabled{}')" 0.0 "browser sessions off"
is "$(m "$T/m1" 'kz_audit_busy_total{}')" 0.0 "no append was answered busy"
is "$(m "$T/m1" 'kz_lease_workers{state=warm}')" 1.0 "the pool's warm workers"

# Move the counters: a run, an egress refusal, an egress pass.
kz-run -q --actor alice --conversation c1 -- true >/dev/null 2>&1
t "after the run the worker is warm again" wait_for warm 1
code() { curl -s -o /dev/null -w '%{http_code}' --unix-socket "$T/kz-egress.sock" \
	--request-target "$1" -H "Proxy-Authorization: Bearer $G" "$1"; }
is "$(code http://origin.kz.test:25/)" 403 "egress refuses a port"
is "$(code http://origin.kz.test/hello)" 200 "egress passes the origin"
kz-metrics --run-dir "$T" >"$T/m2.prom"
$PY "$T/parse.py" "$T/m2.prom" >"$T/m2"
gt() { [ "$(m "$T/m2" "$1" | cut -d. -f1)" -gt "$(m "$T/m1" "$1" | cut -d. -f1)" ] 2>/dev/null || [ -z "$(m "$T/m1" "$1")" -a -n "$(m "$T/m2" "$1")" ]; }
t "leases granted moved" gt kz_lease_leases_granted_total{}
t "resets to warm moved" gt kz_lease_resets_total{outcome=warm}
t "audit appends moved" gt kz_audit_appends_total{}
t "egress allowed moved" gt kz_egress_allowed_total{}
t "egress refusals by reason moved" gt kz_egress_refused_total{reason=port_not_allowed}

missing=
for n in $(awk '/^# TYPE/ { print $3 }' "$T/m2.prom"); do
	grep -q "^\.It Li $n\>" "$TOP/man/man8/kz-metrics.8" || missing="$missing $n"
done
is "$missing" "" "kz-metrics(8) names every metric printed"

kill "$LEASE_PID"; sleep 0.3
kz-metrics --run-dir "$T" >"$T/m3.prom" 2>/dev/null
is "$?" 0 "a daemon down: kz-metrics still exits 0"
like "$(cat "$T/m3.prom")" 'kz_up\{daemon="kz-lease"\} 0' "and says kz_up 0 for it"
done_testing
