#!/bin/bash
# kz-reset: a stale token is refused without touching the worker; a worker
# whose agent does not answer is retired (missing evidence named) and
# replaced, never published warm.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/standin.sh"
plan 7
standin_env
export LEASE_CAPACITY=1 LEASE_RECONCILE_MS=300 RESET_IO_TIMEOUT_MS=500
standin_serve
t "one warm worker" wait_for warm 1
kz-lease lease --socket "$S" --actor a --conversation c >"$T/l" 2>&1
W=$(field "$T/l" worker) K=$(field "$T/l" token)
rc_is 1 "kz-reset with the lease token (not a reset token) is refused" kz-reset --worker "$W" --token "$K"
like "$(cat "$T/.out")" stale_token "it prints stale_token"
is "$(st leased)" 1 "and the worker is still leased to its owner"
# The agent stops answering; the release's reset cannot prove it clean.
kill -STOP "$(cat "$T/workers/$W/pid")"
on_exit "kill -CONT $(cat "$T/workers/$W/pid") 2>/dev/null"
kz-lease release --socket "$S" --lease-id "$(field "$T/l" lease_id)" --token "$K" >/dev/null
t "the silent worker is deleted" sh -c "for i in \$(seq 1 100); do [ -d '$T/workers/$W' ] || exit 0; sleep 0.1; done; exit 1"
t "a clean replacement becomes warm" wait_for warm 1
grep -q '"event":"worker.deleted","worker":"'"$W"'"' "$T/lease.log"; ok $? "deletion was confirmed"
done_testing
