#!/bin/bash
# kz-audit serve: appends acknowledged with their seq, refusals and
# malformed frames answered with a clear error, never written, and counted
# in status; rotation continues the chain across files; a restart
# continues the chain; the log directory has one writer.
. "$(dirname "$0")/lib.sh"
plan 38
head -c 32 /dev/urandom >"$T/key"; chmod 600 "$T/key"
unset KZ_SOCKET KZ_CONFIG KZ_AUDIT_DIR
export KZ_RUN_DIR=$T KZ_FIELD_KEY_FILE=$T/key KZ_AUDIT_MAX_FILE_BYTES=4096
S=$T/kz-audit.sock
start() { bg kz-audit serve 2>>"$T/log.err"; PID=$LASTPID; wait_sock "$S"; }
stop() { kill "$PID"; wait "$PID" 2>/dev/null; }
# One Python process sends every raw frame (a new connection each) and
# prints one reply per line, "closed" when the daemon closed without one.
python3 - "$S" >"$T/raw" <<'PY' &
import socket, struct, sys, time
def fr(p): return struct.pack(">I", len(p)) + p
cases = [
    fr(b'{"v":1,"op":"append","id":"a","kind":"lease","event":{"worker_id":"w2"},"extra":1}'),
    fr(b'{"v":1,"op":"append","id":"a","event":{}}'),
    fr(b'{"v":1,"op":"append","id":"a","kind":"lease"}'),
    b"\x00\x00\x00\x00",
    b"\xff\x00\x00\x00",
    fr(b'{"v":1,"op":'),
    fr(b'[1,2]'),
    None,
]
for i in range(100):
    try:
        socket.socket(socket.AF_UNIX).connect(sys.argv[1]); break
    except OSError: time.sleep(0.05)
for c in cases:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
    if c is None:   # a client that leaves mid-frame
        s.sendall(b"\x00\x00\x00\x10{\"v\":1"); s.close(); continue
    s.sendall(c); h = b""
    while len(h) < 4:
        d = s.recv(4 - len(h))
        if not d: break
        h += d
    if len(h) < 4: print("closed"); continue
    n = struct.unpack(">I", h)[0]; b = b""
    while len(b) < n: b += s.recv(n - len(b))
    print(b.decode()); s.close()
PY
RAWPID=$!
raw() { sed -n "$1p" "$T/raw"; }
start
is "$(stat -c %a "$S")" 660 "socket is 0660 (under KZ_RUN_DIR by default)"
out=$(kz-msg "$S" '{"op":"append","kind":"lease","event":{"worker_id":"w1","member":"m-raw-1"}}')
like "$out" '"ok":true,"seq":1' "append is acknowledged with its seq"
out=$(kz-msg "$S" '{"op":"append","kind":"lease","event":{"worker_id":"/root/x"}}'); rc=$?
is "$rc" 1 "a refused event is a refusal"
like "$out" '"error":"refused","reason":"field .worker_id. holds a path' "the reason names the field"
unlike "$out" '/root' "the reason does not echo the value"
wait $RAWPID
like "$(raw 1)" '"error":"bad_request".*extra' "an unknown request field is refused"
like "$(raw 2)" '"error":"refused".*kind' "a missing kind is refused"
like "$(raw 3)" '"error":"refused".*event' "a missing event is refused"
like "$(raw 4)" '"ok":false' "a zero-length frame gets an error"
like "$(raw 5)" 'frame_too_large' "an oversized frame gets frame_too_large"
like "$(raw 6)" '"error":"bad_request"' "invalid JSON gets bad_request"
like "$(raw 7)" '"error":"bad_request"' "a non-object frame gets bad_request"
like "$(kz-msg "$S" '{"op":"ping"}')" '"ok":true' "a client leaving mid-frame does not disturb the daemon"
st=$(kz-msg "$S" '{"op":"status"}')
like "$st" '"last_seq":1,' "nothing refused or malformed was written"
like "$st" '"refused":3,' "status counts the refusals"
like "$st" '"refused_by_field":\{[^}]*"worker_id":1' "status counts refusals per field"
like "$st" '"refused_by_reason":\{[^}]*"path":1' "status counts refusals per reason"
unlike "$(cat "$T"/audit/*.jsonl)" 'm-raw-1' "a raw member id is never stored"

