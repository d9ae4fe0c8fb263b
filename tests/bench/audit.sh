#!/bin/bash
# kz-audit benchmark (not a pass/fail test).  On the same filesystem, one
# run measures
#  (a) the raw rate of write + fdatasync of one 200-byte record in a loop:
#      the disk's limit for one-by-one durability, and
#  (b) kz-audit's acknowledged-durable appends per second with 64
#      concurrent clients (64 connections, each with one append in flight
#      and sending the next only after its acknowledgement; driven by one
#      epoll thread so the load generator takes little of a small machine),
# and prints both and their ratio (target >= 10).  ROUNDS (default 3)
# repeats the pair; SECONDS_EACH (default 5) is each measurement's length.
set -Eeu
# A step that fails stops the run: say which, not just stop (not in a
# cleanup that has turned set -e off, where a failure is expected).
trap 'r=$?; [[ $- == *e* ]] && echo "${0##*/}: stopped at line $LINENO (exit $r): $BASH_COMMAND" >&2' ERR
TOP=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_EACH:-5}
CLIENTS=${CLIENTS:-64}
D=$(mktemp -d "${BENCH_DIR:-/var/tmp}/kz-audit-bench.XXXXXX")
PID=
cleanup() {
	set +e	# a clean run must not exit 1 because something was already gone
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
[ -x "$TOP/bin/kz-audit" ] || { echo "build first: make" >&2; exit 2; }
cc -O2 -o "$D/audit-load" "$TOP/tests/e2e/audit-load.c"
head -c 32 /dev/urandom >"$D/key"; chmod 600 "$D/key"
echo "# filesystem: $(df -PT "$D" | awk 'NR==2 {print $2, $1}'), $(nproc) CPUs"

rate() { sed -E 's/.* rate ([0-9]+).*/\1/'; }
ratios=""
for r in $(seq "$ROUNDS"); do
	# The disk is measured just before and just after kz-audit, and the
	# two are averaged: on a shared machine its rate drifts.
	raw1=$("$D/audit-load" raw "$D/raw.dat" "$SECS" | rate)
	rm -rf "$D/log"
	KZ_FIELD_KEY_FILE=$D/key KZ_AUDIT_DIR=$D/log KZ_RUN_DIR=$D \
	    "$TOP/bin/kz-audit" serve --socket "$D/a.sock" 2>"$D/err" &
	PID=$!
	for i in $(seq 100); do [ -S "$D/a.sock" ] && break; sleep 0.05; done
	out=$("$D/audit-load" "$D/a.sock" "$CLIENTS" "$SECS" -)
	kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
	aud=$(printf '%s\n' "$out" | rate)
	raw2=$("$D/audit-load" raw "$D/raw.dat" "$SECS" | rate)
	rm -f "$D/raw.dat"
	raw=$(( (raw1 + raw2) / 2 ))
	ratio=$(awk -v a="$aud" -v b="$raw" 'BEGIN { printf "%.1f", b ? a / b : 0 }')
	ratios="$ratios $ratio"
	printf 'round %d: raw write+fdatasync (200 B): %s/s (%s, %s); kz-audit acked appends, %d clients: %s/s; ratio %s\n' \
	    "$r" "$raw" "$raw1" "$raw2" "$CLIENTS" "$aud" "$ratio"
	"$TOP/bin/kz-audit" verify --field-key "$D/key" --dir "$D/log" >/dev/null ||
	    echo "round $r: the log does not verify!" >&2
done
med=$(printf '%s\n' $ratios | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "median ratio: $med (target >= 10)"
