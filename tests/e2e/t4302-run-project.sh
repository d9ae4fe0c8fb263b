#!/bin/bash
# kz-run with --room: kz-project admits the turn before the lease, then
# verifies and materializes it into the leased worker right before the code
# starts.  The code reads the projected files, cannot write, chmod, rename
# or unlink them, and does not find them in the next turn's restored
# workspace; a file withdrawn between turns is not projected; a member who
# cannot read a selected id is refused before anything is leased.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 42
. "$TOP/tests/e2e/room-run-lib.sh"

q member-create --member alice && q member-create --member bob &&
	q room-create --room r1 --member alice &&
	doc alice d1 docs/one.txt "first file" &&
	doc alice d2 data.csv "a,b
1,2" &&
	q link --resource d1 --member alice --room r1 --turn t0 --shared &&
	q link --resource d2 --member alice --room r1 --turn t0 --shared
ok $? "a room with two linked files"

cat >"$T/turn1.py" <<'PY'
import os
P = "/projection/files"
print("one:", open(P + "/docs/one.txt").read())
print("csv:", open(P + "/data.csv").read().replace("\n", "|"))
def tries(name, f):
    try:
        f()
        print(name, "allowed")
    except OSError as e:
        print(name, "denied")
tries("append", lambda: open(P + "/docs/one.txt", "a").write("x"))
tries("truncate", lambda: open(P + "/data.csv", "w"))
tries("chmod", lambda: os.chmod(P + "/data.csv", 0o666))
tries("unlink", lambda: os.unlink(P + "/data.csv"))
tries("rename", lambda: os.rename(P + "/data.csv", P + "/x.csv"))
tries("create", lambda: open(P + "/docs/new.txt", "w"))
open("/workspace/mine.txt", "w").write("kept")
print("cwd:", os.getcwd())
PY
kz-run -q --room r1 --member alice -- python3 -c "$(cat "$T/turn1.py")" >"$T/o1" 2>"$T/e1"
is "$?" 0 "turn 1 runs"
o1=$(cat "$T/o1")
like "$o1" "one: first file" "the code reads a projected file, exact bytes"
like "$o1" "csv: a,b\|1,2" "and the second one"
for op in append truncate chmod unlink rename create; do
	like "$o1" "$op denied" "the code cannot $op in the projection"
done
wait_for warm 1
is "$(ls -A "$T"/workers/*/projection | wc -l)" 0 \
	"the reset after release wiped the projection"

# The dispatch records carry the admission's audience version and digest.
# (kz-project records the member's keyed hash as actor_hash; kz-run sends
# the member, which the sink stores under the same keyed hash.)
ev() { "$PY" -c 'import json,sys; print(json.loads(sys.stdin.readline())["event"].get(sys.argv[1]))' "$1"; }
adm=$(audit_q --kind admission | grep '"decision":"allow"' | tail -1)
md=$(printf '%s\n' "$adm" | ev manifest_digest)
av=$(printf '%s\n' "$adm" | ev audience_version)
mh=$(printf '%s\n' "$adm" | ev actor_hash)
like "$md $av $mh" '^[0-9a-f]{64} [0-9]+ [0-9a-f]+$' "kz-project audited the admission"
disp=$(audit_q --kind dispatch | tail -2)
is "$(printf '%s\n' "$disp" | grep -c "\"manifest_digest\":\"$md\"")" 2 \
	"both dispatch records carry kz-project's manifest digest"
is "$(printf '%s\n' "$disp" | grep -c "\"audience_version\":$av,")" 2 \
	"and the admitted audience version"
is "$(printf '%s\n' "$disp" | grep -c "\"member_hash\":\"$mh\"")" 2 \
	"and the member's hash as kz-project records it"
t "kz-project audited the verification and the projection" sh -c \
	"kz-audit query --dir '$T/audit' --kind verification | grep -q '\"decision\":\"allow\"' &&
	 kz-audit query --dir '$T/audit' --kind projection | grep -q '\"files\":2'"

