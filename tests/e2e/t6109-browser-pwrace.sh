#!/usr/bin/env bash
# The agent's typing cannot be steered into a password field by the page:
# a page that moves the focus onto a password field on a tight timer and
# from the text field's own handlers gets the agent's text in the text
# field, never in the password field; a text field the page turns into a
# password field from a handler that runs during the typing, a field
# marked with autocomplete current-password or new-password or drawn as
# dots, and a password input in a shadow root or a same-origin frame are
# refused, and none of them receives the text; a focused password input in
# a same-origin frame refuses the agent's read.  Real Chromium throughout.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/lib/chromium/chromium ]; then
	echo "1..0 # SKIP Debian's chromium is not installed"; exit 0
fi
. "$TOP/tests/e2e/browser-lib.sh"
plan 16

br_start 169 || { echo "Bail out! the stack did not start"; exit 1; }
O='http://origin.kz.test'
R=$(bcall open '{"actor":"dave","conversation":"c9","url":"'$O'/pwrace"}')
SID=$(jf "$R" session)
is "$(jf "$R" page title)" "pwrace" "a session on the focus-flipping page"
S='"session":"'$SID'"'

act() { # act ACTION: propose, confirm, act; the act's reply
	local c
	c=$(jf "$(bcall agent-propose "{$S,\"action\":$1}")" confirmation)
	bcall confirm "{$S,\"confirmation\":\"$c\"}" >/dev/null
	bcall agent-act "{$S,\"confirmation\":\"$c\",\"action\":$1}"
}
# reported ID: the last value the page reported for field ID.
reported() { grep "^/v/$1?" "$T/origin.log" | tail -1 | sed "s|^/v/$1?||"; }

N=12 M=kzmark
good=0
for _ in $(seq 1 $N); do
	R=$(act '{"kind":"type","selector":"#note","text":"'$M'"}')
	[ "$(jf "$R" ok)" = true ] && good=$((good + 1))
done
is "$good" "$N" "every confirmed type into the text field is done while the page flips the focus"
want=$(printf "$M%.0s" $(seq 1 $N))
for _ in $(seq 1 100); do [ "$(reported note)" = "$want" ] && break; sleep 0.1; done
is "$(reported note)" "$want" "... and the text field holds each of them, in order"
tnot "the password field never received any of it" grep -q "^/v/pw?.*$M" "$T/origin.log"
grep "^/v/pw?.*$M" "$T/origin.log" | tail -1 | sed 's/^/#   the password field: /'

# Password fields the page disguises or hides.
bcall navigate "{$S,\"url\":\"$O/pwhidden\"}" >/dev/null
P=kzpass
for f in flip flip2 ac nw dots host frame; do
	R=$(act '{"kind":"type","selector":"#'$f'","text":"'$P'"}')
	is "$(jf "$R" reason)" "the agent does not read or type into a password field" \
		"#$f: refused as a password field, even confirmed"
done
R=$(act '{"kind":"type","selector":"#plain","text":"plain'$P'"}')
is "$(jf "$R" ok)" "true" "a plain text field on the same page still takes the text"
R=$(act '{"kind":"type","selector":"#texthost","text":"shadow'$P'"}')
is "$(jf "$R" ok)" "true" "... and so does a text field in a shadow root"
for _ in $(seq 1 100); do [ -n "$(reported texthost)" ] && [ -n "$(reported plain)" ] && break; sleep 0.1; done
is "$(reported plain)|$(reported texthost)" "plain$P|shadow$P" "... each holding the text"
tnot "no password field, however disguised, received the text" \
	grep -Eq "^/v/(flip|flip2|ac|nw|dots|host|frame)\?.*$P" "$T/origin.log"
grep -E "^/v/(flip|flip2|ac|nw|dots|host|frame)\?.*$P" "$T/origin.log" | sed 's/^/#   received: /'

bcall navigate "{$S,\"url\":\"$O/framesecret\"}" >/dev/null
is "$(jf "$(bcall agent-read "{$S}")" reason)" "the agent does not read or type into a password field" \
	"a focused password field in a same-origin frame refuses the agent's read"
bcall close "{$S}" >/dev/null
done_testing
