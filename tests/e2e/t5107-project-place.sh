#!/bin/bash
# The place rule against a real store: no member can make a room
# unadmittable for the others.  Each way of blocking a room (one path
# twice, one path inside another, a room over its bounds, a member who
# fills the room and leaves, a clash that reaches admission anyway) is
# tried: the link that would block it is refused with a one-line reason
# that names no one, and the room still admits and projects for the
# others.
. "$(dirname "$0")/lib.sh"
plan 44
. "$(dirname "$0")/project-lib.sh"

for m in alice bob carol; do q member-create --member $m; done
q room-create --room r1 --member alice
q room-join --room r1 --member bob; q room-join --room r1 --member carol
mkdir -p "$T/ws/out"; echo result >"$T/ws/out/result.txt"; echo x >"$T/ws/notes.md"
# lo SNAP ARGS...: bob's link-output in r1 for the turn named SNAP.
lo() { local s=$1; shift; kz-project link-output --room r1 --member bob \
	--workspace "$T/ws" --snapshot "$T/$s.json" --turn "$s" "$@"; }
# go NAME MEMBER [ROOM]: the member admits a turn and materializes it.
go() { adm "$1" --room "${3:-r1}" --member "$2" --turn "$1" &&
	kz-project materialize --snapshot "$T/$1.json" --dest "$T/p-$1" >/dev/null 2>&1; }
files() { (cd "$T/p-$1" && find . -type f | sed 's|^\./||' | sort | paste -sd, -); }

# --- one path twice ------------------------------------------------------------
adm b1 --room r1 --member bob --turn b1
lo b1 --file out/result.txt >"$T/o1.json"
is "$?" 0 "same path: bob's first output takes result.txt"
adm b2 --room r1 --member bob --turn b2
is "$(lo b2 --file out/result.txt 2>&1 >/dev/null | grep -v 'audit is off')" \
	"kz-project: refused: the room already has a file at this path (first linked, first placed)" \
	"same path: refused: the same output name in a later turn, with one line saying why"
unlike "$(lo b2 --file out/result.txt 2>&1)" 'alice|bob|carol|[0-9a-f]{16}|result' \
	"same path: ...naming no member, id or path"
lo b2 --file out/result.txt --name result-2.txt >"$T/o2.json"
is "$?" 0 "same path: under another name the output is linked"
doc alice n1 notes.md "alice's notes"
q link --resource n1 --member alice --room r1 --shared
adm b3 --room r1 --member bob --turn b3
is "$(code link-output --room r1 --member bob --workspace "$T/ws" --snapshot "$T/b3.json" \
	--turn b3 --file notes.md)" refused "same path: refused: an output named like another member's file"
doc bob d1 notes.md "bob's notes"
is "$(code link --resource d1 --member bob --room r1 --shared)" refused \
	"same path: refused: a document at a path the room has"
q link --resource d1 --member bob --project nosuch
go c1 carol
is "$? $(files c1)" "0 notes.md,result-2.txt,result.txt" \
	"same path: the room still admits and projects for the others"
is "$(cat "$T/p-c1/notes.md")" "alice's notes" "same path: first linked, first placed"

# --- one path inside another ---------------------------------------------------
doc alice a1 a.txt "a"
q link --resource a1 --member alice --room r1 --shared
doc carol c2 a.txt/x "inside a file"
is "$(why link --resource c2 --member carol --room r1 --shared)" \
	"this path lies beneath a file the room already has" \
	"prefix: refused: a path beneath a file the room has"
doc carol c3 lib/x.txt "in a directory"
q link --resource c3 --member carol --room r1 --shared
doc bob d3 lib "a file where a directory is"
is "$(why link --resource d3 --member bob --room r1 --shared)" \
	"the room already has files beneath this path" \
	"prefix: refused: a file where the room has a directory"
doc bob d4 a.txt-b "a sibling"
t "prefix: a name that only starts like another is no clash" \
	kz-project link --resource d4 --member bob --room r1 --shared
doc carol c4 c.txt "c"
q link --resource c4 --member carol --room r1 --shared
is "$(code version-new --resource c4 --member carol --path a.txt/y --blob "$(blob v2)")" refused \
	"prefix: refused: a new version that moves a linked file beneath another"
like "$(why version-new --resource c4 --member carol --path a.txt --blob "$(blob v2)")" \
	'^in a room the file is linked to: the room already has a file at this path' \
	"prefix: ...or onto another's path, saying where"
t "prefix: a new version at a free path is taken" \
	kz-project version-new --resource c4 --member carol --path c/c.txt --blob "$(blob v3)"
go c2 alice
is "$? $(files c2)" "0 a.txt,a.txt-b,c/c.txt,lib/x.txt,notes.md,result-2.txt,result.txt" \
	"prefix: the room admits and projects every file for the others"

# --- a private pointer is its linker's alone -------------------------------------
doc carol c5 p.txt "carol's private"
q link --resource c5 --member carol --room r1
doc alice a5 p.txt "alice's shared"
t "private: another member's private link takes no path from the others" \
	kz-project link --resource a5 --member alice --room r1 --shared
go c3 carol
is "$? $(left c3) $(cat "$T/p-c3/p.txt")" "0 a5:path_clash carol's private" \
	"private: its linker's own file comes first; the other is left out, with the reason"
go c4 alice
is "$? $(left c4) $(cat "$T/p-c4/p.txt")" "0  alice's shared" "private: ...for its linker only"

# --- over the room's bounds --------------------------------------------------------
q room-create --room r2 --member alice; q room-join --room r2 --member bob
doc alice e1 e1.txt "0123456789"
q link --resource e1 --member alice --room r2 --shared
for i in 2 3; do doc bob e$i e$i.txt "0123456789"; done
export KZ_PROJECT_MAX_FILES=3 KZ_PROJECT_MAX_TOTAL_BYTES=35
t "bounds: a link within the room's bounds is taken" \
	kz-project link --resource e2 --member bob --room r2 --shared
