#!/bin/bash
# kz-ctl-local's side of kz-controller(7), from outside: frames in, frames
# out.  An empty inventory lists as []; a create under a runtime it does
# not know, or of another class, is refused and leaves nothing behind; an
# unknown op or field is bad_request; bytes that are no frame are answered
# once and end the process with exit 2.
. "$(dirname "$0")/lib.sh"
plan 8
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
export KZ_RUN_DIR=$T LEASE_WORKERS_DIR=$T/workers
# call JSON...: each argument one request frame; prints each reply, one a
# line, then "rc N".
call() {
	$PY -c '
import json, struct, subprocess, sys
inp = b"".join(struct.pack(">I", len(a.encode())) + a.encode() for a in sys.argv[2:])
if sys.argv[2:] == ["RAW"]:
    inp = b"\x00\x00\x00\x05hello"
p = subprocess.run([sys.argv[1]], input=inp, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
d = p.stdout
while len(d) >= 4:
    n = struct.unpack(">I", d[:4])[0]
    print(d[4:4 + n].decode())
    d = d[4 + n:]
print("rc", p.returncode)' "$BIN/kz-ctl-local" "$@"
}
out=$(call '{"v":1,"op":"list"}')
like "$out" '"ok":true,"workers":\[\]' "an empty inventory lists as []"
out=$(call '{"v":1,"op":"create","id":"w1","class":"default","runtime":"kvm"}')
like "$out" '"ok":false,"error":"refused".*unknown runtime' "a runtime kz-sandbox does not know is refused"
out=$(call '{"v":1,"op":"create","id":"w1","class":"big","runtime":"native"}')
like "$out" '"error":"refused".*unknown class' "so is a class it does not have"
is "$(ls -A "$T/workers" 2>/dev/null | grep -v '^\.ids\.lock$')" "" "and neither left anything behind"
out=$(call '{"v":1,"op":"create","id":"w1","class":"default","runtime":"native","image":"x"}')
like "$out" '"error":"bad_request"' "a create with a field it does not know is bad_request"
out=$(call '{"v":1,"op":"create","id":"../w1","class":"default","runtime":"native"}')
like "$out" '"error":"bad_request".*not a worker id' "an id that is not a worker id is bad_request"
out=$(call '{"v":1,"op":"resize"}' '{"v":1,"op":"list"}')
like "$(echo "$out" | tr '\n' ' ')" '"error":"bad_request","message":"unknown op"\} \{"v":1,"ok":true,"workers":\[\]\} rc 0' \
	"an unknown op is bad_request, and the next frame is answered"
out=$(call RAW)
like "$(echo "$out" | tr '\n' ' ')" '^\{[^}]*"error":"bad_request"[^}]*\} rc 2 $' "bytes that are no frame: answered once, exit 2"
done_testing
