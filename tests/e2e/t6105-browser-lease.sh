#!/usr/bin/env bash
# A browser session ends with its lease.  A short LEASE_TTL_MS, and
# kz-browser frozen past it, so that kz-lease expires the lease and
# retires the worker under a live session: the session is then ended
# (browser_reaped with the lease's reason, the viewer's connection closed,
# Chromium and its profile gone), and the next tenant's session finds
# nothing of the cookie and storage the page left.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/lib/chromium/chromium ]; then
	echo "1..0 # SKIP Debian's chromium is not installed"; exit 0
fi
. "$TOP/tests/e2e/browser-lib.sh"
plan 11

export LEASE_TTL_MS=3000
br_start 165 || { echo "Bail out! the stack did not start"; exit 1; }
O='http://origin.kz.test'
audit_has() { # audit_has KIND REGEX: within 5 s
	local i
	for i in $(seq 1 50); do
		kz-audit query --kind "$1" --dir "$T/audit" 2>/dev/null | grep -Eq -- "$2" && return 0
		sleep 0.1
	done
	return 1
}

R=$(bcall open '{"actor":"carol","conversation":"c5","url":"'$O'/state"}')
SID=$(jf "$R" session); [ -n "$SID" ] || { echo "# $R"; tail -5 "$T/browser.log" | sed "s/^/# /"; }
is "$(jf "$R" page title)" "state:none|none" "a session on a fresh worker finds no earlier cookie or storage"
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/state"}')
is "$(jf "$R" page title)" "state:kz=tenant-secret|tenant-secret" \
	"within the session the page's cookie and storage hold"
CHR=$(br_chromium)
"$BPY" "$TOP/tests/browser/viewer.py" "$T/kz-browser.sock.view" "$SID" viewer "$T/viewer.out" 40 &
VPID=$!; on_exit "kill $VPID 2>/dev/null"
for _ in $(seq 1 50); do grep -q frame "$T/viewer.out" 2>/dev/null && break; sleep 0.1; done

# kz-browser frozen: no renewal reaches kz-lease, which expires the lease
# and retires the worker (its bridge is told to end as the worker stops).
P=$(pgrep -f "kz-browser serve --socket $BS")
kill -STOP $P
for _ in $(seq 1 100); do grep -q '"event":"lease.expire"' "$T/lease.log" && break; sleep 0.1; done
grep -q '"event":"lease.expire"' "$T/lease.log"; ok $? "kz-lease expired the session's lease"
for _ in $(seq 1 50); do [ -n "$CHR" ] && kill -0 $CHR 2>/dev/null || break; sleep 0.1; done
tnot "the retired worker's Chromium is gone, and its profile's tmpfs with it" kill -0 ${CHR:-1}
kill -CONT $P

audit_has browser_reaped "\"reason\":\"the session's lease ended\""
ok $? "kz-browser ends the session: browser_reaped, because the lease ended"
for _ in $(seq 1 50); do grep -q closed "$T/viewer.out" && break; sleep 0.1; done
is "$(tail -1 "$T/viewer.out")" "closed" "the viewer's connection is closed"
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/"}')
is "$(jf "$R" reason)" "no such browser session" "the session is gone for good"
is "$(jf "$(bcall status)" sessions)" 0 "kz-browser holds no session"

# The next tenant: a worker that kz-lease brings back warm.
wait_for warm 1 150; ok $? "a worker is warm again"
R=$(bcall open '{"actor":"dave","conversation":"c6","url":"'$O'/state"}')
is "$(jf "$R" page title)" "state:none|none" "the next tenant's session finds none of the cookie or storage"
X=$(wrun 'find /tmp /workspace /dev/shm -mindepth 1 2>/dev/null; find / -xdev \( -name Cookies -o -name "Local Storage" \) 2>/dev/null')
is "$X" "" "code of the next tenant finds none of the profile in the worker"
bcall close '{"session":"'$(jf "$R" session)'"}' >/dev/null
done_testing
