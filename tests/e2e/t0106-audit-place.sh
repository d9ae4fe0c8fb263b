#!/bin/bash
# A seq means the record is in the log: when the log file the sink writes
# is renamed, removed, replaced, truncated or appended to by someone else,
# or the log directory is moved away or its lock removed, under a running
# sink, the next append is not acknowledged (unavailable), nothing more is
# written, status says the log is not writable, and pings are answered
# unavailable.  Before, the sink went on writing to the unlinked or
# renamed file and answered every append with a seq.
. "$(dirname "$0")/lib.sh"
plan 37
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
done_testing
