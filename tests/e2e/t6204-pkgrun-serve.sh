#!/bin/bash
# kz-pkgrun serve: the invoke op gives the one-shot's answers over the
# wire (result, exit status, class; stderr only in a private chat), the
# policy holds the same (absent tool, shell in a shared room, hostile
# member path), unknown fields and bad frames are refused, a peer not in
# KZ_PEER_UIDS is refused, a slow tool does not stall another peer, and
# one actor's slow tools take at most four of the sixteen places.
# This is the daemon's one-shot path (PKGRUN_WARM=0), whose ids come
# lowest first; t6206 runs the same ops on warm workers.  No two
# invocations running at once share a uid, a one-shot beside the daemon
# or its warm workers included, so one exhausting its uid's inotify
# instances starves no other; with none free a one-shot fails closed.
. "$(dirname "$0")/lib.sh"
plan 27
. "$TOP/tests/e2e/pkgrun-lib.sh"
export PKGRUN_WARM=0
S=$T/kz-pkgrun.sock
mkdir -p "$PKGRUN_STATE_DIR/inv-0123456789ab/pkg" "$PKGRUN_STATE_DIR/inv-ba9876543210"
touch -d '1 hour ago' "$PKGRUN_STATE_DIR/inv-0123456789ab"
bg kz-pkgrun serve --socket "$S" 2>"$T/serve.log"
t "kz-pkgrun serves" wait_sock "$S"
is "$(ls "$PKGRUN_STATE_DIR" | grep inv- | tr '\n' ' ')" "inv-ba9876543210 " \
	"a stale projection is swept at start, a recent one is left"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
msg() { kz-msg -t 30 "$S" "$1"; }
get() { "$PY" -c "import json,sys; print(json.load(sys.stdin)$1)"; }
base='"op":"invoke","package":"'$H'","actor":"alice","conversation":"c1"'

r=$(msg '{'"$base"',"tool":"echo","args":["hi","there"]}')
is "$(printf '%s' "$r" | get '["result"]')" "echo: hi there" "invoke returns the tool's result"
is "$(printf '%s' "$r" | get '["exit_status"]')" 0 "... its exit status"
is "$(printf '%s' "$r" | get '["class"]')" "shared_safe" "... and its class"
r=$(msg '{'"$base"',"tool":"count","files":["src/notes.txt"]}')
like "$(printf '%s' "$r" | get '["stderr"]')" "count: 1 files" "a private chat gets stderr"
r=$(msg '{'"$base"',"tool":"count","room":"r1","files":["src/notes.txt"]}')
is "$(printf '%s' "$r" | get '.get("stderr", "none")')" "none" "a shared room does not"
is "$(printf '%s' "$r" | get '["result"]')" "3 src/notes.txt" "... but gets the result"
r=$(msg '{'"$base"',"tool":"ghost"}')
like "$r" '"error":"refused".*no such tool' "an absent tool is refused as no such tool"
r=$(msg '{'"$base"',"tool":"shell","room":"r1","args":["echo RAN"]}')
like "$r" '"error":"refused".*shared room' "the shell is refused in a shared room"
r=$(msg '{'"$base"',"tool":"show","files":["../../outside"]}')
like "$r" '"error":"bad_request"' "a hostile member path is a bad request"
r=$(msg '{'"$base"',"tool":"echo","env":{"A":"1"}}')
like "$r" '"error":"bad_request"' "an unknown field is refused"
r=$(msg '{'"$base"',"tool":"echo","args":"hi"}')
like "$r" '"error":"bad_request"' "args that are not a list are refused"
rc_is 1 "an invoke that is refused exits 1 from kz-msg" msg '{'"$base"',"tool":"nosuch"}'

# A slow tool on one connection, a quick one on another.
( msg '{'"$base"',"tool":"shell","args":["sleep 3; echo slow $(id -u)"]}' >"$T/slow" ) &
SLOW=$!
sleep 0.3
t0=$(date +%s%N)
r=$(msg '{'"$base"',"tool":"shell","args":["echo quick $(id -u)"]}')
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
is "$(printf '%s' "$r" | get '["result"]')" "quick $((PKGRUN_UID + 1))" \
	"a second peer is answered while a slow tool runs, under another id"
ok "$([ "$ms" -lt 2500 ]; echo $?)" "... without waiting for it (${ms} ms)"
wait "$SLOW"
like "$(cat "$T/slow")" "slow $PKGRUN_UID" "the slow tool's answer arrives too, from the range's first id"
r=$(msg '{'"$base"',"tool":"shell","args":["id -u"]}')
is "$(printf '%s' "$r" | get '["result"]')" "$PKGRUN_UID" "... which is free again once it is done"

