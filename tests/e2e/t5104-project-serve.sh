#!/bin/bash
# kz-project serve: the daemon path the backend dispatches through.  Admit,
# verify and materialize over the frame protocol run the same checks as the
# one-shot commands: a stored snapshot must match exactly, live state is
# re-read in one atomic script, and a blob whose bytes changed delivers
# nothing.  The store going away is a refusal, and the daemon recovers.
. "$(dirname "$0")/lib.sh"
plan 19
. "$(dirname "$0")/project-lib.sh"
S=$T/kzp.sock
msg() { kz-msg "$S" "$1"; }
# req OP SNAPFILE [EDIT]: a request carrying the admission in SNAPFILE,
# after the Python expression EDIT (on s, the snapshot) if given.
req() { "$PY" -c 'import json,sys
s = json.load(open(sys.argv[2]))["admission"]
exec(sys.argv[3])
r = {"op": sys.argv[1], "snapshot": s}
if sys.argv[4]: r["dest"] = sys.argv[4]
print(json.dumps(r))' "$1" "$2" "${3:-pass}" "${4:-}"; }
field() { "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read()).get(sys.argv[1]))' "$1"; }

for m in alice bob; do q member-create --member $m; done
q room-create --room r --member alice
doc alice d1 a.txt "alpha bytes"
doc alice d2 sub/b.txt "beta bytes"
for d in d1 d2; do q link --resource $d --member alice --room r --turn t0 --shared; done

bg sh -c "exec kz-project serve --socket $S 2>$T/serve.log"
wait_sock "$S" 10
ok $? "serve: the daemon listens"

msg '{"op":"admit","room":"r","member":"alice","turn":"t1"}' >"$T/a1.json"
is "$?" 0 "serve: admit answers ok"
is "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["admission"]["files"])' "$T/a1.json")" \
	2 "serve: the admission lists the room's two files"
out=$(msg "$(req verify "$T/a1.json")")
is "$(echo "$out" | field verdict)" go "serve: verify goes"
out=$(msg "$(req materialize "$T/a1.json" pass "$T/p1")")
is "$(echo "$out" | field files)" 2 "serve: materialize delivers two files"
is "$(cat "$T/p1/sub/b.txt")" "beta bytes" "serve: projected bytes are exact"
is "$(stat -c %a "$T/p1/a.txt") $(stat -c %a "$T/p1/sub") $(stat -c %a "$T/p1")" \
	"444 555 555" "serve: files 0444, directories 0555"

# The snapshot must be the stored one, field for field.
out=$(msg "$(req verify "$T/a1.json" 's["turn"] = "t9"')")
is "$(echo "$out" | field error)" refused "serve: a snapshot that differs from the stored one is refused"
out=$(msg "$(req verify "$T/a1.json" 's["snapshot"] = "0" * 32')")
is "$(echo "$out" | field error)" refused "serve: an unknown snapshot id is refused"
out=$(msg "$(req verify "$T/a1.json" 's["snapshot"] = "../x"')")
is "$(echo "$out" | field error)" refused "serve: a snapshot id that is not an id is refused"
out=$(msg "$(req materialize "$T/a1.json" 's["items"][0]["size"] = 1' "$T/p2")")
is "$(echo "$out" | field error)" refused "serve: a snapshot whose manifest digest no longer holds is refused"
t "serve: ...and nothing is delivered" test ! -e "$T/p2"

# A blob's bytes change on disk after admission: nothing is delivered.
msg '{"op":"admit","room":"r","member":"alice","turn":"t2"}' >"$T/a2.json"
SHA=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["admission"]["items"][1]["sha256"])' "$T/a2.json")
chmod 0644 "$T/blobs/$SHA"; printf 'BETA BYTES' >"$T/blobs/$SHA"
out=$(msg "$(req materialize "$T/a2.json" pass "$T/p3")")
is "$(echo "$out" | field error)" refused "serve: a blob whose bytes no longer match is refused"
t "serve: no projection and no temporary tree is left" \
	sh -c "! ls -A '$T' | grep -Eq '^(p3|\\.kzp-)'"

# Live state is re-read: a member joining after admission stops the run.
msg '{"op":"admit","room":"r","member":"alice","turn":"t3"}' >"$T/a3.json"
q room-join --room r --member bob
out=$(msg "$(req verify "$T/a3.json")")
is "$(echo "$out" | field error)" resource_audience_changed \
	"serve: a member joined between admit and verify"

# The store goes away: fail closed; it comes back: the daemon reconnects.
kill "$STORE_PID"; wait "$STORE_PID" 2>/dev/null
out=$(msg '{"op":"admit","room":"r","member":"alice","turn":"t4"}')
is "$(echo "$out" | field error)" store_unavailable "serve: no store, no admission"
start_store
out=$(msg '{"op":"admit","room":"r","member":"alice","turn":"t5"}')
is "$(echo "$out" | field ok)" True "serve: the daemon reconnects when the store is back"

# A hostile peer names a fifo it owns for blob-put: opening it for reading
# would block the one-request-at-a-time daemon for every caller.  It is
# refused on one line without being opened, and the daemon answers on.
mkfifo "$T/fifo"
out=$(kz-msg -t 3 "$S" "{\"v\":1,\"id\":\"f\",\"op\":\"blob-put\",\"file\":\"$T/fifo\"}" 2>&1)
like "$out" '"error": ?"refused".*not a regular file' "serve: blob-put of a fifo is refused, not opened"
out=$(msg '{"op":"admit","room":"r","member":"alice","turn":"t6"}')
is "$(echo "$out" | field ok)" True "serve: ...and the daemon still answers"
