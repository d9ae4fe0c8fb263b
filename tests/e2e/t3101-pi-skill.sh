#!/bin/bash
# kz-pi-validate, skill-only profiles: the real Pi skill loader under the
# real kz-sandbox, the parent's own reading of static resources, escapes
# refused before any loader runs, stale receipts, and failing closed
# without sandbox, loader or a recent enough node.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pi-lib.sh"
plan 33

fixture skill-ok
pv skill-ok
is "$RC" 0 "a valid skill-only package passes"
is "$(field skill-ok r.result)" '"pass"' "receipt says pass"
is "$(field skill-ok r.surface.skills)" '["hello"]' "the Pi skill loader found the skill"
is "$(field skill-ok r.static.themes[\"themes/calm.json\"].name)" '"calm"' "the parent read the theme itself"
is "$(field skill-ok r.runtime.pi)" '"0.73.1"' "the pinned Pi version is observed"
is "$(field skill-ok r.runtime.isolation)" '"kz-sandbox"' "the loader ran under kz-sandbox"
like "$(field skill-ok r.runtime.node)" '^"v[0-9]+\.' "the node version is observed"
is "$(field skill-ok r.contract_digest)" "\"$C1\"" "receipt bound to the contract digest"
is "$(ls "$WS")" "" "the workspace is left empty"

rc_is 0 "verify-receipt: current" kz-pi-validate verify-receipt \
	--receipt "$T/skill-ok.receipt" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1"
rc_is 1 "verify-receipt: a contract change makes it stale" kz-pi-validate \
	verify-receipt --receipt "$T/skill-ok.receipt" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C2"
like "$(cat "$T/.out")" "contract changed" "... and says so"
printf 'X' | dd of="$T/skill-ok/skills/hello/SKILL.md" bs=1 seek=10 conv=notrunc 2>/dev/null
rc_is 1 "verify-receipt: a one-byte change makes it stale" kz-pi-validate \
	verify-receipt --receipt "$T/skill-ok.receipt" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1"
like "$(cat "$T/.out")" "files changed" "... and says so"
fixture skill-ok
sed 's/"result":"pass"/"result":"pass" /; s/"files":	3/"files":	4/' "$T/skill-ok.receipt" >"$T/forged.receipt"
rc_is 1 "verify-receipt: an edited receipt body fails the signature" kz-pi-validate \
	verify-receipt --receipt "$T/forged.receipt" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1"

pv skill-ok "$FIX/escape-dotdot.profile.json"
is "$RC" 1 "a resource escaping by .. is refused"
like "$OUT" "'\.\.' segment" "... by the path grammar"
pv skill-ok "$FIX/escape-abs.profile.json"
is "$RC" 1 "a resource given by absolute path is refused"
like "$OUT" "absolute" "... as absolute"
ln -s ../../../../../etc/passwd "$T/skill-ok/prompts/link.md"
pv skill-ok "$FIX/escape-symlink.profile.json"
is "$RC" 1 "a resource reaching outside through a symlink is refused"
like "$OUT" "symlink" "... as a symlink"
rm "$T/skill-ok/prompts/link.md"
ln -s review.md "$T/skill-ok/prompts/alias.md"
pv skill-ok
is "$RC" 1 "a symlink anywhere in the package is refused"

fixture skill-ok
RC=0; (cd "$WS" && KZ_PI_SANDBOX=required KZ_SANDBOX_BIN=$T/no-such-sandbox \
	kz-pi-validate --profile "$FIX/skill-ok/profile.json" --files "$T/skill-ok" \
	--contract-digest "$C1" --out "$T/x.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 3 "sandbox required but unavailable: exit 3"
t "... and no receipt is written" test ! -e "$T/x.receipt"
RC=0; (cd "$WS" && KZ_PI_SANDBOX_CONFIG=$T/no-such.conf kz-pi-validate --profile \
	"$FIX/skill-ok/profile.json" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1" \
	--out "$T/x.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 3 "a kz-sandbox config it cannot read: kz-sandbox refuses, exit 3"
like "$(cat "$T/.out")" "sandbox did not start: .*config" "... with kz-sandbox's reason"
# kz-sandbox's own settings come only from KZ_PI_SANDBOX_CONFIG: a user
# namespace mapping the child to another host uid still returns a result.
printf 'SANDBOX_USERNS = on\nSANDBOX_USERNS_HOST_UID = 60001\nSANDBOX_USERNS_HOST_GID = 60001\n' \
	>"$T/userns.conf"
if kz-sandbox run --config "$T/userns.conf" -- /bin/true >/dev/null 2>&1; then
	RC=0; (cd "$WS" && KZ_PI_SANDBOX_CONFIG=$T/userns.conf kz-pi-validate --profile \
		"$FIX/skill-ok/profile.json" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1" \
		--out "$T/ns.receipt") >"$T/.out" 2>&1 || RC=$?
	is "$RC" 0 "under a kz-sandbox user namespace (host uid 60001): passes"
	is "$(field ns r.surface.skills)" '["hello"]' "... with the loader's observation"
else
	ok 0 "# SKIP kz-sandbox cannot make a user namespace here"; ok 0 "# SKIP"
fi
printf '#!/bin/sh\necho v18.20.4\n' >"$T/old-node"; chmod 0755 "$T/old-node"
RC=0; (cd "$WS" && KZ_PI_NODE=$T/old-node kz-pi-validate --profile \
	"$FIX/skill-ok/profile.json" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1" \
	--out "$T/x.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 3 "node older than 20.6 (Debian 12's 18): exit 3"
like "$(cat "$T/.out")" "node v18.20.4 is too old" "... saying why"
RC=0; (cd "$WS" && KZ_PI_MODULES=$T/nowhere kz-pi-validate --profile \
	"$FIX/skill-ok/profile.json" --files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1" \
	--out "$T/x.receipt") >"$T/.out" 2>&1 || RC=$?
is "$RC" 3 "Pi loader unavailable: exit 3"

echo '{"v":1,"kind":"skill","deadline_ms":1000,"skills":["skills"],"runtime":"node"}' >"$T/bad.json"
pv skill-ok "$T/bad.json"
is "$RC" 2 "a profile naming a runtime is bad input"
ln -s "$WS" "$T/wslink"
RC=0; (cd "$T/wslink" && kz-pi-validate --profile "$FIX/skill-ok/profile.json" \
	--files "$T/skill-ok" --profile "$FIX/skill-ok/profile.json" --contract-digest "$C1" --out "$T/x.receipt") \
	>"$T/.out" 2>&1 || RC=$?
is "$RC" 2 "a working directory reached through a symlink is refused"
done_testing
