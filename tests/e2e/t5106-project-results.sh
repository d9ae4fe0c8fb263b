#!/bin/bash
# kz-project's side of a run's results (issue 18), each with a case that
# goes and one that is refused: the capability checked at admission and
# for link-output, the withheld selection, a projection that cannot be
# audited leaving nothing, turn-less links, signed URLs in declare-source,
# and link-output as kz-run calls it.  The audit sink is the real kz-audit,
# so every record sent here also passes its schema.
. "$(dirname "$0")/lib.sh"
plan 45
. "$(dirname "$0")/project-lib.sh"

export KZ_AUDIT=on KZ_AUDIT_SOCKET=$T/kz-audit.sock
bg kz-audit serve --socket "$KZ_AUDIT_SOCKET" 2>"$T/audit.log"
wait_sock "$KZ_AUDIT_SOCKET" 10
aq() { kz-audit query --dir "$T/audit" "$@"; }

for m in alice bob; do q member-create --member $m; done

# --- capability: the closed set, at admission -------------------------------
q room-create --room rc --member alice
doc alice c1 c.txt "cap file"
q link --resource c1 --member alice --room rc --turn t0 --shared
adm k1 --room rc --member alice --turn t1 --capability code.run.egress
is "$(js "$T/k1.json" 'd["capability"]')" code.run.egress "capability: a capability of the closed set is admitted"
is "$(code admit --room rc --member alice --turn t2 --capability code.run.anything)" isolation_denied \
	"capability: refused: a capability outside the closed set"
rc_is 1 "capability: ...exit 1" kz-project admit --room rc --member alice --turn t2 --capability code.runx
t "capability: the refusal is audited as an isolation denial" sh -c \
	"kz-audit query --dir '$T/audit' --kind isolation_denial | grep '\"boundary\":\"capability\"' | grep -q '\"actor_hash\"'"
unlike "$(aq --kind isolation_denial)" 'code\.run' "capability: the denial never carries the raw name"

# --- link-output as kz-run calls it ------------------------------------------
mkdir -p "$T/ws/out/dir.csv" "$T/ws/private"
printf 'x,y\n3,4\n' >"$T/ws/out/r.csv"
printf 'raw stdout' >"$T/ws/private/stdout.log"
lo() { kz-project link-output --room rc --member alice --workspace "$T/ws" "$@"; }
lo --snapshot "$T/k1.json" --turn t1 --file out/r.csv >"$T/lo1.json"
is "$?" 0 "link-output: a declared output of an admitted run is linked"
is "$(js "$T/lo1.json" '",".join(sorted(d))')" "link_seq,name,resource,sha256,size,version" \
	"link-output: the reply is the durable reference and bounded metadata only"
unlike "$(cat "$T/lo1.json")" 'x,y|/ws/|out/' "link-output: no bytes and no workspace path in the reply"
t "link-output: the room's members read it" kz-project can-read --member alice \
	--resource "$(js "$T/lo1.json" 'd["resource"]')"
t "link-output: the link is audited with its correlation fields" sh -c \
	"kz-audit query --dir '$T/audit' --kind projection | grep '\"stage\":\"output\"' | grep '\"decision\":\"allow\"' | grep -q '\"manifest_digest\"'"
unlike "$(aq --kind projection | grep '"stage":"output"')" 'r\.csv|x,y|/ws' \
	"link-output: the audit record names no file, bytes or path"
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k1.json" --turn t9 --file out/r.csv)" refused \
	"link-output: refused: another turn than the admitted one"
q room-create --room ro --member alice
is "$(code link-output --room ro --member alice --workspace "$T/ws" --snapshot "$T/k1.json" --turn t1 --file out/r.csv)" refused \
	"link-output: refused: another room than the admitted one"
is "$(code link-output --room rc --member alice --workspace "$T/ws" --turn t1 --file out/r.csv)" bad_request \
	"link-output: refused: no admission snapshot"
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k1.json" --turn t1 --file out/dir.csv)" refused \
	"link-output: refused: a directory is no regular file"
adm k2 --room rc --member alice --turn t3 --capability code.run.private
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k2.json" --turn t3 --file out/r.csv)" refused \
	"link-output: refused: code.run.private links no output"
adm k3 --room rc --member alice
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k3.json" --turn - --file out/r.csv)" refused \
	"link-output: refused: a turn-less admission links nothing"
