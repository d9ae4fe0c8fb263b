#!/bin/bash
# kz-project's rules for outputs (retained and shared), project grants,
# declared sources and audit, against a real redis-server and a stand-in
# audit sink that records every event it is sent.
. "$(dirname "$0")/lib.sh"
plan 34
. "$(dirname "$0")/project-lib.sh"

for m in alice bob carol dave; do q member-create --member $m; done

# --- the shared-output rule: shared-turn outputs --------------------------
q room-create --room r10 --member alice; q room-join --room r10 --member bob
mkdir -p "$T/ws/out" "$T/ws/private"
printf 'a,b\n1,2\n' >"$T/ws/out/table.csv"
printf 'raw stdout' >"$T/ws/private/stdout.log"
printf '\0\1binary' >"$T/ws/out/fake.txt"
ln -s ../private/stdout.log "$T/ws/out/link.csv"
# An output is linked for an admitted run: its snapshot names room, member, turn.
adm s10 --room r10 --member alice --turn t1
kz-project link-output --snapshot "$T/s10.json" --room r10 --member alice --turn t1 --workspace "$T/ws" \
	--file out/table.csv >"$T/o10.json"
is "$?" 0 "shared-output rule: a declared shared-turn output is validated and linked"
like "$(cat "$T/o10.json")" '"sha256"' "shared-output rule: the room gets a durable reference with its digest"
unlike "$(cat "$T/o10.json")" 'a,b|/ws/|workspace' "shared-output rule: the reference carries no bytes and no workspace path"
OUT=$(js "$T/o10.json" 'd["resource"]')
t "shared-output rule: a room member can read the linked output" kz-project can-read --member bob --resource "$OUT"
is "$(code can-read --member carol --resource "$OUT")" refused "shared-output rule: refused: it is linked to exactly that room"
is "$(code link-output --snapshot "$T/s10.json" --room r10 --member alice --turn t1 --workspace "$T/ws" --file out/fake.txt)" refused \
	"shared-output rule: refused: content that does not match its type"
is "$(code link-output --snapshot "$T/s10.json" --room r10 --member alice --turn t1 --workspace "$T/ws" --file out/link.csv)" refused \
	"shared-output rule: refused: a symlink out of the declared file"
is "$(code link-output --snapshot "$T/s10.json" --room r10 --member alice --turn t1 --workspace "$T/ws" --file ../etc/passwd)" bad_request \
	"shared-output rule: refused: a path outside the workspace"
KZ_PROJECT_OUTPUT_MAX_BYTES=4 rc_is 1 "shared-output rule: refused: an output over the size bound" \
	kz-project link-output --snapshot "$T/s10.json" --room r10 --member alice --turn t1 --workspace "$T/ws" --file out/table.csv
kz-project placeholder --room r10 --run run1 --call call_provider_XYZ --name deck.pptx >"$T/ph.json"
unlike "$(cat "$T/ph.json")" 'call_provider_XYZ|resource|url|http' \
	"shared-output rule: a placeholder names its call by a run-bound room reference only"
kz-project placeholder --room r10 --run run2 --call call_provider_XYZ --name deck.pptx >"$T/ph2.json"
unlike "$(js "$T/ph.json" 'd["ref"]')" "$(js "$T/ph2.json" 'd["ref"]')" \
	"shared-output rule: the reference is bound to the run"

# --- the retained-output rule: retained outputs in a later turn -----------
adm a9 --room r10 --member bob --turn t2
like "$(ids a9)" "$OUT" "retained-output rule: a current member gets the retained output in a later turn"
unlike "$(cat "$T/a9.json")" 'a,b' "retained-output rule: the decision carries metadata, never raw bytes"
t "retained-output rule: the sandbox gets the digest-matched bytes" \
	kz-project materialize --snapshot "$T/a9.json" --dest "$T/p9"
is "$(sha256sum <"$T/p9/table.csv" | cut -d' ' -f1)" "$(js "$T/o10.json" 'd["sha256"]')" \
	"retained-output rule: projected bytes match the output's digest"
adm a9b --room r10 --member carol --turn t2
is "$?" 1 "retained-output rule: refused: someone who is not a current member"

