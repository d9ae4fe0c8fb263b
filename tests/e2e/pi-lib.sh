# Shared set-up for the kz-pi-validate tests (sourced after lib.sh): a
# field key, a workspace, the operator's unshare isolation mode (kz-sandbox
# is tested for its absence only; see kz-pi-validate(8)), and helpers.
[ -d "$TOP/node_modules/@mariozechner/pi-coding-agent" ] || "$TOP/tests/npm-deps.sh"
head -c 32 /dev/urandom >"$T/field.key"
chmod 0600 "$T/field.key"
export KZ_FIELD_KEY_FILE=$T/field.key KZ_PI_SANDBOX=required
unset KZ_CONFIG KZ_SANDBOX_BIN KZ_PI_MODULES KZ_PI_CHILD KZ_PI_NODE
WS=$T/ws
mkdir -m 0755 "$WS"
FIX=$TOP/tests/pi
C1=$(printf 'contract one' | sha256sum | cut -c1-64)
C2=$(printf 'contract two' | sha256sum | cut -c1-64)
# fixture NAME: a private copy of the fixture's files in $T/NAME
fixture() { rm -rf "$T/$1"; cp -r "$FIX/$1/files" "$T/$1"; }
# pv NAME [PROFILE]: validates $T/NAME from the workspace; sets RC, OUT
pv() {
	RC=0
	(cd "$WS" && kz-pi-validate --profile "${2:-$FIX/$1/profile.json}" \
		--files "$T/$1" --contract-digest "$C1" --out "$T/$1.receipt") \
		>"$T/$1.stdout" 2>"$T/$1.stderr" || RC=$?
	OUT=$(cat "$T/$1.stderr")
}
# field NAME JS-EXPR: evaluates JS-EXPR with r = the receipt body
field() { node -e "const r=JSON.parse(require('fs').readFileSync('$T/$1.receipt','utf8')).body; console.log(JSON.stringify($2))"; }
# leftovers: processes of the child uid still alive
leftovers() { pgrep -u 65534 -c node 2>/dev/null || true; }
