#!/bin/bash
# kz-audit: text that reads as other text is refused.  Zero-width and
# joiner characters, the BOM, the soft hyphen, the Mongolian vowel
# separator, variation selectors and Unicode tag characters in any string
# of an event (free text, a raw member id, a host) are refused with one
# line naming the field and the class, never the value, as the C1
# controls and bidi controls already were, by a direct append and by the
# daemon alike; nothing is written, status counts them, and visible
# non-ASCII text is still stored as given.
. "$(dirname "$0")/lib.sh"
plan 55
head -c 32 /dev/urandom >"$T/key"; chmod 600 "$T/key"
unset KZ_SOCKET KZ_CONFIG KZ_RUN_DIR KZ_AUDIT_MAX_FILE_BYTES
export KZ_FIELD_KEY_FILE=$T/key KZ_AUDIT_DIR=$T/log
S=$T/a.sock

# class ESCAPE WHAT: a reason holding the character (a JSON escape) is
# refused by a direct append: exit 2, one line naming the field and WHAT.
class() {
	local out rc
	out=$(printf '{"kind":"lease","event":{"reason":"ok so%sSECRET"}}\n' "$1" |
	    kz-audit append 2>&1); rc=$?
	is "$rc" 2 "$3: refused (exit 2)"
	like "$out" "^kz-audit: line 1: field 'reason' has $2\$" \
	    "$3: one line naming the field and why"
}
inv="an invisible character"
ctl="a line break, control or bidirectional formatting character"
class '\u200b' "$inv \\(zero-width character\\)" "U+200B zero width space"
class '\u200c' "$inv \\(zero-width character\\)" "U+200C zero width non-joiner"
class '\u200d' "$inv \\(zero-width character\\)" "U+200D zero width joiner"
class '\u2060' "$inv \\(word joiner or invisible operator\\)" "U+2060 word joiner"
class '\ufeff' "$inv \\(zero-width no-break space\\)" "U+FEFF BOM"
class '\u00ad' "$inv \\(soft hyphen\\)" "U+00AD soft hyphen"
class '\u180e' "$inv \\(Mongolian vowel separator\\)" "U+180E Mongolian vowel separator"
class '\ufe0f' "$inv \\(variation selector\\)" "U+FE0F variation selector 16"
class '\udb40\udd00' "$inv \\(variation selector\\)" "U+E0100 variation selector 17"
class '\udb40\udc41' "$inv \\(tag character\\)" "U+E0041 tag latin capital A"
class '\udb40\udc7f' "$inv \\(tag character\\)" "U+E007F cancel tag"
# What was already refused stays refused, with the same words.
class '\u202e' "$ctl" "U+202E right-to-left override"
class '\u2066' "$ctl" "U+2066 left-to-right isolate"
class '\u061c' "$ctl" "U+061C Arabic letter mark"
class '\u0085' "$ctl" "U+0085 next line (C1)"
class '\u009b' "$ctl" "U+009B CSI (C1)"

# Raw UTF-8 bytes, not only JSON escapes.
out=$(printf '{"kind":"lease","event":{"reason":"a\xe2\x80\x8bSECRET"}}\n' |
    kz-audit append 2>&1)
like "$out" "field 'reason' has $inv" "a raw U+200B (UTF-8 bytes) is refused too"
out=$(printf '{"kind":"lease","event":{"reason":"a\xf3\xa0\x81\x81SECRET"}}\n' |
    kz-audit append 2>&1)
like "$out" "field 'reason' has $inv \\(tag" "a raw tag character is refused too"
unlike "$(cat "$T"/log/*.jsonl 2>/dev/null)" 'SECRET' "nothing refused was written"

