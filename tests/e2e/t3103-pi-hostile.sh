#!/bin/bash
# kz-pi-validate against hostile extensions: a forged receipt on stdout, a
# write to the advertised result descriptor, unsupported registrations,
# one that never returns, and authored code that rewrites the loader
# child's report on its way out, all under the real kz-sandbox.  Only the
# nonce-bearing result channel counts.  A receipt counts only for the
# profile it was validated under, and only for the bytes validated, even
# when the files change while they are validated.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pi-lib.sh"
plan 31

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

# The report leaves the child through JSON.stringify: replacing it (the
# loader child runs with frozen intrinsics) neither hides registrations
# nor passes a failure off as an unavailable loader.
fixture ext-scrub
pv ext-scrub
is "$RC" 1 "rewriting the report on its way out hides no registration"
is "$(field ext-scrub r.result)" '"fail"' "... the receipt says fail"
fixture ext-scrub-fs
pv ext-scrub-fs
is "$RC" 1 "nor does rewriting it as it is written (fs.writeSync replaced)"
is "$(field ext-scrub-fs 'sorted(u.kind + ":" + u.name for u in r.unsupported)')" \
	'["flag:turbo","handler:before_everything","provider:shadow-llm"]' "... every registration is reported"
fixture ext-withheld
pv ext-withheld
is "$RC" 0 "an extension probing beneath the loader still loads"
is "$(field ext-withheld r.surface.extensions[0].tools)" \
	'["binding_err_access_denied","addon_err_dlopen_disabled","child_err_access_denied","worker_err_access_denied","write_err_access_denied","memory_err_access_denied"]' \
	"... and met no internal binding, native addon, child process, worker, write outside its home or its own memory"
fixture ext-claim-unavailable
pv ext-claim-unavailable
is "$RC" 1 "authored code cannot make its failure an unavailable loader (exit 1, not 3)"
is "$(field ext-claim-unavailable r.result)" '"fail"' "... a signed failure is written"

# One set of files, two profiles: the receipt names the profile.
fixture ext-kind
pv ext-kind "$FIX/ext-kind/skill.profile.json"
is "$RC" 0 "the skill of a mixed package passes under a skill profile"
vr() { kz-pi-validate verify-receipt --receipt "$T/ext-kind.receipt" --files "$T/ext-kind" \
	--profile "$1" --contract-digest "$C1"; }
rc_is 0 "its receipt is current for that profile" vr "$FIX/ext-kind/skill.profile.json"
rc_is 1 "but not for the extension profile of the same files and contract" vr "$FIX/ext-kind/profile.json"
like "$(cat "$T/.out")" "another profile" "... and says so"

# Files that change while they are validated: the tests flip between a
# failing and a passing version all along.  Whatever the outcome, the
# receipt's digest is that of the version the tests ran on.
fixture ext-tests-fail
cp "$T/ext-tests-fail/test/index.test.mjs" "$T/fail.mjs"
printf 'import { test } from "node:test";\ntest("ready", () => {});\n' >"$T/pass.mjs"
rm -rf "$T/flip-pass"; cp -r "$T/ext-tests-fail" "$T/flip-pass"; cp "$T/pass.mjs" "$T/flip-pass/test/index.test.mjs"
pv flip-pass "$FIX/ext-tests-fail/profile.json"
P=$(field flip-pass r.artifact_sha256)
pv ext-tests-fail
F=$(field ext-tests-fail r.artifact_sha256)
rm -rf "$T/flip"; cp -r "$T/ext-tests-fail" "$T/flip"
( while [ ! -e "$T/flip.stop" ]; do
	cp "$T/pass.mjs" "$T/flip.t" && mv -f "$T/flip.t" "$T/flip/test/index.test.mjs"
	cp "$T/fail.mjs" "$T/flip.t" && mv -f "$T/flip.t" "$T/flip/test/index.test.mjs"
done ) & FLIP=$!
on_exit "touch $T/flip.stop; kill $FLIP 2>/dev/null"
: >"$T/flip.seen"
for i in 1 2 3; do
	pv flip "$FIX/ext-tests-fail/profile.json"
	echo "$RC $(field flip r.artifact_sha256) $(field flip r.tests.status)" >>"$T/flip.seen"
done
touch "$T/flip.stop"; wait "$FLIP" 2>/dev/null
is "$(grep -cvx -e "0 $P \"pass\"" -e "1 $F \"fail\"" "$T/flip.seen")" 0 \
	"three validations of changing files: each receipt names the bytes its tests ran on"
diag "$(sed "s/$P/PASSING/; s/$F/FAILING/" "$T/flip.seen" | tr '\n' ';')"
done_testing
