#!/bin/bash
# kz-pi-validate, extension profiles under the real kz-sandbox (the default
# required mode): node --test in a disposable copy first, then a fresh copy
# for the real Pi extension loader; failing tests, a test that rewrites its
# source, dependencies reinstalled from the lock out of an offline cache, a
# preparation failure that keeps the test evidence, and a sandbox that
# refuses to start.  One case runs in the operator's unshare mode.
# e2e: alone (it holds the host's lock of kz-pi-validate's unshare mode)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pi-lib.sh"
plan 40

# ext-ok's extension writes /tmp/kz-pi-canary-ran: the sandbox's own /tmp.
on_exit "rm -rf /tmp/kz-pi-canary /tmp/kz-pi-canary-ran"
rm -f /tmp/kz-pi-canary-ran
fixture ext-ok
pv ext-ok
is "$RC" 0 "a valid extension with passing tests passes"
t "... and its write to /tmp stayed in the sandbox" test ! -e /tmp/kz-pi-canary-ran
is "$(field ext-ok r.runtime.isolation)" '"kz-sandbox"' "... under kz-sandbox"
is "$(field ext-ok r.tests.status)" '"pass"' "its tests ran and passed"
is "$(field ext-ok r.surface.extensions[0].tools)" '["word_count"]' "registered tool observed"
is "$(field ext-ok r.surface.extensions[0].commands)" '["wc"]' "registered command observed"
is "$(field ext-ok r.surface.extensions[0].hooks)" '["tool_call"]' "registered hook observed"
rc_is 0 "its receipt is current" kz-pi-validate verify-receipt \
	--receipt "$T/ext-ok.receipt" --files "$T/ext-ok" --profile "$FIX/ext-ok/profile.json" --contract-digest "$C1"
is "$(ls "$WS")" "" "the workspace is left empty"

fixture ext-tests-fail
pv ext-tests-fail
is "$RC" 1 "an extension whose tests fail is refused"
is "$(field ext-tests-fail r.tests.status)" '"fail"' "the receipt records the failing tests"
is "$(field ext-tests-fail r.surface)" "undefined" "the loader never ran"

# The test rewrites extensions/index.js and leaves a symlink out of its tree.
mkdir -p /tmp/kz-pi-canary && echo alive >/tmp/kz-pi-canary/file
fixture ext-rewrite
pv ext-rewrite
is "$RC" 0 "a test that rewrites its source does not fail validation"
is "$(field ext-rewrite r.tests.status)" '"pass"' "... its tests could write their own tree"
is "$(field ext-rewrite r.surface.extensions[0].tools)" '["original_tool"]' \
	"the loader saw the original source, not the rewrite"