doc bob big big.txt "0123456789012345678"
is "$(why link --resource big --member bob --room r2 --shared)" \
	"the room's files would be over the total bytes of one projection" \
	"bounds: refused: a link over the room's total bytes"
t "bounds: the last file that fits is taken" kz-project link --resource e3 --member bob --room r2 --shared
doc bob e4 e4.txt "0"
is "$(why link --resource e4 --member bob --room r2 --shared)" \
	"the room already holds as many files as one projection may" \
	"bounds: refused: a link over the room's file count"
adm b4 --room r2 --member bob --turn b4
mkdir -p "$T/ws2"; echo y >"$T/ws2/o.txt"
is "$(code link-output --room r2 --member bob --workspace "$T/ws2" --snapshot "$T/b4.json" --turn b4 --file o.txt)" \
	refused "bounds: refused: an output over the room's file count"
is "$(KZ_PROJECT_MAX_FILE_BYTES=5 code version-new --resource e3 --member bob --path e3.txt --blob "$(blob 0123456)")" \
	refused "bounds: refused: a new version over the bound of one file"
go c5 alice r2
is "$? $(files c5)" "0 e1.txt,e2.txt,e3.txt" "bounds: the full room admits and projects for the others"
# A bound lowered since the links were made: the later links are left out.
export KZ_PROJECT_MAX_FILES=2
go c6 alice r2
is "$? $(files c6) $(left c6)" "0 e1.txt,e2.txt e3:over_bounds" \
	"bounds: over a lowered bound, the room admits the first files and names the rest"
t "bounds: verify goes on such a snapshot" kz-project verify --snapshot "$T/c6.json"
unset KZ_PROJECT_MAX_FILES KZ_PROJECT_MAX_TOTAL_BYTES

# --- a member who fills the room and leaves ------------------------------------------
q room-leave --room r2 --member bob
go c7 alice r2
is "$? $(files c7)" "0 e1.txt,e2.txt,e3.txt" "leaves: the room admits after the member left, keeping the files"
q room-join --room r2 --member carol
is "$(code withdraw --resource e2 --member carol --room r2)" not_owner \
	"leaves: refused: a member withdraws another's link"
t "leaves: the room's owner withdraws a link of the member who left" \
	kz-project withdraw --resource e2 --member alice --room r2
go c8 carol r2
is "$? $(files c8)" "0 e1.txt,e3.txt" "leaves: ...and it is gone for everyone"
is "$(code link --resource e4 --member bob --room r2 --shared)" refused \
	"leaves: refused: a member who left links nothing into the room"
doc carol f2 e2.txt "carol's"
t "leaves: the path is free again" kz-project link --resource f2 --member carol --room r2 --shared
q room-leave --room r2 --member alice
is "$(code withdraw --resource f2 --member alice --room r2)" not_owner \
	"leaves: refused: a room's owner who left withdraws nothing"
q room-join --room r2 --member alice
is "$(code withdraw --resource f2 --member bob --room r2)" not_owner \
	"leaves: refused: nor does any other member"

# --- a clash that reaches admission anyway --------------------------------------------
# A project's file in alice's scope takes no place in the room; a room
# link at its path later is left out of alice's turns, not the room.
q project-create --project pj --member carol; q project-join --project pj --member alice
doc carol g1 shared.md "carol's project file"
q link --resource g1 --member carol --project pj --shared
adm c9 --room r1 --member alice --turn c9 --select g1
is "$?" 0 "scope: alice asks for a project file by id"
doc bob g2 shared.md "bob's room file"
t "scope: a room link at that path is taken (the scope is alice's)" \
	kz-project link --resource g2 --member bob --room r1 --shared
go c10 alice
is "$? $(left c10) $(cat "$T/p-c10/shared.md")" "0 g2:path_clash carol's project file" \
	"scope: alice's scope comes first; the room's file is left out for her"
t "scope: the admission left out proves at the load" kz-project verify --snapshot "$T/c10.json"
go c11 carol
is "$? $(cat "$T/p-c11/shared.md")" "0 bob's room file" "scope: the others get the room's file"
adm c12 --room r1 --member alice --turn c12 --select g1 --select g2
like "$(tail -1 "$T/c12.err")" "^kz-project: refused: the files requested by id do not fit together" \
	"scope: refused: two ids asked for in one turn at one path"
doc bob g3 later.md "after admission"
adm c13 --room r1 --member alice --turn c13
q link --resource g3 --member bob --room r1 --shared
is "$(code verify --snapshot "$T/c13.json")" manifest_changed \
	"scope: a new link after admission still changes the manifest"

# --- the audit findings, replayed ------------------------------------------------------
q room-create --room r3 --member alice; q room-join --room r3 --member bob
export KZ_PROJECT_MAX_FILES=2
mkdir -p "$T/ws3"; for i in 1 2 3; do echo $i >"$T/ws3/o$i.txt"; done
adm b5 --room r3 --member bob --turn b5
n=0; for i in 1 2 3; do
	kz-project link-output --room r3 --member bob --workspace "$T/ws3" --snapshot "$T/b5.json" \
		--turn b5 --file o$i.txt >/dev/null 2>&1 && n=$((n + 1)); done
is "$n" 2 "audit: outputs beyond the room's bound are refused"
q room-leave --room r3 --member bob
go c14 alice r3
is "$? $(files c14)" "0 o1.txt,o2.txt" "audit: the room admits for alice after bob filled it and left"
unset KZ_PROJECT_MAX_FILES
done_testing
