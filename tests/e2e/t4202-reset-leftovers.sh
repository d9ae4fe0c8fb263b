#!/bin/bash
# Real kz-sandbox workers: what one tenant leaves behind (a background
# process, files in /tmp, /dev/shm and the workspace) is gone before the
# next lease, as the next tenant's own code finds; kz-reset killed in the
# middle of a wipe leaves the worker retired and deleted, never warm, and
# a clean replacement takes its place.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 12
export RUN_SNAPSHOT=no
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
is "$(sed -n 2p "$T/o1")" 0 "no leftover process visible to the next tenant"
is "$(sed -n 3p "$T/o1")" 0 "/tmp is empty"
pgrep -f "sleep 3131" >/dev/null; tnot "no leftover process on the host either" test $? = 0

# kz-reset is killed while the agent is in the middle of a wipe (held
# there by SIGSTOP): the worker is retired, never published.
wait_for warm 1
APID=$(cat "$T/workers/$W0/pid")
N0=$(grep -c "reset.warm.*$W0" "$T/lease.log")
kz-lease lease --socket "$S" --actor a --conversation c >"$T/l" 2>&1
K=$(field "$T/l" token)
kill -STOP "$APID"
on_exit "kill -CONT $APID 2>/dev/null"
kz-lease release --socket "$S" --lease-id "$(field "$T/l" lease_id)" --token "$K" >/dev/null
RP=
for i in $(seq 1 50); do RP=$(pgrep -f "kz-reset --worker $W0") && break; sleep 0.05; done
sleep 0.3
kill -9 $RP
t "kz-reset was running and is killed" test -n "$RP"
kill -CONT "$APID"
t "the worker is deleted" sh -c "for i in \$(seq 1 100); do [ -d '$T/workers/$W0' ] || exit 0; sleep 0.1; done; exit 1"
t "a clean replacement becomes warm" wait_for warm 1
unlike "$(ls "$T/workers")" "$W0" "the retired worker is not among the workers"
is "$(grep -c "reset.warm.*$W0" "$T/lease.log")" "$N0" "it was never published warm after the kill"
done_testing
