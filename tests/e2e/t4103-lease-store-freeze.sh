#!/bin/bash
# Store faults short of a crash: a store frozen (SIGSTOP) for longer than
# the client timeout, and CLIENT PAUSE.  Admission closes while the store
# does not answer (exit 3, never a local grant), reopens by itself, and a
# lease whose reply was lost in the freeze is never given to two owners:
# it expires and its worker is retired and replaced.
# e2e: alone (it times an answer against a 2 s bound)
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/standin.sh"
plan 14
standin_env
on_exit "kill -CONT $STORE_PID 2>/dev/null"
export LEASE_CAPACITY=2 LEASE_TTL_MS=4000 LEASE_STORE_TIMEOUT_MS=300
export LEASE_RECONCILE_MS=300
standin_serve
t "two workers warm" wait_for warm 2

kill -STOP "$STORE_PID"
t0=$(date +%s%N)
rc_is 3 "a lease while the store is frozen exits 3" kz-lease lease --socket "$S" --actor a --conversation c
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
like "$(cat "$T/.out")" admission_closed "it says admission_closed"
t "the answer comes within the client timeout, not the freeze ($ms ms)" test "$ms" -lt 2000
sleep 1
is "$(st admission)" False "status reports admission closed during the freeze"
kill -CONT "$STORE_PID"
t "admission reopens by itself when the store answers" wait_for admission True
L=$(st leased)
t "at most one lease may have landed from the frozen call ($L)" test "$L" -le 1
t "an unknown-outcome lease expires and its worker is replaced: two warm" wait_for warm 2 80
kz-lease lease --socket "$S" --actor a --conversation c >"$T/l1" 2>&1; ok $? "leasing works after the freeze"

redis-cli -s "$STORE_SOCK" CLIENT PAUSE 1500 ALL >/dev/null
sleep 0.2
rc_is 3 "a lease during CLIENT PAUSE exits 3" kz-lease lease --socket "$S" --actor b --conversation c
t "admission reopens after the pause" wait_for admission True 60
# The lease sent during the pause may still be applied when it ends (its
# reply is lost, as above): then it holds a worker until it expires and
# the worker is replaced.
some_warm() { local i; for i in $(seq 1 100); do [ "$(st warm)" -ge 1 ] && return 0; sleep 0.1; done; return 1; }
t "a worker is warm after the pause" some_warm
kz-lease lease --socket "$S" --actor b --conversation c >"$T/l2" 2>&1; ok $? "leasing works after the pause"
W1=$(python3 -c "import json; print(json.load(open('$T/l1'))['worker'])")
W2=$(python3 -c "import json; print(json.load(open('$T/l2'))['worker'])")
L1=$(python3 -c "import json; print(json.load(open('$T/l1'))['lease_id'])")
K1=$(python3 -c "import json; print(json.load(open('$T/l1'))['token'])")
# Either the two leases hold different workers, or the first one has
# expired and its owner can no longer use it.
t "no worker has two live owners" sh -c "[ '$W1' != '$W2' ] || ! kz-lease renew --socket '$S' --lease-id '$L1' --token '$K1'"
done_testing
