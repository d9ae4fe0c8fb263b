#!/bin/bash
# kz-supervise starts the store and every daemon that exists, reports them,
# and stops only what it started; kz-msg's exit codes, and a hostile
# reply printed inert.
. "$(dirname "$0")/lib.sh"
plan 25
RUN=$T/run
on_exit "kz-supervise stop --run-dir $RUN >/dev/null 2>&1"

t "start brings the stack up" kz-supervise start --run-dir "$RUN"
st=$(kz-supervise status --run-dir "$RUN")
like "$st" '^store running pid [0-9]+ socket '"$RUN"'/store.sock' "status: store running"
like "$st" 'kz-audit running pid [0-9]+ socket '"$RUN"'/kz-audit.sock' "status: kz-audit running"
like "$st" 'kz-pkgrun running pid [0-9]+ socket '"$RUN"'/kz-pkgrun.sock' "status: kz-pkgrun running"
like "$st" 'kz-browser running pid [0-9]+ socket '"$RUN"'/kz-browser.sock' "status: kz-browser running"
like "$st" 'kz-pkgbroker not configured' "status: kz-pkgbroker waits for an upstream"
out=$(kz-msg "$RUN/kz-browser.sock" '{"op":"open","actor":"a","conversation":"c","url":"http://origin.kz.test/"}')
like "$out" 'browser sessions are turned off' "kz-browser answers, off by default"
is "$(stat -c %a "$RUN/field.key")" 600 "a 0600 field key was generated"
is "$(stat -c %s "$RUN/field.key")" 32 "the field key is 32 bytes"

out=$(kz-msg "$RUN/kz-audit.sock" '{"op":"status"}'); rc=$?
is "$rc" 0 "kz-msg exits 0 on ok:true"
like "$out" '"ok":true' "kz-msg prints the reply"
rc_is 1 "kz-msg exits 1 on a refusal" kz-msg "$RUN/kz-audit.sock" '{"op":"no-such-op"}'
rc_is 2 "kz-msg exits 2 on bad JSON" kz-msg "$RUN/kz-audit.sock" '{"op":'
rc_is 3 "kz-msg exits 3 when the socket is unreachable" kz-msg "$T/nothing.sock" '{"op":"status"}'
echo '{"op":"status"}' | kz-msg "$RUN/kz-audit.sock" >/dev/null
is "$?" 0 "kz-msg reads the request from stdin"

# A reply holding what a terminal would act on (a C1 CSI, a bidi override,
# DEL) or shows as nothing (a zero-width space, a tag character) is printed
# as escapes that mean the same.
python3 - "$T/hostile.sock" <<'PY' &
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept()
n = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
req = json.loads(c.recv(n, socket.MSG_WAITALL))
b = json.dumps({"v": 1, "id": req.get("id"), "ok": True,
                "reason": "\u009b31m\u202egnp.exe\u007f a\u200bdmin\U000e0041"}, ensure_ascii=False).encode()
c.sendall(struct.pack(">I", len(b)) + b)
PY
wait_sock "$T/hostile.sock"
out=$(kz-msg "$T/hostile.sock" '{"op":"status"}')
is "$(printf '%s' "$out" | LC_ALL=C grep -c -P '\xc2\x9b|\xe2\x80\xae|\x7f|\xe2\x80\x8b|\xf3\xa0\x81\x81')" 0 \
	"kz-msg prints no control a terminal would act on, and no invisible character"
is "$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["reason"] == "\u009b31m\u202egnp.exe\u007f a\u200bdmin\U000e0041")')" True \
	"... and its output still parses to the reply"

# A pid file that names someone else's process is not ours to kill.
sleep 300 & foreign=$!
audit_pid=$(cat "$RUN/kz-audit.pid")
echo "$foreign" >"$RUN/kz-audit.pid"
kz-supervise stop --run-dir "$RUN" >/dev/null 2>&1
kill -0 "$foreign" 2>/dev/null; is "$?" 0 "stop leaves a foreign pid alone"
kill "$foreign" "$audit_pid" 2>/dev/null
wait "$foreign" 2>/dev/null
st=$(kz-supervise status --run-dir "$RUN")
like "$st" 'store stopped' "stop ended the store"
# A daemon that cannot start takes the whole start down: nothing is left
# half up.
BROWSER_IDLE=junk kz-supervise start --run-dir "$RUN" >/dev/null 2>&1; rc=$?
st=$(kz-supervise status --run-dir "$RUN")
is "$rc" 3 "a daemon that fails to start fails the start (exit 3)"
unlike "$st" 'running' "and stops the rest: nothing is left half up"
[ -S "$RUN/store.sock" ] && pgrep -f "unixsocket $RUN/store.sock" >/dev/null
is "$?" 1 "no store process is left"

# A daemon installed as a link to a versioned file is the one started:
# start waits for it, status and stop know it.
VB=$T/vbin; mkdir -p "$VB"
cp "$BIN/kz-audit" "$VB/kz-audit-0.1.0"; ln -s kz-audit-0.1.0 "$VB/kz-audit"
ln -s "$BIN/kz-msg" "$VB/kz-msg"
R2=$T/run2
on_exit "KZ_BIN=$VB kz-supervise stop --run-dir $R2 >/dev/null 2>&1"
rc_is 0 "start with kz-audit linked to a versioned file" \
	env KZ_BIN="$VB" "$BIN/kz-supervise" start --run-dir "$R2"
like "$(KZ_BIN=$VB "$BIN/kz-supervise" status --run-dir "$R2")" 'kz-audit running pid [0-9]+' \
	"status knows it"
like "$(KZ_BIN=$VB "$BIN/kz-supervise" stop --run-dir "$R2")" 'stopped kz-audit pid [0-9]+' \
	"and stop stops it"
done_testing
