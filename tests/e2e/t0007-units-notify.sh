#!/bin/bash
# Readiness as systemd's Type=notify sees it: each daemon, given
# NOTIFY_SOCKET, sends READY=1 from its own pid (NotifyAccess=main) once it
# serves, and STOPPING=1 when it stops; kz-lease only once a worker is warm,
# with its progress in STATUS= first, and its workers never speak for it.
# The service manager is a datagram socket this test binds.
. "$(dirname "$0")/lib.sh"
plan 24
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
export KZ_RUN_DIR=$T KZ_FIELD_KEY_FILE=$T/field.key
unset KZ_CONFIG NOTIFY_SOCKET

# The manager: one line per datagram, "PID<TAB>payload" (newlines as |),
# the sender's pid from its kernel-checked credentials.
cat >"$T/manager.py" <<'PY'
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = 0
        for lvl, typ, data in anc:
            if lvl == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                pid = struct.unpack("3i", data[:12])[0]
        out.write("%d\t%s\n" % (pid, msg.decode().replace("\n", "|")))
PY
# manager NAME: a manager on $T/NAME.notify, its lines in $T/NAME.got.
manager() {
	: >"$T/$1.got"
	bg "$PY" "$T/manager.py" "$T/$1.notify" "$T/$1.got"
	wait_sock "$T/$1.notify"
}
# got NAME PATTERN [SECONDS]: waits for a line matching PATTERN.
got() {
	local i
	for i in $(seq 1 $((${3:-15} * 20))); do
		grep -Eq -- "$2" "$T/$1.got" && return 0
		sleep 0.05
	done
	return 1
}
# from NAME PATTERN: the pids of the lines matching PATTERN.
from() { grep -E -- "$2" "$T/$1.got" | cut -f1 | sort -u | tr '\n' ' ' | sed 's/ $//'; }
status_ok() { kz-msg -t 5 "$1" '{"op":"status"}' >/dev/null 2>&1; }

# kz-audit: ready once its log is open and its socket answers.
manager audit
export KZ_AUDIT_SOCKET=$T/kz-audit.sock KZ_AUDIT_DIR=$T/audit
NOTIFY_SOCKET=$T/audit.notify bg kz-audit serve --socket "$KZ_AUDIT_SOCKET" 2>"$T/audit.log"
APID=$LASTPID
t "kz-audit sends READY=1" got audit 'READY=1'
is "$(from audit 'READY=1')" "$APID" "... from its own pid"
t "... and then answers on its socket" status_ok "$KZ_AUDIT_SOCKET"

# kz-project
manager project
PS=$T/kz-project.sock
NOTIFY_SOCKET=$T/project.notify KZ_PROJECT_BLOB_DIR=$T/blobs KZ_STORE_SOCKET=$T/none.sock \
	bg kz-project serve --socket "$PS" 2>"$T/project.log"
PPID_=$LASTPID
t "kz-project sends READY=1" got project 'READY=1'
is "$(from project 'READY=1')" "$PPID_" "... from its own pid"
t "... with its socket listening" test -S "$PS"
kill -TERM "$PPID_"
t "kz-project sends STOPPING=1 when it stops" got project 'STOPPING=1' 10

# kz-egress, on a Unix socket, its audit sink the real kz-audit.
manager egress
kz-egress pubkey --field-key "$T/field.key" >"$T/grant.pub"
cat >"$T/eg.conf" <<EOF2
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $T/grant.pub
SANDBOX_EGRESS_LISTEN = unix:$T/eg.sock
SANDBOX_EGRESS_AUDIT_SOCKET = $KZ_AUDIT_SOCKET
SANDBOX_EGRESS_RESOLVER = 127.0.0.1:53
EOF2
NOTIFY_SOCKET=$T/egress.notify bg kz-egress serve --config "$T/eg.conf" 2>"$T/egress.log"
EPID=$LASTPID
t "kz-egress sends READY=1" got egress 'READY=1'
is "$(from egress 'READY=1')" "$EPID" "... from its own pid"
t "... with its socket listening" test -S "$T/eg.sock"
kill -TERM "$EPID"
t "kz-egress sends STOPPING=1 when it stops" got egress 'STOPPING=1' 10

# kz-sandbox serve: a worker agent started by a unit of its own.
manager sandbox
SID=e2e-notify-$$
NOTIFY_SOCKET=$T/sandbox.notify bg kz-sandbox serve --id "$SID" --socket "$T/w.sock" \
	--pid-file "$T/w.pid" 2>"$T/sandbox.log"
SPID=$LASTPID
# Stopped, not killed: it removes its cgroups as it stops, which a SIGKILL
# at cleanup (busy machine) would leave behind.
on_exit "kill $SPID 2>/dev/null; stopped $SPID; rmdir /sys/fs/cgroup/*/kz-sandbox/$SID/*/ /sys/fs/cgroup/*/kz-sandbox/$SID 2>/dev/null"
t "kz-sandbox serve sends READY=1" got sandbox 'READY=1'
is "$(from sandbox 'READY=1')" "$SPID" "... from its own pid"
t "... with its socket listening" test -S "$T/w.sock"

# kz-lease: ready only once admission is open and a worker is warm.
. "$TOP/tests/unit/kz-lease/stack.sh"
start_store
manager lease
export KZ_STORE_SOCKET=$STORE_SOCK LEASE_CAPACITY=2 LEASE_RECONCILE_MS=500
NOTIFY_SOCKET=$T/lease.notify bg kz-lease serve --socket "$S" 2>"$T/lease.log"
LEASE_PID=$LASTPID
on_exit "kill $LEASE_PID 2>/dev/null; sleep 0.2; stop_workers"
t "kz-lease says it is starting" got lease 'STATUS=starting' 10
t "kz-lease sends READY=1" got lease 'READY=1' 60
W=$(st warm)
ok "$([ "${W:-0}" -ge 1 ]; echo $?)" "... and a status right after shows a warm worker (warm $W)"
is "$(from lease 'READY=1')" "$LEASE_PID" "... from its own pid"
like "$(grep 'READY=1' "$T/lease.got")" 'STATUS=[12]/2 workers warm' "READY=1 says how warm the pool is"
unlike "$(head -1 "$T/lease.got")" 'READY=1' "READY=1 is not the first thing it says"
t "the pool fills: STATUS says serving 2/2" got lease 'STATUS=serving: 2/2 workers warm' 60
is "$(cut -f1 "$T/lease.got" | sort -u | tr '\n' ' ' | sed 's/ $//')" "$LEASE_PID" \
	"its workers never notify (NOTIFY_SOCKET is not passed on)"
is "$(grep -c 'READY=1' "$T/lease.got")" 1 "READY=1 is sent once"
kill -TERM "$LEASE_PID"
t "kz-lease sends STOPPING=1 when it stops" got lease 'STOPPING=1' 10
done_testing
