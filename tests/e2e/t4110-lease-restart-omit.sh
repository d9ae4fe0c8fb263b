#!/bin/bash
# A restarted kz-lease remembers nothing of what its controller listed
# before: a worker the store holds (here leased, with its tenant's state)
# that the controller's first list after the restart leaves out is not
# forgotten on that list's word.  It is taken from its owner, deleted
# through the controller, and forgotten only once the delete confirms it
# absent; it is never left running uncounted.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 8
export LEASE_CONTROLLER=$TOP/tests/ctl/fault-ctl CTL_REAL=$BIN/kz-ctl-local
export LEASE_CONTROLLER_TIMEOUT_MS=3000 LEASE_CREATE_TIMEOUT_MS=5000
export LEASE_STORE_TIMEOUT_MS=5000 LEASE_STOP_WORKERS=0
M=$T/ctl-mode OPS=$T/ctl-ops
echo good >"$M"
start_stack 1
t "the worker becomes warm" wait_for warm 1
W=$(ls "$T/workers" | grep '^w' | head -1)
WP=$(cat "$T/workers/$W/pid")
on_exit "kill $WP 2>/dev/null"
kz-lease lease --socket "$S" --actor alice --conversation c --ttl-ms 60000 >"$T/alice" 2>&1
is "$(field "$T/alice" worker)" "$W" "alice leases it"

# kz-lease stops (its workers left running), and its controller's lists
# leave the worker out from now on.
kill "$LEASE_PID"; wait "$LEASE_PID" 2>/dev/null
t "the worker outlives kz-lease (LEASE_STOP_WORKERS=0)" kill -0 "$WP"
echo "$W" >"$T/ctl-omit"
echo list:omit >"$M"
: >"$OPS"
bg kz-lease serve --socket "$S" 2>"$T/lease2.log"
LEASE_PID=$LASTPID
on_exit "kill $LEASE_PID 2>/dev/null"
t "kz-lease restarts" wait_sock "$S"
t "the omitted worker is deleted through the controller" sh -c \
	"for i in \$(seq 1 100); do grep -q '^delete $W ' '$OPS' && exit 0; sleep 0.1; done; exit 1"
t "and its process is gone" sh -c \
	"for i in \$(seq 1 100); do kill -0 $WP 2>/dev/null || exit 0; sleep 0.1; done; exit 1"
rc_is 1 "alice's lease is gone with it" kz-lease renew --socket "$S" \
	--lease-id "$(field "$T/alice" lease_id)" --token "$(field "$T/alice" token)"
echo good >"$M"
t "a clean replacement becomes warm" wait_for warm 1 100
done_testing