adm k4 --room rc --member alice --turn t4
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k4.json" --turn t4 --file out/r.csv)" refused \
	"link-output: refused: a name the room already has (the place rule)"
t "link-output: the place refusal is audited, with its reason" sh -c \
	"kz-audit query --dir '$T/audit' --kind projection | grep '\"stage\":\"output\"' | grep '\"decision\":\"refuse\"' | grep -q 'already has a file'"
# Text is text all through, not only its first 512 bytes; HTML and SVG,
# which a viewer may run, are not output types unless the operator lists
# them (KZ_PROJECT_OUTPUT_TYPES).
{ head -c 600 /dev/zero | tr '\0' a; printf '\377\376 not UTF-8'; } >"$T/ws/out/late.txt"
{ head -c 600 /dev/zero | tr '\0' a; printf 'x\0y'; } >"$T/ws/out/nul.txt"
printf '<script>alert(1)</script>' >"$T/ws/out/page.html"
printf 'caf\303\251 \342\202\254 ok\n' >"$T/ws/out/utf8.txt"
adm k5 --room rc --member alice --turn t5
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k5.json" --turn t5 --file out/late.txt)" refused \
	"link-output: refused: a .txt invalid UTF-8 after its first 512 bytes"
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k5.json" --turn t5 --file out/nul.txt)" refused \
	"link-output: refused: a .txt with a NUL after its first 512 bytes"
is "$(code link-output --room rc --member alice --workspace "$T/ws" --snapshot "$T/k5.json" --turn t5 --file out/page.html)" refused \
	"link-output: refused: .html is not an output type by default"
lo --snapshot "$T/k5.json" --turn t5 --file out/utf8.txt >/dev/null
is "$?" 0 "link-output: valid UTF-8 text is linked"

# A binary type's magic bytes are checked on the stored blob, not on the
# live file: run code still writing flips a .png's head while its outputs
# are linked through the daemon, and no stored copy may begin otherwise.
q room-create --room rp --member alice
{ printf '\211PNG\r\n\032\n'; head -c 600 /dev/zero; } >"$T/ws/out/p.png"
bg "$PY" -c 'import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY)
while True: os.pwrite(fd, b"\x89PNG\r\n\x1a\n", 0); os.pwrite(fd, b"MZ-EVIL!", 0)' "$T/ws/out/p.png"
W=$LASTPID
adm p1 --room rp --member alice --turn t1
bg sh -c "exec kz-project serve --socket '$T/kzp.sock' 2>'$T/serve.log'"
wait_sock "$T/kzp.sock" 10
res=$("$PY" - "$T" <<'PY'
import json, socket, struct, sys
T, n = sys.argv[1], 0
snap = json.load(open(T + "/p1.json"))
for i in range(150):
    c = socket.socket(socket.AF_UNIX); c.connect(T + "/kzp.sock")
    b = json.dumps({"v": 1, "id": "o%d" % i, "op": "link-output",
        "room": "rp", "member": "alice", "turn": "t1", "snapshot": snap,
        "workspace": T + "/ws", "file": "out/p.png",
        "name": "p%d.png" % i}).encode()
    c.sendall(struct.pack(">I", len(b)) + b)
    k = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
    r = json.loads(c.recv(k, socket.MSG_WAITALL)); c.close()
    if "sha256" not in r:
        continue
    n += 1
    if open(T + "/blobs/" + r["sha256"], "rb").read(8) != b"\x89PNG\r\n\x1a\n":
        sys.exit("a non-PNG was stored as a .png (%d linked)" % n)
print("ok %d linked" % n)
PY
)
kill "$W"
like "$res" "^ok [1-9]" \
	"link-output: a .png whose head changes while it is copied is never stored as one"
t "link-output: a refused output leaves no blob in the store (text or binary)" \
	sh -c "! grep -rlqE 'MZ-EVIL|not UTF-8' '$T/blobs'"

# --- the withheld selection ---------------------------------------------------
doc alice L1 lib/notes.txt "library notes" library
doc alice w1 room.txt "room file"
q room-create --room rw --member alice
q link --resource w1 --member alice --room rw --turn t0 --shared
q select --room rw --member alice --resource L1
adm w1s --room rw --member alice --turn t1 --contract
is "$(ids w1s)" "L1,w1" "withheld: the private room's snapshot has its file and the selection"
q room-join --room rw --member bob
kz-project materialize --snapshot "$T/w1s.json" --dest "$T/pw" >"$T/pw.json"
is "$?" 0 "withheld: the audience moved, the room's own file still goes"
is "$(cd "$T/pw" && find . -type f | sort | tr '\n' ' ')" "./room.txt " \
	"withheld: exactly the room's own file is projected, never the selection"
