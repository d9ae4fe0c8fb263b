#!/bin/bash
# kz-audit against an edited log and hostile input: an edited last record
# (a complete line) stops the sink at restart, naming the file and line
# and never the record, and verify keeps failing; only a torn tail, or
# lines holding a block of NULs (a hole a crash left), are cut; verify
# and query refuse a FIFO or a symbolic link in the log directory instead
# of hanging; an identifier hash must be one; integers are stored as
# their digits; terminal controls and bidi overrides are refused; the
# file size is capped at what startup reads; every record carries the
# uid of the process that wrote it, as the sink saw it, never as claimed,
# and query --uid finds them.
. "$(dirname "$0")/lib.sh"
plan 51
head -c 32 /dev/urandom >"$T/key"; chmod 600 "$T/key"
unset KZ_SOCKET KZ_CONFIG KZ_RUN_DIR KZ_AUDIT_MAX_FILE_BYTES
export KZ_FIELD_KEY_FILE=$T/key KZ_AUDIT_DIR=$T/log
S=$T/a.sock
f=$T/log/audit-000001.jsonl

fill() { # fill N: N lease records from w1
	for i in $(seq "$1"); do
		echo "{\"kind\":\"lease\",\"event\":{\"worker_id\":\"w$i\",\"token\":$i}}"
	done | kz-audit append
}
# serve_rc: starts the sink; its exit status, or "running" after 5 s.
serve_rc() {
	local pid rc i
	kz-audit serve --socket "$S" 2>"$T/serve.err" & pid=$!
	for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"; wait "$pid" 2>/dev/null; echo running; return
	fi
	wait "$pid"; rc=$?; echo "$rc"
}

# 1. An edit of the newest record is damage, not a crash.
fill 5
sed -i '5s/"w5"/"wEDITED"/' "$f"
cp "$f" "$T/before"
is "$(serve_rc)" 1 "an edited last record stops the sink at startup (exit 1)"
err=$(cat "$T/serve.err")
is "$(printf '%s\n' "$err" | wc -l)" 1 "with one line"
like "$err" 'audit-000001\.jsonl:5: ' "naming the file and the line"
unlike "$err" 'wEDITED' "never the record's content"
t "the log is left as it was" cmp "$f" "$T/before"
tnot "nothing is cut aside" test -e "$f.cut"
rc_is 1 "kz-audit append (direct) refuses it too" sh -c 'echo "{\"kind\":\"lease\",\"event\":{}}" | kz-audit append'
rc_is 1 "and verify keeps failing on it" kz-audit verify --dir "$T/log"
like "$(kz-audit verify --dir "$T/log" 2>&1)" 'audit-000001\.jsonl:5: seq 5: mac mismatch' "verify names the same record"

rm -rf "$T/log"; fill 6
sed -i -e '5s/"w5"/"x5"/' -e '6s/"w6"/"x6"/' "$f"
is "$(serve_rc)" 1 "two edited last records stop the sink"
like "$(cat "$T/serve.err")" 'audit-000001\.jsonl:5: ' "naming the first of them"

rm -rf "$T/log"; fill 3
printf 'not a record\n' >>"$f"
is "$(serve_rc)" 1 "a complete line that is not a record stops the sink"
like "$(cat "$T/serve.err")" 'audit-000001\.jsonl:4: ' "naming its line"

# A torn tail (bytes after the last newline) is what a crash leaves: cut.
rm -rf "$T/log"; fill 3
printf '{"seq":4,"ts":"2026-' >>"$f"
is "$(serve_rc)" running "a torn tail is cut and the sink serves"
like "$(cat "$T/serve.err")" '"audit.recover"' "the recovery is logged"
is "$(cat "$f.cut")" '{"seq":4,"ts":"2026-' "the tail is kept in FILE.cut"
t "the log verifies after the cut" kz-audit verify --dir "$T/log"

# A hole: a block of NULs at a 512-byte boundary over records never synced.
rm -rf "$T/log"; fill 12
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[512:1024] = bytes(512)
open(p, "wb").write(bytes(b))
PY
good=$(head -c 512 "$f" | tr -cd '\n' | wc -c)
is "$(serve_rc)" running "a hole left by a crash is cut and the sink serves"
t "the log verifies after the cut" kz-audit verify --dir "$T/log"
is "$(wc -l <"$f")" "$good" "the records before the hole are kept"
rm -rf "$T/log"; fill 12
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[512:1024] = bytes(512)
b[-20] = ord("X") if b[-20] != ord("X") else ord("Y")
open(p, "wb").write(bytes(b))
PY
is "$(serve_rc)" 1 "an edited record after a hole still stops the sink"
rm -rf "$T/log"; fill 3
printf '\0\0\0\0\n' >>"$f"
is "$(serve_rc)" 1 "a few NULs are not a hole: the sink stops"

