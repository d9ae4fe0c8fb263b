#!/bin/bash
# Benchmark kz-sandbox (not a pass/fail test).  Prints medians in ms for
#  (a) fork/exec of /bin/true, (b) bwrap --unshare-all with a read-only root,
#  proc and dev running /bin/true, (c) kz-sandbox run -- /bin/true (cold),
#  (d) a run of /bin/true on a warm kz-sandbox serve worker,
# and the ratios c/b (target <= 1.0) and d/a (target <= 2.0); for reference
# also (e), (d) on a worker with --userns on.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SB=${KZ_SANDBOX_BIN:-$TOP/bin/kz-sandbox}
RUNS=${RUNS:-100}
T=$(mktemp -d /tmp/kz-bench.XXXXXX)
WPID= UPID=
cleanup() { for p in $WPID $UPID; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
cc -O2 -o "$T/client" "$TOP/tests/sandbox/bench-client.c"

# hyperfine's median, in ms.
hmed() {
	hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$T/h.json" "$1" >/dev/null 2>&1
	python3 -c 'import json,sys; print("%.3f" % (json.load(open(sys.argv[1]))["results"][0]["median"]*1000))' "$T/h.json"
}
command -v hyperfine >/dev/null || { echo "hyperfine missing (make deps-bench)"; exit 3; }
b=$(hmed "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev /bin/true")
c=$(hmed "$SB run -- /bin/true")
"$SB" serve --id "bench-$$" --socket "$T/w.sock" 2>/dev/null & WPID=$!
"$SB" serve --id "bench-u-$$" --socket "$T/u.sock" --userns on 2>/dev/null & UPID=$!
for i in $(seq 100); do [ -S "$T/w.sock" ] && [ -S "$T/u.sock" ] && break; sleep 0.05; done
"$T/client" "$T/w.sock" 20 >/dev/null		# warm-up
"$T/client" "$T/u.sock" 20 >/dev/null
# (a) and (d) are measured in alternating rounds, so a change in the
# machine's load during the run weighs on both alike; the medians are over
# every sample of every round.
ROUNDS=${ROUNDS:-5}
: >"$T/a.txt"; : >"$T/d.txt"; : >"$T/e.txt"
for r in $(seq "$ROUNDS"); do
	hyperfine -N --warmup 3 --runs "$(( (RUNS * 2 + ROUNDS - 1) / ROUNDS ))" \
		--export-json "$T/h.json" /bin/true >/dev/null 2>&1
	python3 -c 'import json,sys
for t in json.load(open(sys.argv[1]))["results"][0]["times"]: print("%.4f" % (t*1000))' "$T/h.json" >>"$T/a.txt"
	"$T/client" "$T/w.sock" "$(( (RUNS * 5 + ROUNDS - 1) / ROUNDS ))" -r >>"$T/d.txt"
	"$T/client" "$T/u.sock" "$(( (RUNS + ROUNDS - 1) / ROUNDS ))" -r >>"$T/e.txt"
done
read -r a d dmean e < <(python3 -c 'import statistics as s,sys
a, d, e = ([float(x) for x in open(f)] for f in sys.argv[1:])
print("%.3f %.3f %.3f %.3f" % (s.median(a), s.median(d), s.mean(d), s.median(e)))' \
	"$T/a.txt" "$T/d.txt" "$T/e.txt")
printf '(a) fork/exec /bin/true          median %8.3f ms\n' "$a"
printf '(b) bwrap --unshare-all          median %8.3f ms\n' "$b"
printf '(c) kz-sandbox run (cold)        median %8.3f ms\n' "$c"
printf '(d) kz-sandbox serve run (warm)  median %8.3f ms (mean %.3f)\n' "$d" "$dmean"
printf '(e) (d) with --userns on         median %8.3f ms\n' "$e"
python3 -c 'import sys; a,b,c,d=map(float,sys.argv[1:])
print("c/b = %.2f (target <= 1.0)" % (c/b)); print("d/a = %.2f (target <= 2.0)" % (d/a))' "$a" "$b" "$c" "$d"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
