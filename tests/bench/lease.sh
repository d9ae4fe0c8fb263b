#!/bin/bash
# Benchmark kz-lease and the main job (not a pass/fail test).  Prints:
#  (a) redis-benchmark: a one-round-trip EVALSHA against the same store
#      (32 clients), the store's ceiling in calls/s;
#  (b) kz-lease lease+release cycles/s from 32 concurrent clients on a pool
#      of POOL warm kz-sandbox workers (real ones, as kz-lease's local
#      controller starts them), every release followed by kz-lease's
#      in-process reset (agent wipe + health, host-side cgroup and
#      projection checks, publish script), as in production.  Only honest
#      cycles count: leases of a worker a reset proved clean since its last
#      lease (lease-load.c); leases of fresh workers and any reused clean
#      token are reported beside it.  The CPU every process spent per
#      cycle (kz-lease, the store, the workers' agents) shows what a
#      release->warm costs and the ceiling it sets on 2 cores; beside it
#      the daemon's own path (status ops/s: one EVALSHA each, no lease and
#      no reset);
#  (c) kz-run -- /bin/true end to end on warm real kz-sandbox workers
#      (lease -> run -> release, audit on), p50 and p99, beside the cold
#      bwrap --unshare-all ... /bin/true p50;
# and the ratios b/a (target >= 0.4) and c50/bwrap50 (target <= 0.5).
# Run as root: make deps-bench first (hyperfine).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$TOP/bin
SECS=${SECS:-5}
RUNS=${RUNS:-200}
T=$(mktemp -d /tmp/kz-bench.XXXXXX)
chmod 0755 "$T"
PIDS=
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	sleep 0.5
	for f in "$T"/*/workers/*/pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	wait 2>/dev/null
	sleep 0.5
	rm -rf "$T"
}
trap cleanup EXIT
srv=$(command -v valkey-server || command -v redis-server)
. "$TOP/tests/bench/steal.bash"
ST0=$(steal)
cc -std=c11 -D_GNU_SOURCE -O2 -I"$TOP/lib" $(pkg-config --cflags libcjson) -o "$T/load" \
	"$TOP/tests/bench/lease-load.c" "$TOP/build/libkz.a" $(pkg-config --libs libcjson libsodium) -lpthread
bench=$(command -v valkey-benchmark || command -v redis-benchmark)

# One deployment per part: store, kz-audit (c), kz-lease.
stack() { # stack DIR
	local d=$1
	mkdir -p "$d"; chmod 0755 "$d"
	head -c 32 /dev/urandom >"$d/field.key"; chmod 600 "$d/field.key"
	"$srv" --port 0 --unixsocket "$d/store.sock" --unixsocketperm 600 --dir "$d" \
		--appendonly yes --save '' --daemonize no --loglevel warning >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 100); do [ -S "$d/store.sock" ] && break; sleep 0.05; done
}
wait_warm() { # wait_warm SOCK N
	for _ in $(seq 600); do
		"$BIN/kz-lease" status --socket "$1" 2>/dev/null | grep -q "\"warm\":$2," && return 0
		sleep 0.1
	done
	echo "bench: the pool did not become warm" >&2; exit 3
}

# (a) the store's ceiling: one EVALSHA round trip of a script of the same
# shape as the pool's (reads and writes keys under one hash tag).
A=$T/a; stack "$A"
sha=$(redis-cli -s "$A/store.sock" SCRIPT LOAD \
	"local v = redis.call('HGET', KEYS[1], 'n'); redis.call('HSET', KEYS[1], 'n', (tonumber(v) or 0) + 1); return v")
a=$("$bench" -s "$A/store.sock" -c 32 -n 200000 -q --csv EVALSHA "$sha" 1 'kz:{bench}:w:x' 2>/dev/null |
	tail -1 | cut -d, -f2 | tr -d '"')