# Between turns a file is withdrawn; the workspace comes back, the
# projection never was in it.
q withdraw --resource d2 --member alice --room r1
ok $? "data.csv is withdrawn from the room"
cat >"$T/turn2.py" <<'PY'
import os
print("mine:", open("/workspace/mine.txt").read())
found = [f for _, _, fs in os.walk("/workspace") for f in fs]
print("workspace:", sorted(found))
print("projected:", sorted(f for _, _, fs in os.walk("/projection") for f in fs))
PY
kz-run -q --actor alice --room r1 --member alice -- python3 -c "$(cat "$T/turn2.py")" >"$T/o2" 2>"$T/e2"
is "$?" 0 "turn 2 runs"
o2=$(cat "$T/o2")
like "$o2" "mine: kept" "the workspace file is restored"
like "$o2" "workspace: \['mine.txt'\]" "no projected file in the restored workspace"
like "$o2" "projected: \['one.txt'\]" "the withdrawn file is not projected"
t "no workspace snapshot holds a projected file" sh -c \
	"for f in '$T'/snapshots/*/*.tar; do tar -tf \"\$f\"; done | grep -q mine.txt &&
	 ! { for f in '$T'/snapshots/*/*.tar; do tar -tf \"\$f\"; done | grep -Eq 'one.txt|data.csv'; }"

# The audience moves between admission and verify: bob joins while kz-run,
# admitted, waits for the only worker (held by another lease).  The worker
# is leased and released, and nothing runs.
wait_for warm 1
kz-lease lease --socket "$S" --actor holder --conversation hold >"$T/hold.json"
lid=$(field "$T/hold.json" lease_id) tok=$(field "$T/hold.json" token)
na=$(audit_q --kind admission | grep -c '"decision":"allow"')
d0=$(n_kind dispatch)
RUN_LEASE_WAIT_MS=20000 kz-run --room r1 --member alice -- sh -c 'echo ran' >"$T/o3" 2>"$T/e3" &
runpid=$!
for _ in $(seq 1 100); do
	[ "$(audit_q --kind admission | grep -c '"decision":"allow"')" -gt "$na" ] && break
	sleep 0.05
done
q room-join --room r1 --member bob
kz-lease release --socket "$S" --lease-id "$lid" --token "$tok" >/dev/null
wait "$runpid"
is "$?" 1 "an audience change after admission refuses the run at verify"
like "$(cat "$T/e3")" "kz-run: projection: resource_audience_changed" "with kz-project's code"
is "$(cat "$T/o3")$(n_kind dispatch)" "$d0" "nothing ran, nothing was dispatched"
t "the refusal is audited at the verify stage" sh -c \
	"kz-audit query --dir '$T/audit' --kind projection | grep '\"decision\":\"denied\"' | grep -q '\"stage\":\"verify\"'"
q room-leave --room r1 --member bob

# A file admission leaves out (the place rule, kz-project(8)): alice's
# private link holds clash.txt in her projection, so bob's shared one at
# the same path is left out of her turn, and kz-run says which and why.
q room-join --room r1 --member bob && doc alice d5 clash.txt "alice's" &&
	doc bob d6 clash.txt "bob's" &&
	q link --resource d5 --member alice --room r1 --turn t5 --private &&
	q link --resource d6 --member bob --room r1 --turn t5 --shared
ok $? "alice links clash.txt privately, bob shares his at the same path"
wait_for warm 1
kz-run -q --room r1 --member alice -- cat /projection/files/clash.txt >"$T/o9" 2>"$T/e9"
is "$? $(cat "$T/o9")" "0 alice's" "alice's turn runs with her own clash.txt"
is "$(cat "$T/e9")" "kz-run: admission left 1 of the room's files out: d6 (path_clash)" \
	"and one line says which file was left out, and why"
q withdraw --resource d6 --member bob --room r1 && q withdraw --resource d5 --member alice --room r1 &&
	q room-leave --room r1 --member bob
wait_for warm 1
# Refusals: nothing is leased, nothing dispatched.
doc alice d3 private.txt "alice only"
q room-create --room rb --member bob
l0=$(n_kind lease) d0=$(n_kind dispatch)
rc_is 1 "a member who cannot read the selected id is refused" \
	kz-run --room rb --member bob --select d3 -- cat /projection/files/private.txt
like "$(cat "$T/.out")" "kz-run: admission: refused: " "with kz-project's refusal"
unlike "$(cat "$T/.out")" "alice only" "and none of the file's bytes"
is "$(n_kind lease) $(n_kind dispatch)" "$l0 $d0" "nothing was leased or dispatched"
t "the denial is audited by kz-run and by kz-project" sh -c \
	"[ \$(kz-audit query --dir '$T/audit' --kind admission | grep -c '\"decision\":\"denied\"') -ge 1 ] &&
	 kz-audit query --dir '$T/audit' --kind admission | grep -q '\"decision\":\"refuse\"'"
KZ_PROJECT_SOCKET=$T/nope.sock rc_is 3 "kz-project unreachable: exit 3" \
	kz-run --room r1 --member alice -- true
is "$(n_kind lease)" "$l0" "and nothing was leased"
rc_is 2 "--file and --room are exclusive" \
	kz-run --room r1 --member alice --file "$T/turn1.py" -- true
rc_is 2 "--conversation must be the room" \
	kz-run --room r1 --member alice --conversation c2 -- true
unlike "$(cat "$T"/audit/*.jsonl)" '"alice"|"bob"|"r1"|"rb"' "no raw id in the audit log"
t "the audit chain verifies" kz-audit verify --dir "$T/audit"
done_testing
