#!/bin/bash
# kz-project's admission rules against a real redis-server (bounds,
# selectors, private retrieval, library selection, sole audience, withheld
# selection, freshness, manifest change, fail closed): each rule has cases
# that must pass and cases that must be refused.
. "$(dirname "$0")/lib.sh"
plan 60
. "$(dirname "$0")/project-lib.sh"

for m in alice bob carol; do q member-create --member $m; done

# --- the bounds rule: exact and bounded -----------------------------------
q room-create --room r1 --member alice
doc alice d1 docs/one.txt "first file"
q link --resource d1 --member alice --room r1 --turn t0 --shared
adm a1 --room r1 --member alice --turn t1
is "$?" 0 "bounds rule: admit a room with one linked file"
t "bounds rule: materialize the admitted file" \
	kz-project materialize --snapshot "$T/a1.json" --dest "$T/p1"
is "$(cat "$T/p1/docs/one.txt")" "first file" "bounds rule: projected bytes are exact"
is "$(stat -c %a "$T/p1/docs/one.txt") $(stat -c %a "$T/p1/docs") $(stat -c %a "$T/p1")" \
	"444 555 555" "bounds rule: files 0444, directories 0555"
tnot "bounds rule: an unprivileged reader cannot write the projection" \
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo x >>'$T/p1/docs/one.txt'"
is "$(code materialize --snapshot "$T/a1.json" --dest "$T/p1")" bad_request \
	"bounds rule: refused: the destination already exists"
doc alice d1b docs/two.txt "second file"
q link --resource d1b --member alice --room r1 --turn t0 --shared
# Room files over a bound (lowered since they were linked) are left out,
# named with the reason, and the room still admits (the place rule).
KZ_PROJECT_MAX_FILES=1 adm a1b --room r1 --member alice --turn t2
is "$? $(ids a1b) $(left a1b)" "0 d1 d1b:over_bounds" \
	"bounds rule: never more files than KZ_PROJECT_MAX_FILES"
KZ_PROJECT_MAX_FILE_BYTES=5 adm a1c --room r1 --member alice --turn t2
is "$? $(js "$T/a1c.json" 'd["files"]') $(left a1c)" "0 0 d1:over_bounds,d1b:over_bounds" \
	"bounds rule: never a file over KZ_PROJECT_MAX_FILE_BYTES"
KZ_PROJECT_MAX_TOTAL_BYTES=15 adm a1d --room r1 --member alice --turn t2
is "$? $(ids a1d) $(left a1d)" "0 d1 d1b:over_bounds" \
	"bounds rule: never more bytes than KZ_PROJECT_MAX_TOTAL_BYTES"
KZ_PROJECT_MAX_FILES=1 adm a1e --room r1 --member alice --turn t2 --select d1 --select d1b
is "$?" 1 "bounds rule: refused: the files a turn asks for by id are over a bound"

# --- the selector rule: request ids are selectors -------------------------
q room-create --room r2 --member alice
doc alice d2 mine.txt "alice's own"
doc bob b2 secret.txt "bob's private"
adm a2 --room r2 --member alice --turn t1 --select d2
is "$? $(ids a2)" "0 d2" "selector rule: a readable id is resolved and projected"
adm a2b --room r2 --member alice --turn t2
is "$(ids a2b)" d2 "selector rule: a later turn without ids uses the resolved scope"
adm a2c --room r2 --member alice --turn t3 --select d2 --select b2
is "$?" 1 "selector rule: refused: another member's private file refuses the whole run"
is "$(wc -c <"$T/a2c.json")" 0 "selector rule: a refused run returns no narrowed manifest"
adm a2d --room r2 --member alice --turn t3 --select nosuch
is "$?" 1 "selector rule: refused: an id that resolves to nothing"
adm a2e --room r2 --member bob --turn t3 --select d2
is "$?" 1 "selector rule: refused: a member outside the room"

