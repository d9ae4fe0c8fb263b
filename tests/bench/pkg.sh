#!/bin/bash
# Benchmark the package runner (not a pass/fail test).  Prints, in one run:
#  (a) a trivial package tool (the demo's echo: a shell script printing
#      its arguments) run directly, p50;
#  (b) the same tool through `kz-pkgrun invoke` (the one-shot: cache
#      lookup, hash-verified copy into a fresh projection, audit before and
#      after, a one-shot kz-sandbox of the runner's own), p50 and p99;
#  (c) the same through the `invoke` op of `kz-pkgrun serve` (kz-msg), p50;
#  (d) the same command through a warm `kz-run` (lease -> run -> release
#      on warm real kz-sandbox workers, audit on, no snapshot), p50;
#  (e) the same through `kz-pkgrun invoke --socket` (the thin client of
#      serve: a warm single-use worker per invocation while one is ready,
#      else the one-shot; how many of each is printed), p50 and p99;
#  (f) (e) and (g) (d) again with an untimed pause of 50 ms before each
#      run (hyperfine --prepare), so that invocations arrive with gaps:
#      back to back, each warm worker's stop and its replacement's start
#      (about twice a one-shot's CPU) run beside the next invocation;
# and the ratios against the target: b50, e50 <= 1.5 x d50, f50 <= 1.5 x
# g50.  (b) and (d) run interleaved, in ROUNDS rounds (default 4) of
# RUNS/ROUNDS each, so that a shared machine's load falls on both alike:
# their p50s are of all the rounds' times, and b/d is the median of the
# rounds' ratios (the ratio of the p50s printed beside it).  Then the broker half (tests/bench/pkg-broker.sh) when it is there.
# Run as root: make deps-bench first (hyperfine).  RUNS=N (default 40)
# shortens it on a shared machine; WARM=N (default 2) is serve's
# PKGRUN_WARM.
set -Eeu
# A step that fails stops the run: say which, not just stop (not in a
# cleanup that has turned set -e off, where a failure is expected).
trap 'r=$?; [[ $- == *e* ]] && echo "${0##*/}: stopped at line $LINENO (exit $r): $BASH_COMMAND" >&2' ERR
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$TOP/bin
RUNS=${RUNS:-40}
. "$TOP/tests/bench/steal.bash"
ST0=$(steal)
T=$(mktemp -d /tmp/kz-bench.XXXXXX)
chmod 0755 "$T"
PIDS=
cleanup() {
	set +e
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	sleep 0.5
	for f in "$T"/workers/*/pid; do p=$(cat "$f" 2>/dev/null) && kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	sleep 0.5
	rmdir /sys/fs/cgroup/kz-pkgrun 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
srv=$(command -v valkey-server || command -v redis-server)
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
export KZ_RUN_DIR=$T KZ_STORE_SOCKET=$T/store.sock KZ_FIELD_KEY_FILE=$T/field.key
# This host's fs.file-max may be the kernel's default, which a pool of
# default-size workers passes half of (kz-ctl-local(8), LEASE_FILES_SHARE).
export LEASE_FILES_SHARE=${LEASE_FILES_SHARE:-0}
export KZ_AUDIT_SOCKET=$T/kz-audit.sock KZ_LEASE_SOCKET=$T/kz-lease.sock
export PKGRUN_CACHE=$T/pkgcache PKGRUN_STATE_DIR=$T/pkgstate RUN_SNAPSHOT=no
"$srv" --port 0 --unixsocket "$KZ_STORE_SOCKET" --unixsocketperm 600 --dir "$T" \
	--appendonly yes --save '' --daemonize no --loglevel warning >/dev/null 2>&1 &
PIDS="$PIDS $!"
for _ in $(seq 100); do [ -S "$KZ_STORE_SOCKET" ] && break; sleep 0.05; done
"$BIN/kz-audit" serve --socket "$KZ_AUDIT_SOCKET" 2>"$T/audit.log" & PIDS="$PIDS $!"
for _ in $(seq 100); do [ -S "$KZ_AUDIT_SOCKET" ] && break; sleep 0.05; done
LEASE_CAPACITY=${CPOOL:-2} "$BIN/kz-lease" serve --socket "$KZ_LEASE_SOCKET" 2>"$T/lease.log" & PIDS="$PIDS $!"
PKGRUN_WARM=${WARM:-2} "$BIN/kz-pkgrun" serve --socket "$T/kz-pkgrun.sock" 2>"$T/pkgrun.log" & PIDS="$PIDS $!"
for _ in $(seq 600); do
	"$BIN/kz-lease" status --socket "$KZ_LEASE_SOCKET" 2>/dev/null | grep -q "\"warm\":${CPOOL:-2}," && break
	sleep 0.1
done
H=$("$BIN/kz-pkgrun" admit "$TOP/tests/pkgrun/demo" "$TOP/tests/pkgrun/demo.json")
pct() { # pct Q JSON...: the Q quantile of the files' times, pooled
	python3 -c 'import json,sys; q=float(sys.argv[1]); t=sorted(x for f in sys.argv[2:] for x in json.load(open(f))["results"][0]["times"]); print("%.3f" % (t[min(len(t)-1, int(q*len(t)))]*1000))' "$@"
}
hf() { # hf NAME CMD
	hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$T/$1.json" "$2" >/dev/null 2>&1
}
hf a "$TOP/tests/pkgrun/demo/bin/echo-args x"
req='{"op":"invoke","package":"'$H'","tool":"echo","actor":"bench","conversation":"c","args":["x"]}'
printf '%s' "$req" >"$T/req.json"
hyperfine --warmup 5 --runs "$RUNS" --export-json "$T/c.json" \
	"$BIN/kz-msg -t 30 $T/kz-pkgrun.sock <$T/req.json" >/dev/null 2>&1
ROUNDS=${ROUNDS:-4}
for r in $(seq "$ROUNDS"); do
	n=$((RUNS / ROUNDS > 10 ? RUNS / ROUNDS : 10))
	hyperfine -N --warmup 3 --runs "$n" --export-json "$T/b$r.json" \
		"$BIN/kz-pkgrun invoke --package $H --tool echo --actor bench --conversation c --arg x" >/dev/null 2>&1
	hyperfine -N --warmup 3 --runs "$n" --export-json "$T/d$r.json" \
		"$BIN/kz-run -q --actor bench --conversation c -- /bin/sh -c 'printf \"echo: %s\\n\" x'" >/dev/null 2>&1
	bd="${bd:-} $(python3 -c "print($(pct 0.5 "$T/b$r.json") / $(pct 0.5 "$T/d$r.json"))")"
done
st() { "$BIN/kz-msg" "$T/kz-pkgrun.sock" '{"op":"status"}' |
	python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["warm"]["served"], j["one_shot"])'; }
read -r w0 o0 <<<"$(st)"
hf e "$BIN/kz-pkgrun invoke --socket $T/kz-pkgrun.sock --package $H --tool echo --actor bench --conversation c --arg x"
read -r w1 o1 <<<"$(st)"
hyperfine -N --warmup 5 --runs "$RUNS" --prepare "sleep 0.05" --export-json "$T/f.json" \
	"$BIN/kz-pkgrun invoke --socket $T/kz-pkgrun.sock --package $H --tool echo --actor bench --conversation c --arg x" >/dev/null 2>&1
read -r w2 o2 <<<"$(st)"
hyperfine -N --warmup 5 --runs "$RUNS" --prepare "sleep 0.05" --export-json "$T/g.json" \
	"$BIN/kz-run -q --actor bench --conversation c -- /bin/sh -c 'printf \"echo: %s\\n\" x'" >/dev/null 2>&1
a50=$(pct 0.5 "$T/a.json") b50=$(pct 0.5 "$T"/b[0-9]*.json) b99=$(pct 0.99 "$T"/b[0-9]*.json)
c50=$(pct 0.5 "$T/c.json") d50=$(pct 0.5 "$T"/d[0-9]*.json)
e50=$(pct 0.5 "$T/e.json") e99=$(pct 0.99 "$T/e.json")
f50=$(pct 0.5 "$T/f.json") g50=$(pct 0.5 "$T/g.json")
printf '(a) the echo tool run directly            p50 %8.3f ms\n' "$a50"
printf '(b) kz-pkgrun invoke (one-shot)           p50 %8.3f ms  p99 %8.3f ms\n' "$b50" "$b99"
printf '(c) kz-pkgrun serve, invoke op (kz-msg)   p50 %8.3f ms (hyperfine through a shell)\n' "$c50"
printf '(d) kz-run of the same command, warm      p50 %8.3f ms\n' "$d50"
printf '(e) kz-pkgrun invoke --socket (warm)      p50 %8.3f ms  p99 %8.3f ms (%d warm, %d one-shot)\n' \
	"$e50" "$e99" $((w1 - w0)) $((o1 - o0))
printf '(f) (e) with 50 ms between invocations    p50 %8.3f ms (%d warm, %d one-shot)\n' \
	"$f50" $((w2 - w1)) $((o2 - o1))
printf '(g) (d) with 50 ms between runs           p50 %8.3f ms\n' "$g50"
python3 -c 'import sys, statistics; a,b,c,d,e,f,g=map(float,sys.argv[1:8]); bd=statistics.median(map(float,sys.argv[8].split()))
print("TARGET invoke p50 / warm kz-run p50 = %.2f (one-shot, target <= 1.5: %s; median of the rounds: %s; of the pooled p50s %.2f)" %
      (bd, "met" if bd <= 1.5 else "NOT met", " ".join("%.2f" % float(x) for x in sys.argv[8].split()), b/d))
print("TARGET invoke --socket p50 / warm kz-run p50 = %.2f (warm, target <= 1.5: %s)" % (e/d, "met" if e/d <= 1.5 else "NOT met"))
print("TARGET with gaps, f50 / g50 = %.2f (warm, target <= 1.5: %s)" % (f/g, "met" if f/g <= 1.5 else "NOT met"))
print("b50/a50 = %.1f; serve op c50/d50 = %.2f" % (b/a, c/d))' \
	"$a50" "$b50" "$c50" "$d50" "$e50" "$f50" "$g50" "$bd"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; CPU time stolen by the host during (a)-(g): $(steal_since "$ST0")"
if [ -x "$TOP/tests/bench/pkg-broker.sh" ]; then
	echo "== the broker half"
	"$TOP/tests/bench/pkg-broker.sh"
fi
