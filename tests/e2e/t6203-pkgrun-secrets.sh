#!/bin/bash
# The package runner holds no secret: with the whole stack running beside
# it (store, kz-audit, kz-lease with a real worker, kz-project, the field
# key in the environment of the caller), a package tool that searches its
# entire process (environment, /proc/self, every descriptor, every file it
# can read, /proc/net/unix and every socket it can find) for the field
# key (raw and hex), the egress grant it was invoked with, the store's
# and every daemon's socket path, and the test's own directory finds none
# of them and connects to nothing; two planted controls show the search
# does look.  The invocation is audited without its arguments.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 15
T0=$(date +%s%N)
. "$TOP/tests/e2e/room-run-lib.sh"
diag "the stack is up in $(( ($(date +%s%N) - T0) / 1000000 )) ms"

export PKGRUN_CACHE=$T/pkgcache PKGRUN_STATE_DIR=$T/pkgstate
# A grant goes to kz-sandbox's relay; the socket need not answer here.
export PKGRUN_EGRESS_SOCKET=$T/kz-egress.sock
on_exit "rmdir /sys/fs/cgroup/kz-pkgrun 2>/dev/null"
H=$(kz-pkgrun admit "$TOP/tests/pkgrun/secrets" "$TOP/tests/pkgrun/secrets.json" 2>"$T/admit.err")
is "$?" 0 "the search package is admitted"

mask() { "$PY" -c 'import sys; print(bytes(b ^ 0x5a for b in sys.stdin.buffer.read()).hex())'; }
key_hex=$(od -An -tx1 -v "$T/field.key" | tr -d ' \n')
grant="kzgrant-$(head -c 24 /dev/urandom | od -An -tx1 -v | tr -d ' \n')"
printf '%s' "$grant" >"$T/grant"
args=(--arg "needle:field-key-raw:$(mask <"$T/field.key")"
	--arg "needle:field-key-hex:$(printf '%s' "$key_hex" | mask)"
	--arg "needle:grant:$(printf '%s' "$grant" | mask)"
	--arg "needle:test-dir:$(printf '%s' "$T" | mask)"
	--arg "needle:control-file:$(printf 'CONTROL-IN-A-PACKAGE-FILE' | mask)"
	--arg "needle:control-proc:$(printf '/projection/pkg/bin/search' | mask)")
for s in store kz-audit kz-lease kz-project; do
	p=$T/$s.sock; [ "$s" = store ] && p=$STORE_SOCK
	t "the $s socket is live on the host" test -S "$p"
	args+=(--arg "needle:$s-socket:$(printf '%s' "$p" | mask)"
		--arg "socket:$s:$(printf '%s' "$p" | mask)")
done
kz-pkgrun invoke --package "$H" --tool search --actor alice --conversation c1 \
	--grant-file "$T/grant" "${args[@]}" >"$T/out" 2>"$T/err"
is "$?" 0 "the search ran to completion"
diag "the search took $(( ($(date +%s%N) - T0) / 1000000 )) ms since the stack began"
out=$(cat "$T/out")
diag "$(tail -1 "$T/out")"; sed "s/^/# err: /" "$T/err" | head -5
like "$out" "found control-file in /projection/pkg/data/control.txt" \
	"control: it reads the files it can reach"
like "$out" "found control-proc in /proc/self/cmdline" "control: it reads /proc/self"
is "$(grep '^found' "$T/out" | grep -v ' control-' | tr '\n' ';')" "" \
	"no key, grant, socket path or test path anywhere in its process"
is "$(grep -c '^connected' "$T/out")" 0 "no socket it tried would connect"
like "$out" "searched [0-9]{2,} files, [0-9]{4,} bytes, [0-9]{4,} names, [0-9]+ descriptors, [0-9]+ sockets" \
	"the search covered files, names, descriptors and sockets"
sleep 0.2
rec=$(audit_q --kind package | tail -1)
like "$rec" "\"tool\":\"search\".*" "the invocation is audited"
unlike "$(audit_q --kind package)" "needle|socket:|$grant|\"actor\":\"alice\"" \
	"... without its arguments, the grant or the raw actor"
done_testing
