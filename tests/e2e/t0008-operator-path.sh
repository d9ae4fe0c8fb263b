#!/usr/bin/env bash
# The operator's path, as INSTALL has it: kz-supervise start returns only
# when a run issued at once succeeds and prints the one export line a shell
# needs; the pool's workers reach kz-egress, and a pool without egress
# refuses --egress instead of recording a grant that does nothing; a worker
# that cannot start makes start fail naming the step, and its log is kept;
# stop counts an exited-but-unreaped daemon as stopped; kz-egress is not
# told where the field key is; the run dir is the caller's own and its
# export line is safe to eval whatever its path; make demo leaves
# nothing behind when it works and keeps what it points at when it fails.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=118
plan 42

eg_site $N

# audit ACTION KIND: the records of KIND in run dir $1's audit log.
audit() { kz-audit query --dir "$1/audit" --kind "$2" 2>/dev/null; }

# ---- a stack with egress, started the way INSTALL says
R=$T/run
on_exit "kz-supervise stop --run-dir $R >/dev/null 2>&1"
export SANDBOX_EGRESS_MODE=private_networks
export SANDBOX_EGRESS_PRIVATE_CIDRS=10.213.$N.0/30 SANDBOX_EGRESS_RESOLVER=$EG_DNS
out=$(kz-supervise start --run-dir "$R" 2>"$T/start.err"); rc=$?
is "$rc" 0 "start succeeds"
is "$out" "export KZ_RUN_DIR='$R'" "start prints the one export line, and only it, on stdout"
like "$(cat "$T/start.err")" "kz-lease running pid [0-9]+ socket $R/kz-lease.sock" \
	"the status goes to stderr"
# At once: start returned only once a worker was warm and admission open.
rc_is 0 "a kz-run issued right after start succeeds" \
	env -i PATH="$PATH" KZ_RUN_DIR="$R" \
	kz-run --actor alice --conversation op -- /bin/true
st=$(env -i PATH="$PATH" KZ_RUN_DIR="$R" kz-lease status)
like "$st" '"admission":true' "admission is open"
like "$st" '"last_worker_failure":""' "no worker has failed"

GET='exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9
printf "GET http://origin.kz.test/via-supervise HTTP/1.1\r\nHost: origin.kz.test\r\nConnection: close\r\n\r\n" >&3
cat <&3'
o=$(KZ_RUN_DIR=$R kz-run --actor alice \
	--conversation op --capability code.run.egress --egress -- /bin/bash -c "$GET" 2>"$T/eg.err"); rc=$?
is "$rc" 0 "kz-run --egress under kz-supervise exits 0"
like "$(printf '%s' "$o" | tr '\r\n' '  ')" '^HTTP/1.1 200 .*origin origin.kz.test /via-supervise' \
	"the run reaches the test host through the relay and kz-egress"
like "$(audit "$R" dispatch | tail -1)" '"egress":"granted"' "its dispatch record says granted"
o=$(KZ_RUN_DIR=$R kz-run --actor alice \
	--conversation op -- /bin/bash -c "$GET" 2>&1); rc=$?
is "$rc" 9 "without --egress the same code has no proxy"

EP=$(cat "$R/kz-egress.pid")
tnot "kz-egress is not told where the field key is" grep -qz '^KZ_FIELD_KEY_FILE=' "/proc/$EP/environ"
m=$(KZ_AUDIT_SOCKET=$T/elsewhere.sock kz-supervise status --prometheus --run-dir "$R")
like "$m" 'kz_up\{daemon="kz-egress"\} 1' "status --prometheus reaches kz-egress on the status socket start gave it"
like "$m" 'kz_egress_allowed_total [1-9]' "and counts the run's allowed request"
like "$m" 'kz_up\{daemon="kz-audit"\} 1' "the run dir given wins over a socket the environment names"
kz-supervise stop --run-dir "$R" >"$T/stop.out" 2>&1

# ---- a stack without kz-egress: no egress path for the pool
NB=$T/noeg-bin R2=$T/run2
mkdir -p "$NB"
for b in "$BIN"/kz-*; do [ "${b##*/}" = kz-egress ] || ln -s "$b" "$NB/"; done
on_exit "KZ_BIN=$NB kz-supervise stop --run-dir $R2 >/dev/null 2>&1"
t "a stack without kz-egress starts" env KZ_BIN="$NB" kz-supervise start --run-dir "$R2"
mark=$T/ran-without-egress
o=$(KZ_RUN_DIR=$R2 kz-run --actor bob \
	--conversation op --capability code.run.egress --egress -- /bin/sh -c "echo ran" 2>&1); rc=$?
is "$rc" 3 "kz-run --egress on a pool without egress exits 3"
is "$(printf '%s\n' "$o" | wc -l)" 1 "with one line"
like "$o" '^kz-run: refused: --egress: worker [^ ]+ has no egress path' "naming the missing egress path"
unlike "$o" '^ran' "and the code did not run"
i=0; while [ $i -lt 50 ] && ! audit "$R2" isolation_denial | grep -q egress; do sleep 0.1; i=$((i + 1)); done
like "$(audit "$R2" isolation_denial | tail -1)" '"error":"unavailable","stage":"egress".*"reason":"the leased worker has no egress path"' \
	"the refusal is audited as an isolation denial"
