#!/bin/bash
# Every sample config in etc/kaizen, with each documented key uncommented
# at its documented value, is accepted by its binary: no key it does not
# know, no value it cannot parse.  (A key given as a description in
# parentheses is left out.)  The same file with one unknown key added is
# refused, so the check can fail.
. "$(dirname "$0")/lib.sh"
plan 45
DIGEST=$(printf '%064d' 0)

# uncommented NAME [EXTRA-LINE]: the sample with its keys switched on.
uncommented() {
	sed -E 's/^#([A-Z][A-Z0-9_]* *=)/\1/' "$TOP/etc/kaizen/$1.conf" |
		grep -vE '^[A-Z][A-Z0-9_]* *= *\(.*\) *$' >"$T/$1.conf"
	[ -n "${2:-}" ] && echo "$2" >>"$T/$1.conf"
	return 0
}
# load NAME: runs NAME with $T/NAME.conf so that it reads its config and
# then stops (mostly at something this test has not set up).
load() {
	local c=$T/$1.conf
	case $1 in
	kz-audit) kz-audit serve --config "$c" --check ;;
	kz-egress) kz-egress status --config "$c" ;;
	kz-lease) kz-lease status --config "$c" ;;
	kz-project) kz-project serve --config "$c" --check ;;
	kz-reset) kz-reset --config "$c" --worker w1 --token t1 ;;
	kz-run) kz-run --config "$c" --actor a --conversation c -- true ;;
	kz-sandbox) kz-sandbox run --config "$c" -- true ;;
	kz-pi-validate) kz-pi-validate --config "$c" verify-receipt \
		--receipt "$T/none.json" --files "$T" --profile "$T/none.json" \
		--contract-digest "$DIGEST" ;;
	kz-browser) kz-browser serve --config "$c" --check ;;
	kz-pkgrun) kz-pkgrun serve --config "$c" --check ;;
	kz-pkgbroker) kz-pkgbroker check --config "$c" ;;
	esac
}
for f in "$TOP"/etc/kaizen/*.conf; do
	n=$(basename "$f" .conf)
	uncommented "$n"
	keys=$(grep -cE '^[A-Z][A-Z0-9_]* *=' "$T/$n.conf")
	ok "$([ "$keys" -gt 0 ]; echo $?)" "$n: the sample documents $keys keys"
	out=$(cd "$T" && load "$n" 2>&1)
	unlike "$out" "unknown key|cannot be parsed|bad value|not a number|out of range" \
		"$n: every documented key and value is accepted"
	# kz-egress falls back to isolated without its grant key (not made
	# here); any other reason is the sample's fault.
	unlike "$(printf '%s' "$out" | grep -v 'isolated because: .*public key')" \
		"isolated because" "$n: nothing else in it forces a fallback"
	uncommented "$n" "KZ_NO_SUCH_KEY = 1"
	out=$(cd "$T" && load "$n" 2>&1)
	like "$out" "unknown key 'KZ_NO_SUCH_KEY'" "$n: an unknown key is refused"
done
ok "$([ "$(ls "$TOP"/etc/kaizen/*.conf | wc -l)" -eq 11 ]; echo $?)" "all eleven sample configs were checked"
done_testing
