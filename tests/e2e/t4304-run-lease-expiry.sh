#!/bin/bash
# Leases that end before their holder is done, with real kz-sandbox
# workers.  (a) A lease that expires is not handed on: its worker is
# retired and deleted, the next lease names another worker and endpoint,
# and a run frame sent to the old endpoint reaches nothing (what it would
# write appears nowhere).  (b) A kz-run whose command outlives the TTL
# completes under renewed leases.  (c) A kz-run whose lease is taken away
# mid-run (expired through the store: the renewal is refused) and one
# whose kz-lease stops answering (frozen: the renewal cannot be confirmed
# in time) fail closed: exit 3 and one line, nothing more sent to the
# worker, no snapshot written and the older one removed (the next run
# starts empty, never from an older workspace), the worker retired,
# never published warm.  (e) A lease lost during the restore closes the
# dispatch record as never started.  (f) A lease taken away just before
# the save: the worker's snapshot is never kept.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 52
export LEASE_TTL_MS=3000
start_stack 1
on_exit "kill -CONT $LEASE_PID 2>/dev/null"
t "a real worker becomes warm" wait_for warm 1
rk() { redis-cli -s "$STORE_SOCK" "$@"; }
leased() { rk SMEMBERS 'kz:{default}:s:leased'; }
gone() { local i; for i in $(seq 1 200); do [ ! -e "$1" ] && return 0; sleep 0.1; done; return 1; }
has_leased() { local i; for i in $(seq 1 100); do [ -n "$(leased)" ] && return 0; sleep 0.05; done; return 1; }
resets_of() { audit_q --kind reset | grep -c "\"worker_id\":\"$1\""; }