# --- the project-grant rule: projects add access paths, not authority -----
q project-create --project pA --member alice; q project-join --project pA --member bob
q project-create --project pB --member carol; q project-join --project pB --member bob
doc alice d11 plan.txt "the plan"
doc alice d11p private.txt "kept private"
q link --resource d11 --member alice --project pA --shared
q link --resource d11p --member alice --project pA --private
t "project-grant rule: a project grant is a read grant on the linked item" \
	kz-project can-read --member bob --resource d11
is "$(code can-read --member carol --resource d11)" refused \
	"project-grant rule: refused: the item is not visible in any other project"
is "$(code can-read --member bob --resource d11p)" refused \
	"project-grant rule: refused: a pointer left private grants nothing, even to members"
is "$(code version-new --resource d11 --member bob --path plan.txt --blob "$(blob x)")" not_owner \
	"project-grant rule: refused: no write through a project grant"
is "$(code link --resource d11 --member bob --project pB --shared)" not_owner \
	"project-grant rule: refused: no re-share through a project grant"
is "$(code withdraw --resource d11 --member bob --project pA)" not_owner \
	"project-grant rule: refused: a reader cannot withdraw the grant"
q project-leave --project pA --member bob
is "$(code can-read --member bob --resource d11)" refused "project-grant rule: refused: the grant ends when the reader leaves"
q project-join --project pA --member bob
q withdraw --resource d11 --member alice --project pA
is "$(code can-read --member bob --resource d11)" refused "project-grant rule: refused: the grant ends when the linker withdraws"
doc alice d11d default.txt "default pointer"
q link --resource d11d --member alice --project pA
KZ_PROJECT_POINTER_DEFAULT=shared rc_is 1 "project-grant rule: a later policy change never widens an existing link" \
	kz-project can-read --member bob --resource d11d
rc_is 2 "project-grant rule: refused: a project takes no prompt or instruction" \
	kz-project project-create --project pC --member alice --instruction x

# --- the declared-source rule: declared object-store sources grant nothing ---
t "declared-source rule: a declared source is recorded" kz-project declare-source --project pA --member alice \
	--name src1 --kind s3 --bucket b --key k --url "https://example.invalid/s?sig=x"
is "$(code admit --room r10 --member alice --select src1)" refused \
	"declared-source rule: refused: a declared source is no selector"
is "$(code can-read --member bob --resource src1)" refused \
	"declared-source rule: refused: a declared source grants no read"

# --- the audit rule: every admission, verification and refusal is audited ---
"$PY" - "$T/audit.sock" "$T/audit.log" <<'PYEOF' &
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
seq = 0
while True:
    c, _ = s.accept()
    n = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
    req = json.loads(c.recv(n, socket.MSG_WAITALL))
    seq += 1
    with open(sys.argv[2], "a") as f:
        f.write(json.dumps({"kind": req["kind"], "event": req["event"]}) + "\n")
    rep = json.dumps({"v": 1, "id": req.get("id"), "ok": True, "seq": seq}).encode()
    c.sendall(struct.pack(">I", len(rep)) + rep); c.close()
PYEOF
_pids="$_pids $!"
wait_sock "$T/audit.sock" 5
export KZ_AUDIT=on KZ_AUDIT_SOCKET=$T/audit.sock
adm a14 --room r10 --member bob --turn t3
q verify --snapshot "$T/a14.json"
adm a14b --room r10 --member bob --turn t4 --select d11p
like "$(grep -c '"kind": "admission"' "$T/audit.log")" '^2$' "audit rule: every admission is audited, refused or not"
like "$(grep '"verification"' "$T/audit.log")" '"actor_hash": "[0-9a-f]{32}".*"conversation_hash".*"audience_version".*"capability".*"manifest_digest"' \
	"audit rule: events carry actor, conversation, audience version, capability and manifest digest"
like "$(grep '"refuse"' "$T/audit.log")" '"reason"' "audit rule: a refusal is audited with its reason"
unlike "$(grep "\"refuse\"" "$T/audit.log")" "private.txt|kept private|d11p|bob|/" \
	"audit rule: denial events carry no filenames, bytes, raw ids or paths"
export KZ_AUDIT_SOCKET=$T/nothing.sock
is "$(code admit --room r10 --member bob --turn t5)" unavailable \
	"audit rule: refused (exit 3): an admission that cannot be audited"
done_testing
