#!/bin/bash
# Two deployments on one host (two workers directories, the same
# LEASE_WORKER_IDS range, one LEASE_HOST_DIR): a worker never gets a host
# uid another deployment's live worker holds, and deleting one
# deployment's worker never kills the other's tenant, even when its
# directory says it holds that uid; a uid some other host process runs as
# is skipped at create and never killed at delete; a claim whose worker
# directory is gone is taken over; the files guard counts the other
# deployment's workers.
. "$(dirname "$0")/lib.sh"
plan 21
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
HID=$((2100400001 + ($$ % 5000) * 8))
export LEASE_WORKER_IDS=$HID-$((HID + 3)) LEASE_HOST_DIR=$T/host
on_exit "for u in \$(seq $HID $((HID + 7))); do pkill -9 -U \$u; done; sleep 0.2; for d in \$(find /sys/fs/cgroup/*/kzt?$$ /sys/fs/cgroup/unified/kzt?$$ -depth -type d 2>/dev/null); do rmdir \$d; done"
# Agents left by a failed check (they are root, not of the range).
on_exit "for f in $T/*/workers/*/pid; do kill -9 \$(cat \$f); done"
# call DEP JSON: one frame to the controller of deployment DEP (its own
# run dir, workers directory and cgroup parent); prints the reply.
call() {
	KZ_RUN_DIR=$T/$1 LEASE_WORKERS_DIR=$T/$1/workers \
	LEASE_WORKER_ARGS="--cgroup-parent kzt$1$$ --memory 64M --state-dir $T/$1/st $XARGS" \
	$PY -c '
import struct, subprocess, sys
a = sys.argv[2].encode()
p = subprocess.run([sys.argv[1]], input=struct.pack(">I", len(a)) + a, stdout=subprocess.PIPE)
print(p.stdout[4:].decode())' "$BIN/kz-ctl-local" "$2"
}
XARGS=
create() { call "$1" '{"v":1,"op":"create","id":"'"$2"'","class":"default","runtime":"native"}'; }
delete() { call "$1" '{"v":1,"op":"delete","id":"'"$2"'"}'; }
procs() { ps -o pid= -U "$1" -u "$1" | wc -l; }
uid() { cat "$T/$1/workers/$2/ids" 2>/dev/null; }
mkdir -p "$T/a" "$T/b" "$T/c"

# Deployment a's worker, with a tenant that runs on.
out=$(create a a1)
like "$out" '"ok":true' "deployment a's worker is made"
wait_sock "$T/a/workers/a1/sock" 15
UA=$(uid a a1)
bg timeout 300 $PY "$TOP/tests/sandbox/client.py" "$T/a/workers/a1/sock" run \
	'{"argv":["/bin/sleep","1000"]}'
for i in $(seq 100); do [ "$(procs "$UA")" -ge 1 ] && break; sleep 0.1; done
ok $([ "$(procs "$UA")" -ge 1 ]; echo $?) "its tenant runs as its uid $UA"

# Deployment b, same range: another uid, and its delete spares a's tenant.
out=$(create b b1)
like "$out" '"ok":true' "deployment b's worker is made"
UB=$(uid b b1)
ok $([ -n "$UB" ] && [ "$UB" != "$UA" ]; echo $?) "with a uid other than a's live worker's ($UB, $UA)"
out=$(delete b b1)
like "$out" '"absent":true' "b's worker is deleted"
ok $([ "$(procs "$UA")" -ge 1 ]; echo $?) "and a's tenant still runs"

# A worker directory that names a's uid (made before the host record, or
# misrecorded): its delete refuses to kill as that uid, naming the owner.
out=$(create b b2)
like "$out" '"ok":true' "another worker of b is made"
wait_sock "$T/b/workers/b2/sock" 15
UB2=$(uid b b2)
echo "$UA" >"$T/b/workers/b2/ids"
out=$(delete b b2)
like "$out" "\"ok\":false.*uid $UA .*$T/a/workers/a1" \
	"a delete whose directory names a's uid is refused, naming a's worker"
ok $([ "$(procs "$UA")" -ge 1 ]; echo $?) "and a's tenant still runs"
echo "$UB2" >"$T/b/workers/b2/ids"
out=$(delete b b2)
like "$out" '"absent":true' "with its own uid back, it is deleted"

# A claim whose worker directory is gone (its run dir wiped) is stale.
out=$(create a a2)
like "$out" '"ok":true' "a second worker of a is made"
wait_sock "$T/a/workers/a2/sock" 15
U2=$(uid a a2)
kill -9 "$(cat "$T/a/workers/a2/pid")"
pkill -9 -U "$U2"
sleep 0.5
rm -rf "$T/a/workers/a2"
out=$(create b b3)
UB3=$(uid b b3)
is "$UB3" "$U2" "b's next worker takes over the uid of a's vanished one"
out=$(delete b b3)
like "$out" '"absent":true' "and is deleted"

# A host process already runs as the range's first uid: skipped, spared.
setpriv --reuid=$((HID + 4)) --regid=$((HID + 4)) --clear-groups sleep 600 >/dev/null 2>&1 &
X=$!
on_exit "kill -9 $X"
for i in $(seq 50); do [ "$(procs $((HID + 4)))" -ge 1 ] && break; sleep 0.1; done
out=$(LEASE_WORKER_IDS=$((HID + 4))-$((HID + 7)) create c c1)
like "$out" '"ok":true' "deployment c's worker is made"
UC=$(uid c c1)
ok $([ -n "$UC" ] && [ "$UC" != $((HID + 4)) ]; echo $?) \
	"not as the uid a host process runs as ($UC)"
out=$(LEASE_WORKER_IDS=$((HID + 4))-$((HID + 7)) delete c c1)
like "$out" '"absent":true' "it is deleted"
ok $(kill -0 $X 2>/dev/null; echo $?) "and the host process still runs"

# The host's file table: one worker fits LEASE_FILES_SHARE, two do not,
# whichever deployment each is of.
pkill -9 -U "$UA"
sleep 0.3
out=$(delete a a1)
XARGS="--memory 64M"
F=$("$BIN/kz-sandbox" files --memory 64M)
M=$(cat /proc/sys/fs/file-max)
S=$((F * 100 / M + 1))
if [ $S -le 100 ] && [ $((M / 100 * S)) -lt $((2 * F)) ]; then
	out=$(LEASE_FILES_SHARE=$S create a a9)
	out=$(LEASE_FILES_SHARE=$S create b b9)
	like "$out" '"error":"refused".*more than LEASE_FILES_SHARE' \
		"b's worker is refused while a's holds the share ($F of $M, $S%)"
	is "$(ls -A "$T/b/workers" | grep -c b9)" 0 "and leaves nothing behind"
	delete a a9 >/dev/null
	out=$(LEASE_FILES_SHARE=$S create b b9)
	like "$out" '"ok":true' "once a's is deleted, b's fits"
	delete b b9 >/dev/null
else
	ok 0 "# SKIP fs.file-max $M leaves no share for one worker of $F files"
	ok 0 "# SKIP"
	ok 0 "# SKIP"
fi
is "$(ls "$T/host" 2>/dev/null | wc -l)" 0 "no claim is left once every worker is gone"
done_testing
