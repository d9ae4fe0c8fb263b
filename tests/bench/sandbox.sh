#!/bin/bash
# Benchmark kz-sandbox (not a pass/fail test).  Prints medians in ms for
#  (a) fork/exec of /bin/true, (b) bwrap --unshare-all with a read-only root,
#  proc and dev running /bin/true, (c) kz-sandbox run -- /bin/true (cold),
#  (d) a run of /bin/true on a warm kz-sandbox serve worker,
# and the ratios c/b (target <= 1.0) and d/a (target <= 2.0); for reference
# also (e), (d) on a worker with --userns on, and (f) the reset between
# tenants on a warm worker (op wipe: a new run init with fresh pid, mount,
# network, IPC and UTS namespaces, the previous one killed and reaped, the
# evidence): its round trip and the CPU it costs, the worker's own (agent
# and reaped inits) and the whole machine's (the kernel's workers tear a
# dead network namespace down asynchronously).  (b) and (c) are also compared
# by CPU time per run, every process of the run counted (kz-sandbox's run
# init is not waited for by the agent, so the time hyperfine reports leaves
# it out), where the cgroup v1 cpuacct hierarchy is mounted.
# Under gVisor (when runsc is installed; GRUNS runs each, default 10, and
# GWRUNS warm runs, default 100):
#  (g) runsc do /bin/true, the peer, (h) kz-sandbox run --runtime gvisor
#  (cold), (i) a run on a warm gvisor worker (the lease's sandbox is up:
#  its loader forks and executes the code inside gVisor), and the ratios
#  h/g (target <= 1.2) and i/d (target <= 3.0); and what bounds them: (h)
#  and (i) again with the run's CPU limit lifted to every CPU (runsc's boot
#  and the Sentry's work for the code are charged to the run cgroup, so the
#  tenant's quota throttles them), (j) runsc exec of /bin/true into a
#  sandbox already running (what a warm run would cost through runsc
#  itself), (k) one fork/exec of /bin/true inside a running gVisor sandbox
#  (the floor of any warm run on the platform).
set -Eeu
# A step that fails stops the run: say which, not just stop (not in a
# cleanup that has turned set -e off, where a failure is expected).
trap 'r=$?; [[ $- == *e* ]] && echo "${0##*/}: stopped at line $LINENO (exit $r): $BASH_COMMAND" >&2' ERR
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SB=${KZ_SANDBOX_BIN:-$TOP/bin/kz-sandbox}
RUNS=${RUNS:-100}
T=$(mktemp -d /tmp/kz-bench.XXXXXX)
WPID= UPID= GPID= GXID=
ACCT=/sys/fs/cgroup/cpuacct
CG=$ACCT/kz-bench.$$
cleanup() {
	set +e	# a clean run must not exit 1 because something was already gone
	for p in $WPID $UPID $GPID; do kill "$p" 2>/dev/null; done
	if [ -n "$GXID" ]; then
		"$RUNSC" --root="$T/gxr" kill "$GXID" KILL 2>/dev/null
		"$RUNSC" --root="$T/gxr" delete --force "$GXID" 2>/dev/null
	fi
	wait 2>/dev/null
	rmdir "$CG" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
cc -O2 -o "$T/client" "$TOP/tests/sandbox/bench-client.c"

command -v hyperfine >/dev/null || { echo "hyperfine missing (make deps-bench)"; exit 3; }
BW="bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev /bin/true"
KZ="$SB run -- /bin/true"
ROUNDS=${ROUNDS:-5}

# htimes CMD N: hyperfine's N times of CMD in ms, one a line.
htimes() {
	hyperfine -N --warmup 3 --runs "$2" --export-json "$T/h.json" "$1" >/dev/null 2>&1
	python3 -c 'import json,sys
for t in json.load(open(sys.argv[1]))["results"][0]["times"]: print("%.4f" % (t*1000))' "$T/h.json"
}

# cpu CMD N: CPU microseconds per run of CMD (user+system of every process
# it starts, reaped or not), from a cpuacct cgroup the loop runs in.
cpu() {
	bash -c 'echo $$ >"$1/cgroup.procs" || exit 1
	u0=$(cat "$1/cpuacct.usage")
	for i in $(seq "$2"); do $3 >/dev/null 2>&1; done
	sleep 0.1	# the last run init unwinds
	echo $(( ($(cat "$1/cpuacct.usage") - u0) / $2 / 1000 ))' cpu "$CG" "$2" "$1"
}

# (b) and (c) in alternating rounds, like (a) and (d) below.
: >"$T/b.txt"; : >"$T/c.txt"; : >"$T/bc.txt"; : >"$T/cc.txt"
[ -d "$ACCT" ] && mkdir "$CG" 2>/dev/null || CG=
for r in $(seq "$ROUNDS"); do
	htimes "$BW" "$(( (RUNS + ROUNDS - 1) / ROUNDS ))" >>"$T/b.txt"
	htimes "$KZ" "$(( (RUNS + ROUNDS - 1) / ROUNDS ))" >>"$T/c.txt"
	if [ -n "$CG" ]; then
		cpu "$BW" 20 >>"$T/bc.txt"
		cpu "$KZ" 20 >>"$T/cc.txt"
	fi
done
read -r b c bcpu ccpu < <(python3 -c 'import statistics as s,sys
m = lambda f: [float(x) for x in open(f)]
b, c, bc, cc = (m(f) for f in sys.argv[1:])
print("%.3f %.3f %s %s" % (s.median(b), s.median(c),
    "%.0f" % s.median(bc) if bc else "-", "%.0f" % s.median(cc) if cc else "-"))' \
	"$T/b.txt" "$T/c.txt" "$T/bc.txt" "$T/cc.txt")
"$SB" serve --id "bench-$$" --socket "$T/w.sock" 2>/dev/null & WPID=$!
"$SB" serve --id "bench-u-$$" --socket "$T/u.sock" --userns on 2>/dev/null & UPID=$!
for i in $(seq 100); do [ -S "$T/w.sock" ] && [ -S "$T/u.sock" ] && break; sleep 0.05; done
"$T/client" "$T/w.sock" 20 >/dev/null		# warm-up
"$T/client" "$T/u.sock" 20 >/dev/null
# (a) and (d) are measured in alternating rounds, so a change in the
# machine's load during the run weighs on both alike; the medians are over
# every sample of every round.
: >"$T/a.txt"; : >"$T/d.txt"; : >"$T/e.txt"
for r in $(seq "$ROUNDS"); do
	hyperfine -N --warmup 3 --runs "$(( (RUNS * 2 + ROUNDS - 1) / ROUNDS ))" \
		--export-json "$T/h.json" /bin/true >/dev/null 2>&1
	python3 -c 'import json,sys
for t in json.load(open(sys.argv[1]))["results"][0]["times"]: print("%.4f" % (t*1000))' "$T/h.json" >>"$T/a.txt"
	"$T/client" "$T/w.sock" "$(( (RUNS * 5 + ROUNDS - 1) / ROUNDS ))" -r >>"$T/d.txt"
	"$T/client" "$T/u.sock" "$(( (RUNS + ROUNDS - 1) / ROUNDS ))" -r >>"$T/e.txt"
done
# (f): the whole machine's busy time and the worker's (agent and the inits
# it reaped) around NW wipes.
NW=${NW:-200}
busy() { awk '/^cpu / {print $2+$3+$4+$7+$8}' /proc/stat; }
wcpu() { awk '{print $14+$15+$16+$17}' /proc/"$WPID"/stat; }
# One reset first: it reaps the init that ran (d)'s code, whose CPU would
# otherwise count as the reset's.
"$T/client" "$T/w.sock" 1 -w >/dev/null
m0=$(busy) w0=$(wcpu)
read -r f fmean < <("$T/client" "$T/w.sock" "$NW" -w)
m1=$(busy) w1=$(wcpu)
read -r fw fm < <(python3 -c 'import sys; hz, n = float(sys.argv[1]), float(sys.argv[2])
print("%.3f %.3f" % ((float(sys.argv[3])) / hz * 1000 / n, float(sys.argv[4]) / hz * 1000 / n))' \
	"$(getconf CLK_TCK)" "$NW" $((w1 - w0)) $((m1 - m0)))
read -r a d dmean e < <(python3 -c 'import statistics as s,sys
a, d, e = ([float(x) for x in open(f)] for f in sys.argv[1:])
print("%.3f %.3f %.3f %.3f" % (s.median(a), s.median(d), s.mean(d), s.median(e)))' \
	"$T/a.txt" "$T/d.txt" "$T/e.txt")
printf '(a) fork/exec /bin/true          median %8.3f ms\n' "$a"
printf '(b) bwrap --unshare-all          median %8.3f ms\n' "$b"
printf '(c) kz-sandbox run (cold)        median %8.3f ms\n' "$c"
printf '(d) kz-sandbox serve run (warm)  median %8.3f ms (mean %.3f)\n' "$d" "$dmean"
printf '(e) (d) with --userns on         median %8.3f ms\n' "$e"
printf '(f) reset between tenants (wipe) median %8.3f ms (mean %.3f); CPU per reset: worker %.3f ms, whole machine %.3f ms\n' \
	"$f" "$fmean" "$fw" "$fm"
python3 -c 'import sys; a,b,c,d=map(float,sys.argv[1:5])
print("c/b = %.2f (target <= 1.0)" % (c/b)); print("d/a = %.2f (target <= 2.0)" % (d/a))
bc, cc = sys.argv[5:]
if bc != "-":
	print("CPU per run, every process: (b) %s us, (c) %s us, c/b = %.2f" %
	    (bc, cc, float(cc) / float(bc)))' "$a" "$b" "$c" "$d" "$bcpu" "$ccpu"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"

# (g)-(i): gVisor beside (d); (g) and (h) each a gVisor boot of its own.
RUNSC=${RUNSC:-/usr/bin/runsc}
GRUNS=${GRUNS:-10}
[ -x "$RUNSC" ] || { echo "runsc missing: no gVisor figures (make deps)"; exit 0; }
mkdir -p "$T/gst"
# kz-sandbox's gvisor runs as deployed by kz-ctl-local: runsc and its gofer
# as a second host uid of the worker's (SANDBOX_GVISOR_UID), not root.
GV="--gvisor-uid ${GV_UID:-2100990001} --gvisor-gid ${GV_UID:-2100990001}"
g=$(cd "$T" && htimes "$RUNSC --network=none --platform=ptrace do /bin/true" "$GRUNS" |
	python3 -c 'import statistics as s,sys; print("%.3f" % s.median(float(x) for x in sys.stdin))')
h=$(htimes "$SB run --runtime gvisor $GV --state-dir $T/gst -- /bin/true" "$GRUNS" |
	python3 -c 'import statistics as s,sys; print("%.3f" % s.median(float(x) for x in sys.stdin))')
GWRUNS=${GWRUNS:-100}
# gwarm ID [ARGS]: the median and mean of GWRUNS warm runs on a gvisor
# worker started with ARGS (stopped after; in this shell, so the cleanup
# knows its pid meanwhile).
gwarm() {
	local id=$1 p
	shift
	"$SB" serve --id "$id" --socket "$T/$id.sock" --runtime gvisor $GV \
		--state-dir "$T/gst" "$@" 2>/dev/null & GPID=$!
	for p in $(seq 200); do [ -S "$T/$id.sock" ] && break; sleep 0.05; done
	"$T/client" "$T/$id.sock" 3 >/dev/null		# warm-up, the boot
	"$T/client" "$T/$id.sock" "$GWRUNS"
	kill "$GPID" 2>/dev/null; wait "$GPID" 2>/dev/null; GPID=
}
gwarm "bg$$" >"$T/gi.txt"
gwarm "bgn$$" --cpu "$(($(nproc) * 1000))" >"$T/gin.txt"
read -r i imean <"$T/gi.txt"
read -r in_ inmean <"$T/gin.txt"
hn=$(htimes "$SB run --runtime gvisor $GV --cpu $(($(nproc) * 1000)) --state-dir $T/gst -- /bin/true" "$GRUNS" |
	python3 -c 'import statistics as s,sys; print("%.3f" % s.median(float(x) for x in sys.stdin))')
# (j), (k): a sandbox left running (read-only host root, no network).
mkdir -p "$T/gxb" "$T/gxr"
(cd "$T/gxb" && "$RUNSC" spec -- /bin/sleep 600)
python3 -c 'import json,sys
s = json.load(open(sys.argv[1])); s["root"] = {"path": "/", "readonly": True}
s["process"]["terminal"] = False; json.dump(s, open(sys.argv[1], "w"))' "$T/gxb/config.json"
printf '%s\n' '#!/bin/sh' 's=$(date +%s%N); i=0' \
	'while [ $i -lt 100 ]; do /bin/true; i=$((i + 1)); done' \
	'echo $(( ($(date +%s%N) - s) / 100 ))' >"$T/gxloop"
chmod 0755 "$T/gxloop"
GXID=kzbench$$ j=n/a k=n/a
if "$RUNSC" --root="$T/gxr" --network=none --platform=ptrace run --detach \
	--bundle "$T/gxb" "$GXID" </dev/null >/dev/null 2>&1; then
	j=$(htimes "$RUNSC --root=$T/gxr exec $GXID /bin/true" "$GRUNS" |
		python3 -c 'import statistics as s,sys; print("%.3f" % s.median(float(x) for x in sys.stdin))')
	# Three loops of 100, the median; the figure goes through a file
	# (runsc exec hands the sandbox its descriptors, not a pipe's order).
	for r in 1 2 3; do
		"$RUNSC" --root="$T/gxr" exec "$GXID" "$T/gxloop" >"$T/gxk.$r" 2>/dev/null </dev/null || :
	done
	k=$(cat "$T/gxk".* | python3 -c 'import statistics as s,sys
v = [float(x) / 1e6 for x in sys.stdin.read().split()]; print("%.3f" % s.median(v) if v else "n/a")')
fi
printf '(g) runsc do /bin/true (peer)    median %8.3f ms\n' "$g"
printf '(h) kz-sandbox run gvisor (cold) median %8.3f ms\n' "$h"
printf '    (h) with no CPU limit        median %8.3f ms\n' "$hn"
printf '(i) gvisor serve run (warm)      median %8.3f ms (mean %.3f)\n' "$i" "$imean"
printf '    (i) with no CPU limit        median %8.3f ms (mean %.3f)\n' "$in_" "$inmean"
printf '(j) runsc exec into a sandbox    median %8s ms\n' "$j"
printf '(k) fork/exec inside gVisor      median %8s ms\n' "$k"
python3 -c 'import sys; d,g,h,hn,i,inn=map(float,sys.argv[1:7]); j,k=sys.argv[7:]
print("h/g = %.2f (target <= 1.2); without the CPU limit %.2f" % (h/g, hn/g))
print("i/d = %.2f (target <= 3.0); without the CPU limit %.2f" % (i/d, inn/d))
if j != "n/a" and k != "n/a":
    print("floors: j/d = %.2f (runsc exec per run), k/d = %.2f (fork/exec inside gVisor alone)" % (float(j)/d, float(k)/d))' \
	"$d" "$g" "$h" "$hn" "$i" "$in_" "$j" "$k"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
