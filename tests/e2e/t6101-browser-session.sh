#!/usr/bin/env bash
# kz-browser with real Chromium in a real leased worker: a session opens on
# a test origin admitted by kz-egress; the managed policy blocks file:// and
# chrome:// (ERR_BLOCKED_BY_ADMINISTRATOR) and the next navigation works;
# a page's requests for loopback, the worker's ports and the metadata
# address all reach kz-egress and are refused, and a sink on the worker's
# loopback sees nothing; code run in the same worker finds no listener, no
# Chromium and no pipe; the profile never reaches the worker's /tmp or
# workspace and is gone with the session, and Chromium cannot read or
# write the workspace.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/lib/chromium/chromium ]; then
	echo "1..0 # SKIP Debian's chromium is not installed"; exit 0
fi
. "$TOP/tests/e2e/browser-lib.sh"
plan 37

br_start 161 || { echo "Bail out! the stack did not start"; exit 1; }
ok 0 "kz-egress, the lease stack with a warm worker and kz-browser serve"
O='http://origin.kz.test'

# Turned off by the operator: its own reason.
br_daemon "$T/off.sock" BROWSER_ENABLED=no
R=$(bcall --sock "$T/off.sock" open '{"actor":"alice","conversation":"c1","url":"'$O'/"}')
is "$(jf "$R" reason)" "browser sessions are turned off in this deployment" \
	"sessions turned off: every open is refused with that reason"

R=$(bcall open '{"actor":"alice","conversation":"c1","url":"http://10.99.0.1/"}')
is "$(jf "$R" reason)" "the egress policy does not admit the opening address" \
	"an opening address the egress policy does not admit is refused before any navigation"
R=$(bcall open '{"actor":"alice","conversation":"c1","url":"file:///etc/passwd"}')
is "$(jf "$R" error)" "bad_request" "a session opens only on http or https"

R=$(bcall open '{"actor":"alice","conversation":"c1","url":"'$O'/"}')
SID=$(jf "$R" session)
is "$(jf "$R" page title)" "kz test page" "open: the test page is loaded in the worker's Chromium"
grep -q '^/$' "$T/origin.log"; ok $? "the page came from the test origin through the relay and kz-egress"

R=$(bcall navigate '{"session":"'$SID'","url":"file:///etc/passwd"}')
is "$(jf "$R" reason)" "the browser's policy blocks that address" \
	"file:///etc/passwd: ERR_BLOCKED_BY_ADMINISTRATOR under the managed policy"
R=$(bcall navigate '{"session":"'$SID'","url":"chrome://version"}')
is "$(jf "$R" reason)" "the browser's policy blocks that address" \
	"chrome://version: blocked the same way"
R=$(bcall navigate '{"session":"'$SID'","url":"view-source:'$O'/"}')
is "$(jf "$R" reason)" "the browser's policy blocks that address" "view-source: blocked"
# Chromium serves its debug addresses before its policy: refused here,
# at once, and so is a javascript: address (a script, not an address).
t0=$EPOCHREALTIME
R=$(bcall navigate '{"session":"'$SID'","url":"chrome://hang"}')
R2=$(bcall navigate '{"session":"'$SID'","url":"ABOUT:crash"}')
ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
is "$(jf "$R" reason)|$(jf "$R2" reason)" "the browser's policy blocks that address|the browser's policy blocks that address" \
	"chrome://hang and about:crash are refused as the policy's (${ms} ms)"
R=$(bcall navigate '{"session":"'$SID'","url":"javascript:document.title=1"}')
R2=$(bcall navigate '{"session":"'$SID'","url":"java\tscript:document.title=1"}')
is "$(jf "$R" error) $(jf "$R" reason)|$(jf "$R2" reason)" \
	"bad_request a navigation names an address, not a script|that is not an address" \
	"a javascript: address is refused, also with a tab in its scheme"
ok "$([ "$ms" -lt 5000 ]; echo $?)" "... each at once, not after the navigation's timeout"
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/next"}')
is "$(jf "$R" page title)" "kz test page" "the next navigation after a blocked one succeeds"

