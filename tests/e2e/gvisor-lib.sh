# Sourced after lib.sh by the tests of gVisor's host ids (t1122, t1123):
# one-shot gvisor runs that stay up while the test looks at their
# processes, and the ids of a host process.
SB=$BIN/kz-sandbox
RUNSC=${RUNSC:-/usr/bin/runsc}
[ -x "$RUNSC" ] || { echo "1..0 # SKIP runsc is not installed (make deps)"; exit 0; }
export SANDBOX_RUNTIME=gvisor

# gv_hold NAME SCRIPT [ARGS...]: a one-shot run of its own state directory
# $T/NAME (ARGS are kz-sandbox run's), whose code runs SCRIPT and then
# reads a line of its standard input, a fifo the test holds, which
# gv_release NAME writes; then it prints "alive" and ends.  Its output is
# in $T/NAME.out.
gv_hold() {
	local n=$1 s=$2 fd
	shift 2
	mkfifo "$T/$n.fifo"
	(
		exec <"$T/$n.fifo" >"$T/$n.out" 2>&1
		exec "$SB" run --state-dir "$T/$n" --timeout 60 \
			--workspace-size 4M "$@" -- /bin/sh -c "$s
			read -r _; echo alive"
	) &
	_pids="$_pids $!"
	exec {fd}>"$T/$n.fifo"
	eval "_gv_$n=$fd"
}
# gv_release NAME: the held run goes on to its end (10 s at most).
gv_release() {
	local fd i
	eval "fd=\$_gv_$1"
	echo go >&"$fd"
	exec {fd}>&-
	for i in $(seq 100); do grep -q '^alive' "$T/$1.out" && return; sleep 0.1; done
}
# gv_egress: a stand-in for kz-egress's socket, $T/egress.sock (the
# loader then forwards the relay's port), and the grant file $T/grant.
gv_egress() {
	python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); time.sleep(120)' \
		"$T/egress.sock" &
	_pids="$_pids $!"
	wait_sock "$T/egress.sock" 10
	echo grant >"$T/grant"
}
uids() { awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$1/status" 2>/dev/null; }
gids() { awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$1/status" 2>/dev/null; }
