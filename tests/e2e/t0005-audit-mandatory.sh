#!/bin/bash
# Audit is part of the boundary, and every client finds the deployment
# from KZ_RUN_DIR alone (kaizen.conf(5), DEFAULTS): kz-run, kz-lease,
# kz-audit query/verify, kz-egress status and kz-project with only
# KZ_RUN_DIR exported; kz-run with no reachable audit sink, one that
# does not acknowledge, or one that can no longer write (it answers no
# ping) runs nothing and exits 3 with one line naming the sink; a run
# whose closing records are not acknowledged keeps the code's exit status
# and --json says audit incomplete;
# KZ_AUDIT = off is said on every run and records nothing; a client
# that cannot reach something names the path it tried; the systemd layout
# (RUN/NAME/NAME.sock) is found by the same rule; kz-audit query --kind
# with an unknown kind is a usage error.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 62
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
start_stack 1
t "a real worker becomes warm" wait_for warm 1

# Only KZ_RUN_DIR (and PATH): every default comes from the one rule.
only() { env -i PATH="$PATH" KZ_RUN_DIR="$T" "$@"; }
n_disp() { only kz-audit query --kind dispatch | wc -l; }

only kz-run --actor alice --conversation c1 -- sh -c 'echo hello' >"$T/o1" 2>"$T/e1"
is "$?" 0 "kz-run works with only KZ_RUN_DIR"
is "$(cat "$T/o1")" hello "and prints the code's output"
unlike "$(cat "$T/e1")" "audit off" "its status line does not say audit is off"
is "$(n_disp)" 2 "kz-audit query finds RUN/audit: the run's two dispatch records"
only kz-run --json --actor alice --conversation c1 -- true >"$T/o1j" 2>/dev/null
like "$(cat "$T/o1j")" '"exit":0,"audit":"complete"' "--json says every record was acknowledged"
t "kz-audit verify finds RUN/audit and RUN/field.key" only kz-audit verify
t "kz-lease status finds RUN/kz-lease.sock" only kz-lease status
like "$(only kz-egress status)" "audit: $T/kz-audit.sock" "kz-egress status names the audit sink it would use"
t "kz-project finds RUN/store.sock" only KZ_AUDIT=off kz-project member-create --member m1

rc_is 2 "kz-audit query --kind bogus is a usage error" only kz-audit query --kind bogus
like "$(cat "$T/.out")" "unknown kind 'bogus'" "and names the kind"
rc_is 2 "kz-audit query --dir and files together is a usage error" only kz-audit query --dir "$T/audit" "$T/o1"
rc_is 2 "kz-audit query on a missing directory is a usage error" env -i PATH="$PATH" KZ_RUN_DIR="$T/none" kz-audit query
like "$(cat "$T/.out")" "$T/none/audit" "and names the directory it tried"

# The sink does not answer: nothing is dispatched.
kill "$AUDIT_PID"; wait "$AUDIT_PID" 2>/dev/null
for _ in $(seq 1 40); do [ -S "$T/kz-audit.sock" ] || break; sleep 0.05; done
only kz-run --actor alice --conversation c1 -- sh -c 'echo ran >>notes.txt' >"$T/o2" 2>"$T/e2"
is "$?" 3 "kz-run with no reachable audit sink exits 3"
is "$(wc -l <"$T/e2")" 1 "with one line"
like "$(cat "$T/e2")" "^kz-run: audit sink $T/kz-audit.sock unreachable .*nothing was dispatched" "naming the sink it tried"
is "$(cat "$T/o2")" "" "and no output: the code did not start"
rc_is 3 "kz-reset with no reachable audit sink exits 3" only kz-reset --worker w1 --token 1
like "$(cat "$T/.out")" "audit sink $T/kz-audit.sock unreachable.*nothing was reset" "naming the sink; nothing was reset"

# A stand-in sink on SOCK that answers pings (refuses them with "ping")
# and refuses every record.
stand_in() { # stand_in SOCK [ping]
	"$PY" - "$@" <<'PYEOF' &
import json, socket, struct, sys
refuse_ping = sys.argv[2:] == ["ping"]
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
while True:
    c, _ = s.accept()
    n = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
    req = json.loads(c.recv(n, socket.MSG_WAITALL))
    if req.get("op") == "ping" and not refuse_ping:
        rep = {"v": 1, "id": req.get("id"), "ok": True}
    else:
        rep = {"v": 1, "id": req.get("id"), "ok": False, "error": "unavailable",
               "reason": "read-only" if refuse_ping else "disk full"}
    rep = json.dumps(rep).encode()
    c.sendall(struct.pack(">I", len(rep)) + rep); c.close()
PYEOF
	_pids="$_pids $!"
}

