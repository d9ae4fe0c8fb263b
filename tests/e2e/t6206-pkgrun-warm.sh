#!/bin/bash
# kz-pkgrun serve runs invocations on warm, single-use kz-sandbox workers:
# `invoke --socket` is served by one (the status op counts it) with the
# one-shot's answers and exit codes; what a tool leaves in /tmp, its
# workspace or running in the background is not there for the next
# invocation, which has a fresh worker under another uid; killed workers
# make the next invocation a one-shot that still succeeds, and are
# replaced; PKGRUN_WARM=0 runs one-shots only; once the daemon stops no
# worker process, cgroup or directory is left.
. "$(dirname "$0")/lib.sh"
plan 28
# The runner's parent cgroup (the runner makes it; its sandboxes' are
# below), once they are gone.
on_exit "for c in /sys/fs/cgroup/kz-pkgrun /sys/fs/cgroup/*/kz-pkgrun; do rmdir \$c 2>/dev/null; done"
. "$TOP/tests/e2e/pkgrun-lib.sh"
S=$T/kz-pkgrun.sock
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
st() { kz-msg -t 10 "${1:-$S}" '{"op":"status"}'; }
field() { st "${2:-$S}" | "$PY" -c "import json,sys; print(json.load(sys.stdin)$1)"; }
ready() { # ready N: until N warm workers are ready (10 s at most)
	for _ in $(seq 200); do [ "$(field '["warm"]["ready"]')" = "$1" ] && return 0; sleep 0.05; done
	return 1
}
inv() { kz-pkgrun invoke --socket "$S" --package "$H" --actor alice --conversation c1 "$@"; }
workers() { ls -d "$PKGRUN_STATE_DIR"/warm-* 2>/dev/null | wc -l; }

bg kz-pkgrun serve --socket "$S" 2>"$T/serve.log"
DPID=$LASTPID
t "kz-pkgrun serves" wait_sock "$S"
t "it starts PKGRUN_WARM (2) warm workers" ready 2

is "$(inv --tool echo --arg hi --arg there)" "echo: hi there" "invoke --socket returns the tool's result"
is "$(field '["warm"]["served"]') $(field '["one_shot"]')" "1 0" \
	"... served by a warm worker, not a one-shot"
rc_is 1 "a tool's non-zero status is exit 1, as in-process" inv --tool shell --arg 'exit 3'
like "$(cat "$T/.out")" "the tool exited with status 3" "... with the same line"
rc_is 1 "an absent tool is refused (exit 1)" inv --tool ghost
rc_is 2 "a hostile member path is bad input (exit 2)" inv --tool show --file ../../outside
ready 2
inv --tool count --file src/notes.txt >"$T/out" 2>"$T/err"
is "$(cat "$T/out")" "3 src/notes.txt" "member files are staged into the worker's projection"
like "$(cat "$T/err")" "count: 1 files" "a private chat gets stderr"
ready 2
inv --tool count --room r1 --file src/notes.txt >"$T/out" 2>"$T/err"
is "$(cat "$T/out") [$(cat "$T/err")]" "3 src/notes.txt []" "a shared room gets the result and no stderr"

# What one invocation leaves behind, the next does not find.
ready 2
u1=$(inv --tool shell --arg 'echo secret >/tmp/left; echo secret >/workspace/left; (sleep 987 </dev/null >/dev/null 2>&1 &) ; sleep 0.1; id -u')
ready 2
out=$(inv --tool shell --arg 'cat /tmp/left /workspace/left 2>/dev/null; for p in /proc/[0-9]*; do tr "\0" " " <$p/cmdline; echo; done; id -u')
unlike "$out" "secret" "a file the last tool wrote to /tmp or its workspace is not there"
unlike "$out" "sleep 987" "nor is the process it left running"
tnot "... which is gone from the host too" pgrep -f "sleep 987"
u2=$(printf '%s\n' "$out" | tail -1)
ok "$([ -n "$u1" ] && [ "$u1" != "$u2" ]; echo $?)" "each invocation runs under a uid of its own ($u1, $u2)"
ids="$u1 $u2"
for _ in 1 2 3; do ready 2; ids="$ids $(inv --tool shell --arg 'id -u')"; done
is "$(echo $ids | tr ' ' '\n' | sort -u | awk -v lo="$PKGRUN_UID" '$1 >= lo && $1 < lo + 16' | wc -l)" 5 \
	"five invocations, five uids of the runner's range"

# Killed workers: the next invocation is a one-shot and still succeeds.
ready 2
fb=$(field '["fallbacks"]')
for f in "$PKGRUN_STATE_DIR"/warm-*/pid; do kill -9 "$(cat "$f")"; done
is "$(inv --tool echo --arg after)" "echo: after" "with its warm workers killed, an invocation still succeeds"
is "$(field '["fallbacks"]')" "$((fb + 1))" "... on the one-shot"
like "$(grep pkgrun.oneshot "$T/serve.log")" "warm worker (had died|did not answer)" \
	"... and the daemon logs why"
inv --tool echo --arg x >/dev/null
t "the dead workers are replaced" ready 2
sv=$(field '["warm"]["served"]')
inv --tool echo --arg again >/dev/null
is "$(field '["warm"]["served"]')" "$((sv + 1))" "... and serve again"

# The daemon's stop stops every worker, the one a running tool is on too.
ready 2
( inv --tool shell --arg 'sleep 20; echo late' >"$T/late" 2>&1; echo "rc=$?" >>"$T/late" ) &
LATE=$!
for _ in $(seq 100); do [ "$(field '["warm"]["in_use"]')" = 1 ] && break; sleep 0.05; done
t0=$(date +%s)
kill "$DPID"; wait "$DPID" 2>/dev/null; wait "$LATE"
ok "$([ $(($(date +%s) - t0)) -lt 15 ]; echo $?)" "the daemon stops with a tool running, within seconds"
like "$(cat "$T/late")" "rc=3" "... and that invocation fails closed (exit 3), never late"
ids=$(grep -o 'pkgrun-warm-[0-9a-f]*' "$T/serve.log" | sort -u)
left=$(for i in $ids; do ls -d /sys/fs/cgroup/*/kz-pkgrun/"$i" 2>/dev/null; done)
is "$(pgrep -f "$PKGRUN_STATE_DIR" | wc -l) $(workers) [$left]" "0 0 []" \
	"after the daemon stops no worker process, directory or cgroup is left"
ok "$([ "$(echo "$ids" | wc -w)" -ge 10 ]; echo $?)" "... of the $(echo "$ids" | wc -w) workers it started"

# PKGRUN_WARM=0: one-shots only.
PKGRUN_WARM=0 bg kz-pkgrun serve --socket "$T/s0.sock" 2>"$T/serve0.log"
wait_sock "$T/s0.sock"
S=$T/s0.sock
is "$(inv --tool echo --arg cold)" "echo: cold" "PKGRUN_WARM=0: the invocation is answered"
is "$(field '["warm"]["served"]') $(field '["one_shot"]') $(field '["fallbacks"]') $(workers)" "0 1 0 0" \
	"... by a one-shot, with no warm worker at all"
rc_is 3 "invoke --socket with no daemon there fails closed (exit 3)" \
	kz-pkgrun invoke --socket "$T/none.sock" --package "$H" --tool echo --actor alice --conversation c1
done_testing
