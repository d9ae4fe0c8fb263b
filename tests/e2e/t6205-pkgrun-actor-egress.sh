#!/bin/bash
# Actor-bound reads run as the initiating participant: the tool is told
# the actor, conversation and room it acts for, is given only that actor's
# own member files (PKGRUN_WORKSPACE_ROOT/<conversation>/<actor>), and a
# path naming another actor's or another conversation's files finds
# nothing, from the request or from inside the tool; its result is
# sanitized and bounded.  Network is off unless a grant is given: with the
# real kz-egress, a tool without a grant has no route to a test host (in a
# network namespace this test makes); with one it reaches the allowed
# host through the sandbox's relay, and a host outside the grant's scope
# is refused by kz-egress.  Both through invoke and the serve op.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
plan 24
. "$TOP/tests/e2e/pkgrun-lib.sh"
N=105

A=$(kz-pkgrun admit "$TOP/tests/pkgrun/actor" "$TOP/tests/pkgrun/actor.json" 2>"$T/admit.err")
like "$A" "^[0-9a-f]{64}$" "the actor fixture package is admitted"
mkdir -p "$T/ws/c1/bob" "$T/ws/c2/alice"
echo "BOB-PRIVATE" >"$T/ws/c1/bob/secret.txt"
echo "ALICE-OTHER-CONVERSATION" >"$T/ws/c2/alice/other.txt"
echo "alice-own" >"$T/ws/c1/alice/own.txt"
peek() { kz-pkgrun invoke --package "$A" --tool peek --conversation c1 "$@"; }

o=$(peek --actor alice --file own.txt)
like "$o" "^actor=alice conversation=c1 room=$" "the tool is told the initiating actor and conversation"
like "$(printf '%s' "$o" | tr '\n' ' ')" "== own.txt alice-own" "... and reads that actor's own file by its rooted path"
like "$(peek --actor bob --room r1 --file secret.txt)" "^actor=bob conversation=c1 room=r1" \
	"in a shared room, bob's invocation runs as bob, in that room"
rc_is 1 "alice naming bob's file by her own path finds nothing" peek --actor alice --file secret.txt
unlike "$(cat "$T/.out")" "BOB-PRIVATE" "... and nothing of it came back"
rc_is 2 "a path up into bob's workspace is refused before anything is opened" peek --actor alice --file ../bob/secret.txt
rc_is 2 "so is a workspace up into another conversation" peek --actor alice --workspace ../../c2/alice --file other.txt
rc_is 1 "alice's file of another conversation is not hers in this one" peek --actor alice --file other.txt
rc_is 2 "an actor that is not one path segment takes no files" peek --actor ../c1/bob --file secret.txt
o=$(peek --actor alice --arg "$T/ws/c1/bob/secret.txt" --arg "$T/ws/c2/alice/other.txt" \
	--arg /proc/1/root/etc/hostname)
unlike "$o" "BOB-PRIVATE|ALICE-OTHER" "from inside, the tool reads no other actor's or conversation's file"
like "$o" "none:$T/ws/c1/bob/secret.txt" "... the host's workspace root is not there at all"
o=$(peek --actor alice --room r1)
unlike "$(printf '%s' "$o" | tr -d '\n\t' | LC_ALL=C grep -c '[[:cntrl:]]')" "^[1-9]" \
	"the result carries no control character but newline and tab"
R=$'\xef\xbf\xbd'
like "$o" "bell$R esc$R\\[31m cr$R del$R end" "... each became U+FFFD"
PKGRUN_RESULT_MAX=4096 peek --actor alice --arg big >"$T/big" 2>/dev/null
n=$(wc -c <"$T/big")
ok "$([ "$n" -gt 4000 ] && [ "$n" -le 4096 ]; echo $?)" "a result that sanitizing would widen stays within PKGRUN_RESULT_MAX"
t "... and is cut at a character boundary: valid UTF-8" iconv -f UTF-8 -t UTF-8 "$T/big"

# Network, with the real kz-egress.
eg_netns $N || { echo "Bail out! cannot create a network namespace"; exit 1; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
cat >"$T/zone.json" <<EOZ
{"origin.kz.test": {"A": ["$EG_ORIGIN"]}, "host.kz.test": {"A": ["10.213.$N.1"]}}
EOZ
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
EG_PK=$T/grant.pub
kz-egress pubkey --field-key "$T/field.key" >"$EG_PK"
cat >"$T/eg.conf" <<EOC
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = $EG_ORIGIN/32
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = unix:$T/eg.sock
EOC
bg kz-egress serve --config "$T/eg.conf" 2>"$T/eg.log"
wait_sock "$T/eg.sock" 10 || { echo "Bail out! kz-egress did not start"; exit 1; }
chmod 0666 "$T/eg.sock"
export PKGRUN_EGRESS_SOCKET=$T/eg.sock
kz-egress grant --field-key "$T/field.key" --run pkgrun-$$ >"$T/grant"
fetch() { kz-pkgrun invoke --package "$A" --tool fetch --actor alice --conversation c1 "$@"; }

is "$(fetch --arg origin.kz.test --arg "$EG_ORIGIN")" "no-route" "without a grant the tool has no route to the test host"
o=$(fetch --grant-file "$T/grant" --arg origin.kz.test --arg "$EG_ORIGIN")
like "$o" "^HTTP/1.1 200" "with a grant it reaches the allowed host through the relay and kz-egress"
like "$o" "origin origin.kz.test /from-pkgrun" "... the origin's own answer"
like "$(fetch --grant-file "$T/grant" --arg host.kz.test --arg 10.213.$N.1 | head -1)" "^HTTP/1.1 403" \
	"a host outside the grant's scope is refused by kz-egress"
echo "kzg1.forged.forged" >"$T/bad-grant"
unlike "$(fetch --grant-file "$T/bad-grant" --arg origin.kz.test --arg "$EG_ORIGIN" 2>&1)" "HTTP/1.1 200" \
	"a forged grant reaches nothing"

# The same through the daemon's invoke op, on its warm workers (started
# with the egress socket: the grant comes with the run op).
S=$T/pkgrun.sock
bg kz-pkgrun serve --socket "$S" 2>"$T/serve.log"
wait_sock "$S" 10 || { echo "Bail out! kz-pkgrun serve did not start"; exit 1; }
warm() { kz-msg "$S" '{"op":"status"}' | "$EG_PY" -c "import json,sys; print(json.load(sys.stdin)['warm']['$1'])"; }
for _ in $(seq 200); do [ "$(warm ready)" = 2 ] && break; sleep 0.05; done
req() { "$EG_PY" -c 'import json,sys; d={"op":"invoke","id":"1","package":sys.argv[1],"tool":"fetch","actor":"alice","conversation":"c1","args":["origin.kz.test",sys.argv[2]]}
if sys.argv[3]: d["grant"]=sys.argv[3]
print(json.dumps(d))' "$A" "$EG_ORIGIN" "${1:-}"; }
res() { kz-msg -t 30 "$S" "$(req "$@")" | "$EG_PY" -c 'import json,sys; print(json.load(sys.stdin).get("result",""))'; }
is "$(res)" "no-route" "the serve op without a grant: no route"
like "$(res "$(cat "$T/grant")")" "^HTTP/1.1 200" "the serve op with a grant reaches the allowed host"
is "$(warm served)" 2 "... both on warm workers"
done_testing
