#!/bin/bash
# kz-run --output: after the run each declared file is read from the real
# worker's workspace and linked by kz-project to exactly the turn's room;
# a declared file that is missing, a symlink, not a rooted path or of a
# type kz-project refuses is reported by name and reason, the status line
# says which were linked, and nothing undeclared is linked.  Private by
# default: raw stdout, stderr and undeclared workspace files reach neither
# the room (another member's admission and resolve) nor the audit, and no
# output record carries a file's name, path or bytes.  What the code leaves
# for the host to take out is hostile: a FIFO under a declared name is
# refused without a read that would block, a declared path through a
# symlinked directory is missing (never followed), a name with control
# characters reaches nothing the operator reads, and a workspace whose
# archive one reply cannot carry is refused at once with its reason.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 33
. "$TOP/tests/e2e/room-run-lib.sh"

q member-create --member alice && q member-create --member bob &&
	q room-create --room r1 --member alice && q room-join --room r1 --member bob
ok $? "a room of alice and bob"

cat >"$T/prog.sh" <<'SH'
mkdir -p out
printf 'RESULT-CONTENT-7d1\n' >out/result.txt
printf 'UNDECLARED-CONTENT-9c2\n' >private-notes.txt
printf 'not declared either\n' >out/other.txt
ln -s /etc/passwd link.txt
mkfifo fifo.txt
ln -s /etc etc
: >"$(printf 'esc\033]0;KZ-TITLE\007\n.txt')"
printf '\x7fELF' >prog.exe
echo STDOUT-MARKER-5a4
echo STDERR-MARKER-3b8 >&2
SH
kz-run --room r1 --member alice --turn t1 --output out/result.txt \
	--output missing.txt --output link.txt --output ../escape.txt \
	--output prog.exe --output fifo.txt --output etc/passwd \
	-- sh -c "$(cat "$T/prog.sh")" >"$T/o1" 2>"$T/e1"
is "$?" 0 "the run exits 0"
like "$(cat "$T/o1")" "STDOUT-MARKER-5a4" "the initiator gets the raw stdout"
e1=$(cat "$T/e1")
like "$e1" "kz-run: output missing.txt: refused: refused: missing from the workspace" \
	"a missing output is reported by name and reason"
like "$e1" "kz-run: output link.txt: refused: refused: not a regular file" \
	"a symlink is refused, never followed"
like "$e1" "kz-run: output \(not a rooted path\): refused: bad_request: not a rooted relative path" \
	"a path that is not rooted is refused and not echoed"
like "$e1" "kz-run: output prog.exe: refused: refused: the output type is not allowed" \
	"kz-project's type policy refuses an executable"
like "$e1" "kz-run: output fifo.txt: refused: refused: not a regular file" \
	"a FIFO is refused, never opened"
like "$e1" "kz-run: output etc/passwd: refused: refused: missing from the workspace" \
	"a path through a symlinked directory is missing, never followed"
tnot "no control character of a workspace name reaches the operator" grep -q "$(printf '\033')" "$T/e1"
like "$e1" "kz-run: exit 0 \(worker [^)]+\); outputs linked 1 of 7: out/result.txt" \
	"the status line says which outputs were linked"

# What another member of the room sees: kz-project's admission of bob's
# turn lists the room's files.
adm=$(kz-project admit --room r1 --member bob --turn t2 2>&1)
items() { "$PY" -c 'import json,sys
j=json.load(sys.stdin)
print(" ".join(x.get(sys.argv[1], "") for x in j.get("items") or []))' "$1"; }
is "$(printf '%s' "$adm" | items path)" "result.txt" \
	"bob's admission lists the linked output, and nothing else"
unlike "$adm" "private-notes|other.txt|link.txt|prog.exe|missing|fifo|passwd" \
	"nothing undeclared or refused is in it"
unlike "$adm" "STDOUT-MARKER|STDERR-MARKER|RESULT-CONTENT|UNDECLARED" \
	"and no output bytes"
res=$(printf '%s' "$adm" | items id)
like "$res" "^out-[0-9a-f]+$" "the output is one durable resource"
t "bob, a member of the room, can read it" kz-project can-read --member bob --resource "$res"
q member-create --member carol
kz-project can-read --member carol --resource "$res" >/dev/null 2>&1
is "$?" 1 "carol, who is not in the room, cannot"
q room-create --room r2 --member bob
adm2=$(kz-project admit --room r2 --member bob --turn t3 2>&1)
unlike "$adm2" "result.txt" "the output is linked to exactly that room"

# The audit: one output record each, the correlation fields, no names.
is "$(n_kind output)" 7 "seven output records"
is "$(audit_q --kind output | grep -c '"decision":"linked"')" 1 "one linked"
is "$(audit_q --kind output | grep -c '"decision":"refused"')" 6 "six refused"
rec=$(audit_q --kind output | grep '"decision":"linked"')
like "$rec" "\"resource\":\"$res\"" "the linked record carries the durable reference"
like "$rec" '"actor_hash":"[0-9a-f]+"' "the actor's hash"
like "$rec" '"conversation_hash":"[0-9a-f]+"' "the conversation's"
like "$rec" '"audience_version":[0-9]+' "the audience version"
like "$rec" '"capability":"code.run"' "the capability"
like "$rec" '"manifest_digest":"[0-9a-f]{64}"' "and the manifest digest"
log=$(cat "$T"/audit/* 2>/dev/null; audit_q)
unlike "$log" "result\.txt|missing\.txt|link\.txt|prog\.exe|escape|private-notes|other\.txt" \
	"no file name or path is in the audit"
unlike "$log" "RESULT-CONTENT|UNDECLARED-CONTENT|STDOUT-MARKER|STDERR-MARKER" \
	"no file bytes, stdout or stderr are in the audit"
is "$(ls -A "$T"/snapshots/*/ | grep -c '\.out')" 0 "the output archive and directory are gone"

# A workspace whose archive is under SANDBOX_SNAPSHOT_MAX (64M) but over
# what one reply frame carries in base64: refused at once, with the reason,
# not left waiting for a reply that never comes.
wait_for warm 1
kz-run --room r1 --member alice --turn t9 --output small.txt -- \
	sh -c 'echo s >small.txt; head -c 50M /dev/zero >big' >/dev/null 2>"$T/e9"
like "$(cat "$T/e9")" "kz-run: output small.txt: refused: refused: the workspace archive is over the worker's bound for outputs \(SANDBOX_SNAPSHOT_MAX, at most 47M\)" \
	"an archive too large for one reply is refused with its reason"
done_testing
