#!/bin/bash
# kz-run against real kz-sandbox workers leased from kz-lease: output and
# exit status, read-only projection, workspace snapshot carried over in a
# conversation but never to another actor in it, host administration
# refused before dispatch, admission closed without the store, the audit
# trail of every step (with no raw identifier in it; kz-lease's reset
# record names the run that released the worker), and no run without a
# durable dispatch record.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 38
start_stack 1
t "a real worker becomes warm" wait_for warm 1

cat >"$T/prog.py" <<'PY'
import os, sys
with open("notes.txt", "a") as f:
    f.write("run\n")
print("runs:", len(open("notes.txt").read().splitlines()))
print("projected:", sorted(os.listdir("/projection")))
try:
    open("/projection/prog.py", "a")
    print("projection writable")
except OSError:
    print("projection read-only")
sys.exit(5)
PY
kz-run -q --actor alice --conversation c1 --file "$T/prog.py" -- python3 /projection/prog.py >"$T/o1" 2>"$T/e1"
is "$?" 5 "kz-run exits with the code's exit status"
like "$(cat "$T/o1")" "runs: 1" "the code's stdout is printed"
like "$(cat "$T/o1")" "projected: \['prog.py'\]" "the file is projected"
like "$(cat "$T/o1")" "projection read-only" "the projection is read-only to the code"
kz-run --actor alice --conversation c1 -- sh -c 'cat notes.txt | wc -l; ls -A /projection | wc -l; echo oops >&2' >"$T/o2" 2>"$T/e2"
is "$(head -1 "$T/o2")" 1 "the same actor and conversation get their workspace back"
is "$(sed -n 2p "$T/o2")" 0 "the previous projection is gone"
like "$(cat "$T/e2")" "oops" "the code's stderr is printed"
like "$(cat "$T/e2")" "kz-run: exit 0 \(worker w" "and the exit status line"
kz-run -q --actor bob --conversation c1 -- sh -c 'ls -A /workspace | wc -l' >"$T/o3" 2>&1
is "$(cat "$T/o3")" 0 "another actor in the same conversation gets an empty workspace"
n=$(ls "$T"/snapshots/*/*.tar | wc -l)
is "$n" 2 "two workspace keys, two snapshots"
is "$(ls "$T/snapshots" | wc -l)" 2 "each in its actor's directory"
tar -tf "$(ls -d "$T"/snapshots/*/*.tar | head -1)" >"$T/list" 2>&1
unlike "$(cat "$T/list")" "prog.py" "no snapshot holds the projection"

# Host administration never reaches a worker.
d0=$(audit_q --kind dispatch | wc -l)
rc_is 1 "an inline script that needs root is refused" kz-run --actor alice --conversation c1 -- sh -c 'sudo id'
printf '#!/bin/sh\necho x >> /etc/sudoers\n' >"$T/adm.sh"
rc_is 1 "a projected script that needs root is refused" kz-run --actor alice --conversation c1 --file "$T/adm.sh" -- sh /projection/adm.sh
rc_is 1 "a command line that runs sudo is refused" kz-run --actor alice --conversation c1 -- env LC_ALL=C sudo id
like "$(cat "$T/.out")" "the command is host administration" "and says it was the command"
# bash runs what follows a NUL byte: the whole file is classified.
printf 'echo one\necho two\0\nsudo id\n' >"$T/nul.sh"
rc_is 1 "a script hiding sudo after a NUL byte is refused" kz-run --actor alice --conversation c1 --file "$T/nul.sh" -- bash /projection/nul.sh
mkfifo "$T/fifo"
rc_is 3 "a --file that is not a regular file cannot be classified: exit 3" kz-run --actor alice --conversation c1 --file "$T/fifo" -- true
is "$(audit_q --kind dispatch | wc -l)" "$d0" "none was dispatched"
is "$(audit_q --kind isolation_denial | grep -c host_administration)" 4 "every refusal is audited"

