#!/bin/bash
# What one tenant leaves in the kernel never reaches the next one on the
# same worker, through kz-run and kz-lease's real reset: SysV shm, msg and
# sem objects and a POSIX message queue under fixed names are absent for
# the next tenant, the memory they held is free to it, its namespaces are
# new, and its pid counter and loopback counters start over.  Two tenants
# on two workers at once run as two host uids, so one that takes every
# inotify instance and POSIX timer its uid may have takes none of the
# other's.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 26
export RUN_SNAPSHOT=no
# A 64 MiB run: a 32 MiB segment left behind would leave the next tenant
# too little for its own 48 MiB.
export LEASE_WORKER_ARGS="--memory 64M"
cp "$TOP/tests/sandbox/tenant.py" "$T/tenant.py"
start_stack 1
t "a real worker becomes warm" wait_for warm 1
W0=$(ls "$T/workers")
val() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }

kz-run -q --actor mallory --conversation m1 --file "$T/tenant.py" -- \
	python3 /projection/tenant.py leave >"$T/a" 2>"$T/a.err"
is "$?" 0 "the first tenant runs"
is "$(val "$T/a" shm_made) $(val "$T/a" msg_made) $(val "$T/a" sem_made) $(val "$T/a" mq_made)" \
	"yes yes yes yes" "it leaves a SysV shm segment, message queue and semaphore set and a POSIX queue"
t "its pid counter moved past 200" test "$(val "$T/a" child_pid)" -gt 200
t "it moved megabytes over its loopback" test "$(val "$T/a" lo_tx_bytes)" -gt 8000000
t "the worker is warm again" wait_for warm 1

kz-run -q --actor eve --conversation e1 --file "$T/tenant.py" -- \
	sh -c 'ALLOC_MB=48 exec python3 /projection/tenant.py look' >"$T/b" 2>"$T/b.err"
is "$?" 0 "the next tenant runs"
is "$(ls "$T/workers")" "$W0" "on the same worker"
is "$(val "$T/b" shm_found)" no "the SysV shared memory segment is gone"
is "$(val "$T/b" msg_found)" no "the SysV message queue is gone"
is "$(val "$T/b" sem_found)" no "the SysV semaphore set is gone"
is "$(val "$T/b" mq_found)" no "the POSIX message queue is gone"
is "$(val "$T/b" alloc_mb)" 48 "the memory the segment held is free: 48 of 64 MiB can be used"
is "$(val "$T/b" child_pid)" 3 "the pid counter starts over (init 1, the code 2, its child 3)"
is "$(val "$T/b" lo_rx_bytes) $(val "$T/b" lo_tx_bytes)" "0 0" "the loopback counters start at zero"
for n in ipc mnt net pid uts; do
	tnot "the $n namespace is not the previous tenant's" test "$(val "$T/a" ns_$n)" = "$(val "$T/b" ns_$n)"
done
ev=$(audit_q --kind reset | tail -1)
like "$ev" '"agent_namespaces_new":true' "the reset's audit record proves the namespaces new"
like "$ev" '"agent_ipc_empty":true.*"agent_memory_clean":true' "and the IPC namespace empty and the memory back"

# Two workers, two tenants at once: each runs as its own host uid, and the
# one that takes every inotify instance and POSIX timer its uid may have
# leaves the other's alone.
kill "$LEASE_PID"; wait "$LEASE_PID" 2>/dev/null; stop_workers
rm -rf "$T/workers"
LEASE_CAPACITY=2 bg kz-lease serve --socket "$S" 2>>"$T/lease.log"
LEASE_PID=$LASTPID
wait_sock "$S"
t "two workers become warm" wait_for warm 2
kz-run -q --actor mallory --conversation m2 --file "$T/tenant.py" -- \
	python3 /projection/tenant.py exhaust 6 >"$T/x" 2>"$T/x.err" &
XP=$!
for _ in $(seq 1 100); do [ "$(st leased)" = 1 ] && break; sleep 0.05; done
sleep 2
kz-run -q --actor eve --conversation e2 --file "$T/tenant.py" -- \
	python3 /projection/tenant.py some >"$T/y" 2>"$T/y.err"
wait "$XP"
ux=$(awk '{print $2}' "$T/x") uy=$(awk '{print $2}' "$T/y")
like "$(cat "$T/x")" '^uid [0-9]+ inotify (12[0-9]|[0-9]{3,}) timers (25[0-9]|[0-9]{3,})$' \
	"one tenant takes every inotify instance and POSIX timer its uid may have"
tnot "the two tenants run as two host uids ($ux, $uy)" test "$ux" = "$uy"
is "$(cut -d' ' -f3- "$T/y")" "inotify 8 timers 8" "the other, meanwhile, still gets its own"
done_testing