# (a) An expired lease's endpoint answers nothing, for anyone.
kz-msg "$S" '{"op":"lease","actor":"mallory","conversation":"m1","ttl_ms":1500}' >"$T/l0"
W0=$(field "$T/l0" worker) EP0=$(field "$T/l0" endpoint)
P0=$(cat "$T/workers/$W0/pid")
t "the expired lease's worker is deleted" gone "$T/workers/$W0"
# (A zombie not reaped yet by whoever inherited it runs nothing.)
dead() { local i; for i in $(seq 1 50); do [ ! -d "/proc/$1" ] && return 0; grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
t "its agent is gone" dead "$P0"
t "a replacement becomes warm" wait_for warm 1
kz-msg "$S" '{"op":"lease","actor":"alice","conversation":"a1"}' >"$T/l1"
W1=$(field "$T/l1" worker) EP1=$(field "$T/l1" endpoint)
tnot "the next lease names a different worker" test "$W1" = "$W0"
tnot "and a different endpoint" test "$EP1" = "$EP0"
RUNF="{\"op\":\"run\",\"argv\":[\"sh\",\"-c\",\"echo pwned >/workspace/pwned-$$; echo pwned\"]}"
kz-msg "$EP0" "$RUNF" >"$T/o0" 2>&1
rc=$?
tnot "a run frame to the expired endpoint gets no answer (exit $rc)" test "$rc" = 0
unlike "$(cat "$T/o0")" '"ok"' "and no reply at all"
python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$EP0" 2>"$T/c0"
like "$(cat "$T/c0")" "FileNotFoundError|ConnectionRefusedError" "nothing listens there"
# Alice's lease is left to expire too (3 s): its worker is replaced.
wait_for warm 1
kz-run -q --actor mallory --conversation m1 -- sh -c 'ls -A /workspace | grep -c pwned' >"$T/o1" 2>&1
is "$(cat "$T/o1")" 0 "the expired holder's workspace key has no trace of the frame"
is "$(find "$T" -name "pwned-$$*" | wc -l)" 0 "nor has any file on the host"
t "the expiry was audited as a retire of that worker" sh -c "kz-audit query --dir '$T/audit' --kind retire | grep '\"worker_id\":\"$W0\"' | grep -q '\"outcome\":\"expired\"'"
is "$(resets_of "$W0")" 0 "and the expired worker was never reset"

# (b) A command longer than the TTL completes under renewed leases.
wait_for warm 1
kz-run --actor bob --conversation b1 -- sh -c 'sleep 7; echo done-late' >"$T/ob" 2>"$T/eb" &
RUNB=$!
has_leased
WB=$(leased)
sleep 0.5; x1=$(rk HGET "kz:{default}:w:$WB" expires)
sleep 4; x2=$(rk HGET "kz:{default}:w:$WB" expires)
wait $RUNB
is "$?" 0 "kz-run exits 0 after a run of 7 s under a 3 s lease"
is "$(cat "$T/ob")" done-late "the command's output is printed"
t "kz-run renewed the lease while the command ran ($x1 -> $x2)" test "$((x2 - x1))" -ge 3000
like "$(cat "$T/eb")" "^kz-run: exit 0 \\(worker $WB," "the closing line names the worker"
t "the worker goes back warm (released and reset, not retired)" wait_for warm 1
t "it is the same worker" test -d "$T/workers/$WB"
unlike "$(grep lease.expire "$T/lease.log")" "$WB" "its lease never expired"

# (c) The lease is taken away during the run: expired through the store.
kz-run -q --actor carol --conversation c1 -- sh -c 'echo old >keep.txt' >/dev/null 2>&1
wait_for warm 1
SNAP=$(ls -t "$T"/snapshots/*/*.tar | head -1)
kz-run --actor carol --conversation c1 -- sh -c 'echo new >keep.txt; sleep 10; echo finished' >"$T/oc" 2>"$T/ec" &
RUNC=$!
has_leased
WC=$(leased)
sleep 0.5
NC=$(resets_of "$WC")
rk ZADD 'kz:{default}:exp' 0 "$WC" >/dev/null
rk HSET "kz:{default}:w:$WC" expires 0 >/dev/null
wait $RUNC
is "$?" 3 "kz-run whose lease expired mid-run exits 3"
is "$(grep -c '^kz-run:' "$T/ec")" 1 "with one line"
like "$(cat "$T/ec")" "^kz-run: the lease expired during the run \\(the renewal was refused: [a-z_]+\\); the worker was retired and nothing more was sent to it; the workspace was not saved$" "which says so"
unlike "$(cat "$T/oc")" finished "the abandoned run printed nothing of its end"
tnot "no snapshot was written, and the older one is gone" test -e "$SNAP"
is "$(ls "$T"/snapshots/* | grep -c '\.new$')" 0 "and no partial snapshot is left"
t "the worker is retired and deleted" gone "$T/workers/$WC"
is "$(resets_of "$WC")" "$NC" "never reset after it (so never published warm)"
t "the release record says the lease expired" sh -c "kz-audit query --dir '$T/audit' --kind release | grep '\"worker_id\":\"$WC\"' | grep -q '\"outcome\":\"lease_expired\"'"
t "the dispatch record says the run was abandoned" sh -c "kz-audit query --dir '$T/audit' --kind dispatch | grep '\"worker_id\":\"$WC\"' | grep -q '\"outcome\":\"lease_expired\"'"

# (c) kz-lease stops answering: the renewal cannot be confirmed before the
# lease would expire; kz-run gives up first.
t "a replacement becomes warm" wait_for warm 1
kz-run --actor dave --conversation d1 -- sh -c 'sleep 10; echo finished' >"$T/od" 2>"$T/ed" &
RUND=$!
has_leased
WD=$(leased)
ND=$(resets_of "$WD")
kill -STOP "$LEASE_PID"
t0=$(date +%s%N)
wait $RUND
rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill -CONT "$LEASE_PID"
is "$rc" 3 "kz-run whose kz-lease is frozen exits 3"
t "before the 3 s lease could have expired ($ms ms)" test "$ms" -lt 3000
like "$(cat "$T/ed")" "^kz-run: the lease expired during the run \\(kz-lease did not confirm it in time\\); the worker was retired and nothing more was sent to it; the workspace was not saved$" "with the one line"
t "once kz-lease answers again, the worker is retired and deleted" gone "$T/workers/$WD"
is "$(resets_of "$WD")" "$ND" "never reset after it"
t "and a replacement becomes warm" wait_for warm 1
kz-run -q --actor carol --conversation c1 -- sh -c 'cat keep.txt 2>/dev/null || echo none' >"$T/oc2" 2>&1
is "$(cat "$T/oc2")" none "the next run of the abandoned one's workspace never gets the older workspace"

# (e) The lease is lost while the workspace is restored, before the run:
# the dispatch record, sent at the grant, is closed as never started.
kz-run -q --actor erin --conversation e1 -- sh -c 'echo x >f' >/dev/null 2>&1
t "the worker is warm" wait_for warm 1
WE=$(ls "$T/workers")
kill -STOP "$(cat "$T/workers/$WE/pid")"
kz-run --actor erin --conversation e1 -- sh -c 'echo RAN' >"$T/oe" 2>"$T/ee" &
RUNE=$!
has_leased
rk ZADD 'kz:{default}:exp' 0 "$WE" >/dev/null
rk HSET "kz:{default}:w:$WE" expires 0 >/dev/null
wait $RUNE
rc=$?
kill -CONT "$(cat "$T/workers/$WE/pid" 2>/dev/null)" 2>/dev/null
is "$rc" 3 "kz-run whose lease is lost during the restore exits 3"
like "$(cat "$T/ee")" "^kz-run: the lease expired before the run" "before the run, it says"
is "$(cat "$T/oe")" "" "nothing ran"
is "$(audit_q --kind dispatch | grep "\"worker_id\":\"$WE\"" | grep -o '"outcome":"[a-z_]*"' | tail -2 | tr '\n' ' ')" \
	'"outcome":"started" "outcome":"lease_expired" ' "the dispatch record is closed"
like "$(audit_q --kind dispatch | grep "\"worker_id\":\"$WE\"" | grep lease_expired)" "never started" \
	"... as never started"
# (f) The lease is taken away as the command ends (its token replaced in
# the store; kz-lease's reconcile may retire the worker mid-save, else
# the release is refused): the snapshot the worker may write meanwhile is
# never kept.
kz-run -q --actor fay --conversation f1 -- sh -c 'echo old >keep.txt' >/dev/null 2>&1
t "the worker is warm again" wait_for warm 1
SNAPF=$(ls -t "$T"/snapshots/*/*.tar | head -1)
kz-run --actor fay --conversation f1 -- sh -c 'echo new >keep.txt; sleep 0.6' >/dev/null 2>"$T/ef" &
RUNF=$!
has_leased
WF=$(leased)
sleep 0.2
rk HSET "kz:{default}:w:$WF" token forged >/dev/null
wait $RUNF; rcf=$?
is "$rcf" 3 "kz-run whose lease is taken away before the save exits 3"
like "$(tail -n 1 "$T/ef")" "^kz-run: exit 3 \\(worker w[0-9a-f]+, [0-9]+ ms\\); the workspace was not saved: [a-z]" \
	"the closing line says the workspace was not saved"
tnot "the older snapshot is gone" test -e "$SNAPF"
is "$(ls "$T"/snapshots/* | grep -c '\.new$')" 0 "and no snapshot the worker wrote is kept"
t "the worker is retired and deleted" gone "$T/workers/$WF"
t "a replacement becomes warm" wait_for warm 1
kz-run -q --actor fay --conversation f1 -- sh -c 'cat keep.txt 2>/dev/null || echo none' >"$T/of2" 2>&1
is "$(cat "$T/of2")" none "the next run starts empty: neither the old workspace nor the unsaved one"
done_testing