# The audit trail: per run lease, dispatch (before and after), release,
# and kz-reset's record; raw ids never stored.
t "each run was leased, dispatched twice and released" sh -c "[ \$(kz-audit query --dir '$T/audit' --kind lease | wc -l) -ge 3 ] && [ \$(kz-audit query --dir '$T/audit' --kind dispatch | wc -l) -eq 6 ] && [ \$(kz-audit query --dir '$T/audit' --kind release | wc -l) -ge 3 ]"
t "kz-reset audited a reset with projection evidence" sh -c "kz-audit query --dir '$T/audit' --kind reset | grep -q '\"projection_empty\":true'"
unlike "$(cat "$T"/audit/*.jsonl)" 'alice|bob|"c1"' "no raw actor or conversation in the audit log"
t "the audit chain verifies" kz-audit verify --dir "$T/audit"
# The reset after bob's run names his run: its rid is the one on his
# dispatch records.
rid=$(audit_q --kind dispatch | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["event"]["rid"])')
t "the reset after a run carries that run's rid" sh -c "for i in \$(seq 1 50); do kz-audit query --dir '$T/audit' --kind reset | grep -q '\"rid\":\"$rid\"' && exit 0; sleep 0.1; done; exit 1"
# A run's four records go out as two appends (lease and dispatch at the
# grant, dispatch and release at the end): the sink makes each pair
# durable with one fsync.  kz-lease's reset record may take one of its own.
ast() { kz-msg "$T/kz-audit.sock" '{"op":"status"}' | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["records"], d["fsyncs"])'; }
read -r r0 f0 < <(ast)
kz-run -q --actor alice --conversation c1 -- true
rid=$(audit_q --kind dispatch | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["event"]["rid"])')
for _ in $(seq 50); do audit_q --kind reset | grep -q "\"rid\":\"$rid\"" && break; sleep 0.1; done
read -r r1 f1 < <(ast)
ok $(( (r1 - r0) - (f1 - f0) >= 2 ? 0 : 1 )) "a run's records share fsyncs in pairs ($((r1 - r0)) records, $((f1 - f0)) fsyncs)"
# A lease that is never released expires; its worker is retired, never
# reset, and the retire record names the run the lease was taken for
# (kept with the lease).
t "the pool is warm again" wait_for warm 1
xr=feedc0ffee0123456789abcdef012345
t "a lease for run $xr" kz-msg "$S" "{\"op\":\"lease\",\"actor\":\"carol\",\"conversation\":\"c9\",\"ttl_ms\":300,\"run_id\":\"$xr\"}"
t "its expiry's retire record carries that rid" sh -c "for i in \$(seq 1 100); do kz-audit query --dir '$T/audit' --kind retire | grep '\"rid\":\"$xr\"' | grep -q '\"outcome\":\"expired\"' && exit 0; sleep 0.1; done; exit 1"
unlike "$(audit_q --kind reset)" "\"rid\":\"$xr\"" "and no reset record names it"

# No durable dispatch record, no run: with the audit sink stopped, the
# code never starts and kz-run exits 3 (a stopped sink does not answer
# kz-run's first ping; t0005 has one that answers it and then refuses).
wait_for warm 1
kill -STOP "$AUDIT_PID"
kz-run -q --actor alice --conversation c1 -- sh -c 'echo ran >>notes.txt' >"$T/o4" 2>&1
rc=$?
kill -CONT "$AUDIT_PID"
is "$rc" 3 "kz-run exits 3 when the sink does not acknowledge the dispatch"
like "$(cat "$T/o4")" "audit sink $T/kz-audit.sock .*nothing (ran|was dispatched)" "and says nothing ran, naming the sink"
wait_for warm 1
kz-run -q --actor alice --conversation c1 -- sh -c 'grep -c ran notes.txt' >"$T/o5" 2>&1
is "$(cat "$T/o5")" 0 "the code did not run (nothing it would write is in the workspace)"

# Without the store admission closes: exit 3, audited as a denial.
disown "$STORE_PID"; kill -9 "$STORE_PID"; sleep 1.2
rc_is 3 "kz-run exits 3 when admission is closed" kz-run --actor alice --conversation c1 -- true
like "$(cat "$T/.out")" admission_closed "and names admission_closed"
t "the denial is audited" sh -c "kz-audit query --dir '$T/audit' --kind admission | grep -q '\"decision\":\"denied\"'"
rc_is 2 "kz-run without a command is a usage error" kz-run --actor a --conversation c
done_testing
