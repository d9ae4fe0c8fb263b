#!/usr/bin/env bash
# A browser session's end, every way it ends: Chromium crashing mid-session
# (its own one-line reason, a browser_failed record), a page that takes
# more memory than the session may (its renderer is killed under the
# session's limit: the op waiting on it is answered at once, not at its
# timeout, and says so; the daemon answers meanwhile), the idle reaper (a
# short BROWSER_IDLE), and kz-browser itself dying (the bridge loses its
# peer and ends Chromium).  Each time nothing of the session is left in the
# worker, the lease is back, and the next tenant of the worker finds none
# of the profile.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/lib/chromium/chromium ]; then
	echo "1..0 # SKIP Debian's chromium is not installed"; exit 0
fi
. "$TOP/tests/e2e/browser-lib.sh"
plan 19

# A page call's bound as it was before BROWSER_OP_TIMEOUT_MS: within it the
# memory page below is busy allocating, and a shorter bound would have its
# scripts stopped (t6110) before the OOM killer takes the renderer.
br_start 162 BROWSER_OP_TIMEOUT_MS=20000 || { echo "Bail out! the stack did not start"; exit 1; }
O='http://origin.kz.test'
OPEN='{"actor":"bob","conversation":"c2","url":"'$O'/"}'
gone() { # gone: no session cgroup and no Chromium, within 3 s
	local i
	for i in $(seq 1 30); do
		[ "$(br_sessions | wc -l)$(br_chromium | wc -l)" = 00 ] && return 0
		sleep 0.1
	done
	return 1
}
audit_has() { # audit_has KIND REGEX: within 3 s
	local i
	for i in $(seq 1 30); do
		kz-audit query --kind "$1" --dir "$T/audit" 2>/dev/null | grep -Eq -- "$2" && return 0
		sleep 0.1
	done
	return 1
}

# Chromium crashes mid-session.
R=$(bcall open "$OPEN"); SID=$(jf "$R" session)
is "$(jf "$R" page title)" "kz test page" "a session is open"
P=$(br_chromium)
[ -n "$P" ] && kill -SEGV $P
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/after"}')
like "$(jf "$R" reason)" '^(the browser stopped; the session is closed|no such browser session)$' \
	"after Chromium crashed, the next action is refused with a one-line reason"
unlike "$(jf "$R" reason)" '/|[0-9]+\.[0-9]+\.[0-9]+|sock' "the reason names no path, address or socket"
audit_has browser_failed '"reason":"the browser stopped; the session is closed"'
ok $? "the crash is on record as browser_failed with that reason"
gone; ok $? "nothing of the crashed session is left in the worker"
wait_for warm 1 100; ok $? "its lease is released and the reset brings the worker back warm"

# A page exhausts the session's memory while an agent-read waits on it:
# the cgroup's OOM killer takes its renderer, and the read is answered
# then, not at the call's timeout (20 s), with the crash as its reason.
R=$(bcall open "$OPEN"); SID=$(jf "$R" session)
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/mem"}')
is "$(jf "$R" page title)" "mem" "a page that takes memory in a loop once loaded"
t0=$EPOCHREALTIME
bcall agent-read '{"session":"'$SID'"}' >"$T/oom.out" &
RJ=$!
sleep 1
t1=$EPOCHREALTIME; ST=$(bcall status)
sms=$(awk -v a="$t1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
ok "$([ -n "$(jf "$ST" sessions)" ] && [ "$sms" -lt 2000 ]; echo $?)" \
	"the daemon answers while the page exhausts its memory (${sms} ms)"
wait $RJ
ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
R=$(cat "$T/oom.out")
is "$(jf "$R" reason)" "the page crashed; the session is closed" \
	"the read waiting on it is refused: the page crashed (${ms} ms)"
ok "$([ "$ms" -lt 15000 ]; echo $?)" "... when the renderer is killed, not at the call's timeout"
audit_has browser_failed '"reason":"the page crashed; the session is closed"'
ok $? "on record as browser_failed with that reason"
gone; ok $? "nothing of the session is left in the worker"
wait_for warm 1 100 || diag "the worker did not come back warm"

# The idle reaper.
br_daemon "$T/idle.sock" BROWSER_IDLE=2
R=$(bcall --sock "$T/idle.sock" open "$OPEN"); SID=$(jf "$R" session)
is "$(jf "$R" page title)" "kz test page" "a session on a daemon with a 2-second idle limit"
audit_has browser_reaped '"outcome":"reaped"' || sleep 3
audit_has browser_reaped '"outcome":"reaped"'; ok $? "the idle reaper ends it (browser_reaped)"
gone; ok $? "after the reaper: no Chromium and no session cgroup"
R=$(bcall --sock "$T/idle.sock" navigate '{"session":"'$SID'","url":"'$O'/"}')
is "$(jf "$R" reason)" "no such browser session" "a reaped session is gone for good"

# kz-browser dies with a session open: the bridge loses its peer.
R=$(bcall open "$OPEN")
[ -n "$(jf "$R" session)" ]; ok $? "a session is open again"
P=$(pgrep -f "kz-browser serve --socket $BS")
{ kill -9 $P; wait $P; } 2>/dev/null
gone; ok $? "kz-browser killed: the worker ends Chromium and its namespaces"
X=$(wrun 'find /tmp /workspace /dev/shm -mindepth 1 2>/dev/null; find / -xdev -name Cookies 2>/dev/null')
is "$X" "" "the worker's next tenant finds none of the profile"
done_testing
