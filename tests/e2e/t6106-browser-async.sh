#!/usr/bin/env bash
# One session's slow page holds that session only: two sessions on two
# workers, A navigating to a page the origin answers after 8 s.  While A's
# navigation is still waiting, B navigates and takes a screenshot, B's
# viewer receives frames and the daemon answers status.  A member's close
# of A during another slow load ends it at once, the pending navigation
# answered "the session was closed".  One actor holds at most a quarter
# of the daemon's sessions.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/lib/chromium/chromium ]; then
	echo "1..0 # SKIP Debian's chromium is not installed"; exit 0
fi
. "$TOP/tests/e2e/browser-lib.sh"
plan 14

# BROWSER_SESSIONS_MAX=4: one session per actor.
BR_WORKERS=2 br_start 166 BROWSER_SESSIONS_MAX=4 || { echo "Bail out! the stack did not start"; exit 1; }
O='http://origin.kz.test'
A=$(jf "$(bcall open '{"actor":"ann","conversation":"a1","url":"'$O'/"}')" session)
B=$(jf "$(bcall open '{"actor":"ben","conversation":"b1","url":"'$O'/"}')" session)
[ -n "$A" ] && [ -n "$B" ]; ok $? "two sessions are open, each on its own worker"
is "$(jf "$(bcall open '{"actor":"ann","conversation":"a2","url":"'$O'/"}')" reason)" \
	"this member holds as many browser sessions as one may" \
	"one actor holds at most a quarter of BROWSER_SESSIONS_MAX"

"$BPY" "$TOP/tests/browser/viewer.py" "$T/kz-browser.sock.view" "$B" viewer "$T/viewer.out" 30 &
VPID=$!; on_exit "kill $VPID 2>/dev/null"
for _ in $(seq 1 50); do grep -q frame "$T/viewer.out" 2>/dev/null && break; sleep 0.1; done

bcall navigate '{"session":"'$A'","url":"'$O'/slow?ms=8000"}' >"$T/a.out" &
APID=$!
for _ in $(seq 1 50); do grep -q '^/slow' "$T/origin.log" && break; sleep 0.1; done
grep -q '^/slow' "$T/origin.log"; ok $? "A's slow page was asked for"
F0=$(grep -c frame "$T/viewer.out")
R=$(bcall navigate '{"session":"'$B'","url":"'$O'/"}')
is "$(jf "$R" page title)" "kz test page" "B navigates while A's page loads"
R=$(bcall screenshot '{"session":"'$B'"}')
[ -n "$(jf "$R" png_b64)" ]; ok $? "B's screenshot is taken while A's page loads"
is "$(jf "$(bcall status)" sessions)" 2 "status answers while A's page loads"
sleep 2.5
F1=$(grep -c frame "$T/viewer.out")
[ "$F1" -gt "$F0" ]; ok $? "B's viewer receives frames while A's page loads ($F0 -> $F1)"
kill -0 $APID 2>/dev/null; ok $? "... all of it before A's navigation was answered"
wait $APID
is "$(jf "$(cat "$T/a.out")" page title)" "slow page" "A's navigation then ends with its page"

# A request frame is bounded to what a request holds, not to what a reply
# (a screenshot) may: an 8 MiB one is refused before it is read, rather
# than parsed on the loop that serves every session.
R=$("$BPY" - "$BS" <<'EOP'
import json, socket, struct, sys
b = b'{"v":1,"op":"status","id":"x","a":[' + b"0," * (4 << 20) + b'0]}'
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(20)
try:
    s.sendall(struct.pack(">I", len(b)) + b)
except OSError:
    pass
h = s.recv(4)
n = struct.unpack(">I", h)[0] if len(h) == 4 else 0
m = b""
while len(m) < n:
    c = s.recv(n - len(m))
    if not c:
        break
    m += c
print(m.decode())
EOP
)
is "$(jf "$R" error)" "frame_too_large" "an 8 MiB request frame is refused as too large, not parsed"
is "$(jf "$(bcall status)" sessions)" 2 "... and the daemon goes on serving"
EV=$("$BPY" -c 'import json; print(json.dumps([{"type": "text", "text": "x" * 1024}] * 64))')
is "$(jf "$(bcall input '{"session":"'$B'","events":'"$EV"'}')" ok)" true \
	"the largest request (64 input events of 1024 characters) is still served"

# A close during a slow load is not held by it.
bcall navigate '{"session":"'$A'","url":"'$O'/slow?ms=15000"}' >"$T/a2.out" &
APID=$!
sleep 1
t0=$EPOCHREALTIME
R=$(bcall close '{"session":"'$A'"}')
ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
[ "$(jf "$R" ok)" = true ] && [ "$ms" -lt 8000 ]; ok $? "A's close is answered in $ms ms, not after its page"
wait $APID
is "$(jf "$(cat "$T/a2.out")" reason)" "the session was closed" "the pending navigation is told the session was closed"
bcall close '{"session":"'$B'"}' >/dev/null
done_testing