# 2. A FIFO or a symbolic link to /dev/zero among the log files.
rm -rf "$T/log"; fill 2
mkfifo "$T/log/audit-000002.jsonl"
out=$(timeout 10 kz-audit verify --dir "$T/log" 2>&1); rc=$?
is "$rc" 2 "verify refuses a FIFO (exit 2, no hang)"
like "$out" 'audit-000002\.jsonl: not a regular file' "naming it"
out=$(timeout 10 kz-audit query --dir "$T/log" 2>&1 >/dev/null); rc=$?
is "$rc" 2 "query refuses a FIFO (exit 2, no hang)"
like "$out" 'audit-000002\.jsonl: not a regular file' "naming it"
rm "$T/log/audit-000002.jsonl"; ln -s /dev/zero "$T/log/audit-000002.jsonl"
out=$(timeout 10 kz-audit verify --dir "$T/log" 2>&1); rc=$?
is "$rc" 2 "verify refuses a symbolic link to /dev/zero (exit 2, no hang)"
like "$out" 'audit-000002\.jsonl: .*symbolic link' "naming it"
out=$(timeout 10 kz-audit query --dir "$T/log" 2>&1 >/dev/null); rc=$?
is "$rc" 2 "query refuses it too (exit 2, no hang)"
rc_is 2 "verify refuses /dev/zero named directly" timeout 10 kz-audit verify /dev/zero

# 3.-5. What a record may hold.
rm -rf "$T/log"
refuse() { # refuse FIELD LINE DESCRIPTION
	local out rc=0
	out=$(printf '%s\n' "$2" | kz-audit append 2>&1) || rc=$?
	if [ "$rc" = 2 ] && printf '%s' "$out" | grep -q "line 1: .*'$1'"; then
		ok 0 "$3"
	else
		ok 1 "$3"; diag "rc=$rc out=$out"
	fi
}
refuse actor_hash '{"kind":"lease","event":{"actor_hash":"123456789"}}' "a raw numeric id is not an actor_hash"
refuse member_hash "{\"kind\":\"lease\",\"event\":{\"member_hash\":\"$(printf '%064d' 0)\"}}" "nor a hash of another length"
refuse run_hash '{"kind":"egress_refusal","event":{"run_hash":"0123456789ABCDEF0123456789abcdef"}}' "nor upper-case hex"
h32=0123456789abcdef0123456789abcdef
echo "{\"kind\":\"lease\",\"event\":{\"actor_hash\":\"$h32\",\"token\":5000000000000001,\"wait_ms\":9007199254740991}}" |
    kz-audit append
is "$?" 0 "a keyed identifier hash is accepted"
like "$(cat "$f")" '"token":5000000000000001,"wait_ms":9007199254740991' "integers are stored as their digits"
t "and the record verifies" kz-audit verify --dir "$T/log"
refuse reason "$(printf '{"kind":"lease","event":{"reason":"a\\u009b31mb"}}')" "a C1 control (CSI) is refused"
refuse reason "$(printf '{"kind":"lease","event":{"reason":"a\\u202eb"}}')" "a bidi override is refused"
refuse reason "$(printf '{"kind":"lease","event":{"reason":"a\\u2066b"}}')" "a bidi isolate is refused"

# 6. The file size is capped at what startup reads back.
out=$(KZ_AUDIT_MAX_FILE_BYTES=2G kz-audit serve -n 2>&1); rc=$?
is "$rc" 2 "KZ_AUDIT_MAX_FILE_BYTES over 1G is a config error"
like "$out" 'KZ_AUDIT_MAX_FILE_BYTES.*1073741824' "naming the key and the maximum"
rc_is 0 "1G is accepted" env KZ_AUDIT_MAX_FILE_BYTES=1G kz-audit serve -n

# 7. Who wrote a record: any allowed peer may append any kind (the daemons
# share the group), so the sink stamps the peer's uid (SO_PEERCRED) into
# each record, under the MAC; an event cannot name one.
rm -rf "$T/log"
echo '{"kind":"lease","event":{"worker_id":"direct"}}' | kz-audit append
like "$(cat "$f")" '"uid":0,"kind":"lease","event":\{"worker_id":"direct"' \
    "a direct append carries the writer's uid"
chmod 711 "$T"
KZ_PEER_UIDS=65534 kz-audit serve --socket "$S" 2>"$T/serve7.err" & spid=$!
wait_sock "$S"
chmod 666 "$S"
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups kz-msg "$S" \
    '{"op":"append","kind":"dispatch","event":{"worker_id":"w-other","outcome":"started"}}')
like "$out" '"ok":true' "an allowed peer of another uid appends"
like "$(kz-msg "$S" '{"op":"append","kind":"dispatch","event":{"worker_id":"w-root"}}')" '"ok":true' \
    "and so does root"
kill "$spid"; wait "$spid" 2>/dev/null
like "$(grep w-other "$f")" '"uid":65534,"kind":"dispatch"' "the record of uid 65534 says so"
like "$(grep w-root "$f")" '"uid":0,"kind":"dispatch"' "the record of root says uid 0"
echo '{"kind":"lease","event":{"worker_id":"w","uid":0}}' | kz-audit append 2>/dev/null
is "$?" 2 "an event cannot claim a uid"
is "$(kz-audit query --uid 65534 | grep -c .)" 1 "query --uid finds what one uid wrote"
like "$(kz-audit query --uid 65534)" '"worker_id":"w-other"' "and only that"
rc_is 2 "query --uid with a name is a usage error" kz-audit query --uid nobody
done_testing