# --- the private-retrieval rule: retrieval in a private turn, by id only ---
doc alice d3 found.txt "retrieved"
adm a3 --room r2 --member alice --turn t4 --retrieved d3
like "$(ids a3)" 'd3' "private-retrieval rule: a ready retrieved document is projected in a private turn"
adm a3b --room r2 --member alice --turn t5
unlike "$(ids a3b)" 'd3' "private-retrieval rule: retrieval is for that turn only"
is "$(code admit --room r2 --member alice --retrieved 'Quarterly report')" bad_request \
	"private-retrieval rule: refused: a title is not an id"
is "$(code admit --room r2 --member alice --retrieved docs/found.txt)" bad_request \
	"private-retrieval rule: refused: a path is not an id"
q resource-create --resource d3p --member alice
q version-new --resource d3p --member alice --path p.txt --pending
is "$(code admit --room r2 --member alice --retrieved d3p)" refused \
	"private-retrieval rule: refused: a document that is not ready"
q room-create --room r3 --member alice; q room-join --room r3 --member bob
is "$(code admit --room r3 --member alice --retrieved d3)" refused \
	"private-retrieval rule: refused: retrieval never widens a shared conversation"

# --- the library rule: a library file is a selection, never a room link ---
doc alice L1 lib/notes.txt "library notes" library
q room-create --room r4 --member alice
t "library rule: the owner binds a library file to the chat" \
	kz-project select --room r4 --member alice --resource L1
is "$(code link --resource L1 --member alice --room r4 --shared)" refused \
	"library rule: refused: a library file is never linked into a room"
is "$(code admit --room r4 --member alice --select L1)" refused \
	"library rule: refused: a library file is not a request selector"
q room-join --room r4 --member bob
is "$(code select --room r4 --member bob --resource L1)" refused \
	"library rule: refused: a member cannot select another's library file"
q room-leave --room r4 --member bob

# --- the sole-audience rule: the selection only while the member is the whole audience ---
adm a5 --room r4 --member alice --turn t1
is "$(js "$T/a5.json" 'd["selection"]') $(ids a5)" "included L1" \
	"sole-audience rule: the selection reaches a private room's snapshot"
is "$(js "$T/a5.json" 'len(d["roster"])')" 1 "sole-audience rule: the snapshot lists exactly that member"
t "sole-audience rule: verify goes while the member is alone" kz-project verify --snapshot "$T/a5.json"
q room-join --room r4 --member bob
# The selection was this run's only source and it never named the contract:
# the selection is withheld and the run goes on without it.
is "$(kz-project verify --snapshot "$T/a5.json" | js /dev/stdin 'd["selection"]')" withheld \
	"sole-audience rule: a member joined before the bytes load: the selection is withheld"
is "$(kz-project materialize --snapshot "$T/a5.json" --dest "$T/p5" | js /dev/stdin 'd["files"]')" 0 \
	"sole-audience rule: materialize re-reads the audience too and projects no file"
t "sole-audience rule: nothing of the selection was delivered" sh -c "test -d '$T/p5' && [ -z \"\$(ls -A '$T/p5')\" ]"
adm a5b --room r4 --member alice --turn t2
is "$(js "$T/a5b.json" 'd["selection"]')/$(ids a5b)/" "not_considered//" \
	"sole-audience rule: a room anyone else can see never receives the library file"
q room-leave --room r4 --member bob
q project-create --project pj5 --member alice
q room-link-project --room r4 --project pj5 --member alice
adm a5c --room r4 --member alice --turn t3
q project-join --project pj5 --member carol
is "$(kz-project verify --snapshot "$T/a5c.json" | js /dev/stdin 'd["selection"]')" withheld \
	"sole-audience rule: a member who reaches the chat through a project withholds the selection"
q project-leave --project pj5 --member carol
adm a5d --room r4 --member alice --turn t4
q resource-revoke --resource L1 --member alice
is "$(code verify --snapshot "$T/a5d.json")" manifest_changed \
	"sole-audience rule: refused: a revoked library file is never projected"

