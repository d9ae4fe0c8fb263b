#!/bin/bash
# kz-audit serve: one client cannot crowd out the others.  A peer uid
# (65534) floods appends on 700 connections (within its share of the
# server's connections, kz-protocol(7)) as fast as it can;
# it is held to its share of the writer's queue (a quarter) and told busy
# past it, while every append root makes during the flood, one at a time
# as the daemons make them, is acknowledged; what both wrote verifies.
. "$(dirname "$0")/lib.sh"
plan 10
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
head -c 32 /dev/urandom >"$T/key"; chmod 600 "$T/key"
unset KZ_SOCKET KZ_CONFIG KZ_RUN_DIR KZ_AUDIT_MAX_FILE_BYTES
export KZ_FIELD_KEY_FILE=$T/key KZ_AUDIT_DIR=$T/log
S=$T/a.sock
N=100 # root's appends during the flood
SHARE=1024 # a quarter of the 4096-record queue

# flood.py SOCK CONNS STOPFILE: keeps an append in flight on each of
# CONNS connections (most of them 16-record batches, the rest single
# records, which fill the queue to its last free slot) until STOPFILE
# exists (60 s at most); prints "ok N busy M other K" (replies).
cat >"$T/flood.py" <<'PY'
import json, os, selectors, socket, struct, sys, time
sock, nconn, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def fr(o):
    b = json.dumps(o).encode(); return struct.pack(">I", len(b)) + b
rec = {"kind": "dispatch", "event": {"worker_id": "flood"}}
batch = fr({"v": 1, "op": "append", "id": "f", "records": [rec] * 16})
single = fr({"v": 1, "op": "append", "id": "g", **rec})
sel, cnt, conns = selectors.DefaultSelector(), {"ok": 0, "busy": 0, "other": 0}, {}
for i in range(nconn):
    s = socket.socket(socket.AF_UNIX)
    try: s.connect(sock)
    except OSError: cnt["other"] += 1; continue
    f = batch if i % 3 else single
    s.sendall(f); s.setblocking(False)
    conns[s] = [f, b""]; sel.register(s, selectors.EVENT_READ)
open(stop + ".up", "w").close()
end = time.time() + 60
while time.time() < end and conns and not os.path.exists(stop):
    for key, _ in sel.select(0.2):
        s = key.fileobj; c = conns[s]
        try: d = s.recv(65536)
        except BlockingIOError: continue
        if not d:
            sel.unregister(s); del conns[s]; cnt["other"] += 1; continue
        c[1] += d
        while len(c[1]) >= 4 and len(c[1]) >= 4 + struct.unpack(">I", c[1][:4])[0]:
            n = struct.unpack(">I", c[1][:4])[0]
            rep = json.loads(c[1][4:4 + n]); c[1] = c[1][4 + n:]
            cnt["ok" if rep.get("ok") else
                "busy" if rep.get("error") == "busy" else "other"] += 1
            s.setblocking(True); s.sendall(c[0]); s.setblocking(False)
print("ok %(ok)d busy %(busy)d other %(other)d" % cnt, flush=True)
PY
# one.py SOCK N: N single appends, one connection each, one after the
# other (as kz_audit_send makes them); prints "ok N busy M other K".
cat >"$T/one.py" <<'PY'
import json, socket, struct, sys
sock, n = sys.argv[1], int(sys.argv[2])
cnt = {"ok": 0, "busy": 0, "other": 0}
for i in range(n):
    b = json.dumps({"v": 1, "op": "append", "id": "r%d" % i, "kind": "lease",
                    "event": {"worker_id": "root%d" % i}}).encode()
    s = socket.socket(socket.AF_UNIX); s.settimeout(60); k = "other"
    try:
        s.connect(sock); s.sendall(struct.pack(">I", len(b)) + b); h = b""
        while len(h) < 4:
            d = s.recv(4 - len(h))
            if not d: raise OSError("closed")
            h += d
        m = struct.unpack(">I", h)[0]; r = b""
        while len(r) < m:
            d = s.recv(m - len(r))
            if not d: raise OSError("closed")
            r += d
        rep = json.loads(r)
        k = "ok" if rep.get("ok") else "busy" if rep.get("error") == "busy" else "other"
    except OSError: pass
    cnt[k] += 1; s.close()
print("ok %(ok)d busy %(busy)d other %(other)d" % cnt, flush=True)
PY
chmod 711 "$T"; chmod 644 "$T/flood.py"
KZ_PEER_UIDS=65534 bg kz-audit serve --socket "$S" 2>"$T/serve.err"
SPID=$LASTPID
wait_sock "$S"
chmod 666 "$S"
mkdir "$T/flag"; chmod 777 "$T/flag"
setpriv --reuid 65534 --regid 65534 --clear-groups \
    "$PY" "$T/flood.py" "$S" 700 "$T/flag/stop" >"$T/flood.out" 2>&1 &
FPID=$!
on_exit "kill $FPID"
for i in $(seq 200); do [ -e "$T/flag/stop.up" ] && break; sleep 0.05; done
t0=$SECONDS
sleep 1 # the flood at full speed: the queue is kept full on the old sink
"$PY" "$T/one.py" "$S" "$N" >"$T/one.out" 2>&1
st=$(kz-msg "$S" '{"op":"status"}')
touch "$T/flag/stop"; wait "$FPID"
secs=$((SECONDS - t0 + 1))
diag "uid 65534 (flood): $(cat "$T/flood.out"); uid 0: $(cat "$T/one.out")"
num() { grep -o "\"$1\":[0-9]*" <<<"$2" | cut -d: -f2; }

is "$(cat "$T/one.out")" "ok $N busy 0 other 0" \
    "every append of another uid is acknowledged during the flood"
like "$(cat "$T/flood.out")" "^ok [1-9][0-9]* busy [1-9][0-9]* other 0$" \
    "the flooding uid gets appends in and is told busy past its share"
mb=$(num max_batch "$st")
t "the writer never took more than the flooder's share and root's one ($mb)" \
    test "${mb:-99999}" -le $((SHARE + 1))
t "status counts the busy refusals" test "$(num busy "$st")" -gt 0
like "$(grep '"audit.busy"' "$T/serve.err")" '"uid":"65534"' \
    "the log names the uid that was held to its share"
t "and says so at most once every 10 s ($secs s), not once per refusal" \
    test "$(grep -c '"audit.busy"' "$T/serve.err")" -le $((secs / 10 + 1))
kill "$SPID"; wait "$SPID" 2>/dev/null
rc_is 0 "what both wrote verifies as one chain" kz-audit verify --dir "$T/log"
is "$(kz-audit query --uid 0 --kind lease | grep -c '"worker_id":"root')" "$N" \
    "root's records are all in the log"
t "and the flooder's records too" test \
    "$(kz-audit query --uid 65534 --kind dispatch | grep -c .)" -gt 0
unlike "$(cat "$T/serve.err")" '"level":"error"' "the sink logged no error"
done_testing
