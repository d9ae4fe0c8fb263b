#!/bin/bash
# kz-sandbox run: exit status, streams, env scrubbing, limits reported as
# limits (timeout, output, fork bomb, memory bomb), leftovers gone after a
# one-shot run, fail-closed setup naming the failed step, and classify.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
plan 47

t "--version" sh -c "$SB --version | grep -qx 'kz-sandbox 0.1.0'"
t "--help lists the options" sh -c "$SB --help | grep -q -- '--workspace-size'"
rc_is 2 "usage error exits 2" "$SB" run
rc_is 2 "uid 0 is refused by config" "$SB" run --uid 0 -- /bin/true
rc_is 2 "unknown option exits 2" "$SB" run --bogus 1 -- /bin/true

out=$("$SB" run -- /bin/sh -c 'echo out; echo err >&2; exit 7' 2>"$T/err"); rc=$?
is "$rc" 7 "exit status of the command is the exit status"
is "$out" out "stdout is streamed"
t "stderr is streamed" grep -qx err "$T/err"
out=$(echo piped | "$SB" run -- /bin/cat)
is "$out" piped "stdin is streamed"
rc_is 137 "death by signal is 128+signal" "$SB" run -- /bin/sh -c 'kill -9 $$'
rc_is 127 "a missing command exits 127" "$SB" run -- /nonexistent
# An empty argument used to end the job's argument vector early and hang
# the agent; it is refused as serve refuses it.
on_exit "rmdir /sys/fs/cgroup/*/kz-sandbox/e2e-empty-$$ 2>/dev/null"
rc_is 2 "an empty argument is refused" timeout -s KILL 20 "$SB" run \
	--id e2e-empty-$$ -- /bin/echo a "" b

out=$(KZ_SECRET_TEST=s3cret "$SB" run --env FOO=bar -- /usr/bin/env)
like "$out" "^FOO=bar" "requested env is passed"
unlike "$out" "s3cret|KZ_SECRET_TEST" "worker env is not passed"
like "$out" "PATH=/usr/local/bin:/usr/bin:/bin" "the safe PATH is set"
rc_is 2 "a bad env name is refused" "$SB" run --env 'A-B=1' -- /bin/true
out=$("$SB" run --cwd sub -- /bin/pwd 2>&1); rc=$?
is "$rc" 3 "a cwd missing from the workspace fails before exec"

out=$("$SB" run --pass-fd 3 --pass-fd 4 -- /bin/sh -c 'echo to3 >&3; read x <&4; echo "got $x"; ls /proc/self/fd | tr "\n" " "' 3>"$T/p3" 4< <(echo four))
like "$out" "got four" "--pass-fd hands a descriptor to the code at its number"
is "$(cat "$T/p3")" to3 "the code writes through a passed descriptor"
rc_is 2 "--pass-fd of a closed descriptor is refused" "$SB" run --pass-fd 9 -- /bin/true
# systemd's default soft limit on open files is 1024: the run must fit.
rc_is 0 "a run works under a 1024 open-files limit" bash -c "ulimit -n 1024; exec \"$SB\" run -- /bin/true"
out=$(bash -c "ulimit -n 1024; exec \"$SB\" run --pass-fd 7 -- /bin/sh -c 'echo seven >&7'" 7>&1)
is "$out" "seven" "--pass-fd works under a 1024 open-files limit"

# --start-fd: the sandbox is made, and the code runs only on the caller's
# byte; a close, or the run's timeout, runs nothing; the code never holds
# the descriptor.
out=$("$SB" run --start-fd 5 -- /bin/sh -c 'echo RAN; ls /proc/self/fd | tr "\n" " "' 5< <(sleep 0.3; echo g))
like "$out" "^RAN" "--start-fd: the code runs once the caller writes a byte"
unlike "$out" " 5 " "... and the start descriptor is not the code's"
rc_is 3 "--start-fd closed without a byte: exit 3" \
	"$SB" run --start-fd 5 -- /bin/sh -c 'echo RAN' 5</dev/null
unlike "$(cat "$T/.out")" "RAN" "... and nothing ran"
like "$(cat "$T/.out")" "withheld the start: nothing ran" "... said in one line"
t0=$(date +%s%N)
rc_is 3 "--start-fd never written: nothing runs past the run's timeout" \
	"$SB" run --timeout 1 --start-fd 5 -- /bin/sh -c 'echo RAN' 5< <(sleep 4)
is "$(( ($(date +%s%N) - t0) / 1000000000 < 3 ))" 1 "... and the wait is the timeout's, not the caller's"
rc_is 2 "--start-fd that is also --pass-fd is refused" \
	"$SB" run --start-fd 5 --pass-fd 5 -- /bin/true 5</dev/null

# Limits.
s=$(date +%s%N)
out=$("$SB" run --timeout 1 -- /bin/sh -c 'sleep 30; sleep 30 & wait' 2>&1); rc=$?
e=$(( ($(date +%s%N) - s) / 1000000 ))
is "$rc" 1 "timeout exits 1"
like "$out" "timeout limit reached" "timeout is reported as a limit"
t "the timeout ends the run promptly" test "$e" -lt 5000
out=$("$SB" run --stdout-max 1K -- /bin/sh -c 'head -c 5000 /dev/zero | tr "\0" a' 2>/dev/null)
is "${#out}" 1024 "stdout is capped at --stdout-max"
out=$("$SB" run --stdout-max 1K -- /bin/sh -c 'yes flood' 2>&1 >/dev/null); rc=$?
is "$rc" 1 "an output flood exits 1"
like "$out" "output limit reached" "an output flood is reported as a limit"
out=$("$SB" run --pids 32 --timeout 20 -- /bin/sh -c 'b() { b | b & }; b; sleep 10' 2>&1); rc=$?
is "$rc" 1 "a fork bomb exits 1"
like "$out" "pids limit reached" "a fork bomb is reported as the pids limit"
out=$("$SB" run --memory 32M --timeout 20 -- /usr/bin/python3 -c 'a=[]
while True: a.append(bytearray(1<<20))' 2>&1); rc=$?
is "$rc" 1 "a memory bomb exits 1"
like "$out" "memory limit reached" "a memory bomb is reported as the memory limit"

# A leftover background process must not survive a one-shot run.
"$SB" run -- /bin/sh -c 'setsid sleep 77 </dev/null >/dev/null 2>&1 &' 2>/dev/null
sleep 0.2
tnot "no leftover process after a one-shot run" pgrep -f 'sleep 77'

# Fail closed, naming the step.
out=$("$SB" run --projection /nonexistent-kz -- /bin/true 2>&1); rc=$?
is "$rc" 3 "a failed mount step exits 3 and runs nothing"
like "$out" "isolation setup failed: mount: bind projection" "the refusal names the failed step"
out=$("$SB" run --root /nonexistent-kz -- /bin/true 2>&1); rc=$?
like "$rc:$out" "^3:.*isolation setup failed: mount" "a missing root view fails closed"
out=$("$SB" run --cgroup-parent cgroup.procs -- /bin/sh -c 'echo RAN' 2>&1); rc=$?
like "$rc:$out" "^3:.*isolation setup failed: cgroup" "a cgroup that cannot be made fails closed, naming the step"
unlike "$out" "RAN" "nothing runs when a step fails"
out=$("$SB" run --state-dir /proc/kz-nope -- /bin/true 2>&1); rc=$?
like "$rc:$out" "^3:.*isolation setup failed: state" "an unusable state directory fails closed"
done_testing
