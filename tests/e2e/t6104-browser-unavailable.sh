#!/usr/bin/env bash
# A worker whose pinned Chromium is missing refuses the session with its
# own one-line reason, never falling back to another browser; the reason
# reaches the member and the audit, and names no path or address.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/browser-lib.sh"
plan 5

export LEASE_WORKER_ARGS="--browser-bin $T/no-such-chromium"
br_start 164 || { echo "Bail out! the stack did not start"; exit 1; }
R=$(bcall open '{"actor":"dave","conversation":"c4","url":"http://origin.kz.test/"}')
is "$(jf "$R" reason)" "no browser is installed on this worker" \
	"a missing pinned Chromium: the open is refused with that reason"
is "$(jf "$R" error)" "unavailable" "... as unavailable, not as an internal fault"
unlike "$(jf "$R" reason)" '/|[0-9]+\.[0-9]+\.[0-9]+|sock' "the reason names no path, address or socket"
Q=$(kz-audit query --kind browser_failed --dir "$T/audit" 2>/dev/null)
like "$Q" '"reason":"no browser is installed on this worker"' "the same sentence is on record as browser_failed"
grep -q '^/' "$T/origin.log"; tnot "no page was fetched by any other browser" test $? = 0
done_testing
