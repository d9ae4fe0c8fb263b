#!/bin/bash
# kz-sandbox serve: the ops kz-lease and kz-reset drive (health, run, wipe,
# shutdown), the documented cgroup layout, peer checks, bad frames, and
# 1,000 sequential runs on one worker without leaking descriptors, memory or
# processes.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
ID=e2e-serve-$$
S=$T/w.sock
CG=/sys/fs/cgroup/pids/kz-sandbox/$ID
plan 33

bg "$SB" serve --id "$ID" --socket "$S" --pid-file "$T/pid" --timeout 10
wait_sock "$S" 10
for i in $(seq 40); do [ -s "$T/pid" ] && break; sleep 0.05; done
AGENT=$(cat "$T/pid")
h=$($C "$S" health)
like "$h" '"ok": true' "health answers"
like "$h" "\"worker\": \"$ID\"" "health names the worker id"
like "$h" "\"pid\": $AGENT" "health pid is the pid file's"
like "$h" '"generation": 0' "a fresh worker is generation 0"
is "$(cat $CG/cgroup.procs)" "$AGENT" "the worker cgroup holds only the agent"
is "$(wc -l <$CG/init/cgroup.procs)" 1 "the run init sits in <id>/init"

r=$($C "$S" run '{"argv":["/bin/sh","-c","cat; echo e >&2; echo x >/workspace/f; exit 4"],"stdin_b64":"aGVsbG8K"}')
like "$r" '"exit_code": 4' "run returns the exit status"
like "$r" '"stdout_b64": "aGVsbG8K"' "stdin reaches the code and stdout comes back"
like "$r" '"stderr_b64": "ZQo="' "stderr comes back"
like "$r" '"generation": 1' "generation counts runs"
r=$($C "$S" run '{"argv":["/bin/cat","/workspace/f"]}')
like "$r" '"stdout_b64": "eAo="' "the workspace persists between runs of a lease"
r=$($C "$S" run '{"argv":["/bin/sh","-c","sleep 5"],"timeout_ms":300}')
like "$r" '"limit": "timeout"' "a run timeout is reported as a limit"
r=$($C "$S" run '{"argv":["/bin/sh","-c","setsid sleep 60 & echo x > /tmp/t; echo y > /dev/shm/s"]}')
like "$r" '"exit_code": 0' "a run may leave a background process"
is "$(cat $CG/run/cgroup.procs | wc -l)" 0 "the leftover is killed at the end of the run"
w=$($C "$S" wipe)
like "$w" '"ok": true, "evidence": \{"leftovers_killed": true, "previous_gone": true, "namespaces_new": true, "within_lease_limit": true, "workspace_empty": true, "tmp_empty": true, "shm_empty": true, "mounts_baseline": true, "ipc_empty": true, "cgroup_only_agent": true, "memory_clean": true\}' "wipe answers with positive evidence, item by item"
r=$($C "$S" run '{"argv":["/bin/sh","-c","ls -A /workspace /tmp /dev/shm"]}')
like "$r" '"stdout_b64": "L2Rldi9zaG06CgovdG1wOgoKL3dvcmtzcGFjZToK"' "after wipe the workspace, /tmp and /dev/shm are empty"
r=$($C "$S" run '{"argv":["/bin/true"],"cwd":"../etc"}')
like "$r" '"error": "bad_request"' "a cwd outside the workspace is refused"
r=$($C "$S" run '{"argv":["/bin/true"],"bogus":1}')
like "$r" '"error": "bad_request"' "unknown fields are refused"
r=$(printf '\377\377\377\377' | timeout 5 python3 -c '
import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); print(s.recv(200))' "$S")
like "$r" "frame_too_large" "an oversized frame is answered with frame_too_large"
r=$(setpriv --reuid 65534 --regid 65534 --clear-groups python3 "$TOP/tests/sandbox/client.py" "$S" health 2>&1)
like "$r" "unauthorized_peer|Permission denied" "an unlisted peer uid is refused"

# 1,000 sequential runs: descriptors, memory and processes stay flat.
fd0=$(ls /proc/$AGENT/fd | wc -l)
rss0=$(awk '/VmRSS/ {print $2}' /proc/$AGENT/status)
m=$($C "$S" --loop 1000 '{"argv":["/bin/true"]}'); rc=$?
is "$rc" 0 "1,000 sequential runs succeed (median ${m} ms)"
fd1=$(ls /proc/$AGENT/fd | wc -l)
rss1=$(awk '/VmRSS/ {print $2}' /proc/$AGENT/status)
is "$fd1" "$fd0" "no descriptor leaked over 1,000 runs"
t "RSS grew less than 2 MiB over 1,000 runs ($rss0 -> $rss1 kB)" test $((rss1 - rss0)) -lt 2048
is "$(pgrep -c -P $AGENT)" 1 "the agent has exactly one child (the run init) after 1,000 runs"
$C "$S" shutdown >/dev/null
for i in $(seq 40); do kill -0 "$AGENT" 2>/dev/null || break; sleep 0.05; done
tnot "shutdown removes the worker cgroup" test -d "$CG"

# A worker killed outright takes its code with it, and the same id starts
# again over whatever it left.
bg "$SB" serve --id "$ID" --socket "$S" --pid-file "$T/pid2"
P2=$LASTPID
wait_sock "$S" 10
for i in $(seq 40); do [ -s "$T/pid2" ] && break; sleep 0.05; done
# (Its client sees the connection close when the worker dies: expected.)
$C "$S" run '{"argv":["/bin/sh","-c","setsid sleep 88 >/dev/null 2>&1 & sleep 5"],"timeout_ms":3000}' >/dev/null 2>&1 &
sleep 1
disown "$P2"; kill -9 "$(cat "$T/pid2")"
sleep 0.5
tnot "a killed worker leaves no code process behind" pgrep -fx 'sleep 88'
rm -f "$S"
# This time nobody (65534) is a peer too, but not an operator.
KZ_PEER_UIDS=0,65534 bg "$SB" serve --id "$ID" --socket "$S"
wait_sock "$S" 10
chmod 0666 "$S"
like "$($C "$S" health)" '"ok": true' "the same id serves again after a crash"
like "$($C "$S" run '{"argv":["/bin/true"]}')" '"exit_code": 0' "and runs code"
r=$(python3 -c '
import json,socket,struct,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
b=json.dumps({"v":1,"op":"health"}).encode(); s.sendall(struct.pack(">I",len(b))+b); print(s.recv(400))' "$S")
like "$r" '"error": ?"bad_request"' "a request without an id is refused"
# The system's python and a copy of the client: nobody may not reach a
# checkout or an interpreter under /root.
install -m 0644 "$TOP/tests/sandbox/client.py" "$T/client.py"
nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 "$T/client.py" "$S" "$@" 2>&1; }
like "$(nobody health)" '"ok": true' "a listed peer that is not an operator may ask for health"
like "$(nobody wipe)" '"error": "operator_only"' "but not for a wipe"
like "$(nobody shutdown)" '"error": "operator_only"' "nor a shutdown"
like "$($C "$S" health)" '"ok": true' "and the worker still serves"
$C "$S" shutdown >/dev/null
done_testing