# (b) lease+release through kz-lease (one daemon), 32 clients.
B=$T/b; stack "$B"
(
	export KZ_RUN_DIR=$B KZ_STORE_SOCKET=$B/store.sock KZ_FIELD_KEY_FILE=$B/field.key
	export LEASE_CAPACITY=${POOL:-32} LEASE_MEMBER_LIMIT=64 LEASE_RECONCILE_MS=2000
	exec "$BIN/kz-lease" serve --socket "$B/kz-lease.sock" 2>"$B/lease.log"
) & PIDS="$PIDS $!"
for _ in $(seq 100); do [ -S "$B/kz-lease.sock" ] && break; sleep 0.05; done
wait_warm "$B/kz-lease.sock" "${POOL:-32}"
# CPU (utime+stime, clock ticks) of kz-lease, the store and the workers'
# agents of (b).
cpu() { local p s=0; for p in $(pgrep -f "$1"); do s=$((s + $(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null || echo 0))); done; echo $s; }
L0=$(cpu "kz-lease serve --socket $B/") S0=$(cpu "unixsocket:$B/store.sock") W0=$(cpu "kz-sandbox serve.*$B/")
"$T/load" "$B/kz-lease.sock" 32 "$SECS" >"$T/b.out"
L1=$(cpu "kz-lease serve --socket $B/") S1=$(cpu "unixsocket:$B/store.sock") W1=$(cpu "kz-sandbox serve.*$B/")
read -r b bbusy bfresh breused <"$T/b.out"
bcpu=$(python3 -c 'import sys; hz=float(sys.argv[1]); n=float(sys.argv[2])*float(sys.argv[3])
l,s,w=[float(x)/hz*1000/n for x in sys.argv[4:]]; print("%.3f %.3f %.3f %.3f %.0f" % (l+s+w, l, s, w, 2000/(l+s+w)))' \
	"$(getconf CLK_TCK)" "$b" "$SECS" $((L1 - L0)) $((S1 - S0)) $((W1 - W0)))
read -r bc bl bs bw bmax <<<"$bcpu"
# The daemon and store path alone (status: one EVALSHA, no lease, no reset).
read -r bst _ < <(KZ_LOAD_STATUS=1 "$T/load" "$B/kz-lease.sock" 32 "$SECS")

# (c) kz-run -- /bin/true on warm real workers, audit on, no snapshot.
C=$T/c; stack "$C"
export KZ_RUN_DIR=$C KZ_STORE_SOCKET=$C/store.sock KZ_FIELD_KEY_FILE=$C/field.key
export KZ_AUDIT_SOCKET=$C/kz-audit.sock KZ_LEASE_SOCKET=$C/kz-lease.sock
"$BIN/kz-audit" serve --socket "$KZ_AUDIT_SOCKET" 2>"$C/audit.log" & PIDS="$PIDS $!"
LEASE_CAPACITY=${CPOOL:-4} "$BIN/kz-lease" serve --socket "$KZ_LEASE_SOCKET" 2>"$C/lease.log" & PIDS="$PIDS $!"
for _ in $(seq 100); do [ -S "$KZ_LEASE_SOCKET" ] && break; sleep 0.05; done
wait_warm "$KZ_LEASE_SOCKET" "${CPOOL:-4}"
pct() { # pct JSON Q
	python3 -c 'import json,sys; t=sorted(json.load(open(sys.argv[1]))["results"][0]["times"]); q=float(sys.argv[2]); print("%.3f" % (t[min(len(t)-1, int(q*len(t)))]*1000))' "$1" "$2"
}
RUN_SNAPSHOT=no hyperfine -N --warmup 10 --runs "$RUNS" --export-json "$T/c.json" \
	"$BIN/kz-run -q --actor bench --conversation c -- /bin/true" >/dev/null 2>&1
c50=$(pct "$T/c.json" 0.5) c99=$(pct "$T/c.json" 0.99)
RUN_SNAPSHOT=yes hyperfine -N --warmup 5 --runs "$((RUNS / 2))" --export-json "$T/cs.json" \
	"$BIN/kz-run -q --actor bench --conversation c -- /bin/true" >/dev/null 2>&1
cs50=$(pct "$T/cs.json" 0.5)
hyperfine -N --warmup 10 --runs "$RUNS" --export-json "$T/w.json" \
	"bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev /bin/true" >/dev/null 2>&1
w50=$(pct "$T/w.json" 0.5)

printf '(a) store EVALSHA, 32 clients           %10.0f calls/s\n' "$a"
printf '(b) kz-lease lease+release, 32 clients  %10.0f cycles/s (pool %s), each a lease of a worker reset and proven clean\n' "$b" "${POOL:-32}"
printf '    not counted                          %10s fresh-worker leases, %s reused clean tokens (must be 0)\n' "$bfresh" "$breused"
printf '    kz-lease requests answered           %10.0f req/s (%s busy replies/s while resets ran)\n' "$((2 * b + bbusy))" "$bbusy"
printf '    CPU per cycle (lease+release+reset)  %10.3f ms: kz-lease %.3f, store %.3f, worker agents %.3f\n' "$bc" "$bl" "$bs" "$bw"
printf '    ceiling at that cost on 2 CPUs       %10.0f cycles/s, %.4f of (a)\n' "$bmax" "$(python3 -c "print($bmax/$a)")"
printf '    kz-lease status ops (no reset)       %10.0f ops/s, %.3f of (a)\n' "$bst" "$(python3 -c "print($bst/$a)")"
printf '(c) kz-run /bin/true warm end to end    p50 %8.3f ms  p99 %8.3f ms\n' "$c50" "$c99"
printf '    the same with workspace snapshots   p50 %8.3f ms\n' "$cs50"
printf '    bwrap --unshare-all /bin/true cold  p50 %8.3f ms\n' "$w50"
python3 -c 'import sys; a,b,c,w=map(float,sys.argv[1:])
print("b/a = %.3f (target >= 0.4)" % (b/a)); print("c50/bwrap50 = %.2f (target <= 0.5)" % (c/w))' "$a" "$b" "$c50" "$w50"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; CPU time stolen by the host during the run: $(steal_since "$ST0")"
