#!/bin/bash
# Under gvisor, the host ids of a worker's sandbox processes: the Sentry
# (runsc's sandbox process) runs as the worker's own SANDBOX_UID, not as
# the host's nobody that every gVisor worker and every nobody process of
# the host would share; so a host process running as nobody, or as another
# worker's uid (what another tenant's Sentry is), cannot signal it, and no
# two workers share the kernel's per-uid counts.  runsc and its gofer hold
# capabilities only in runsc's user namespace, not in the host's, and the
# code's files on the host are
# still the sandbox uid's.
# e2e: alone (gVisor on the ptrace platform takes what CPU there is)
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/gvisor-lib.sh"
plan 14
UA=2100000000 UB=2100000017 UC=2100000019
HOSTNS=$(readlink /proc/self/ns/user)

# gvrun NAME UID [ARGS...]: a held run whose code writes its three places.
gvrun() {
	local n=$1 u=$2
	shift 2
	gv_hold "$n" 'echo x >/workspace/f; echo x >/tmp/f; echo x >/dev/shm/f' \
		--uid "$u" --gid "$u" "$@"
}
# proc KIND NAME: the pid of the run's runsc ("run"), gofer or Sentry
# ("sandbox"), once its code has written its files (30 s at most).
proc() {
	local p i
	for i in $(seq 300); do
		if [ "$1" = run ]; then
			p=$(pgrep -f "^$RUNSC --root=$T/$2/" | head -n1)
		else
			p=$(pgrep -f "^runsc-$1 --root=$T/$2/" | head -n1)
		fi
		[ -n "$p" ] && ls "/proc/$p/root$T/$2"/run-*/root/dev/shm/f >/dev/null 2>&1 && {
			echo "$p"
			return
		}
		[ "$1" != run ] && [ -n "$p" ] && { echo "$p"; return; }
		sleep 0.1
	done
}
gv_egress
gvrun a "$UA"
gvrun b "$UB"
gvrun c "$UC" --egress-socket "$T/egress.sock" --grant-file "$T/grant"
ra=$(proc run a)
sa=$(proc sandbox a) sb=$(proc sandbox b) sc=$(proc sandbox c)
ga=$(proc gofer a)
t "the three sandboxes are up (Sentries ${sa:-none} ${sb:-none} ${sc:-none})" \
	test -n "$ra" -a -n "$sa" -a -n "$sb" -a -n "$sc" -a -n "$ga"
is "$(uids "$sa")" "$UA $UA $UA $UA" "worker a's Sentry runs as a's own uid, not nobody or root"
is "$(uids "$sb")" "$UB $UB $UB $UB" "worker b's Sentry runs as b's own uid: no two workers share one"
# The ptrace platform's stubs (the code's address spaces) are the
# Sentry's children, and its uid's.
stubs=$(ps -o uid= --ppid "$sa" | sort -u | tr -d ' \n')
is "${stubs:-none}" "$UA" "a's Sentry's stub processes run as a's uid too"
is "$(awk '/^Gid:/ {print $2}' "/proc/$sa/status")" "$UA" "and with a's gid"
# runsc and the gofer are root in runsc's user namespace only: no
# capability of theirs holds on the host (nor nobody's uid).
isnt_host() {
	local ns
	ns=$(readlink "/proc/$1/ns/user") && [ -n "$ns" ] && [ "$ns" != "$HOSTNS" ]
}
t "runsc runs in a user namespace of its own, not the host's" isnt_host "$ra"
t "so does the gofer (uid $(uids "$ga" | cut -d' ' -f1), not nobody)" \
	eval 'isnt_host "$ga" && [ "$(uids "$ga" | cut -d" " -f1)" != 65534 ]'
# With an egress socket, too, the Sentry is in runsc's user namespace
# (gVisor's own network stack: runsc has --network=none either way).
t "with an egress socket, the Sentry is not in the host's user namespace either" \
	isnt_host "$sc"
# The code's files on the host are still the sandbox uid's.
own=$(stat -c '%u:%g' "/proc/$ra/root$T/a"/run-*/root/workspace/f \
	"/proc/$ra/root$T/a"/run-*/root/tmp/f "/proc/$ra/root$T/a"/run-*/root/dev/shm/f \
	2>&1 | sort -u | tr '\n' ' ')
is "$own" "$UA:$UA " "the files a's code wrote (workspace, /tmp, /dev/shm) are a's uid and gid on the host"
# The boundary itself: a host process running as nobody, or as b's uid
# (which is what b's Sentry is), cannot signal a's Sentry.
tnot "a host process running as nobody cannot kill a's Sentry" \
	setpriv --reuid 65534 --regid 65534 --clear-groups kill -KILL "$sa"
tnot "a process running as another worker's uid cannot kill it either" \
	setpriv --reuid "$UB" --regid "$UB" --clear-groups kill -KILL "$sa"
t "a's Sentry is still there" kill -0 "$sa"
for n in a b c; do gv_release $n; done
t "a's run ends normally" grep -q '^alive' "$T/a.out"
t "and so do b's and c's" eval 'grep -q "^alive" "$T/b.out" && grep -q "^alive" "$T/c.out"'
done_testing