# One actor holds at most four places at once: its fifth is busy, and
# another actor is still answered.
HELD=
for i in 1 2 3 4; do ( msg '{'"$base"',"tool":"shell","args":["sleep 4"]}' >"$T/held$i" ) & HELD="$HELD $!"; done
for i in $(seq 1 100); do [ "$(msg '{"op":"status"}' | get '["inflight"]')" = 4 ] && break; sleep 0.1; done
is "$(msg '{"op":"status"}' | get '["inflight"]')" 4 "four slow invocations of one actor run"
like "$(msg '{'"$base"',"tool":"echo","args":["fifth"]}')" '"error":"busy"' \
	"a fifth of the same actor at once is busy"
r=$(msg '{"op":"invoke","package":"'"$H"'","actor":"bob","conversation":"c2","tool":"echo","args":["bob"]}')
is "$(printf '%s' "$r" | get '["result"]')" "echo: bob" "another actor is answered meanwhile"
wait $HELD

# Peers: only the configured uids may call.
kill "$LASTPID" 2>/dev/null; sleep 0.3
KZ_PEER_UIDS=4242 bg kz-pkgrun serve --socket "$T/p2.sock" 2>>"$T/serve.log"
wait_sock "$T/p2.sock"
like "$(kz-msg "$T/p2.sock" '{"op":"status"}' 2>&1)" "unauthorized_peer|refused" \
	"a peer outside KZ_PEER_UIDS is refused"

# Concurrent tenants never share a uid (issue 12): a runner of two ids
# with its own state (and so its own uid claims).  Two of its daemon's
# invocations hold both ids, each with every inotify instance its uid may
# have; a one-shot beside them (as a CI job runs it) waits for a free id
# rather than share one, so its inotify_init1 still works.
export PKGRUN_STATE_DIR=$T/pkgstate2 PKGRUN_UID_COUNT=2
bg kz-pkgrun serve --socket "$T/u2.sock" 2>"$T/serve2.log"
wait_sock "$T/u2.sock"
HOGS=
hog='python3 -c "import ctypes,time; l=ctypes.CDLL(None); print(sum(l.inotify_init1(0) >= 0 for _ in range(200))); time.sleep(3)"; id -u'
for i in 1 2; do ( pr --socket "$T/u2.sock" --tool shell --arg "$hog" >"$T/hog$i" 2>&1 ) & HOGS="$HOGS $!"; done
for _ in $(seq 100); do [ "$(kz-msg -t 5 "$T/u2.sock" '{"op":"status"}' | get '["inflight"]')" = 2 ] && break; sleep 0.05; done
sleep 0.5
vic=$(pr --tool shell --arg 'python3 -c "import ctypes; l=ctypes.CDLL(None, use_errno=True); r=l.inotify_init1(0); print(\"inotify\", \"ok\" if r >= 0 else \"errno %d\" % ctypes.get_errno())"; id -u' 2>&1)
wait $HOGS
is "$(tail -qn1 "$T/hog1" "$T/hog2" | sort | tr '\n' ' ')$(head -1 <<<"$vic")" \
	"$PKGRUN_UID $((PKGRUN_UID + 1)) inotify ok" \
	"two daemon invocations hold both ids' inotify; a one-shot beside them is not starved"
# A host process under the one id left, and every id taken: the one-shot
# waits its bound (PKGRUN_TIMEOUT) and fails closed, never shares.
bg setpriv --reuid=$PKGRUN_UID --regid=$PKGRUN_UID --clear-groups sleep 30
HOSTPID=$LASTPID
sleep 0.2
PKGRUN_TIMEOUT=1 PKGRUN_UID_COUNT=1 rc_is 3 "a one-shot whose only id runs a host process does not run (exit 3)" \
	pr --tool shell --arg 'id -u'
like "$(cat "$T/.out")" "no free tool uid" "... and says: no free tool uid"
kill "$HOSTPID"
# A warm daemon of two ids: its two workers hold both, and a one-shot
# beside it finds none free.
PKGRUN_WARM=2 bg kz-pkgrun serve --socket "$T/w2.sock" 2>"$T/serve3.log"
wait_sock "$T/w2.sock"
for _ in $(seq 200); do [ "$(kz-msg -t 5 "$T/w2.sock" '{"op":"status"}' | get '["warm"]["ready"]')" = 2 ] && break; sleep 0.05; done
PKGRUN_TIMEOUT=1 rc_is 3 "a one-shot beside two warm workers of two ids gets neither's uid (exit 3)" \
	pr --tool shell --arg 'id -u'
like "$(cat "$T/.out")|$(pr --socket "$T/w2.sock" --tool echo --arg warm)" \
	"^kz-pkgrun: no free tool uid\|echo: warm$" "... says so in one line, and the daemon's own is served"
done_testing