# A sink that answers but does not acknowledge the records.
stand_in "$T/deaf.sock"
t "a stand-in sink that answers pings and refuses records" wait_sock "$T/deaf.sock" 5
t "the worker is warm again" wait_for warm 1
only KZ_AUDIT_SOCKET="$T/deaf.sock" kz-run --actor alice --conversation c1 -- sh -c 'echo ran >>notes.txt' >"$T/o3" 2>"$T/e3"
is "$?" 3 "kz-run with a sink that does not acknowledge exits 3"
like "$(cat "$T/e3")" "audit sink $T/deaf.sock did not record the dispatch; nothing ran" "naming the sink; nothing ran"

# A sink that takes the connection but refuses the ping: its answer is
# read once the lease is granted (the two overlap), and the lease goes
# back unused: nothing reaches the worker, and it is warm again.
stand_in "$T/mute.sock" ping
t "a stand-in sink that refuses pings" wait_sock "$T/mute.sock" 5
t "the worker is warm" wait_for warm 1
r0=$(only kz-lease status | sed -n 's/.*"releases":\([0-9]*\).*/\1/p')
only KZ_AUDIT_SOCKET="$T/mute.sock" kz-run --actor alice --conversation c1 -- sh -c 'echo ran >>notes.txt; echo ran' >"$T/o7" 2>"$T/e7"
is "$?" 3 "kz-run with a sink that refuses the ping exits 3"
is "$(cat "$T/e7")" "kz-run: audit sink $T/mute.sock unreachable (the sink refused a ping: read-only); nothing was dispatched" \
	"with one line naming the sink"
is "$(cat "$T/o7")" "" "and no output: the code did not start"
is "$(only kz-lease status | sed -n 's/.*"releases":\([0-9]*\).*/\1/p')" "$((r0 + 1))" "the lease it was granted was given back"
t "and the worker is warm again" wait_for warm 1

# A sink that acknowledges the lease and dispatch records but not the
# closing ones: code that exits 1 keeps its status, and --json says the
# run is not completely recorded.
"$PY" - "$T/half.sock" <<'PYEOF' &
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
appends = 0
while True:
    c, _ = s.accept()
    n = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
    req = json.loads(c.recv(n, socket.MSG_WAITALL))
    rep = {"v": 1, "id": req.get("id"), "ok": True}
    if req.get("op") == "append":
        appends += 1
        k = len(req.get("records", [None]))
        if appends == 1:
            rep.update(seq=k, seqs=list(range(1, k + 1)))
        else:
            rep = {"v": 1, "id": req.get("id"), "ok": False,
                   "error": "unavailable", "reason": "disk full"}
    rep = json.dumps(rep).encode()
    c.sendall(struct.pack(">I", len(rep)) + rep); c.close()
PYEOF
_pids="$_pids $!"
t "a stand-in sink that acknowledges only the first append" wait_sock "$T/half.sock" 5
t "the worker is warm" wait_for warm 1
only KZ_AUDIT_SOCKET="$T/half.sock" kz-run --json --actor alice --conversation c1 -- sh -c 'exit 1' >"$T/o9" 2>"$T/e9"
is "$?" 1 "the code's exit status is kept when a closing record is lost"
like "$(cat "$T/e9")" "audit sink $T/half.sock did not acknowledge every record of this run" "stderr says so"
like "$(cat "$T/o9")" '"exit":1,"audit":"incomplete"' "and --json says the run is not completely recorded"