# A sink on the worker's loopback while the page asks for it.
SINK=$(wrun 'python3 -c "import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])"')
[ -n "$SINK" ] || SINK=47011
wrun 'timeout 6 python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"127.0.0.1\", '"$SINK"')); s.listen(8); s.settimeout(4)
try:
    c, a = s.accept(); print(\"sink got a connection\")
except Exception:
    print(\"sink saw nothing\")
"' 12000 >"$T/sink.out" &
SINKJOB=$!
sleep 1
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/probe?p='$SINK'"}')
is "$(jf "$R" page url)" "$O/probe?p=$SINK" "the probe page loads"
for _ in $(seq 1 50); do grep -q '^/report' "$T/origin.log" && break; sleep 0.1; done
like "$(grep '^/report' "$T/origin.log" | tail -1)" '^/report\?' \
	"the probe's script asked for all four by fetch and reported back"
wait $SINKJOB
is "$(cat "$T/sink.out")" "sink saw nothing" "nothing went direct: the sink on the worker's loopback saw nothing"
Q=$(kz-audit query --kind egress_refusal --dir "$T/audit" 2>/dev/null)
like "$Q" '"host":"127.0.0.1","port":'"$SINK" "loopback at the sink's port reached kz-egress and was refused"
like "$Q" '"host":"169.254.169.254"' "the metadata address reached kz-egress and was refused"
like "$Q" '"host":"localhost"|"host":"127.0.0.1","port":3128' "localhost and the relay port reached kz-egress too"

# Code run in the same worker while the session lives.
L=$(wrun 'cat /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 2>/dev/null | awk "NR>1 && (\$4==\"0A\" || \$4==\"07\") {print}" | grep -v "local_address"; tail -n +2 /proc/net/unix 2>/dev/null')
is "$L" "" "no TCP or UDP listener and no unix socket in the worker's network namespace"
P=$(wrun 'for d in /proc/[0-9]*; do tr "\0" " " <$d/cmdline; echo; done | grep -c -e "chromiu[m]" -e "remote-debuggin[g]"')
is "$P" "0" "code in the worker sees no Chromium process"
F=$(wrun 'n=0; for f in /proc/[0-9]*/fd/*; do [ "$(readlink $f 2>/dev/null | cut -c1-5)" = pipe: ] || continue; p=${f#/proc/}; p=${p%%/*}; [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue; exec 9<>"$f" 2>/dev/null && { n=$((n+1)); exec 9>&-; }; done; echo $n')
is "$F" "0" "no other process's pipe can be opened through /proc/PID/fd"
X=$(wrun 'find / -xdev \( -name Cookies -o -name "Local State" -o -name kaizen.json \) 2>/dev/null; find /tmp /workspace /dev/shm -mindepth 1 2>/dev/null')
is "$X" "" "the profile and the policy are nowhere in the code's view"
# Nor is the code's workspace in Chromium's: a renderer (no sandbox of its
# own) compromised by the page could otherwise read and plant its files.
wrun 'echo member >/workspace/kz-ws-probe' >/dev/null
P=$(br_chromium); U=$(stat -c %u "/proc/$P" 2>/dev/null)
X=$(nsenter -t "$P" -m -S "${U:-0}" -G "${U:-0}" sh -c 'ls -A /workspace; touch /workspace/kz-planted 2>/dev/null && echo writable' 2>&1)
is "$X" "" "Chromium, as its uid, finds /workspace empty and cannot write there"
# Nor the projection the worker's code reads (a file kz-project put there).
WP=$(dirname "$(wsock)")/projection
echo member >"$WP/kz-proj-probe"
X=$(nsenter -t "$P" -m -S "${U:-0}" -G "${U:-0}" sh -c 'ls -A /projection' 2>&1)
is "$X|$(wrun 'ls -A /projection')" "|kz-proj-probe" "Chromium finds /projection empty, where the code finds the projected file"
rm -f "$WP/kz-proj-probe"
wrun 'ls -A /workspace; rm -f /workspace/kz-ws-probe' >"$T/ws.out"
is "$(cat "$T/ws.out")" "kz-ws-probe" "... while the code's workspace holds its file and nothing planted"

R=$(bcall screenshot '{"session":"'$SID'"}')
PNG=$(jf "$R" png_b64 | base64 -d 2>/dev/null | head -c 4 | od -An -c | tr -d ' ')
is "$PNG" "211PNG" "a screenshot is a PNG"

is "$(br_sessions | wc -l)" "1" "the live session has its own cgroup in the worker"
# Only the agent holds the worker's listening socket: not its bridge.
is "$(ss -xlpH 2>/dev/null | grep -F " $(wsock) " | grep -o 'pid=[0-9]*' | sort -u | wc -l)" 1 \
	"the worker's endpoint is held by its agent alone, not by the session's bridge"

# A page's scripts are code: two Web Workers spinning are held to the
# session's CPU bandwidth (SANDBOX_BROWSER_CPU, one CPU by default).
CL=$(br_leaves | grep -e '/cpu/' -e '/cpu,cpuacct/' | head -1)
[ -n "$CL" ] || CL=$(br_leaves | head -1)
if [ -f "$CL/cpu.max" ]; then q=$(cut -d' ' -f1 "$CL/cpu.max"); else q=$(cat "$CL/cpu.cfs_quota_us" 2>/dev/null); fi
is "$q" 100000 "the session's cgroup has a CPU quota of one CPU"
bcall navigate '{"session":"'$SID'","url":"http://origin.kz.test/spin?n=2"}' >/dev/null
thr() { awk '$1 == "nr_throttled" {print $2}' "$CL/cpu.stat" 2>/dev/null; }
t0=$(thr); sleep 2; t1=$(thr)
ok "$([ "${t1:-0}" -gt "${t0:-0}" ]; echo $?)" "a page spinning two workers is throttled (nr_throttled ${t0:-?} -> ${t1:-?})"
bcall navigate '{"session":"'$SID'","url":"http://origin.kz.test/"}' >/dev/null

# A page's dialog does not hold the session: it is dismissed as it opens.
R=$(bcall navigate '{"session":"'$SID'","url":"http://origin.kz.test/alert"}')
t0=$EPOCHREALTIME
R2=$(bcall screenshot '{"session":"'$SID'"}')
ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
is "$(jf "$R" page title)" "after alert" "a page's alert is dismissed as it opens"
ok "$([ -n "$(jf "$R2" png_b64)" ] && [ "$ms" -lt 4000 ]; echo $?)" "... and a screenshot is not held by it (${ms} ms)"
# Popups: none without a click (Chromium's popup blocker); one the
# member's click opens runs in the session's Chromium, behind the same
# relay and kz-egress, and goes with it.
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/popup?u=http://10.99.0.1/pp"}')
is "$(jf "$R" page title)" "popup:none" "a page opens no popup by itself, by window.open or a scripted click"
bcall input '{"session":"'$SID'","events":[{"type":"click","x":12,"y":16}]}' >/dev/null
bcall navigate '{"session":"'$SID'","url":"'$O'/popup?u='$O'/frompopup"}' >/dev/null
bcall input '{"session":"'$SID'","events":[{"type":"click","x":12,"y":16}]}' >/dev/null
for _ in $(seq 1 50); do grep -q '^/frompopup' "$T/origin.log" &&
	kz-audit query --kind egress_refusal --dir "$T/audit" 2>/dev/null | grep -q '"host":"10.99.0.1"' && break; sleep 0.1; done
like "$(kz-audit query --kind egress_refusal --dir "$T/audit" 2>/dev/null)" '"host":"10.99.0.1","port":80' \
	"a popup the member's click opens goes through the relay: kz-egress refuses what its policy does not admit"
grep -q '^/frompopup$' "$T/origin.log"; ok $? "... and carries what it admits"
R=$(bcall close '{"session":"'$SID'"}')
sleep 0.5
is "$(br_sessions | wc -l)$(br_chromium | wc -l)" "00" "after close: no Chromium (nor its popups) and no session cgroup (its profile's tmpfs went with it)"
done_testing
