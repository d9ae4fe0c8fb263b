# Shared helpers for the end-to-end tests: TAP output, a temp dir per test,
# and a cleanup trap that stops what the test started.  Source it first:
#   . "$(dirname "$0")/lib.sh"; plan 3; ...; done_testing
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$TOP/bin
export PATH=$BIN:$PATH
# A host whose fs.file-max is the kernel's default (this one, unless
# systemd booted it) cannot hold the open files of a pool of default-size
# workers within half of it, and kz-ctl-local would refuse them: the tests
# turn that guard off, and t4112 turns it on to test it.
export LEASE_FILES_SHARE=0
T=$(mktemp -d /tmp/kz-e2e.XXXXXX)
chmod 0755 "$T"
# Each test its own host record of worker uids (kz-ctl-local(8)), not the
# host's /run/kz-host: what one test leaves there is no other test's.
export LEASE_HOST_DIR=$T/host
# And its own range of worker uids: two files running at once (make e2e
# runs E2E_JOBS of them) with one range and two host records would give
# one uid to two workers, and the delete of one would kill the other's
# processes.  128 ids per pid of this shell, above the default range.
_ids=$((2101000001 + ($$ % 32768) * 128))
export LEASE_WORKER_IDS=$_ids-$((_ids + 127))
# kz-pkgrun's tool uids likewise: 32 per pid, above those.
export PKGRUN_UID=$((2106000000 + ($$ % 32768) * 32))
export PKGRUN_GID=$PKGRUN_UID
_n=0 _fail=0 _pids="" _cleanups=""

plan() { echo "1..$1"; }
diag() { echo "# $*"; }
ok() { # ok COND-EXIT-CODE DESCRIPTION
	_n=$((_n + 1))
	if [ "$1" = 0 ]; then echo "ok $_n - $2"; else echo "not ok $_n - $2"; _fail=$((_fail + 1)); fi
}
# t DESCRIPTION CMD...: passes when CMD exits 0.
t() { local d=$1; shift; if "$@" >"$T/.out" 2>&1; then ok 0 "$d"; else ok 1 "$d"; sed 's/^/#   /' "$T/.out" | head -20; fi; }
# tnot DESCRIPTION CMD...: passes when CMD exits non-zero.
tnot() { local d=$1; shift; if "$@" >"$T/.out" 2>&1; then ok 1 "$d"; sed 's/^/#   /' "$T/.out" | head -20; else ok 0 "$d"; fi; }
# is GOT WANT DESCRIPTION
is() { if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"; diag "got '$1', want '$2'"; fi; }
# rc_is WANT DESCRIPTION CMD...: passes when CMD exits with WANT.
rc_is() { local w=$1 d=$2 rc=0; shift 2; "$@" >"$T/.out" 2>&1 || rc=$?; is "$rc" "$w" "$d"; }
# like STRING REGEX DESCRIPTION
like() { if printf '%s' "$1" | grep -Eq -- "$2"; then ok 0 "$3"; else ok 1 "$3"; diag "'$(printf '%s' "$1" | head -c 300)' does not match /$2/"; fi; }
unlike() { if printf '%s' "$1" | grep -Eq -- "$2"; then ok 1 "$3"; diag "matched /$2/"; else ok 0 "$3"; fi; }

# bg CMD...: runs CMD in the background; its pid is killed at cleanup.
bg() { "$@" & _pids="$_pids $!"; LASTPID=$!; }
# on_exit CMD: runs CMD (a string) at cleanup, last registered first.
on_exit() { _cleanups="$1;$_cleanups"; }
# stopped PID [SECONDS]: until PID has exited (a zombie counts as exited),
# 5 s at most; false if it still runs.
stopped() {
	local s i=0 max=$(( ${2:-5} * 20 ))
	while read -r s 2>/dev/null <"/proc/$1/stat"; do
		s=${s##*) }; [ "${s%% *}" = Z ] && return 0
		[ $i -ge $max ] && return 1
		sleep 0.05; i=$((i + 1))
	done
	return 0
}
wait_sock() { # wait_sock PATH [SECONDS]
	local i=0 max=$(( ${2:-10} * 20 ))
	while [ ! -S "$1" ] && [ $i -lt $max ]; do sleep 0.05; i=$((i + 1)); done
	[ -S "$1" ]
}

# start_store: a real redis-server/valkey-server on a Unix socket in $T.
start_store() {
	local srv; srv=$(command -v valkey-server || command -v redis-server)
	STORE_SOCK=$T/store.sock
	bg "$srv" --port 0 --unixsocket "$STORE_SOCK" --unixsocketperm 600 \
		--dir "$T" --appendonly yes --save '' --daemonize no --loglevel warning \
		--logfile "$T/store.log"
	STORE_PID=$LASTPID
	wait_sock "$STORE_SOCK" 10
}

_cleanup() {
	eval "$_cleanups" 2>/dev/null
	for p in $_pids; do kill "$p" 2>/dev/null; done
	for p in $_pids; do kill -0 "$p" 2>/dev/null && sleep 0.2 && kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	# Once more now that the processes are gone: what they held (a cgroup
	# with a daemon's workers in it, say) can only be removed after them.
	sleep 0.3
	eval "$_cleanups" 2>/dev/null
	rm -rf "$T"
}
trap _cleanup EXIT
trap 'exit 130' INT TERM

done_testing() { echo "# $_n tests, $_fail failed"; [ "$_fail" = 0 ]; }
