#!/bin/bash
# kz-ctl-local delete of a worker whose agent was SIGKILLed mid-run (it
# never ran its own teardown), under a cgroup parent of its own: the
# answer "absent" comes only once none of its cgroups is left and no
# process of its host uid runs, the hostile tenant's stopped, signal-
# ignoring and double-forked processes among them, and a process still in
# its cgroups is killed through them first.  kz-sandbox reap does the same
# on a cgroup2 tree (the unified mount).  A create whose settings would let
# the workers hold more than LEASE_FILES_SHARE of fs.file-max is refused
# with one line and leaves nothing behind; one within it is made.
. "$(dirname "$0")/lib.sh"
plan 12
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
PARENT=kzt$$
HID=$((2100800001 + ($$ % 5000) * 8))
export KZ_RUN_DIR=$T LEASE_WORKERS_DIR=$T/workers LEASE_WORKER_IDS=$HID-$((HID + 7))
export LEASE_WORKER_ARGS="--cgroup-parent $PARENT --memory 64M --state-dir $T/st"
export LEASE_FILES_SHARE=50
on_exit "pkill -9 -U $HID; sleep 0.2; for d in \$(find /sys/fs/cgroup/*/$PARENT /sys/fs/cgroup/unified/$PARENT -depth -type d 2>/dev/null); do rmdir \$d; done"
call() {
	$PY -c '
import json, struct, subprocess, sys
a = sys.argv[2].encode()
p = subprocess.run([sys.argv[1]], input=struct.pack(">I", len(a)) + a, stdout=subprocess.PIPE)
print(p.stdout[4:].decode())' "$BIN/kz-ctl-local" "$1"
}
cgroups() { find /sys/fs/cgroup/*/$PARENT/"$1" /sys/fs/cgroup/unified/$PARENT/"$1" -type d 2>/dev/null | wc -l; }
procs() { ps -o pid= -U "$1" -u "$1" | wc -l; }

out=$(call '{"v":1,"op":"create","id":"w1","class":"default","runtime":"native"}')
like "$out" '"ok":true' "a worker under a cgroup parent of its own is made"
wait_sock "$T/workers/w1/sock" 15
# The tenant: a sleep, a double-forked one that ignores TERM/HUP/INT in a
# session of its own, and a stopped one; the run itself blocks (its
# client sees the connection close when the worker goes: expected).
bg timeout 60 $PY "$TOP/tests/sandbox/client.py" "$T/workers/w1/sock" run \
	'{"argv":["/bin/sh","-c","sleep 1000 & (setsid sh -c \"trap \\\"\\\" TERM HUP INT; sleep 1000\" &); sh -c \"kill -STOP \\$\\$; sleep 1000\" & exec sleep 1000"]}' >/dev/null 2>&1
for i in $(seq 200); do [ "$(procs $HID)" -ge 5 ] && break; sleep 0.1; done
is "$(procs $HID)" 5 "the tenant's five processes run as the worker's uid"
# One more process of the worker's uid in its run cgroup, outside the
# run's pid namespace (what a dying agent's pid namespace does not take
# with it), stopped.
setpriv --reuid $HID --regid $HID --clear-groups sleep 1000 >/dev/null 2>&1 &
X=$!
on_exit "kill -9 $X"
for i in $(seq 50); do [ "$(procs $HID)" -ge 6 ] && break; sleep 0.1; done
for h in memory pids cpu freezer blkio; do
	[ -d /sys/fs/cgroup/$h/$PARENT/w1/run ] && echo $X >/sys/fs/cgroup/$h/$PARENT/w1/run/tasks
done
kill -STOP $X
kill -9 "$(cat "$T/workers/w1/pid")"
sleep 1
out=$(call '{"v":1,"op":"delete","id":"w1"}')
like "$out" '"ok":true,"absent":true' "the delete of the SIGKILLed worker answers absent"
is "$(cgroups w1)" 0 "and no cgroup of it is left, under its own parent"
is "$(procs $HID)" 0 "and no process of its uid runs"
is "$(ls "$T/workers" | grep -c w1)" 0 "and its directory is gone"

# v2: kz-sandbox reap on a cgroup2 tree, with a process in it.
U=/sys/fs/cgroup/unified
if [ -e $U/cgroup.procs ] && mkdir -p $U/$PARENT/w2/run 2>/dev/null; then
	sh -c "echo \$\$ >$U/$PARENT/w2/run/cgroup.procs; exec sleep 1000" >/dev/null 2>&1 &
	Y=$!
	on_exit "kill -9 $Y"
	sleep 0.3
	rc_is 0 "reap of a cgroup2 worker tree exits 0" \
		"$BIN/kz-sandbox" reap --id w2 --cgroup-root $U --cgroup-parent $PARENT --state-dir "$T/st"
	ok $( [ ! -d $U/$PARENT/w2 ] && stopped $Y 2; echo $?) "its process was killed and its cgroups removed"
else
	ok 0 "# SKIP no cgroup2 mount to write to"
	ok 0 "# SKIP no cgroup2 mount to write to"
fi

# The host's file table: a worker allowed 65536 processes of 1048576
# descriptors each could hold more than half of fs.file-max.
out=$(LEASE_WORKER_ARGS="$LEASE_WORKER_ARGS --pids 65536 --nofile 1048576" \
	call '{"v":1,"op":"create","id":"w3","class":"default","runtime":"native"}')
like "$out" '"error":"refused".*open files, more than LEASE_FILES_SHARE 50% of fs.file-max' \
	"a create whose workers could fill half the file table is refused"
is "$(ls -A "$T/workers" | grep -c w3)" 0 "and leaves nothing behind"
out=$(call '{"v":1,"op":"create","id":"w4","class":"default","runtime":"native"}')
like "$out" '"ok":true' "one within the share is made"
out=$(call '{"v":1,"op":"delete","id":"w4"}')
like "$out" '"absent":true' "and deleted"
done_testing
