#!/bin/bash
# kz-pi-validate against hostile extensions: a forged receipt on stdout, a
# write to the advertised result descriptor, unsupported registrations, and
# one that never returns, all under the real kz-sandbox.  Only the
# nonce-bearing result channel counts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pi-lib.sh"
plan 18

fixture ext-forge-stdout
pv ext-forge-stdout
is "$RC" 1 "a forged receipt printed on stdout does not make a pass"
is "$(field ext-forge-stdout r.result)" '"fail"' "the receipt says fail"
like "$(field ext-forge-stdout r.child_stdout_bytes)" '^[1-9]' "the child did print on stdout"
is "$(field ext-forge-stdout r.unsupported[0].name)" '"bogus_event"' "its real registration is reported"

fixture ext-write-fd
pv ext-write-fd
is "$RC" 0 "writing to the advertised result descriptor achieves nothing"
is "$(field ext-write-fd r.surface.extensions[0].tools)" '["fd_probe_ebadf"]' \
	"the advertised descriptor was closed before authored code loaded"
unlike "$(cat "$T/ext-write-fd.receipt")" "forged_tool" "the forged observation is absent"

fixture ext-unsupported
pv ext-unsupported
is "$RC" 1 "unsupported registrations fail validation"
is "$(field ext-unsupported 'sorted(u.kind + ":" + u.name for u in r.unsupported)')" \
	'["flag:turbo","handler:before_everything","provider:shadow-llm","shortcut:ctrl+k"]' \
	"each unsupported registration is listed"
is "$(field ext-unsupported r.surface.extensions[0].tools)" '["fine_tool"]' "supported tools still listed"

fixture ext-hang
s=$(date +%s)
pv ext-hang
e=$(( $(date +%s) - s ))
is "$RC" 1 "an extension that never returns is refused"
like "$(field ext-hang r.reasons)" "deadline" "... for missing the deadline"
t "... within the deadline plus a margin (${e}s)" test "$e" -le 14
is "$(leftovers)" 0 "no child process is left behind"
fixture ext-exit3
pv ext-exit3
is "$RC" 1 "authored code exiting 3 is a failed validation, not an unavailable sandbox"
like "$(field ext-exit3 r.reasons)" "no observation" "... with no observation"
fixture ext-netprobe
pv ext-netprobe
is "$RC" 0 "the child runs with no route out, not as root, with no KZ_ variables"
is "$(field ext-netprobe r.tests.status)" '"pass"' "... as its tests observed"
done_testing