unlike "$(audit "$R2" dispatch)" 'granted' "no dispatch record says egress granted"
W=$(ls "$R2/workers" | grep -v -e '\.' | head -1)
G=$(kz-egress grant --field-key "$R2/field.key" --run direct-$$)
o=$(kz-msg "$R2/workers/$W/sock" "{\"op\":\"run\",\"argv\":[\"/bin/sh\",\"-c\",\"echo x\"],\"grant\":\"$G\"}" 2>&1)
like "$o" '"error":"unavailable".*no egress socket' "the worker itself refuses a grant it has no egress for"
KZ_BIN=$NB kz-supervise stop --run-dir "$R2" >/dev/null 2>&1

# ---- a worker that cannot start
R3=$T/run3
on_exit "kz-supervise stop --run-dir $R3 >/dev/null 2>&1"
t0=$(date +%s)
SANDBOX_ROOT=$T/no-such-root kz-supervise start --run-dir "$R3" --timeout 4 >"$T/s3.out" 2>&1; rc=$?
el=$(($(date +%s) - t0))
is "$rc" 3 "start with workers that cannot start exits 3"
like "$(tail -1 "$T/s3.out")" '^kz-supervise: not ready after 4 s: .*last worker failure: worker [^ ]+: kz-sandbox: isolation setup failed: mount: open root' \
	"naming the isolation step the worker failed at"
like "$(cat "$T/s3.out")" 'kz-supervise: waiting: kz-lease' "it showed what it waited for"
[ "$el" -le 8 ]; ok $? "within its timeout (took $el s)"
like "$(grep '"create.fail"' "$R3/log/kz-lease.log" | tail -1)" 'isolation setup failed: mount: open root' \
	"kz-lease logs the worker's own reason"
like "$(tail -1 "$R3/workers/last-failed.log" 2>&1)" 'isolation setup failed' \
	"the failed worker's log is kept in the workers directory"
is "$(ls "$R3"/*.pid 2>/dev/null | wc -l)" 0 "a start that was not ready stopped what it started"

# ---- stop: a daemon that exited but was never reaped is stopped
R4=$T/run4
on_exit "kz-supervise stop --run-dir $R4 >/dev/null 2>&1"
# A parent that adopts the daemons (a subreaper) and never reaps them.
"$EG_PY" -c '
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
pid = os.fork()
if pid == 0:
    os.execvp("kz-supervise", ["kz-supervise", "start", "--run-dir", sys.argv[1]])
os.waitpid(pid, 0)
open(sys.argv[2], "w").write("started\n")
time.sleep(120)
' "$R4" "$T/adopted" >/dev/null 2>&1 &
ADOPTER=$!
on_exit "kill $ADOPTER 2>/dev/null"
i=0; while [ ! -s "$T/adopted" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
t0=$(date +%s%N)
out=$(kz-supervise stop --run-dir "$R4" 2>&1)
ms=$((($(date +%s%N) - t0) / 1000000))
like "$out" 'stopped kz-audit pid [0-9]+' "stop says what it stopped"
unlike "$out" 'SIGKILL' "an exited, unreaped daemon is counted stopped, not killed again"
[ "$ms" -lt 4000 ]; ok $? "without waiting out the kill timeout (${ms} ms)"
kill "$ADOPTER" 2>/dev/null; wait "$ADOPTER" 2>/dev/null

# ---- the run dir: the caller's own, and any path is safe to eval
R5="$T/run\$(touch\${IFS}$T/PWNED)"
on_exit "kz-supervise stop --run-dir '$R5' >/dev/null 2>&1"
out=$(kz-supervise start --run-dir "$R5" 2>/dev/null)
eval "$out"
is "$KZ_RUN_DIR" "$R5" "the export line gives any run dir back as it is"
tnot "and runs nothing when eval'd" test -e "$T/PWNED"
kz-supervise stop --run-dir "$R5" >/dev/null 2>&1
mkdir -m 0777 "$T/shared"
rc_is 2 "a run dir others may write is refused" kz-supervise status --run-dir "$T/shared"
like "$(cat "$T/.out")" "writable by others" "... saying so"
mkdir "$T/theirs"; chown 4343 "$T/theirs"
rc_is 2 "so is one another user owns" kz-supervise stop --run-dir "$T/theirs"

# ---- make demo
o=$(sh "$TOP/tests/demo.sh" 2>&1); rc=$?
is "$rc" 0 "the demo runs"
d=$(printf '%s\n' "$o" | sed -n 's/^== starting the stack in //p')
[ -n "$d" ] && [ ! -e "$d" ]; ok $? "and leaves no run dir behind"
o=$(SANDBOX_ROOT=$T/no-such-root KZ_SUPERVISE_TIMEOUT=2 sh "$TOP/tests/demo.sh" 2>&1); rc=$?
d=$(printf '%s\n' "$o" | sed -n 's/^== starting the stack in //p')
on_exit "rm -rf $d"
[ "$rc" != 0 ]; ok $? "a demo whose workers cannot start fails"
like "$o" "demo: failed; the logs are kept in $d/log" "and says where its logs are kept"
[ -s "$d/log/kz-lease.log" ]; ok $? "where they are"
done_testing