t "the supplied files are untouched" grep -q original_tool "$T/ext-rewrite/extensions/index.js"
RC=0; (cd "$WS" && KZ_PI_SANDBOX=unshare kz-pi-validate --profile \
	"$FIX/ext-rewrite/profile.json" --files "$T/ext-rewrite" --contract-digest "$C1" \
	--out "$T/u.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 0 "unshare mode: the rewrite does not reach the loader either"
is "$(field u r.surface.extensions[0].tools)" '["original_tool"]' "... which saw the original"
is "$(field u r.runtime.isolation)" '"unshare"' "... and the receipt names the mode"
t "... and discarding the host test tree did not follow the symlink it left" \
	test -f /tmp/kz-pi-canary/file
is "$(ls -A "$WS")" "" "... and removed the tree whole, deeper than any walk"
# The unshare mode's own view: the host read-only, /tmp, /dev/shm and /proc
# the validation's own.  The tests write both and try a world-writable host
# directory; nothing reaches the host.
fixture ext-hostview
mkdir -m 1777 "$PI_STAGE/open"
HV=kz-pi-hostview-$$
on_exit "rm -f '/tmp/$HV' '/dev/shm/$HV'"
printf '{"tmp":"/tmp/%s","shm":"/dev/shm/%s","open":"%s","hostpid":%d}\n' \
	"$HV" "$HV" "$PI_STAGE/open" $$ >"$T/ext-hostview/probe.json"
RC=0; (cd "$WS" && KZ_PI_SANDBOX=unshare kz-pi-validate --profile \
	"$FIX/ext-hostview/profile.json" --files "$T/ext-hostview" --contract-digest "$C1" \
	--out "$T/hv.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC-$(field hv r.tests.status)" '0-"pass"' \
	"unshare mode: the tests found the host read-only and /proc their own"
t "... their files in /tmp and /dev/shm stayed in the validation" \
	test ! -e "/tmp/$HV" -a ! -e "/dev/shm/$HV"
is "$(ls -A "$PI_STAGE/open")" "" "... and a world-writable host directory took nothing"
# A loader under /tmp (a checkout there) is bound back into the fresh /tmp.
mkdir -p "$T/stage" && cp "$KZ_PI_CHILD" "$T/stage/child.mjs"
RC=0; (cd "$WS" && KZ_PI_SANDBOX=unshare KZ_PI_CHILD=$T/stage/child.mjs kz-pi-validate \
	--profile "$FIX/ext-rewrite/profile.json" --files "$T/ext-rewrite" --contract-digest "$C1" \
	--out "$T/u3.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC-$(field u3 r.surface.extensions[0].tools)" '0-["original_tool"]' \
	"unshare mode: a loader script under /tmp is still read by the child"
# The unshare mode's validations all run as KZ_PI_UID: one at a time on a
# host.  One started while another holds the host's lock makes nothing
# until it is free.
# The holder is the sleep itself (the lock's descriptor is its own), so
# killing it frees the lock and leaves nothing running.
(exec 9>>/run/kz-pi-validate.unshare.lock && flock 9 && exec sleep 60) & HOLD=$!
_pids="$_pids $HOLD"
for i in $(seq 50); do flock -n /run/kz-pi-validate.unshare.lock true || break; sleep 0.1; done
(cd "$WS" && KZ_PI_SANDBOX=unshare exec kz-pi-validate --profile \
	"$FIX/ext-rewrite/profile.json" --files "$T/ext-rewrite" --contract-digest "$C1" \
	--out "$T/u2.receipt") >"$T/.out2" 2>&1 & V=$!
sleep 1.5
is "$(ls -A "$WS")|$(kill -0 "$V" 2>/dev/null && echo waiting)" "|waiting" \
	"unshare mode: a validation waits while another holds the host's lock, making nothing"
kill "$HOLD"
RC=0; wait "$V" || RC=$?
is "$RC-$(ls -A "$WS")" "0-" "... and validates once the lock is free"

# A kz-sandbox that cannot isolate: exit 3, its reason, nothing else runs.
fake_sandbox 3 "kz-sandbox: isolation setup failed at cgroup: e2e"
RC=0; (cd "$WS" && KZ_SANDBOX_BIN=$T/fake-sandbox kz-pi-validate --profile \
	"$FIX/ext-ok/profile.json" --files "$T/ext-ok" --contract-digest "$C1" \
	--out "$T/f.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 3 "kz-sandbox failing to isolate: exit 3"
like "$(cat "$T/.out")" "sandbox did not start: kz-sandbox: isolation setup failed at cgroup" \
	"... with kz-sandbox's reason"
is "$(wc -l <"$T/sbx.calls")" 1 "... after one attempt, no further phase"
t "... no receipt" test ! -e "$T/f.receipt"
t "... and no authored code ran outside it" test ! -e /tmp/kz-pi-canary-ran
fake_sandbox 2 "kz-sandbox: unknown option --pass-fd"
RC=0; (cd "$WS" && KZ_SANDBOX_BIN=$T/fake-sandbox kz-pi-validate --profile \
	"$FIX/ext-ok/profile.json" --files "$T/ext-ok" --contract-digest "$C1" \
	--out "$T/f.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 3 "kz-sandbox refusing the command line: exit 3"

# Dependencies: none without the offline cache, all from it with it.
fixture ext-deps
deps_setup
pv ext-deps
is "$RC" 1 "a lock without an offline cache: refused"
is "$(field ext-deps r.tests.status)" '"fail"' "... its tests could not import the dependency"
RC=0; (cd "$WS" && KZ_PI_NPM_CACHE=$NPMC kz-pi-validate --profile \
	"$FIX/ext-deps/profile.json" --files "$T/ext-deps" --contract-digest "$C1" \
	--out "$T/d.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 0 "with the offline cache: the dependencies are reinstalled, validation passes"
is "$(field d r.surface.extensions[0].tools)" '["DEP_tool"]' "... the loader saw the dependency"

fixture ext-prep-fail
RC=0; (cd "$WS" && KZ_PI_NPM_CACHE=$NPMC kz-pi-validate --profile \
	"$FIX/ext-prep-fail/profile.json" --files "$T/ext-prep-fail" --contract-digest "$C1" \
	--out "$T/ext-prep-fail.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 1 "a preparation failure (a dependency the cache lacks) fails validation"
is "$(field ext-prep-fail r.tests.status)" '"pass"' "... and keeps the test evidence"
is "$(field ext-prep-fail r.preparation.status)" '"fail"' "... and records the failed preparation"
done_testing
