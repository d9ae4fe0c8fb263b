#!/bin/bash
# A seq means the record is in the log: when the log file the sink writes
# is renamed, removed, replaced, truncated or appended to by someone else,
# or the log directory is moved away or its lock removed, under a running
# sink, the next append is not acknowledged (unavailable), nothing more is
# written, status says the log is not writable, and pings are answered
# unavailable.  Before, the sink went on writing to the unlinked or
# renamed file and answered every append with a seq.  And a disk that
# fills under the sink: what was acknowledged is there, nothing more.
. "$(dirname "$0")/lib.sh"
plan 43
head -c 32 /dev/urandom >"$T/key"; chmod 600 "$T/key"
unset KZ_SOCKET KZ_CONFIG KZ_RUN_DIR
export KZ_FIELD_KEY_FILE=$T/key
S=$T/a.sock
app() { kz-msg "$S" "{\"op\":\"append\",\"kind\":\"lease\",\"event\":{\"worker_id\":\"$1\"}}"; }
# case NAME SHELL-COMMAND: a fresh sink on $T/NAME with one record, the
# command run on its directory D and file F, then one more append.
case_() {
	local name=$1 cmd=$2 out
	export KZ_AUDIT_DIR=$T/$name
	bg kz-audit serve --socket "$S" 2>"$T/$name.err"; PID=$LASTPID
	wait_sock "$S"
	like "$(app before)" '"ok":true,"seq":1' "$name: the first append is acknowledged"
	D=$KZ_AUDIT_DIR F=$KZ_AUDIT_DIR/audit-000001.jsonl sh -c "$cmd"
	out=$(app after)
	like "$out" '"ok":false,"error":"unavailable"' "$name: the next append is not acknowledged"
	like "$(kz-msg "$S" '{"op":"status"}')" '"writable":false' "$name: status says the log is not writable"
	like "$(cat "$T/$name.err")" '"event":"audit.write"' "$name: the reason is logged"
	like "$(kz-msg "$S" '{"op":"ping"}')" '"ok":false,"error":"unavailable"' \
	    "$name: and it answers no ping (kz-run and kz-reset ask before they act)"
	kill "$PID"; wait "$PID" 2>/dev/null; rm -f "$S"
}
case_ renamed 'mv "$F" "$D/old.jsonl"'
unlike "$(cat "$T/renamed/old.jsonl")" '"after"' "renamed: nothing more went into the renamed file"
case_ removed 'rm "$F"'
case_ replaced 'cp "$F" "$F.new" && mv "$F.new" "$F"'
case_ truncated ': >"$F"'
case_ appended 'echo "{}" >>"$F"'
case_ dirmoved 'mv "$D" "$D.old" && mkdir "$D"'
# A removed lock would let a second sink take the directory beside it.
case_ unlocked 'rm "$D/.lock"'
is "$(grep -c . "$T/dirmoved.old/audit-000001.jsonl")" 1 "dirmoved: nothing more went into the moved directory"

# The disk fills under the sink (a 64 KiB tmpfs of our own): every append
# acknowledged before is in the log, the one that did not fit is not
# acknowledged and leaves no partial record, and a restart on the full
# disk acknowledges nothing either.
mkdir "$T/full"
if mount -t tmpfs -o size=64k wt-aud-t0106 "$T/full" 2>/dev/null; then
	on_exit "umount '$T/full'"
	export KZ_AUDIT_DIR=$T/full/audit
	bg kz-audit serve --socket "$S" 2>"$T/full.err"; PID=$LASTPID
	wait_sock "$S"
	acked=0 refused=""
	for i in $(seq 1 400); do
		out=$(kz-msg "$S" "{\"op\":\"append\",\"kind\":\"dispatch\",\"event\":{\"worker_id\":\"w$i\",\"reason\":\"padding the record out to fill the disk sooner than later\"}}")
		case $out in *'"ok":true'*) acked=$i ;; *) refused=$out; break ;; esac
	done
	[ "$acked" -gt 10 ]; ok $? "full: appends were acknowledged until the disk filled ($acked)"
	like "$refused" '"error":"unavailable"' "full: the append that did not fit is not acknowledged"
	like "$(cat "$T/full.err")" 'No space left on device' "full: the reason is logged"
	kill "$PID"; wait "$PID" 2>/dev/null; rm -f "$S"
	t "full: the log verifies, no partial record left" kz-audit verify --dir "$KZ_AUDIT_DIR"
	like "$(cat "$T/.out")" "seq 1..$acked, intact" "full: every acknowledged record is there, and no more"
	bg kz-audit serve --socket "$S" 2>"$T/full2.err"; PID=$LASTPID
	wait_sock "$S"
	while head -c 4096 /dev/zero >>"$T/full/pad" 2>/dev/null; do :; done
	like "$(app after-restart)" '"ok":false,"error":"unavailable"' "full: a restart on the full disk acknowledges nothing"
	kill "$PID"; wait "$PID" 2>/dev/null
else
	for i in 1 2 3 4 5 6; do ok 0 "# SKIP cannot mount a tmpfs"; done
fi
done_testing
