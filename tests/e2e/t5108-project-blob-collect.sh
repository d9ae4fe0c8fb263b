#!/bin/bash
# kz-project blob-collect: the blobs no version names, and the partial
# writes of puts that died, are removed once older than the grace; every
# blob a version names stays, whatever its age, and still projects.  What
# is not the store's (a directory or a link under a digest's name, another
# file) is left alone.  The references are read whole first, so a store
# that cannot be read removes nothing; the plan is audited first, so a
# sink that is down removes nothing.  Through the daemon it is an
# operator's op.  A version renews the blob it names.
. "$(dirname "$0")/lib.sh"
plan 34
. "$(dirname "$0")/project-lib.sh"
B=$T/blobs
old() { touch -h -d '2 days ago' "$@"; }
field() { "$PY" -c 'import json,sys; d=json.loads(sys.stdin.read()); print(" ".join(str(d.get(k)) for k in sys.argv[1:]))' "$@"; }
age() { echo $(( $(date +%s) - $(stat -c %Y "$1") )); }

q member-create --member alice
q room-create --room r --member alice
doc alice d1 a.txt "alpha"
A=$(blob "alpha")
q version-new --resource d1 --member alice --path a.txt --blob "$A"
q resource-create --resource d2 --member alice --kind document
q version-new --resource d2 --member alice --path b.txt --pending
q link --resource d1 --member alice --room r --turn t0 --shared
BB=$(blob "bravo")
C=$(blob "charlie")
printf 'partial' >"$B/.tmp-0123456789abcdef"
printf 'fresh' >"$B/.tmp-fedcba9876543210"
mkdir "$B/$(printf '%064d' 1)"
echo "outside" >"$T/outside"
ln -s "$T/outside" "$B/$(printf '%064d' 2)"
echo "operator's" >"$B/notes.txt"
old "$B/$A" "$B/$BB" "$B/.tmp-0123456789abcdef" "$B/$(printf '%064d' 1)" \
	"$B/$(printf '%064d' 2)" "$B/notes.txt" "$T/outside"

out=$(kz-project blob-collect --dry)
is "$(echo "$out" | field dry referenced kept young removed partial bytes)" \
	"True 1 1 2 1 1 12" "dry run: one referenced and kept, one blob and one partial write to go (12 bytes), two young"
t "dry run: nothing is removed" test -e "$B/$BB" -a -e "$B/.tmp-0123456789abcdef"

out=$(kz-project blob-collect)
is "$?" 0 "collect: exits 0"
is "$(echo "$out" | field dry kept young removed partial bytes failed)" \
	"False 1 2 1 1 12 0" "collect: the reply counts what went"
tnot "an old blob no version names is removed" test -e "$B/$BB"
tnot "an old partial write is removed" test -e "$B/.tmp-0123456789abcdef"
t "an old blob a version names stays" test -e "$B/$A"
t "a young blob no version names stays (the grace)" test -e "$B/$C"
t "a young partial write stays (a put in progress)" test -e "$B/.tmp-fedcba9876543210"
t "a directory under a digest's name is not the store's: left" test -d "$B/$(printf '%064d' 1)"
t "a link under a digest's name is left, and what it names" \
	test -L "$B/$(printf '%064d' 2)" -a "$(cat "$T/outside")" = outside
t "another file of the directory is left" test -e "$B/notes.txt"

adm a1 --room r --member alice --turn t1
is "$(js "$T/a1.json" 'len(d["items"])')" 1 "the kept blob is admitted"
kz-project materialize --snapshot "$T/a1.json" --dest "$T/p1" >/dev/null 2>&1
is "$(cat "$T/p1/a.txt" 2>&1)" alpha "and projected, byte for byte"

# A version may only name a stored blob: the removed one is refused,
# cleanly, until its bytes are put again (the same digest).
is "$(code version-new --resource d2 --member alice --path b.txt --blob "$BB")" \
	bad_request "a version naming a removed blob is refused"
is "$(blob "bravo")" "$BB" "putting the bytes again stores the same digest"
rc_is 0 "and the version is then made" \
	kz-project version-new --resource d2 --member alice --path b.txt --blob "$BB"

