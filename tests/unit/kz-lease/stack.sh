# Sourced by the kz-lease/kz-run e2e tests after tests/e2e/lib.sh: a real
# store, kz-audit and kz-lease with real kz-sandbox workers, all in $T.
# start_stack [CAPACITY]; st FIELD; wait_for FIELD VALUE; field FILE KEY.
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
export KZ_RUN_DIR=$T KZ_FIELD_KEY_FILE=$T/field.key
export KZ_AUDIT_SOCKET=$T/kz-audit.sock KZ_LEASE_SOCKET=$T/kz-lease.sock
S=$T/kz-lease.sock

# Workers are detached from kz-lease (their own session): stop each by
# the pid in its worker directory, then wait for its cgroups to go.
stop_workers() {
	local f p
	for f in "$T"/workers/*/pid; do
		[ -f "$f" ] && p=$(cat "$f") && kill "$p" 2>/dev/null
	done
	for f in "$T"/workers/*/pid; do
		[ -f "$f" ] || continue
		p=$(cat "$f")
		for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
		kill -9 "$p" 2>/dev/null
	done
}

start_stack() {
	start_store
	export KZ_STORE_SOCKET=$STORE_SOCK LEASE_CAPACITY=${1:-1}
	export LEASE_RECONCILE_MS=${LEASE_RECONCILE_MS:-500}
	bg kz-audit serve --socket "$KZ_AUDIT_SOCKET" 2>"$T/audit.log"
	AUDIT_PID=$LASTPID
	wait_sock "$KZ_AUDIT_SOCKET"
	bg kz-lease serve --socket "$S" 2>"$T/lease.log"
	LEASE_PID=$LASTPID
	on_exit "kill $LEASE_PID 2>/dev/null; sleep 0.2; stop_workers"
	wait_sock "$S"
}

# The system interpreter: a version manager's shim costs most of a second
# on a loaded host, longer than the short leases some tests take.
if [ -x /usr/bin/python3 ]; then ST_PY=/usr/bin/python3; else ST_PY=python3; fi
st() { kz-lease status --socket "$S" | $ST_PY -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
wait_for() { local i; for i in $(seq 1 ${3:-200}); do [ "$(st "$1")" = "$2" ] && return 0; sleep 0.1; done; return 1; }
field() { $ST_PY -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
audit_q() { kz-audit query --dir "$T/audit" "$@"; }
