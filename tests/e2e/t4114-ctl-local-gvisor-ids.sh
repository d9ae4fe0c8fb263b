#!/bin/bash
# A gvisor worker of kz-ctl-local holds two host uids of LEASE_WORKER_IDS,
# both claimed in the host's record (LEASE_HOST_DIR): the first for the
# code, the second for runsc and its gofer (kz-sandbox's
# SANDBOX_GVISOR_UID), so no process of its sandbox is the host's root.
# No other worker, gvisor or native, is given either; the delete kills
# the processes of both and releases both claims.
# e2e: alone (gVisor on the ptrace platform takes what CPU there is)
. "$(dirname "$0")/lib.sh"
RUNSC=${RUNSC:-/usr/bin/runsc}
[ -x "$RUNSC" ] || { echo "1..0 # SKIP runsc is not installed (make deps)"; exit 0; }
plan 14
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
HID=$((2100600001 + ($$ % 5000) * 8))
export LEASE_WORKER_IDS=$HID-$((HID + 5)) LEASE_HOST_DIR=$T/host
on_exit "for u in \$(seq $HID $((HID + 5))); do pkill -9 -U \$u; done; sleep 0.2; for d in \$(find /sys/fs/cgroup/*/kzg$$ /sys/fs/cgroup/unified/kzg$$ /sys/fs/cgroup/kzg$$ -depth -type d 2>/dev/null); do rmdir \$d; done"
on_exit "for f in $T/workers/*/pid; do kill -9 \$(cat \$f); done"
call() {
	KZ_RUN_DIR=$T LEASE_WORKERS_DIR=$T/workers \
	LEASE_WORKER_ARGS="--cgroup-parent kzg$$ --memory 128M" \
	$PY -c '
import struct, subprocess, sys
a = sys.argv[2].encode()
p = subprocess.run([sys.argv[1]], input=struct.pack(">I", len(a)) + a, stdout=subprocess.PIPE)
print(p.stdout[4:].decode())' "$BIN/kz-ctl-local" "$1"
}
create() { call '{"v":1,"op":"create","id":"'"$1"'","class":"default","runtime":"'"$2"'"}'; }
delete() { call '{"v":1,"op":"delete","id":"'"$1"'"}'; }
procs() { ps -o pid= -U "$1" -u "$1" | wc -l; }
num() { cat "$T/workers/$1/$2" 2>/dev/null; }
claim() { head -n1 "$T/host/$1" 2>/dev/null; }

out=$(create g1 gvisor)
like "$out" '"ok":true' "a gvisor worker is made"
U=$(num g1 ids) G=$(num g1 gvids)
ok $([ -n "$U" ] && [ -n "$G" ] && [ "$U" != "$G" ] && [ "$G" -ge $HID ] && [ "$G" -le $((HID + 5)) ]; echo $?) \
	"it holds two uids of the range (${U:-none}, ${G:-none})"
W=$(realpath "$T/workers/g1")
is "$(claim "$U");$(claim "${G:-x}")" "$W;$W" "the host's record claims both for it"
wait_sock "$T/workers/g1/sock" 60
bg timeout 120 $PY "$TOP/tests/sandbox/client.py" "$T/workers/g1/sock" run \
	'{"argv":["/bin/sleep","100"]}' >/dev/null 2>&1
for i in $(seq 300); do
	[ -n "$G" ] && [ "$(pgrep -u "$G" -f "^runsc-sandbox" | wc -l)" -ge 1 ] && break
	sleep 0.1
done
r=$(pgrep -f "^$RUNSC --root=$T/workers/g1/state/" | head -n1)
is "$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/${r:-0}/status" 2>/dev/null)" "$G $G $G $G" \
	"its runsc runs as the second uid, not root"
s=$(pgrep -f "^runsc-sandbox --root=$T/workers/g1/state/" | head -n1)
is "$(awk '/^Uid:/ {print $2}' "/proc/${s:-0}/status" 2>/dev/null)" "$U" \
	"and its Sentry as the first"

out=$(create g2 gvisor)
like "$out" '"ok":true' "a second gvisor worker is made"
U2=$(num g2 ids) G2=$(num g2 gvids)
ok $([ -n "$U2" ] && [ -n "$G2" ] && [ "$(printf '%s\n' "$U" "$G" "$U2" "$G2" | sort -u | wc -l)" = 4 ]; echo $?) \
	"with two uids of its own ($U2, $G2; first: $U, $G)"
out=$(create n1 native)
N=$(num n1 ids)
ok $([ -n "$N" ] && [ ! -e "$T/workers/n1/gvids" ] && [ "$(printf '%s\n' "$U" "$G" "$U2" "$G2" "$N" | sort -u | wc -l)" = 5 ]; echo $?) \
	"a native worker holds one uid, none of theirs ($N)"
is "$(ls "$T/host" | wc -l)" 5 "the host's record holds the five claims"

out=$(delete g1)
like "$out" '"absent":true' "the first gvisor worker is deleted"
is "$(procs "$U") $(procs "${G:-0}")" "0 0" "no process of either of its uids is left"
ok $([ -n "$G" ] && [ ! -e "$T/host/$U" ] && [ ! -e "$T/host/$G" ]; echo $?) \
	"both its claims are released"
is "$(claim "$U2");$(claim "$G2")" "$(realpath "$T/workers/g2");$(realpath "$T/workers/g2")" \
	"the other gvisor worker's claims stay"
delete g2 >/dev/null
delete n1 >/dev/null
is "$(ls "$T/host" 2>/dev/null | wc -l)" 0 "no claim is left once every worker is gone"
done_testing