# A member id that reads as another's: hashed ids would differ, and a
# search by the id as read would never find the record.
out=$(echo '{"kind":"lease","event":{"member":"al\u200bice"}}' | kz-audit append 2>&1)
like "$out" "field 'member' has $inv" "a raw member id with U+200B is refused"
out=$(echo '{"kind":"dispatch","event":{"actor":"bob\udb40\udc41"}}' | kz-audit append 2>&1)
like "$out" "field 'actor' has $inv \\(tag" "a raw actor id with a tag character is refused"
out=$(echo '{"kind":"egress_refusal","event":{"host":"ex\u00adample.com"}}' | kz-audit append 2>&1)
like "$out" "field 'host' has $inv \\(soft hyphen" "a host with a soft hyphen is refused"
out=$(echo '{"kind":"pkg_refusal","event":{"package":"left\u200cpad"}}' | kz-audit append 2>&1)
like "$out" "field 'package' has $inv" "a package name with U+200C is refused"

# Visible non-ASCII text is stored exactly as given.
echo '{"kind":"lease","event":{"reason":"caf\u00e9 \u2014 \u65e5\u672c \ud83d\ude00"}}' |
    kz-audit append
is "$?" 0 "visible non-ASCII text is accepted"
like "$(kz-audit query --kind lease)" '"reason":"café — 日本 😀"' "and stored as given"

# The daemon refuses the same, names field and class, counts them.
bg kz-audit serve --socket "$S" 2>"$T/serve.err"
SPID=$LASTPID
wait_sock "$S"
out=$(kz-msg "$S" '{"op":"append","kind":"lease","event":{"reason":"x\u2063SECRET"}}'); rc=$?
is "$rc" 1 "the daemon refuses an invisible operator (U+2063)"
like "$out" '"error":"refused","reason":"field .reason. has an invisible character' \
    "naming the field and the class"
unlike "$out" 'SECRET' "never the value"
out=$(kz-msg "$S" '{"op":"append","records":[{"kind":"lease","event":{"worker_id":"w1"}},{"kind":"lease","event":{"member":"m\ufeff1"}}]}')
like "$out" '"reason":"record 1: field .member. has an invisible character' \
    "a batch with one such record is refused whole, naming the record"
like "$(kz-msg "$S" '{"op":"append","kind":"lease","event":{"worker_id":"w2","reason":"plain"}}')" \
    '"ok":true' "a clean record still goes in"
st=$(kz-msg "$S" '{"op":"status"}')
like "$st" '"refused_by_reason":\{[^}]*"invisible":2' "status counts them by reason"
like "$st" '"refused_by_field":\{[^}]*"member":1' "and by field"
like "$(grep audit.refuse "$T/serve.err")" '"reason":"invisible"' "and the log says why"
unlike "$(cat "$T/serve.err")" 'SECRET' "never with the value"
kill "$SPID"; wait "$SPID" 2>/dev/null
rc_is 0 "the log verifies" kz-audit verify --dir "$T/log"
unlike "$(cat "$T"/log/*.jsonl)" 'SECRET|w1' "nothing of a refused record was written"

# A record stored before these were refused (made here by editing the
# log, which no longer verifies) is shown by query as it is: the bidi
# override and the zero-width space as JSON escapes, the same JSON; --raw
# prints the stored line byte for byte.
f=$(ls "$T"/log/*.jsonl | tail -1)
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
open(p, "wb").write(b.replace(b'"plain"', '"pl\u202eai\u200bn"'.encode()))
PY
q=$(kz-audit query --kind lease | grep worker_id.:.w2)
like "$q" '"reason":"pl\\u202eai\\u200bn"' "query shows an old record's invisible characters as escapes"
is "$(printf '%s\n' "$q" "$(kz-audit query --raw --kind lease | grep worker_id.:.w2)" |
	python3 -c 'import json,sys; a, b = (json.loads(l) for l in sys.stdin); print(a == b)')" True \
	"... the same JSON as the stored line"
is "$(kz-audit query --raw --kind lease | grep worker_id.:.w2)" "$(grep worker_id.:.w2 "$f")" \
	"query --raw prints the stored line byte for byte"
done_testing
