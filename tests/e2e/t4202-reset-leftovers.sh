#!/bin/bash
# Real kz-sandbox workers: what one tenant leaves behind (a background
# process, files in /tmp, /dev/shm and the workspace) is gone before the
# next lease, as the next tenant's own code finds; a reset killed in the
# middle of a wipe (kz-lease's own, or an operator's kz-reset) leaves the
# worker retired and deleted, never warm, and a clean replacement takes
# its place.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 13
export RUN_SNAPSHOT=no RESET_IO_TIMEOUT_MS=30000
start_stack 1
t "a real worker becomes warm" wait_for warm 1
W0=$(ls "$T/workers")
kz-run -q --actor mallory --conversation m1 -- sh -c '
	nohup sleep 3131 >/dev/null 2>&1 &
	echo left >/tmp/left; echo left >/dev/shm/left; echo left >left
	mkdir -p /tmp/d/e && ln -s /etc/passwd /tmp/d/e/l' >"$T/o0" 2>&1
ok $? "the first tenant leaves a process and files behind"
kz-run -q --actor eve --conversation e1 -- sh -c '
	ls -A /tmp /dev/shm /workspace | grep -c left
	for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr "\0" " "; echo; done | grep -c "^sleep 313[1]"
	ls -A /tmp | wc -l' >"$T/o1" 2>&1
is "$(ls "$T/workers")" "$W0" "the next tenant got the same worker"
is "$(sed -n 1p "$T/o1")" 0 "no leftover file in /tmp, /dev/shm or the workspace"
[ "$(sed -n 1p "$T/o1")" = 0 ] || sed "s/^/#   /" "$T/o1"
is "$(sed -n 2p "$T/o1")" 0 "no leftover process visible to the next tenant"
is "$(sed -n 3p "$T/o1")" 0 "/tmp is empty"
pgrep -f "sleep 3131" >/dev/null; tnot "no leftover process on the host either" test $? = 0

# A reset killed in the middle of a wipe (the agent held there by SIGSTOP)
# leaves the worker resetting, never warm: kz-lease's own in-process reset
# dies with kz-lease (SIGKILL), then the operator's kz-reset, run by hand
# under the worker's reset token, is killed too.  The next kz-lease
# retires the worker after the reset grace, deletes it and creates a
# clean replacement.
wait_for warm 1
APID=$(cat "$T/workers/$W0/pid")
N0=$(grep -c "reset.warm.*$W0" "$T/lease.log")
kz-lease lease --socket "$S" --actor a --conversation c >"$T/l" 2>&1
K=$(field "$T/l" token)
kill -STOP "$APID"
on_exit "kill -CONT $APID 2>/dev/null"
kz-lease release --socket "$S" --lease-id "$(field "$T/l" lease_id)" --token "$K" >/dev/null
t "the released worker is resetting (its wipe is held)" wait_for resetting 1 50
sleep 0.3
disown "$LEASE_PID"; kill -9 "$LEASE_PID"
RT=$(redis-cli -s "$STORE_SOCK" HGET "kz:{default}:w:$W0" token)
kz-reset --worker "$W0" --token "$RT" >"$T/r.out" 2>&1 &
RP=$!
sleep 0.5
t "the operator's kz-reset is mid-wipe" kill -0 "$RP"
kill -9 "$RP"; wait "$RP" 2>/dev/null
kill -CONT "$APID"
LEASE_RESET_GRACE_MS=1500 bg kz-lease serve --socket "$S" 2>>"$T/lease.log"
on_exit "kill $LASTPID 2>/dev/null; sleep 0.2; stop_workers"
wait_sock "$S"
t "the worker is deleted" sh -c "for i in \$(seq 1 150); do [ -d '$T/workers/$W0' ] || exit 0; sleep 0.1; done; exit 1"
t "a clean replacement becomes warm" wait_for warm 1
unlike "$(ls "$T/workers")" "$W0" "the retired worker is not among the workers"
is "$(grep -c "reset.warm.*$W0" "$T/lease.log")" "$N0" "it was never published warm after the kills"
done_testing
