#!/bin/bash
# kz-sandbox snapshot/restore: a bounded tar of /workspace (never the
# projection), to a host path or base64, restored after a wipe; a hostile
# archive cannot write outside the sandbox's workspace.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
plan 17
mkdir -p "$T/proj" && echo projected >"$T/proj/p"
bg "$SB" serve --id e2e-snap-$$ --socket "$T/w.sock" --projection "$T/proj" --snapshot-max 1M
wait_sock "$T/w.sock" 10
out() { python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["stdout_b64"]).decode())'; }

$C "$T/w.sock" run '{"argv":["/bin/sh","-c","mkdir d; echo hello >d/f; ln -s /etc/passwd l"]}' >/dev/null
r=$($C "$T/w.sock" snapshot "{\"path\":\"$T/s.tar\"}")
like "$r" '"ok": true' "snapshot to a host path"
is "$(stat -c %a "$T/s.tar")" 600 "the snapshot file is 0600"
list=$(tar -tf "$T/s.tar")
like "$list" "d/f" "the archive holds the workspace"
unlike "$list" "projected|^\./p$" "the projection is never in the snapshot"
r=$($C "$T/w.sock" snapshot "{\"path\":\"$T/s.tar\"}")
like "$r" '"error": "internal"' "an existing snapshot file is never overwritten"
$C "$T/w.sock" wipe >/dev/null
r=$($C "$T/w.sock" restore "{\"path\":\"$T/s.tar\"}")
like "$r" '"ok": true' "restore from a host path"
is "$($C "$T/w.sock" run '{"argv":["/bin/cat","d/f"]}' | out)" hello "restored content is back"
unlike "$(tar --numeric-owner -tvf "$T/s.tar")" "[1-9][0-9]*/[0-9]" "the archive names no host uid (owners are 0)"
# A workspace that archives to exactly what this lease restored is not
# written again; any change, or a restore that failed, is.
r=$($C "$T/w.sock" snapshot "{\"path\":\"$T/s2.tar\",\"skip_unchanged\":true}")
like "$r" '"unchanged": true' "an unchanged workspace is reported unchanged"
tnot "and nothing is written for it" test -e "$T/s2.tar"
$C "$T/w.sock" run '{"argv":["/bin/sh","-c","echo changed >d/f"]}' >/dev/null
r=$($C "$T/w.sock" snapshot "{\"path\":\"$T/s3.tar\",\"skip_unchanged\":true}")
t "a changed workspace is written" test -s "$T/s3.tar" -a "${r/unchanged/}" = "$r"
$C "$T/w.sock" wipe >/dev/null
$C "$T/w.sock" restore "{\"path\":\"$T/s.tar\"}" >/dev/null
$C "$T/w.sock" restore '{"archive_b64":"bm90IGEgdGFy"}' >/dev/null
r=$($C "$T/w.sock" snapshot "{\"path\":\"$T/s4.tar\",\"skip_unchanged\":true}")
t "after a failed restore the workspace is written, never taken as restored" test -s "$T/s4.tar" -a "${r/unchanged/}" = "$r"
r=$($C "$T/w.sock" snapshot '{"skip_unchanged":true}')
like "$r" '"error": "bad_request".*only with a path' "skip_unchanged without a path is refused"
$C "$T/w.sock" run '{"argv":["/bin/sh","-c","head -c 2000000 /dev/urandom >big"]}' >/dev/null
r=$($C "$T/w.sock" snapshot)
like "$r" '"error": "refused".*snapshot bound' "a workspace over the bound is refused"
# A hostile archive: absolute and dot-dot members stay in the sandbox.
mkdir -p "$T/evil" && echo x >"$T/evil/x"
tar -cf "$T/evil.tar" -C "$T/evil" --transform 's,^x$,../../../tmp/kz-evil-'$$',' x
tar -rf "$T/evil.tar" -P -C "$T/evil" --transform 's,^x$,/tmp/kz-evil2-'$$',' x 2>/dev/null
b64=$(base64 -w0 "$T/evil.tar")
$C "$T/w.sock" restore "{\"archive_b64\":\"$b64\"}" >/dev/null
tnot "a hostile archive writes nothing on the host (../)" test -e /tmp/kz-evil-$$
tnot "a hostile archive writes nothing on the host (absolute)" test -e /tmp/kz-evil2-$$
r=$($C "$T/w.sock" restore '{"archive_b64":"bm90IGEgdGFy"}')
like "$r" '"ok": false' "a corrupt archive is an error"
done_testing