# A batch (records): one append, one fsync, consecutive seqs, all or none.
num() { grep -o "\"$1\":[0-9]*" <<<"$2" | cut -d: -f2; }
b0=$(num fsyncs "$st")
rec() { printf '{"kind":"dispatch","event":{"worker_id":"%s","exit_status":0}}' "$1"; }
out=$(kz-msg "$S" "{\"op\":\"append\",\"records\":[$(rec wb1),$(rec wb2),$(rec wb3)]}")
like "$out" '"ok":true,"seq":4,"seqs":\[2,3,4\]' "a batch is acknowledged with every record's seq"
st=$(kz-msg "$S" '{"op":"status"}')
is "$(num fsyncs "$st")" $((b0 + 1)) "a batch of three is made durable with one fsync"
is "$(grep -o '"worker_id":"wb[0-9]"' "$T"/audit/*.jsonl | tr -d '\n')" \
    '"worker_id":"wb1""worker_id":"wb2""worker_id":"wb3"' "the batch's records are written in order"
out=$(kz-msg "$S" "{\"op\":\"append\",\"records\":[$(rec wb4),{\"kind\":\"lease\",\"event\":{\"worker_id\":\"/etc/x\"}}]}")
like "$out" '"error":"refused","reason":"record 1: field .worker_id. holds a path' \
    "a refused record refuses the batch, naming its place and field"
for bad in "[]" "[$(rec wb5),"'{"kind":"lease"}]' "[$(rec wb6),"'{"kind":"lease","event":{},"x":1}]' \
    "[$(rec wb7),7]" "[$(for i in $(seq 16); do printf '%s,' "$(rec wb8)"; done)$(rec wb8)]"; do
	like "$(kz-msg "$S" "{\"op\":\"append\",\"records\":$bad}")" '"error":"bad_request"' \
	    "a malformed batch is a bad request: ${bad:0:40}"
done
like "$(kz-msg "$S" "{\"op\":\"append\",\"kind\":\"lease\",\"event\":{},\"records\":[$(rec wb9)]}")" \
    '"error":"bad_request"' "records with kind and event beside them is a bad request"
like "$(kz-msg "$S" '{"op":"status"}')" '"last_seq":4,' "nothing of a refused or malformed batch was written"

for i in $(seq 2 40); do
	echo "{\"kind\":\"dispatch\",\"event\":{\"worker_id\":\"w$i\",\"duration_ms\":$i,\"reason\":\"padding the record out to rotate the file early\"}}"
done | kz-audit append --socket "$S"
is "$?" 0 "append --socket sends every line to the daemon"
n=$(ls "$T"/audit/audit-*.jsonl | wc -l)
[ "$n" -ge 2 ]; ok $? "the log rotated by size ($n files)"
t "verify --dir checks the chain across files" kz-audit verify --dir "$T/audit"
rc_is 1 "a later file alone does not start at seq 1" kz-audit verify "$T/audit/audit-000002.jsonl"
rc_is 3 "a second daemon on the same directory fails closed" \
    kz-audit serve --socket "$T/other.sock"
rc_is 3 "direct append while the daemon holds the log fails closed" \
    sh -c 'echo "{\"kind\":\"lease\",\"event\":{}}" | kz-audit append'
stop
echo '{"kind":"lease","event":{"worker_id":"w41"}}' | kz-audit append
start
like "$(kz-msg "$S" '{"op":"append","kind":"lease","event":{"worker_id":"w42"}}')" \
    '"seq":45' "a restart continues seq after direct appends"
stop
t "the whole chain verifies after restarts" kz-audit verify --dir "$T/audit"
rc_is 2 "an unknown config key fails closed" sh -c "echo 'NOPE = 1' >'$T/bad.conf'; kz-audit serve --config '$T/bad.conf' --check"
done_testing
