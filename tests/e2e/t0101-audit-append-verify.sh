#!/bin/bash
# kz-audit append writes chained records from stdin, hashes raw ids, refuses
# events outside the schema naming the field (never the value), and verify
# and query read the result.
. "$(dirname "$0")/lib.sh"
plan 30
head -c 32 /dev/urandom >"$T/key"; chmod 600 "$T/key"
export KZ_FIELD_KEY_FILE=$T/key KZ_AUDIT_DIR=$T/log
unset KZ_RUN_DIR KZ_SOCKET KZ_CONFIG

like "$(kz-audit --version)" '^kz-audit 0\.1\.0$' "--version"
like "$(kz-audit --help)" 'kz-audit verify' "--help names the subcommands"
rc_is 2 "no subcommand is a usage error" kz-audit
rc_is 2 "an unknown subcommand is a usage error" kz-audit frobnicate

cat >"$T/in" <<'EV'
{"kind":"dispatch","event":{"worker_id":"w1","actor":"alice@example","conversation":"conv-1","exit_status":0,"duration_ms":12,"capability":"code.run"}}
{"kind":"reset","worker_id":"w1","token":7,"evidence":{"procs":0,"clean":true},"missing":[]}

{"kind":"egress_refusal","event":{"host":"example.org","port":443,"reason":"destination not in the grant"}}
EV
rc_is 0 "append accepts both forms and skips blank lines" kz-audit append <"$T/in"
f=$T/log/audit-000001.jsonl
is "$(wc -l <"$f")" 3 "three records written"
unlike "$(cat "$f")" 'alice|conv-1' "raw actor and conversation ids are not stored"
like "$(sed -n 1p "$f")" '"actor_hash":"[0-9a-f]{32}","conversation_hash":"[0-9a-f]{32}"' "raw ids stored as keyed hashes"
is "$(stat -c %a "$f")" 640 "log file is 0640"
out=$(kz-audit verify "$f"); rc=$?
is "$rc" 0 "verify exits 0 on an intact log"
like "$out" '3 records, seq 1\.\.3, intact' "verify reports the records"

# Hostile events: each refused with exit 2, naming the line and the field.
refuse() { # refuse FIELD LINE DESCRIPTION
	local out rc=0
	out=$(printf '%s\n' "$2" | kz-audit append 2>&1) || rc=$?
	if [ "$rc" = 2 ] && printf '%s' "$out" | grep -q "line 1: .*'$1'" &&
	    ! printf '%s' "$out" | grep -q 'SECRETVALUE'; then
		ok 0 "$3"
	else
		ok 1 "$3"; diag "rc=$rc out=$out"
	fi
}
refuse bogus '{"kind":"lease","event":{"bogus":"x"}}' "unknown field refused"
refuse kind '{"kind":"nope","event":{}}' "unknown kind refused"
refuse reason '{"kind":"lease","event":{"reason":"SECRETVALUE\nline two"}}' "multi-line value refused"
refuse worker_id '{"kind":"lease","event":{"worker_id":"/home/SECRETVALUE"}}' "absolute path refused"
refuse reason '{"kind":"lease","event":{"reason":"read ~/SECRETVALUE"}}' "home path refused"
refuse reason '{"kind":"lease","event":{"reason":"see file:///SECRETVALUE"}}' "file URL refused"
refuse reason '{"kind":"lease","event":{"reason":"failed at /etc/SECRETVALUE"}}' "embedded absolute path refused"
refuse worker_id '{"kind":"lease","event":{"worker_id":{"a":"SECRETVALUE"}}}' "nested value refused"
refuse capability "{\"kind\":\"lease\",\"event\":{\"capability\":\"$(head -c 100 /dev/zero | tr '\0' a)SECRETVALUE\"}}" "over-long value refused"
refuse port '{"kind":"egress_refusal","event":{"port":70000}}' "out-of-range number refused"
refuse evidence '{"kind":"reset","event":{"evidence":{"x":{"y":1}}}}' "nested evidence refused"
refuse actor '{"kind":"lease","event":{"actor":"a","actor_hash":"0123456789abcdef0123456789abcdef"}}' "raw id and hash together refused"

printf '%s\n' '{"kind":"lease","event":{"worker_id":"w9"}}' \
    '{"kind":"lease","event":{"bogus":1}}' '{"kind":"lease","event":{"worker_id":"w10"}}' \
    | kz-audit append 2>"$T/err"
is "$?:$(wc -l <"$f")" "2:4" "lines before a bad one are kept, none after"
like "$(cat "$T/err")" 'line 2: ' "the error names the bad line"
rc_is 2 "invalid JSON is refused" sh -c 'echo "{\"kind\":" | kz-audit append'

q=$(kz-audit query --dir "$T/log" --kind dispatch)
is "$(printf '%s\n' "$q" | grep -c .)" 1 "query --kind filters"
ah=$(sed -n 1p "$f" | grep -o '"actor_hash":"[0-9a-f]*"' | cut -d'"' -f4)
is "$(kz-audit query --actor-hash "$ah" "$f" | wc -l)" 1 "query --actor-hash filters"
is "$(kz-audit query --since 2000-01-01T00:00:00Z --until 2999-01-01T00:00:00Z --dir "$T/log" | wc -l)" 4 "query --since/--until"
is "$(kz-audit query --since 2999-01-01T00:00:00Z --dir "$T/log" | wc -l)" 0 "query --since excludes older records"
done_testing
