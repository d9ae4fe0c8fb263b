#!/bin/bash
# kz-pi-validate when its own loader is out of the sandbox's reach: a
# child script (KZ_PI_CHILD) or a node (KZ_PI_NODE) that the host sees but
# kz-sandbox's root view does not show is the validator's environment
# failing, not the package: exit 3, one line "loader unavailable: ...",
# and no receipt.  A package that fails, even one exiting as the step
# does when a loader is missing, still gets exit 1 and a signed fail
# receipt.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pi-lib.sh"
plan 24

# The child script copied under the test's /tmp directory: the host has
# it, the sandbox's view (which shows no /tmp of the host) does not.
cp "$TOP/cmd/kz-pi-validate/child.mjs" "$T/child.mjs"
# pv_env NAME VAR=VALUE: pv with one variable changed
pv_env() {
	RC=0
	(cd "$WS" && env "$2" kz-pi-validate --profile "$FIX/$1/profile.json" \
		--files "$T/$1" --contract-digest "$C1" --out "$T/$1.receipt") \
		>"$T/$1.stdout" 2>"$T/$1.stderr" || RC=$?
	OUT=$(cat "$T/$1.stderr")
}
# plain NAME: the plain (non-JSON) lines of the validator's stderr
plain() { grep -v '^{' "$T/$1.stderr" || true; }

fixture skill-ok
pv_env skill-ok KZ_PI_CHILD="$T/child.mjs"
is "$RC" 3 "a child script the sandbox cannot reach: exit 3"
is "$(plain skill-ok | wc -l)" 1 "... with one line"
like "$(plain skill-ok)" "^kz-pi-validate: loader unavailable: $T/child.mjs is not reachable in the sandbox's root view$" \
	"... saying loader unavailable and which path"
t "... and no receipt" test ! -e "$T/skill-ok.receipt"
is "$(ls "$WS")" "" "... the workspace left empty"

fixture ext-ok
pv_env ext-ok KZ_PI_CHILD="$T/child.mjs"
is "$RC" 3 "an extension whose tests ran, then a child script out of reach: exit 3"
like "$(plain ext-ok)" "^kz-pi-validate: loader unavailable: " "... loader unavailable"
t "... and no receipt" test ! -e "$T/ext-ok.receipt"

# A node the host runs (a wrapper around the real one) but the sandbox's
# view does not show.
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v node)" >"$T/node"
chmod 0755 "$T/node"
fixture skill-ok
pv_env skill-ok KZ_PI_NODE="$T/node"
is "$RC" 3 "a node the sandbox cannot reach: exit 3"
like "$(plain skill-ok)" "^kz-pi-validate: loader unavailable: $T/node is not reachable" "... naming it"
t "... and no receipt" test ! -e "$T/skill-ok.receipt"
fixture ext-ok
pv_env ext-ok KZ_PI_NODE="$T/node"
is "$RC" 3 "... also for an extension's tests, which run first"
t "... and no receipt" test ! -e "$T/ext-ok.receipt"

# The staged loader is reachable: the same package passes.
fixture skill-ok
pv skill-ok
is "$RC" 0 "the staged child script: the package passes"
is "$(field skill-ok r.result)" '"pass"' "... with a pass receipt"

# Package failures stay package failures.
fixture ext-exit3
pv ext-exit3
is "$RC" 1 "authored code exiting 3: a failed validation"
is "$(field ext-exit3 r.result)" '"fail"' "... with a signed fail receipt"
rm -rf "$T/ext-exit87" && cp -r "$FIX/ext-exit3" "$T/ext-exit87.src"
sed -i 's/process.exit(3)/process.exit(87)/' "$T/ext-exit87.src/files/extensions/index.js"
cp -r "$T/ext-exit87.src/files" "$T/ext-exit87"
RC=0
(cd "$WS" && kz-pi-validate --profile "$T/ext-exit87.src/profile.json" \
	--files "$T/ext-exit87" --contract-digest "$C1" --out "$T/ext-exit87.receipt") \
	>"$T/ext-exit87.stdout" 2>"$T/ext-exit87.stderr" || RC=$?
is "$RC" 1 "authored code exiting as a missing loader does (87): still a failed validation"
is "$(field ext-exit87 r.result)" '"fail"' "... with a signed fail receipt"
unlike "$(cat "$T/ext-exit87.stderr")" "loader unavailable" "... not a loader unavailable"
fixture ext-tests-fail
pv ext-tests-fail
is "$RC" 1 "failing tests: exit 1"
is "$(field ext-tests-fail r.result)" '"fail"' "... with a signed fail receipt"
# runsc's uid under gvisor may not be the child's, nor nobody: a bad
# setting is refused before anything runs.
pv_env skill-ok KZ_PI_GVISOR_UID="$KZ_PI_UID"
is "$RC-$(plain skill-ok)" "2-kz-pi-validate: config: KZ_PI_GVISOR_UID is neither KZ_PI_UID nor nobody (65534)" \
	"KZ_PI_GVISOR_UID equal to KZ_PI_UID is refused (exit 2, one line)"
pv_env skill-ok KZ_PI_GVISOR_UID=65534
is "$RC" 2 "so is nobody"
done_testing
