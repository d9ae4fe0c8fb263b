#!/bin/bash
# Under gvisor with SANDBOX_GVISOR_UID (the worker's second host uid), no
# process of a sandbox is the host's root: runsc and its gofer run as the
# second uid, the Sentry and its stubs as SANDBOX_UID, with an egress
# socket too (runsc always has --network=none).  A host
# root process cannot be signalled by any of them (the kernel compares
# uids: none is 0), root's files give them no owner's rights, and the
# code's files on the host are still SANDBOX_UID's.  Files of the host's
# root are nobody's inside.  The configuration refuses a second uid that
# is the sandbox's own or nobody's.
# e2e: alone (gVisor on the ptrace platform takes what CPU there is)
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/gvisor-lib.sh"
plan 16
UA=2100000020 GA=2100000021 UC=2100000022 GC=2100000023

# gvrun NAME UID UID2 [ARGS...]: a held run whose code writes its three
# places and reports the owners it sees.
gvrun() {
	local n=$1 u=$2 g=$3
	shift 3
	gv_hold "$n" 'echo x >/workspace/f; echo x >/tmp/f; echo x >/dev/shm/f
		python3 -c "import os; print(\"own\", *[os.stat(p).st_uid for p in (\"/workspace/f\", \"/etc/passwd\", \"/usr/bin\")])"' \
		--uid "$u" --gid "$u" --gvisor-uid "$g" --gvisor-gid "$g" "$@"
}
# pids NAME: every process of the run: runsc, the gofer and the Sentry
# (named by their --root state path), and the Sentry's children, the
# ptrace stubs; once the code has written its files (30 s at most).
sentry() { pgrep -f "^runsc-sandbox --root=$T/$1/" | head -n1; }
pids() {
	local s i
	for i in $(seq 300); do
		s=$(sentry "$1")
		[ -n "$s" ] && grep -q '^own' "$T/$1.out" && break
		sleep 0.1
	done
	{ pgrep -f -- "--root=$T/$1/"; [ -n "$s" ] && pgrep -P "$s"; } | sort -un
}
# rootless LIST: the list holds runsc, the gofer and the Sentry at least,
# and none of its processes has uid or gid 0 in any field.
rootless() {
	local p
	[ $# -ge 3 ] || { echo "only $# processes"; return 1; }
	for p in "$@"; do
		[ -r "/proc/$p/status" ] || continue
		case " $(uids "$p") $(gids "$p") " in
		*" 0 "*) echo "pid $p: $(uids "$p") / $(gids "$p"): $(tr '\0' ' ' <"/proc/$p/cmdline" | head -c 80)"; return 1 ;;
		esac
	done
}
# the uids of the list's processes, one line each, sorted and unique
uidset() { for p in "$@"; do uids "$p"; done | sort -u | tr '\n' ';'; }

gv_egress
gvrun a "$UA" "$GA"
gvrun c "$UC" "$GC" --egress-socket "$T/egress.sock" --grant-file "$T/grant"
pa=$(pids a) pc=$(pids c)
sa=$(sentry a) sc=$(sentry c)
ra=$(pgrep -f "^$RUNSC --root=$T/a/" | head -n1)
ga=$(pgrep -f "^runsc-gofer --root=$T/a/" | head -n1)
rc=$(pgrep -f "^$RUNSC --root=$T/c/" | head -n1)
gc=$(pgrep -f "^runsc-gofer --root=$T/c/" | head -n1)
t "both sandboxes are up (Sentries ${sa:-none} ${sc:-none})" \
	test -n "$sa" -a -n "$sc" -a -n "$ra" -a -n "$ga" -a -n "$rc" -a -n "$gc"
diag "a: $(echo $pa) c: $(echo $pc)"
t "with --network=none, no process of the sandbox is host uid or gid 0" rootless $pa
t "with an egress socket, none is either" rootless $pc
is "$(uids "$ra");$(uids "$ga")" "$GA $GA $GA $GA;$GA $GA $GA $GA" \
	"runsc and the gofer run as the worker's second uid"
is "$(gids "$ga" | cut -d' ' -f1)" "$GA" "the gofer with its second gid"
is "$(uids "$sa")" "$UA $UA $UA $UA" "with --network=none the Sentry runs as SANDBOX_UID"
stubs=$(ps -o uid= --ppid "$sa" | sort -u | tr -d ' \n')
is "${stubs:-none}" "$UA" "and so do its stub processes"
is "$(uids "$sc")" "$UC $UC $UC $UC" "with an egress socket, too, the Sentry runs as SANDBOX_UID"
is "$(uidset $pc)" "$(printf '%s\n' "$GC $GC $GC $GC" "$UC $UC $UC $UC" | sort -u | tr '\n' ';')" \
	"every process of that sandbox is the second uid or SANDBOX_UID"
own=$(stat -c '%u:%g' "/proc/$ra/root$T/a"/run-*/root/workspace/f \
	"/proc/$ra/root$T/a"/run-*/root/tmp/f "/proc/$ra/root$T/a"/run-*/root/dev/shm/f \
	2>&1 | sort -u | tr '\n' ' ')
is "$own" "$UA:$UA " "the files a's code wrote (workspace, /tmp, /dev/shm) are SANDBOX_UID's on the host"
like "$(grep '^own' "$T/a.out")" "^own $UA 65534 65534\$" \
	"inside, the code owns its files; the host root's are nobody's"
for n in a c; do gv_release $n; done
t "a's run ends normally" grep -q '^alive' "$T/a.out"
t "and so does c's" grep -q '^alive' "$T/c.out"
# The configuration: a second uid that is the sandbox's own, or nobody's,
# or one without the other, is refused before anything starts.
cfg() { "$SB" run --state-dir "$T/x" --uid "$UA" --gid "$UA" "$@" -- /bin/true 2>&1; }
like "$(cfg --gvisor-uid "$UA" --gvisor-gid "$GA")" 'SANDBOX_GVISOR_UID.*neither' \
	"SANDBOX_GVISOR_UID equal to SANDBOX_UID is refused"
like "$(cfg --gvisor-uid 65534 --gvisor-gid 65534)" 'SANDBOX_GVISOR_UID.*neither' \
	"nobody as the second uid is refused"
like "$(cfg --gvisor-uid "$GA")" 'SANDBOX_GVISOR_UID and SANDBOX_GVISOR_GID are set together' \
	"a second uid without a second gid is refused"
done_testing
