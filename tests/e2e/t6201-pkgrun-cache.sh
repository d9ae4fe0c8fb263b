#!/bin/bash
# kz-pkgrun's cache and classes: a package is admitted under the SHA-256
# of its exact file set and manifest, read-only; a changed byte, mode or
# manifest is another package; a tampered cache entry never runs.  Tools
# with a missing or unknown class are absent (the same answer as no such
# tool); a shell tool runs in a private chat and never in a shared room;
# a shared-room result carries no stderr; a shared_safe tool takes no
# member files.  The tool runs as the runner's own uid, with no network,
# a read-only package and its own limits, and a tool's own exit 3 is not
# mistaken for an unavailable sandbox; time, memory and process limits
# stop it.  Each invocation is audited, never
# with its arguments, and none runs when the audit sink is down.
. "$(dirname "$0")/lib.sh"
plan 48
. "$TOP/tests/e2e/pkgrun-lib.sh"

like "$H" "^[0-9a-f]{64}$" "admit prints the package's SHA-256"
is "$(kz-pkgrun admit "$TOP/tests/pkgrun/demo" "$TOP/tests/pkgrun/demo.json")" "$H" \
	"admitting the same package again names the same entry"
cp -a "$TOP/tests/pkgrun/demo" "$T/demo2"
sed 's/"1.0.0"/"1.0.1"/' "$TOP/tests/pkgrun/demo.json" >"$T/demo2.json"
H2=$(kz-pkgrun admit "$T/demo2" "$T/demo2.json")
ok "$([ -n "$H2" ] && [ "$H2" != "$H" ]; echo $?)" "a manifest change makes a different package"
printf ' ' >>"$T/demo2/bin/ghost"
H3=$(kz-pkgrun admit "$T/demo2" "$TOP/tests/pkgrun/demo.json")
ok "$([ -n "$H3" ] && [ "$H3" != "$H" ]; echo $?)" "one more byte in one file makes a different package"
E=$PKGRUN_CACHE/$H
is "$(find "$E" -perm /0222 | wc -l)" 0 "nothing in the cache entry is writable"
is "$(stat -c %a "$E/pkg/bin/echo-args" "$E/manifest.json" | tr '\n' ' ')" "555 444 " \
	"a tool keeps its executable bit, the manifest is read-only"

is "$(kz-pkgrun list --package "$H" | cut -f1 | tr '\n' ' ')" "echo shell count show " \
	"a private chat lists the tools with a known class"
is "$(kz-pkgrun list --package "$H" --shared | tr '\t\n' ': ')" "echo:shared_safe count:actor_read show:actor_read " \
	"a shared room lists only the classes that admit it"
n0=$(n_pkg)
is "$(pr --tool echo --arg hello --arg 'a b')" "echo: hello a b" "a shared_safe tool runs"
rc_is 1 "a tool without a class is not callable" pr --tool ghost
ghost=$(cat "$T/.out")
rc_is 1 "a tool with an unknown class is not callable" pr --tool phantom
is "$(cat "$T/.out")" "$ghost" "... with the same answer"
rc_is 1 "a tool that does not exist is refused" pr --tool nosuch
is "$(cat "$T/.out")" "$ghost" "... with the same answer again"
like "$ghost" "no such tool" "... which names no class"

