#!/bin/bash
# kz-sandbox snapshot/restore: a bounded tar of /workspace (never the
# projection), to a host path or base64, restored after a wipe; a hostile
# archive cannot write outside the sandbox's workspace.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
plan 30
mkdir -p "$T/proj" && echo projected >"$T/proj/p"
bg "$SB" serve --id e2e-snap-$$ --socket "$T/w.sock" --projection "$T/proj" --snapshot-max 1M
wait_sock "$T/w.sock" 10
out() { python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["stdout_b64"]).decode())'; }

$C "$T/w.sock" run '{"argv":["/bin/sh","-c","mkdir d; echo hello >d/f; ln -s /etc/passwd l; cp /bin/true su; chmod 6755 su; mkdir sg; chmod 2755 sg"]}' >/dev/null
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
# Owner 0 with a set-id bit would be a set-id program of root's for
# whoever unpacks the archive on the host as root: the archive has none.
unlike "$(tar -tvf "$T/s.tar")" "^.{3}[sS]|^.{6}[sS]" "the archive holds no set-id bit the code set"
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
# A snapshot GNU tar made (before kz-sandbox-tar, or by hand) restores.
mkdir -p "$T/gnu/sub" && echo gnu >"$T/gnu/sub/g"
tar --numeric-owner --owner=0 --group=0 -C "$T/gnu" -cf "$T/gnu.tar" .
$C "$T/w.sock" wipe >/dev/null
r=$($C "$T/w.sock" restore "{\"path\":\"$T/gnu.tar\"}")
is "$(printf '%s' "$r" | grep -c '"ok": true')-$($C "$T/w.sock" run '{"argv":["/bin/cat","sub/g"]}' | out)" "1-gnu" "a GNU tar archive restores"
# A symlink in the archive, then a member through it: nothing is written
# where the link points, and the restore fails.
$C "$T/w.sock" wipe >/dev/null
python3 - "$T/evil3.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT) as t:
    l = tarfile.TarInfo("s2"); l.type = tarfile.SYMTYPE; l.linkname = "/tmp"
    t.addfile(l)
    f = tarfile.TarInfo("s2/kz-evil3"); f.size = 2
    t.addfile(f, io.BytesIO(b"x\n"))
PY
r=$($C "$T/w.sock" restore "{\"archive_b64\":\"$(base64 -w0 "$T/evil3.tar")\"}")
like "$r" '"ok": false' "a member written through a symlink of the archive fails the restore"
is "$($C "$T/w.sock" run '{"argv":["/bin/sh","-c","test -e /tmp/kz-evil3 && echo reached; ls -A"]}' | out)" "s2" "and nothing reached the link's target"
# What a workspace holds comes back as it was: a read-only directory and
# its file, a hard link, a FIFO, a name that is not UTF-8; a socket is
# left out.
$C "$T/w.sock" wipe >/dev/null
cat >"$T/proj/mk.sh" <<'SH'
mkdir ro && echo r >ro/f && chmod 555 ro && echo a >a && ln a b && mkfifo p &&
	printf n >"$(printf 'n\377')" &&
	python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
SH
cat >"$T/proj/look.sh" <<'SH'
python3 -c 'import os, stat; print("%o" % stat.S_IMODE(os.stat("ro").st_mode))'
cat ro/f; [ a -ef b ] && echo linked
cat "$(printf 'n\377')"; [ -e sock ] || echo nosock
SH
chmod 0644 "$T/proj/mk.sh" "$T/proj/look.sh"
$C "$T/w.sock" run '{"argv":["/bin/sh","/projection/mk.sh"]}' >/dev/null
r=$($C "$T/w.sock" snapshot "{\"path\":\"$T/s5.tar\"}")
like "$r" '"ok": true' "a workspace with a read-only directory, links and a FIFO is saved"
$C "$T/w.sock" wipe >/dev/null
r=$($C "$T/w.sock" restore "{\"path\":\"$T/s5.tar\"}")
like "$r" '"ok": true' "and restored"
is "$($C "$T/w.sock" run '{"argv":["/bin/sh","/projection/look.sh"]}' | out)" "$(printf '555\nr\nlinked\nnnosock')" "with its modes, hard link and names, and without the socket"
if [ "${SANDBOX_RUNTIME:-native}" = gvisor ]; then
	ok 0 "and the FIFO # SKIP GNU tar under gVisor 20221219 archives no FIFO"
else
	is "$($C "$T/w.sock" run '{"argv":["/bin/sh","-c","[ -p p ] && echo fifo"]}' | out)" fifo "and the FIFO"
fi
# The code never holds the archiver: no descriptor of it in a run, no kz
# path in the view.
fds=$($C "$T/w.sock" run '{"argv":["/bin/sh","-c","for f in /proc/$$/fd/*; do readlink $f; done"]}' | out)
unlike "$fds" "kz-sandbox-tar|libexec" "a run holds no descriptor of the archiver"
unlike "$($C "$T/w.sock" run '{"argv":["/bin/cat","/proc/self/mountinfo"]}' | out)" "libexec|kz-sandbox-tar" "the view has no path of it"
# A served worker that cannot open its archiver does not start, and says
# which path.  (Under gvisor the sandbox's own tar archives: none is
# opened.)
noarch() { # noarch PATH: "EXIT-named"
	local rc=0
	SANDBOX_ARCHIVER=$1 timeout 20 "$SB" serve --id e2e-snap2-$$ --socket "$T/w2.sock" >"$T/w2.out" 2>&1 || rc=$?
	echo "$rc-$(grep -q "kz-sandbox: .*archiver $1$2" "$T/w2.out" && echo named)"
}
chmod 0644 "$T/evil.tar"
if [ "${SANDBOX_RUNTIME:-native}" = gvisor ]; then
	ok 0 "a served worker without its archiver refuses to start # SKIP no archiver under gvisor"
	ok 0 "nor with an archiver nobody may execute # SKIP no archiver under gvisor"
else
	is "$(noarch "$T/no-archiver" ": No such file")" "3-named" "a served worker without its archiver refuses to start (exit 3), naming the path"
	is "$(noarch "$T/evil.tar" " is not a file every uid may execute")" "3-named" "nor with an archiver nobody may execute"
fi
# A restore path that is not a regular file is refused, never waited on:
# a FIFO there (nobody ever writes it) would hold the worker for good.
mkfifo "$T/fifo.tar"
r=$(timeout 20 $C "$T/w.sock" restore "{\"path\":\"$T/fifo.tar\"}")
like "$r" '"error": "bad_request".*cannot read the archive' "a restore from a FIFO is refused at once"
done_testing