# --- the withheld-selection rule: when the selection is withheld ----------
q room-create --room r6 --member alice
q resource-create --resource L6 --member alice --kind library
q version-new --resource L6 --member alice --path l6.txt --pending
q select --room r6 --member alice --resource L6
adm a6 --room r6 --member alice --turn t1
is "$? $(js "$T/a6.json" 'd["selection"]') $(js "$T/a6.json" 'd["files"]')" "0 withheld 0" \
	"withheld-selection rule: a run that never named the contract runs without it"
adm a6b --room r6 --member alice --turn t1 --contract
is "$?" 1 "withheld-selection rule: refused: asked for files and the selection was its only source"
like "$(cat "$T/a6b.err")" 'not ready' "withheld-selection rule: the member gets the specific reason"
doc alice d6 room6.txt "room file"
q link --resource d6 --member alice --room r6 --turn t0 --shared
adm a6c --room r6 --member alice --turn t2 --contract
is "$? $(ids a6c)" "0 d6" "withheld-selection rule: a room with its own files runs on exactly those"
q version-new --resource L6 --member alice --path l6.txt --blob "$(blob "0123456789")"
KZ_PROJECT_MAX_FILES=1 adm a6d --room r6 --member alice --turn t3 --contract
is "$(js "$T/a6d.json" 'd["selection"]') $(ids a6d)" "withheld d6" \
	"withheld-selection rule: a selection over the bound is withheld, room files still run"
adm a6e --room r6 --member alice --turn t4
is "$(js "$T/a6e.json" 'd["selection"]')" included \
	"withheld-selection rule: the selection is offered to a run that did not name the contract"
q room-create --room r6s --member alice; q room-join --room r6s --member bob
q select --room r6s --member alice --resource L6
adm a6f --room r6s --member alice --turn t1 --contract
is "$? $(js "$T/a6f.json" 'd["files"]') $(js "$T/a6f.json" 'd["selection"]')" "0 0 not_considered" \
	"withheld-selection rule: an already shared room reports no attached file"

# --- the freshness rule: verify before code starts ------------------------
adm a7 --room r1 --member alice --turn t7
t "freshness rule: verify goes on unchanged state" kz-project verify --snapshot "$T/a7.json"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["items"][0]["size"]+=1; json.dump(d,open(sys.argv[2],"w"))' "$T/a7.json" "$T/a7x.json"
is "$(code verify --snapshot "$T/a7x.json")" refused "freshness rule: refused: a size that differs from admission"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["items"][0]["sha256"]="0"*64
import hashlib; json.dump(d,open(sys.argv[2],"w"))' "$T/a7.json" "$T/a7y.json"
is "$(code verify --snapshot "$T/a7y.json")" refused "freshness rule: refused: a content digest that differs"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["audience_version"]+=1; json.dump(d,open(sys.argv[2],"w"))' "$T/a7.json" "$T/a7z.json"
is "$(code verify --snapshot "$T/a7z.json")" refused "freshness rule: refused: an audience version the snapshot was not admitted with"

# --- the manifest-change rule: manifest changes between admission and dispatch ---
adm a8 --room r1 --member alice --turn t8
doc alice o8 out8.txt "made by this run"
q link --resource o8 --member alice --room r1 --turn t8 --shared
t "manifest-change rule: a file the same run linked after admission does not stop it" \
	kz-project materialize --snapshot "$T/a8.json" --dest "$T/p8"
t "manifest-change rule: ...and is not projected into that run" test ! -e "$T/p8/out8.txt"
adm a8b --room r1 --member alice --turn t9
like "$(ids a8b)" 'o8' "manifest-change rule: it is projected from the next turn"
q version-new --resource d1 --member alice --path docs/one.txt --blob "$(blob "first, v2")"
is "$(code verify --snapshot "$T/a8b.json")" manifest_changed \
	"manifest-change rule: refused: a new version of an admitted document"
adm a8c --room r1 --member alice --turn t10
q room-join --room r1 --member bob
adm a8d --room r1 --member alice --turn t11
doc bob b8 bob8.txt "bob's file"
q link --resource b8 --member bob --room r1 --turn t11 --shared
is "$(code verify --snapshot "$T/a8d.json")" manifest_changed \
	"manifest-change rule: refused: another participant's file"
