#!/usr/bin/env bash
# SANDBOX_BROWSER_PRESTART=yes: a warm worker holds one Chromium started
# ahead of the next session, with no network until an op hands it a grant
# (no relay listens in its namespace, it has no interface but loopback).
# A session opens on it (pages, navigation and a screenshot as without
# it), a replacement is pre-started, and after release and reset the next
# lease's session gets another Chromium and none of the previous one's
# cookie or storage.  The reset passes with a pre-started bridge present
# and fails closed when a session cgroup of the last lease is left.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/lib/chromium/chromium ]; then
	echo "1..0 # SKIP Debian's chromium is not installed"; exit 0
fi
. "$TOP/tests/e2e/browser-lib.sh"
plan 19

export SANDBOX_BROWSER_PRESTART=yes
br_start 168 || { echo "Bail out! the stack did not start"; exit 1; }
O='http://origin.kz.test'
wstatus() { "$BPY" "$TOP/tests/sandbox/client.py" "$(wsock)" status '{}'; }
wlog() { cat "$T"/workers/*/log 2>/dev/null; }
# pre_ready: the worker says a pre-started browser is ready and its
# Chromium runs (within 10 s); prints that Chromium's pid.
pre_ready() {
	local i p
	for i in $(seq 1 100); do
		if [ "$(jf "$(wstatus)" browser_prestart)" = ready ]; then
			p=$(br_chromium | grep -vxF -e "${1:-0}" | head -1)
			[ -n "$p" ] && { echo "$p"; return 0; }
		fi
		sleep 0.1
	done
	return 1
}
listens() { # listens PID PORT: a TCP listener on PORT in PID's netns
	awk -v p="$(printf ':%04X' "$2")" 'NR > 1 && $4 == "0A" && $2 ~ p "$"' \
		"/proc/$1/net/tcp" | grep -q .
}

C0=$(pre_ready); ok $? "a warm worker holds a pre-started Chromium before any session"
ST0=$(awk '{ print $22 }' "/proc/$C0/stat" 2>/dev/null)
tnot "before its op it has no relay: nothing listens on the relay port in its namespace" listens "$C0" 3128
L=$(nsenter -t "$C0" -n ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | tr '\n' ' ')
is "$L" "lo " "its network namespace has loopback and nothing else"
tnot "it cannot reach the relay's port, nor the test origin" \
	nsenter -t "$C0" -n bash -c "echo >/dev/tcp/127.0.0.1/3128 || echo >/dev/tcp/$EG_ORIGIN/80" 2>/dev/null
is "$(br_sessions | wc -l)" 1 "the pre-started browser has its own cgroup in the worker"

sleep 0.3
R=$(bcall open '{"actor":"erin","conversation":"c8","url":"'$O'/state"}')
SID=$(jf "$R" session); [ -n "$SID" ] || { echo "# $R"; tail -5 "$T/browser.log" | sed "s/^/# /"; }
is "$(jf "$R" page title)" "state:none|none" "a session opens on it and loads the page (no earlier cookie or storage)"
is "$(awk '{ print $22 }' "/proc/$C0/stat" 2>/dev/null)" "$ST0" \
	"the Chromium serving it is the one started before the op"
like "$(wlog)" '"event":"sandbox.browser.prestart".*a session took the pre-started browser' \
	"the worker's log says the session took the pre-started browser"
listens "$C0" 3128; ok $? "it serves the session: with the op's grant, the relay listens in its namespace"
R=$(bcall navigate '{"session":"'$SID'","url":"'$O'/state"}')
is "$(jf "$R" page title)" "state:kz=tenant-secret|tenant-secret" \
	"navigation works, and the page's cookie and storage hold within the session"
R=$(bcall screenshot '{"session":"'$SID'"}')
PNG=$(jf "$R" png_b64 | base64 -d 2>/dev/null | head -c 4 | od -An -c | tr -d ' ')
is "$PNG" "211PNG" "a screenshot is a PNG"
C1=$(pre_ready "$C0"); ok $? "a replacement is pre-started beside the live session"

# The next tenant.
bcall close '{"session":"'$SID'"}' >/dev/null
wait_for warm 1 150; ok $? "after release the reset passes with a pre-started browser about"
W=$(wstatus)
is "$(jf "$W" wipes)/$(jf "$W" wipes_unclean)" "1/0" "the worker's one wipe was proven clean"
C2=$(pre_ready "$C1")
tnot "the session's Chromium and the replacement started during the lease are gone" \
	bash -c "kill -0 $C0 2>/dev/null || kill -0 ${C1:-1} 2>/dev/null"
R=$(bcall open '{"actor":"frank","conversation":"c9","url":"'$O'/state"}')
SID=$(jf "$R" session)
is "$(jf "$R" page title)" "state:none|none" "the next lease's session finds no cookie or storage of the previous one"
listens "${C2:-1}" 3128; ok $? "it runs on the Chromium pre-started after the reset, not an earlier one"

# A session cgroup of the last lease that does not go: the reset fails
# closed and the worker is retired.
ID=$(basename "$(dirname "$(wsock)")")
M=$(find /sys/fs/cgroup/memory -maxdepth 4 -type d -path "*/$ID" | head -1)
mkdir "$M/browser-999"
sleep 60 & SP=$!
on_exit "kill $SP 2>/dev/null; sleep 0.2; rmdir '$M/browser-999' '$M' 2>/dev/null"
echo $SP >"$M/browser-999/cgroup.procs"
bcall close '{"session":"'$SID'"}' >/dev/null
for _ in $(seq 1 100); do kz-audit query --kind retire --dir "$T/audit" 2>/dev/null | grep -q . && break; sleep 0.1; done
like "$(kz-audit query --kind retire --dir "$T/audit" 2>/dev/null)" '"agent_cgroup_only_agent":false' \
	"a session cgroup left after the wipe: the reset fails closed and retires the worker"
kill $SP 2>/dev/null
wait_for warm 1 200; ok $? "a clean replacement worker is warm again"
done_testing
