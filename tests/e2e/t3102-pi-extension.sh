#!/bin/bash
# kz-pi-validate, extension profiles: node --test in a child first, then a
# fresh copy for the real Pi extension loader; failing tests, a test that
# rewrites the source, and a preparation failure that keeps test evidence.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pi-lib.sh"
plan 16

fixture ext-ok
pv ext-ok
is "$RC" 0 "a valid extension with passing tests passes"
is "$(field ext-ok r.tests.status)" '"pass"' "its tests ran and passed"
is "$(field ext-ok r.surface.extensions[0].tools)" '["word_count"]' "registered tool observed"
is "$(field ext-ok r.surface.extensions[0].commands)" '["wc"]' "registered command observed"
is "$(field ext-ok r.surface.extensions[0].hooks)" '["tool_call"]' "registered hook observed"
rc_is 0 "its receipt is current" kz-pi-validate verify-receipt \
	--receipt "$T/ext-ok.receipt" --files "$T/ext-ok" --contract-digest "$C1"

fixture ext-tests-fail
pv ext-tests-fail
is "$RC" 1 "an extension whose tests fail is refused"
is "$(field ext-tests-fail r.tests.status)" '"fail"' "the receipt records the failing tests"
is "$(field ext-tests-fail r.surface)" "undefined" "the loader never ran"

fixture ext-rewrite
mkdir -p /tmp/kz-pi-canary && echo alive >/tmp/kz-pi-canary/file
on_exit "rm -rf /tmp/kz-pi-canary"
pv ext-rewrite
is "$RC" 0 "a test that rewrites its source does not fail validation"
is "$(field ext-rewrite r.surface.extensions[0].tools)" '["original_tool"]' \
	"the loader saw the original source, not the rewrite"
t "discarding the test tree did not follow the symlink it left" \
	test -f /tmp/kz-pi-canary/file
t "the supplied files are untouched" grep -q original_tool "$T/ext-rewrite/extensions/index.js"

fixture ext-prep-fail
pv ext-prep-fail
is "$RC" 1 "a preparation failure (dependency reinstall) fails validation"
is "$(field ext-prep-fail r.tests.status)" '"pass"' "... and keeps the test evidence"
is "$(field ext-prep-fail r.preparation.status)" '"fail"' "... and records the failed preparation"
done_testing
