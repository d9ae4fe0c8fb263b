#!/bin/bash
# A worker that exits before it is ready (it could not set up its
# isolation, say) gives its place in the capacity back at once: kz-lease
# retires and deletes it when its controller's probe says it exited, and
# the next create follows, without waiting for LEASE_CREATE_TIMEOUT_MS
# (here a minute).  Each failure is logged with its worker, the pool
# never holds more than its capacity, and once workers can start the pool
# fills.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/standin.sh"
plan 7
standin_env
export LEASE_WORKER_BIN=$TOP/tests/unit/kz-lease/bad-worker.sh
export LEASE_CAPACITY=1 LEASE_RECONCILE_MS=300 LEASE_CREATE_TIMEOUT_MS=60000
echo die >"$T/worker-mode"
standin_serve
( while :; do
	kz-lease status --socket "$S" 2>/dev/null | grep -o '"total":[0-9]*' | cut -d: -f2 >>"$T/totals"
	sleep 0.1
done ) & SAMPLER=$!
on_exit "kill $SAMPLER 2>/dev/null"

fails() { grep -c '"create.fail"' "$T/lease.log"; }
t "three workers that exit at start, one after another, within 20 s" sh -c \
	"for i in \$(seq 1 200); do [ \$(grep -c '\"create.fail\"' '$T/lease.log') -ge 3 ] && exit 0; sleep 0.1; done; exit 1"
n=$(grep '"create.fail"' "$T/lease.log" | grep -o '"worker":"[^"]*"' | sort -u | wc -l)
[ "$n" -ge 3 ]; ok $? "each a worker of its own ($n)"
d=$(grep '"worker.deleted"' "$T/lease.log" | grep -o '"worker":"[^"]*"' | sort -u | wc -l)
[ "$d" -ge 2 ]; ok $? "each deleted through the controller ($d), not left for the create grace"
unlike "$(cat "$T/lease.log")" '"create.timeout"' "none waited for the create grace"
echo good >"$T/worker-mode"
t "once workers can start, the pool fills" wait_for warm 1 100
kill "$SAMPLER"
is "$(sort -n "$T/totals" | tail -1)" 1 "the pool never exceeded its capacity ($(wc -l <"$T/totals") samples)"
is "$(ls -d "$T"/workers/w*/ 2>/dev/null | wc -l)" 1 "one worker directory is left: the warm one"
done_testing