rc_is 1 "the shell tool is unavailable in a shared room" pr --tool shell --room r1 --arg 'echo RAN'
like "$(cat "$T/.out")" "not available in a shared room" "... saying so"
unlike "$(cat "$T/.out")" "RAN" "... and nothing ran"
ids=$(pr --tool shell --arg 'echo $(id -u) $(id -g)')
u=${ids% *} g=${ids#* }
ok "$([ "$u" = "$g" ] && [ "$u" -ge "$PKGRUN_UID" ] && [ "$u" -le $((PKGRUN_UID + 15)) ]; echo $?)" \
	"in a private chat it runs, under an id of the runner's own range ($ids)"
is "$(pr --tool shell --arg 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "')" "lo" \
	"the tool has no network: loopback is its only interface"
is "$(pr --tool shell --arg 'echo "proxy=${HTTP_PROXY:-}"')" "proxy=" "without a grant there is no egress relay"
echo "kzgrant-test" >"$T/grant"
is "$(PKGRUN_EGRESS_SOCKET=$T/kz-egress.sock pr --tool shell --grant-file "$T/grant" \
	--arg 'echo "proxy=$HTTP_PROXY"; grep -rs kzgrant-test /projection /workspace /tmp; true')" \
	"proxy=http://127.0.0.1:3128" "with one, the only way out is kz-sandbox's relay, and the grant is not in reach"
rc_is 0 "the package is read-only to the tool" pr --tool shell \
	--arg 'if echo x >/projection/pkg/bin/echo-args || touch /projection/pkg/new; then exit 9; fi 2>/dev/null'
t "... and the cache entry is unchanged" kz-pkgrun verify --package "$H"

pr --tool count --room r1 --file src/notes.txt >"$T/o" 2>"$T/e"
is "$?" 0 "an actor_read tool runs in a shared room"
is "$(cat "$T/o")" "3 src/notes.txt" "... on the member file it was given"
unlike "$(cat "$T/e")" "count:" "... and the room gets no stderr"
like "$(pr --tool count --file src/notes.txt 2>&1)" "count: 1 files" \
	"a private chat gets the tool's stderr"
rc_is 1 "a shared_safe tool takes no member files" pr --tool echo --file src/notes.txt

rc_is 1 "a tool's own exit 3 is its status" pr --tool shell --arg 'exit 3'
like "$(cat "$T/.out")" "exited with status 3" "... not an unavailable sandbox"
is "$(pr --tool shell --arg 'printf "a\033[2Jb\n"' | od -An -c | tr -s ' ')" \
	" a 357 277 275 [ 2 J b \\n" "control characters in a result are replaced"
export PKGRUN_TIMEOUT=1
rc_is 1 "a tool over the time limit is stopped" pr --tool shell --arg 'sleep 20'
unset PKGRUN_TIMEOUT
export PKGRUN_MEMORY=32M
rc_is 1 "a tool over the memory limit is stopped" pr --tool shell \
	--arg 'python3 -c "b = bytearray(200 << 20); print(len(b))"'
like "$(cat "$T/.out")" "memory limit reached" "... by its own cgroup's limit"
unset PKGRUN_MEMORY
export PKGRUN_PIDS=8
rc_is 1 "a tool over the process limit is stopped" pr --tool shell \
	--arg 'for i in $(seq 20); do sleep 1 & done; wait'
like "$(cat "$T/.out")" "pids limit reached" "... by its own cgroup's limit"
unset PKGRUN_PIDS
like "$(cat "$T/.out")" "stopped at a limit|killed" "... by the runner's limit"

# The audit trail: every invocation above, and no argument in it.
sleep 0.2
is "$(audit_q --kind package | grep '"action":"invoke"' | grep -c '"outcome":"ok"')" 10 \
	"each invocation that ran is audited"
is "$(audit_q --kind package | grep '"action":"invoke"' | grep -c '"outcome":"refused"')" 5 \
	"... and each that was refused"
unlike "$(audit_q --kind package)" "hello|notes\.txt|RAN|sleep|\"actor\":" \
	"no argument, member file or raw actor is in the audit trail"
is "$(ls "$PKGRUN_STATE_DIR" | grep -c '^inv-')" 0 \
	"no invocation leaves its staged copy behind, whatever its outcome"

# A byte changed in the cache: the entry never runs again.
chmod u+w "$E/pkg/bin" "$E/pkg/bin/echo-args"
printf 'echo tampered\n' >>"$E/pkg/bin/echo-args"
chmod a-w "$E/pkg/bin" "$E/pkg/bin/echo-args"
rc_is 3 "a tampered cache entry fails closed" pr --tool echo --arg x
like "$(cat "$T/.out")" "does not match its hash" "... naming why, and nothing ran"

kill "$AUDIT_PID"; wait "$AUDIT_PID" 2>/dev/null
rc_is 3 "with the audit sink down nothing runs" pr --tool shell --arg 'echo RAN'
unlike "$(cat "$T/.out")" "RAN" "... not even the tool"
sed 's/"1.0.0"/"1.0.2"/' "$TOP/tests/pkgrun/demo.json" >"$T/demo4.json"
H4=$(kz-pkgrun admit "$TOP/tests/pkgrun/demo" "$T/demo4.json" 2>/dev/null)
is "$?:$H4:$(ls "$PKGRUN_CACHE" | wc -l)" "3::3" "nor is a package admitted: the cache is as it was"
out=$(KZ_AUDIT=off kz-pkgrun invoke --package "$H2" --tool echo --actor a --conversation c --arg x 2>&1)
like "$out" "audit is off \(KZ_AUDIT = off\)" "audit off (debugging only) is said on every run"
done_testing