# A real sink that can no longer write (its log file was moved away under
# it) answers no ping: kz-run gets nothing leased past it and kz-reset
# resets nothing, instead of learning it from the first record.
bg env KZ_AUDIT_DIR="$T/ro-audit" kz-audit serve --socket "$T/ro.sock" 2>"$T/ro.err"
RO_PID=$LASTPID
t "a second sink on its own directory" wait_sock "$T/ro.sock"
kz-msg "$T/ro.sock" '{"op":"append","kind":"lease","event":{"worker_id":"w0"}}' >/dev/null
mv "$T/ro-audit/audit-000001.jsonl" "$T/ro-audit/moved.jsonl"
kz-msg "$T/ro.sock" '{"op":"append","kind":"lease","event":{"worker_id":"w0"}}' >/dev/null
t "the worker is warm" wait_for warm 1
only KZ_AUDIT_SOCKET="$T/ro.sock" kz-run --actor alice --conversation c1 -- sh -c 'echo ran >>notes.txt; echo ran' >"$T/o8" 2>"$T/e8"
is "$?" 3 "kz-run with a sink that cannot write exits 3"
is "$(cat "$T/e8")" "kz-run: audit sink $T/ro.sock unreachable (the sink refused a ping: the audit log cannot be written); nothing was dispatched" \
	"before anything ran, with one line naming the sink"
rc_is 3 "kz-reset with a sink that cannot write exits 3" only KZ_AUDIT_SOCKET="$T/ro.sock" kz-reset --worker w1 --token 1
like "$(cat "$T/.out")" "audit sink $T/ro.sock unreachable.*nothing was reset" "and resets nothing"
kill "$RO_PID"; wait "$RO_PID" 2>/dev/null

# The explicit opt-out: said on every run, nothing recorded.
bg kz-audit serve --socket "$T/kz-audit.sock" 2>>"$T/audit.log"
AUDIT_PID=$LASTPID
t "kz-audit serves again" wait_sock "$T/kz-audit.sock"
t "the worker is warm again" wait_for warm 1
d0=$(n_disp)
only KZ_AUDIT=off kz-run --actor alice --conversation c1 -- sh -c 'cat notes.txt 2>/dev/null | grep -c ran; true' >"$T/o4" 2>"$T/e4"
is "$?" 0 "KZ_AUDIT=off runs"
is "$(cat "$T/o4")" 0 "and neither refused run had reached the workspace"
like "$(head -1 "$T/e4")" "^kz-run: audit is off \(KZ_AUDIT = off\): nothing of this run is recorded" "the opt-out is said first"
like "$(tail -1 "$T/e4")" "^kz-run: exit 0 .*; audit off, nothing recorded" "and in the status line"
is "$(n_disp)" "$d0" "no dispatch record was written"
only KZ_AUDIT=off kz-run --json --actor alice --conversation c1 -- true >"$T/o4j" 2>/dev/null
like "$(cat "$T/o4j")" '"audit":"off"' "--json says audit was off"
only KZ_AUDIT=off kz-egress status >"$T/o5" 2>&1
like "$(cat "$T/o5")" "audit: off" "kz-egress status says audit is off"

# Bad audit settings are config errors (exit 2), never a silent opt-out.
rc_is 2 "an empty KZ_AUDIT_SOCKET is a config error" only KZ_AUDIT_SOCKET= kz-run --actor a --conversation c -- true
like "$(cat "$T/.out")" "KZ_AUDIT_SOCKET is empty: audit is mandatory" "and says audit is mandatory"
rc_is 2 "KZ_AUDIT=maybe is a config error" only KZ_AUDIT=maybe kz-run --actor a --conversation c -- true

# What cannot be reached is named.
mkdir "$T/sd" "$T/sd/kz-audit"
rc_is 3 "the systemd layout: RUN/kz-audit/kz-audit.sock is the default" env -i PATH="$PATH" KZ_RUN_DIR="$T/sd" kz-run --actor a --conversation c -- true
like "$(cat "$T/.out")" "audit sink $T/sd/kz-audit/kz-audit.sock unreachable" "and the path is named"
rc_is 3 "kz-run: a lease socket that is not there" only KZ_LEASE_SOCKET="$T/nope.sock" kz-run --actor a --conversation c -- true
like "$(cat "$T/.out")" "kz-lease unreachable at $T/nope.sock" "is named"
rc_is 3 "kz-lease status: a socket that is not there" env -i PATH="$PATH" KZ_RUN_DIR="$T/sd" kz-lease status
like "$(cat "$T/.out")" "kz-lease unreachable at $T/sd/kz-lease.sock" "is named"
env -i PATH="$PATH" KZ_RUN_DIR="$T/sd" KZ_AUDIT=off KZ_FIELD_KEY_FILE="$T/field.key" kz-project member-create --member m2 >"$T/o6" 2>&1
like "$(cat "$T/o6")" "kz-project: store unreachable at $T/sd/store.sock" "kz-project names the store it tried"
done_testing