adm a8e --room r1 --member alice --turn t12
doc alice o8e other.txt "other turn"
q link --resource o8e --member alice --room r1 --turn t99 --shared
is "$(code verify --snapshot "$T/a8e.json")" manifest_changed \
	"manifest-change rule: refused: a file from a different turn"
adm a8f --room r1 --member alice --turn t13
q withdraw --resource o8e --member alice --room r1
is "$(code materialize --snapshot "$T/a8f.json" --dest "$T/p8f")" manifest_changed \
	"manifest-change rule: refused: a removed file stops the run before any file is read"

# --- the bounds rule again: a delivery that fails leaves nothing ----------
# The daemon runs as its own user, not root.  A destination that appears
# while the tree is written (a second materialize to the same dest) makes
# the rename fail after the tree was made read-only: the refusal must
# still remove the whole tree, 0555 directories included.
q room-create --room r9 --member alice
head -c 16000000 /dev/urandom >"$T/big9"
q resource-create --resource d9 --member alice
q version-new --resource d9 --member alice --path big/b.bin \
	--blob "$(kz-project blob-put --file "$T/big9" | js /dev/stdin 'd["sha256"]')"
q link --resource d9 --member alice --room r9 --turn t0 --shared
adm a9 --room r9 --member alice --turn t1
mkdir "$T/pd9" && chown 65534 "$T/pd9" && chmod 755 "$T/blobs" && chmod 777 "$STORE_SOCK"
install -o 65534 -m 600 "$T/field.key" "$T/fk9"
# The daemon's binary where its user may run it (the tree may be under a
# home directory it cannot enter).
install -m 0755 "$BIN/kz-project" "$T/kz-project9"
# When the temporary tree appears beside dest, dest is made.
"$PY" -c 'import ctypes,os,select,sys
c = ctypes.CDLL(None); fd = c.inotify_init1(os.O_CLOEXEC)
c.inotify_add_watch(fd, sys.argv[1].encode(), 0x100)
open(sys.argv[3], "w").close()
if select.select([fd], [], [], 30)[0]: os.mkdir(sys.argv[2])' \
	"$T/pd9" "$T/pd9/dest" "$T/ready9" & rp=$!
while [ ! -e "$T/ready9" ]; do sleep 0.02; done
setpriv --reuid=65534 --regid=65534 --clear-groups env KZ_FIELD_KEY_FILE="$T/fk9" \
	"$T/kz-project9" materialize --snapshot "$T/a9.json" --dest "$T/pd9/dest" >"$T/m9.out" 2>"$T/m9.err"
is "$?:$(grep -v 'audit is off' "$T/m9.err")" \
	"1:kz-project: refused: the projection could not be delivered" \
	"bounds rule: a destination made meanwhile refuses the delivery, on one line"
wait "$rp"
is "$(ls -A "$T/pd9")" dest "bounds rule: ...and no temporary tree is left beside it (not root)"
chmod -R u+w "$T/pd9"

# --- the fail-closed rule: fail closed ------------------------------------
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["snapshot"]="0"*32; json.dump(d,open(sys.argv[2],"w"))' "$T/a8f.json" "$T/a13.json"
is "$(code verify --snapshot "$T/a13.json")" refused "fail-closed rule: refused: a snapshot this service never stored"
is "$(code admit --room r1 --member mallory)" refused "fail-closed rule: refused: an actor that cannot be proven"
rc_is 2 "fail-closed rule: no field key, no decision (exit 2)" \
	env KZ_FIELD_KEY_FILE="$T/none" kz-project admit --room r1 --member alice
kill "$STORE_PID"; sleep 0.3
rc_is 3 "fail-closed rule: store down: admit fails closed with exit 3" \
	kz-project admit --room r1 --member alice
is "$(code verify --snapshot "$T/a8f.json")" store_unavailable \
	"fail-closed rule: store down: verify answers store_unavailable"
done_testing