is "$(js "$T/pw.json" 'd["selection"]')" withheld "withheld: the reply says the selection was withheld"
q room-leave --room rw --member bob
q room-create --room rs --member alice
q select --room rs --member alice --resource L1
adm s1 --room rs --member alice --turn t1 --contract
adm s2 --room rs --member alice --turn t2
q room-join --room rs --member bob
is "$(code materialize --snapshot "$T/s1.json" --dest "$T/ps1")" resource_audience_changed \
	"withheld: refused: the run asked for files and the selection was its only source"
t "withheld: ...and nothing is delivered" test ! -e "$T/ps1"
kz-project materialize --snapshot "$T/s2.json" --dest "$T/ps2" >"$T/ps2.json"
is "$?:$(js "$T/ps2.json" 'd["files"]')" "0:0" "withheld: a run that never named the contract goes without it"
q room-leave --room rs --member bob
# Still verified against live state: the room's own file, withdrawn, stops it.
adm w2 --room rw --member alice --turn t2
q room-join --room rw --member bob
q withdraw --resource w1 --member alice --room rw
is "$(code materialize --snapshot "$T/w2.json" --dest "$T/pw2")" manifest_changed \
	"withheld: refused: the room's own file is still verified against live state"

# --- turn-less links ------------------------------------------------------------
q room-create --room rt --member alice
doc alice t1d a.txt "a"
doc alice t2d b.txt "b"
q link --resource t1d --member alice --room rt --turn t0 --shared
adm n1 --room rt --member alice --turn t5
q link --resource t2d --member alice --room rt --turn t5 --shared
t "turn-less: a run's own later link with its turn is tolerated" kz-project verify --snapshot "$T/n1.json"
adm n2 --room rt --member alice
doc alice t3d c.txt "c"
q link --resource t3d --member alice --room rt --shared
is "$(code verify --snapshot "$T/n2.json")" manifest_changed \
	"turn-less: refused: a link with no turn is never a turn-less run's own file"

# --- projection with no audit ---------------------------------------------------
adm m1 --room rt --member alice --turn t6
KZ_AUDIT_SOCKET=$T/nothing.sock rc_is 3 "no audit: materialize answers unavailable (exit 3)" \
	kz-project materialize --snapshot "$T/m1.json" --dest "$T/pm"
t "no audit: nothing is left behind, no tree and no temporary" \
	sh -c "! ls -A '$T' | grep -Eq '^(pm|\\.kzp-)'"
t "no audit: with the sink back the same snapshot projects" \
	kz-project materialize --snapshot "$T/m1.json" --dest "$T/pm"

# --- signed URLs in declare-source ----------------------------------------------
q project-create --project pj --member alice
t "signed URL: a declaration without credentials is kept" kz-project declare-source \
	--project pj --member alice --name s1 --url "https://bucket.example/key.csv?versionId=3"
URL='https://b.s3.amazonaws.com/k.csv?X-Amz-Algorithm=AWS4&x-amz-credential=AKIAEXAMPLE77%2F2026&X-Amz-Signature=deadbeef99'
kz-project declare-source --project pj --member alice --name s2 --url "$URL" >/dev/null 2>"$T/sig.err"
is "$?" 1 "signed URL: refused: an S3 presigned URL"
like "$(cat "$T/sig.err")" "x-amz-credential" "signed URL: the refusal names the parameter"
unlike "$(cat "$T/sig.err")" "AKIAEXAMPLE77|deadbeef99" "signed URL: ...never its value"
is "$(code declare-source --project pj --member alice --name s3 --endpoint 'https://a.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-12-01&sig=c2VjcmV0')" refused \
	"signed URL: refused: an Azure SAS (sig with sv/se)"
t "signed URL: a bare 'sig' parameter is no SAS" kz-project declare-source \
	--project pj --member alice --name s4 --url "https://example.org/img.png?sig=2"
is "$(code declare-source --project pj --member alice --name s5 --manifest 'gs://b/o?X-Goog-Signature=ab12')" refused \
	"signed URL: refused: a GCS signed URL in any field"
done_testing
