#!/bin/bash
# verify detects a deleted, reordered or edited record, a cut-off last
# record, a wrong key and a chain that does not start at seq 1, and names
# the first bad record by file and seq.
. "$(dirname "$0")/lib.sh"
plan 16
head -c 32 /dev/urandom >"$T/key"; chmod 600 "$T/key"
head -c 32 /dev/urandom >"$T/other"; chmod 600 "$T/other"
export KZ_FIELD_KEY_FILE=$T/key KZ_AUDIT_DIR=$T/log
unset KZ_RUN_DIR KZ_SOCKET KZ_CONFIG
for i in 1 2 3 4 5 6; do
	echo "{\"kind\":\"lease\",\"event\":{\"worker_id\":\"w$i\",\"token\":$i}}"
done | kz-audit append
f=$T/log/audit-000001.jsonl
t "the untouched log verifies" kz-audit verify "$f"

# bad NAME EXPECTED-REGEX: verify the copy in $T/c, expect exit 1 and the
# first bad record named.
bad() {
	local out rc=0
	out=$(kz-audit verify "$T/c" 2>&1) || rc=$?
	is "$rc" 1 "$1: verify exits 1"
	like "$out" "$2" "$1: names the first bad record"
}
sed 3d "$f" >"$T/c"
bad "deleted record" "$T/c:3: seq 4: out of sequence"
{ sed -n 1,2p "$f"; sed -n 4p "$f"; sed -n 3p "$f"; sed -n 5,6p "$f"; } >"$T/c"
bad "reordered records" "$T/c:3: seq 4: "
sed '5s/"w5"/"w7"/' "$f" >"$T/c"
bad "edited record" "$T/c:5: seq 5: mac mismatch"
sed '2s/"seq":2/"seq":9/' "$f" >"$T/c"
bad "edited seq" "$T/c:2: seq 9: mac mismatch"
head -c -20 "$f" >"$T/c"
bad "cut-off last record" "$T/c:6: .*incomplete"
sed 1d "$f" >"$T/c"
bad "first record deleted" "$T/c:1: seq 2: .*seq 1"
out=$(kz-audit verify --anchor "$T/c"); rc=$?
is "$rc" 0 "--anchor accepts a chain that starts later"
rc_is 1 "a different field key fails verification" kz-audit verify --field-key "$T/other" "$f"
rc_is 2 "verify without a readable key is a config error" kz-audit verify --field-key "$T/none" "$f"
done_testing