# A version renews what it names: an old blob it names is young again, so
# a collection racing the backend's put-then-version never takes it.
D=$(blob "delta")
old "$B/$D"
q version-new --resource d1 --member alice --path a.txt --blob "$D"
t "a version renews the blob it names ($(age "$B/$D") s old)" test "$(age "$B/$D")" -lt 60
old "$B/$C"
blob "charlie" >/dev/null
t "a put renews a blob already stored ($(age "$B/$C") s old)" test "$(age "$B/$C")" -lt 60

# The references span many SCAN pages (1000 keys a page): 3000 versions,
# the last of which names an old blob; it is kept.
G=$(blob "golf"); old "$B/$G"
"$PY" -c 'import sys
for i in range(2999): print("HSET", "kz:{default}:res:bulk%d:v:1" % i, "sha", "%064x" % (i + 7))
print("HSET", "kz:{default}:res:bulkg:v:1", "sha", sys.argv[1])' "$G" |
	redis-cli -s "$STORE_SOCK" >/dev/null
out=$(kz-project blob-collect --dry)
is "$(echo "$out" | field referenced removed)" "3003 0" "3000 more versions are all read: the old blob the last names is kept"

# The race the lock and the renewal close: the backend names an old,
# unreferenced blob in a version while a collection reads the 3000
# versions.  Every version made must name a blob that is still there.
lost=0 made=0
for i in $(seq 20); do
	X=$(blob "race $i"); old "$B/$X"
	kz-project blob-collect >/dev/null 2>&1 & c=$!
	sleep "0.0$((RANDOM % 10))"
	if q version-new --resource d1 --member alice --path a.txt --blob "$X"; then
		made=$((made + 1)); wait "$c"; [ -e "$B/$X" ] || lost=$((lost + 1))
	else
		wait "$c"
	fi
done
is "$lost" 0 "20 versions naming old blobs during collections: none of the $made made lost its blob"

# Fail closed: the references, then the audit, before anything goes.
E=$(blob "echo")
old "$B/$E"
KZ_STORE_SOCKET=$T/no-store.sock rc_is 3 "store unreachable: exit 3" kz-project blob-collect
like "$(cat "$T/.out")" "store" "...saying the store is the cause"
t "...and nothing is removed" test -e "$B/$E"
KZ_AUDIT=on KZ_AUDIT_SOCKET=$T/no-audit.sock rc_is 3 "audit sink down: exit 3" kz-project blob-collect
like "$(cat "$T/.out")" "audit sink is unavailable: nothing removed" "...saying nothing was removed"
t "...and nothing is" test -e "$B/$E"

export KZ_AUDIT=on KZ_AUDIT_SOCKET=$T/kz-audit.sock
bg kz-audit serve --socket "$KZ_AUDIT_SOCKET" 2>"$T/audit.log"
wait_sock "$KZ_AUDIT_SOCKET" 10
out=$(kz-project blob-collect)
is "$(echo "$out" | field removed bytes)" "1 4" "with the sink up the old blob goes"
is "$(kz-audit query --dir "$T/audit" --kind projection | "$PY" -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l)["event"]
    if d.get("stage") == "blob_collect": print(d["files"], d["bytes"], d["decision"])' 2>&1)" \
	"1 4 allow" "the removal is audited: kind projection, stage blob_collect, its count and bytes"
export KZ_AUDIT=off

KZ_PROJECT_BLOB_GRACE=59 rc_is 2 "a grace under a minute is refused (exit 2)" kz-project blob-collect
like "$(cat "$T/.out")" KZ_PROJECT_BLOB_GRACE "...naming the key"

# The daemon: an operator's op.  nobody is a peer, not an operator.
S=$T/kzp.sock
F=$(blob "foxtrot"); old "$B/$F"
KZ_PEER_UIDS=0,65534 bg kz-project serve --socket "$S"
wait_sock "$S" 10
chmod 0666 "$S"
install -m 0644 "$TOP/tests/sandbox/client.py" "$T/client.py"
like "$(setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 "$T/client.py" "$S" blob-collect 2>&1)" \
	'"error": "operator_only"' "served: a peer that is no operator is refused"
t "...and removes nothing" test -e "$B/$F"
like "$(kz-msg "$S" '{"op":"blob-collect"}')" '"removed": ?1,' "served: root, an operator, collects"
done_testing
